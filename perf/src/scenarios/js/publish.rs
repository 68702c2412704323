//! `js-pub-async` and `js-pub-sync`: publishing into file streams with acknowledgements.
//!
//! - `js-pub-async`: `--streams` K streams `S0..` (subjects `js.S<k>.>`), P publishers (default
//!   one per stream; publisher i writes to stream i mod K), each keeping `--inflight` publishes
//!   unacknowledged. Counted: `PubAck`s per second, from the first publish to the last ack;
//!   afterwards every stream's message count is checked.
//! - `js-pub-sync`: one publisher, one publish at a time; every publish → `PubAck` round trip
//!   goes into an HDR histogram (p50/p90/p99/p99.9).

use std::sync::atomic::AtomicU64;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use super::api::Api;
use super::window::{self, WindowSpec};
use crate::client::Conn;
use crate::error::{PerfError, Result};
use crate::proc;
use crate::proto::{encode_pub, encode_sub, Frame};
use crate::report::RunResult;
use crate::scenarios::reqrep::{latency, new_histogram};
use crate::scenarios::{base_result, server_stats, set_rate, share, Ctx, Params, Scenario};

/// Publishes not recorded in the latency histogram (connection and stream warm-up).
const WARMUP: u64 = 50;

/// The name of stream `k`.
pub fn stream_name(k: usize) -> String {
    format!("S{k}")
}

/// A file stream on `js.<name>.>` with the servers' defaults for everything else.
pub fn stream_config(name: &str) -> serde_json::Value {
    json!({
        "name": name,
        "subjects": [format!("js.{name}.>")],
        "storage": "file",
        "retention": "limits",
        "num_replicas": 1,
    })
}

/// Creates streams `S0..S<k-1>`.
pub fn create_streams(api: &mut Api, k: usize) -> Result<()> {
    for i in 0..k {
        api.create_stream(&stream_config(&stream_name(i)))?;
    }
    Ok(())
}

/// A publisher connection with its reply inbox: (connection, reply subject).
pub fn ack_conn(ctx: &Ctx<'_>, tag: &str) -> Result<(Conn, Vec<u8>)> {
    let mut setup = Vec::new();
    encode_sub(&mut setup, &format!("_INBOX.{tag}.*"), None, 1);
    let conn = Conn::connect(ctx.addr, ctx.handshake_timeout, &setup)?;
    Ok((conn, format!("_INBOX.{tag}.a").into_bytes()))
}

/// `count` publishes to `subject` with `inflight` acks outstanding on a new connection (used
/// to fill streams before a consumer scenario): the ack outcome.
pub fn fill(ctx: &Ctx<'_>, subject: &str, count: u64, payload: &[u8], inflight: u64) -> Result<window::WindowOutcome> {
    let (mut conn, reply) = ack_conn(ctx, "perffill")?;
    let subjects = [subject.as_bytes().to_vec()];
    let spec = WindowSpec {
        subjects: &subjects,
        reply: &reply,
        payload,
        header: b"",
        count,
        inflight,
        batch_bytes: 64 * 1024,
        deadline: Instant::now() + Duration::from_secs(600),
        check: &window::check_puback,
    };
    let out = window::run(&mut conn, &spec, &AtomicU64::new(0))?;
    match out.problem("filling the stream", count) {
        Some(p) => Err(PerfError::Protocol(p)),
        None => Ok(out),
    }
}

