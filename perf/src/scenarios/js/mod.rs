//! The JetStream scenarios. Every server the lab starts for them runs JetStream on a fresh
//! store folder (`-js -sd <tmp>`, [`api::StoreDir`]); the scenarios create their streams and
//! consumers through the `$JS.API` subjects ([`api::Api`]) over the raw protocol.
//!
//! | scenario | module | what it measures |
//! |---|---|---|
//! | `js-pub-async` | [`publish`] | acked publishes/s into `--streams` file streams, `--inflight` acks outstanding per publisher |
//! | `js-pub-sync` | [`publish`] | publish → `PubAck` latency, one at a time (HDR histogram) |
//! | `js-pull` | [`consume`] | msgs/s through a durable pull consumer, batches of `--fetch`, every message acked |
//! | `js-push` | [`consume`] | msgs/s through a durable push consumer, every message acked |
//! | `kv-put` | [`kv`] | acked puts/s into a KV bucket's stream |
//! | `kv-get` | [`kv`] | direct gets/s from a KV bucket's stream |
//! | `js-mirror` | [`mirror`] | catch-up msgs/s of a new mirror of a filled file stream |
//! | `js-counter` | [`counter`] | acked counter increments/s (`Nats-Incr`) over `--keys` subjects |
//!
//! Requests with pipelined answers share the engine in [`window`].

pub mod api;
pub mod consume;
pub mod counter;
pub mod kv;
pub mod mirror;
pub mod publish;
pub mod window;

use crate::error::{PerfError, Result};
use crate::report::RunResult;
use crate::scenarios::{Ctx, Params, Scenario};

/// Runs one JetStream scenario, after opening the `--pad-conns` idle connections.
pub fn run(scenario: Scenario, p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let _pads = api::pad_conns(ctx, p.pad_conns)?;
    match scenario {
        Scenario::JsPubAsync => publish::run_async(p, ctx),
        Scenario::JsPubSync => publish::run_sync(p, ctx),
        Scenario::JsPull => consume::run(p, ctx, true),
        Scenario::JsPush => consume::run(p, ctx, false),
        Scenario::KvPut => kv::run(p, ctx, true),
        Scenario::KvGet => kv::run(p, ctx, false),
        Scenario::JsMirror => mirror::run(p, ctx),
        Scenario::JsCounter => counter::run(p, ctx),
        other => Err(PerfError::Param(format!(
            "{} is not a JetStream scenario",
            other.name()
        ))),
    }
}

/// The JetStream parameters of a run, for the reports' parameter lines.
pub fn describe(p: &Params) -> String {
    format!(
        " streams={} inflight={} fetch={} keys={}",
        p.streams, p.inflight, p.fetch, p.keys
    )
}
