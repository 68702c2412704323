//! `pub`, `pubsub`, `fanout`, `fanin` and `queue`: one subject, P publishers, S subscribers
//! (plain, or one queue group for `queue`). `pairs`: P publishers, each with its own subject
//! and one subscriber on it ([`run_pairs`]).
//!
//! Throughput is counted at the subscribers (deliveries / time to the last delivery), except
//! for `pub`, which counts published messages up to the publisher's PING/PONG barrier.
//! [`run_on`] is the same flow on another subject and as a given user (`perms`).

use crate::client::Credentials;
use crate::error::Result;
use crate::proto::encode_sub;
use crate::report::RunResult;
use crate::scenarios::flow::{self, Batch, FlowSpec};
use crate::scenarios::{set_rate, Ctx, Params, Scenario};
use crate::stats;

const SUBJECT: &str = "perf.bench";
const QUEUE: &str = "perf_q";

/// Runs one of the single-subject scenarios.
pub fn run(scenario: Scenario, p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    run_on(scenario, p, ctx, SUBJECT, None)
}

/// [`run`] on `subject`, every connection logged in as `login`.
pub fn run_on(
    scenario: Scenario,
    p: &Params,
    ctx: &Ctx<'_>,
    subject: &str,
    login: Option<&Credentials>,
) -> Result<RunResult> {
    let queue = scenario == Scenario::Queue;
    let subs = if scenario == Scenario::Pub { 0 } else { p.subs };
    let subscribers = (0..subs)
        .map(|_| {
            let mut setup = Vec::new();
            encode_sub(&mut setup, subject, queue.then_some(QUEUE), 1);
            setup
        })
        .collect();
    // Each message reaches every plain subscriber, or one member of the queue group.
    let per_msg = if queue { 1 } else { subs as u64 };
    let spec = FlowSpec {
        publishers: p.pubs,
        subscribers,
        pinned: false,
        batches: vec![Batch::uniform(subject, &p.payload(), per_msg, p.batch)],
        msgs: p.msgs,
        window: p.window_msgs(subject.len()),
        duration: p.duration(),
        login: login.cloned(),
    };
    let mut out = flow::run(ctx, &spec)?;
    let mut r = out.result(scenario, p);
    let counted = if subs == 0 {
        set_rate(&mut r, out.published, p.size, out.pub_elapsed);
        out.published
    } else {
        set_rate(&mut r, out.delivered, p.size, out.sub_elapsed);
        out.delivered
    };
    if queue {
        r.balance = stats::balance(&out.per_sub);
        r.per_sub = Some(std::mem::take(&mut out.per_sub));
    }
    out.set_cpu(&mut r, counted);
    Ok(r)
}

/// `pairs`: publisher i publishes only to `perf.pair.<i>`, which subscriber i alone
/// subscribes to. The subscribers connect first, in order, then the publishers: a server
/// that places connections round-robin over as many shards as there are pairs (rnats) puts
/// both ends of each pair on one shard, so the pairs share nothing there.
pub fn run_pairs(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let subjects: Vec<String> = (0..p.pubs).map(|i| format!("perf.pair.{i}")).collect();
    let subscribers = subjects
        .iter()
        .map(|s| {
            let mut setup = Vec::new();
            encode_sub(&mut setup, s, None, 1);
            setup
        })
        .collect();
    let payload = p.payload();
    let spec = FlowSpec {
        publishers: p.pubs,
        subscribers,
        batches: subjects
            .iter()
            .map(|s| Batch::uniform(s, &payload, 1, p.batch))
            .collect(),
        pinned: true,
        msgs: p.msgs,
        window: p.window_msgs(subjects.last().map_or(0, String::len)),
        duration: p.duration(),
        login: None,
    };
    let mut out = flow::run(ctx, &spec)?;
    let mut r = out.result(Scenario::Pairs, p);
    set_rate(&mut r, out.delivered, p.size, out.sub_elapsed);
    r.per_sub = Some(std::mem::take(&mut out.per_sub));
    out.set_cpu(&mut r, out.delivered);
    Ok(r)
}