/// Runs `js-pub-async`.
pub fn run_async(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let mut api = Api::connect(ctx)?;
    create_streams(&mut api, p.streams)?;
    let payload = p.payload();
    let mut conns = Vec::new();
    for i in 0..p.pubs {
        let (conn, reply) = ack_conn(ctx, &format!("perfjs{i}"))?;
        let subject = format!("js.{}.x", stream_name(i % p.streams)).into_bytes();
        conns.push((conn, reply, subject));
    }
    let done = AtomicU64::new(0);
    ctx.bar.set_length(p.msgs);
    ctx.bar.set_message("acks");
    let before = ctx.pid.and_then(proc::sample);
    let t0 = Instant::now();
    let deadline = t0 + p.duration();
    let npubs = p.pubs as u64;
    let (outcomes, elapsed) = thread::scope(|s| {
        let handles: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(i, (mut conn, reply, subject))| {
                let (payload, done) = (&payload, &done);
                s.spawn(move || {
                    let subjects = [subject];
                    let spec = WindowSpec {
                        subjects: &subjects,
                        reply: &reply,
                        payload,
                        header: b"",
                        count: share(p.msgs, npubs, i),
                        inflight: p.inflight,
                        batch_bytes: p.batch,
                        deadline,
                        check: &window::check_puback,
                    };
                    let out = window::run(&mut conn, &spec, done);
                    (out, Instant::now())
                })
            })
            .collect();
        super::super::join_timed(handles, ctx.bar, &done, t0, "publisher")
    })?;
    let after = ctx.pid.and_then(proc::sample);
    let mut r = base_result(Scenario::JsPubAsync, p);
    let (mut good, mut sent) = (0, 0);
    let mut per_stream = vec![0u64; p.streams];
    for (i, o) in outcomes.into_iter().enumerate() {
        let o = o?;
        good += o.good;
        sent += o.sent;
        if let Some(n) = per_stream.get_mut(i % p.streams) {
            *n += o.good;
        }
        if let Some(problem) = o.problem(&format!("publisher {i}"), share(p.msgs, npubs, i)) {
            r.complete = false;
            r.notes.push(problem);
        }
    }
    for (k, want) in per_stream.iter().enumerate() {
        let have = api.stream_msgs(&stream_name(k))?;
        if have != *want {
            r.complete = false;
            r.notes.push(format!(
                "stream {} holds {have} messages, {want} were acked",
                stream_name(k)
            ));
        }
    }
    for k in 0..p.streams {
        api.delete_stream(&stream_name(k))?;
    }
    r.published = sent;
    r.delivered = good;
    r.expected = p.msgs;
    set_rate(&mut r, good, p.size, elapsed);
    r.server = server_stats(before, after, good);
    Ok(r)
}

/// Runs `js-pub-sync`.
pub fn run_sync(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let mut api = Api::connect(ctx)?;
    create_streams(&mut api, 1)?;
    let (mut conn, reply) = ack_conn(ctx, "perfjssync")?;
    let mut frame = Vec::new();
    encode_pub(
        &mut frame,
        format!("js.{}.x", stream_name(0)).as_bytes(),
        Some(&reply),
        &p.payload(),
    );
    let mut hist = new_histogram()?;
    let mut r = base_result(Scenario::JsPubSync, p);
    ctx.bar.set_length(p.msgs);
    ctx.bar.set_message("publishes");
    let warmup = WARMUP.min(p.msgs / 10);
    let before = ctx.pid.and_then(proc::sample);
    let t0 = Instant::now();
    let deadline = t0 + p.duration();
    let mut acked = 0u64;
    'publish: while acked < p.msgs && Instant::now() < deadline {
        let sent = Instant::now();
        conn.write_all(&frame)?;
        let mut answer: Option<std::result::Result<(), String>> = None;
        while answer.is_none() {
            conn.read_frames(|f| {
                if let Frame::Msg(m) = f {
                    answer = Some(window::check_puback(m));
                }
                Ok(())
            })?;
            if answer.is_none() && sent.elapsed() > window::STALL {
                r.complete = false;
                r.notes.push(format!("no PubAck within {:?}", window::STALL));
                break 'publish;
            }
        }
        let rtt = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
        if let Some(Err(why)) = answer {
            r.complete = false;
            r.notes.push(format!("bad PubAck: {why}"));
            break;
        }
        acked += 1;
        if acked > warmup {
            hist.saturating_record(rtt);
        }
        if acked % 256 == 0 {
            ctx.bar.set_position(acked);
        }
    }
    let elapsed = t0.elapsed();
    let after = ctx.pid.and_then(proc::sample);
    if acked < p.msgs && r.complete {
        r.complete = false;
        r.notes
            .push(format!("{acked} of {} publishes acknowledged in time", p.msgs));
    }
    let stored = api.stream_msgs(&stream_name(0))?;
    if stored != acked {
        r.complete = false;
        r.notes
            .push(format!("the stream holds {stored} messages, {acked} were acked"));
    }
    api.delete_stream(&stream_name(0))?;
    r.published = acked;
    r.delivered = acked;
    r.expected = p.msgs;
    set_rate(&mut r, acked, p.size, elapsed);
    r.latency_us = latency(&hist);
    r.server = server_stats(before, after, acked);
    Ok(r)
}
