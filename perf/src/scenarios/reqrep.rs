//! `reqrep`: P requesters, each with one request in flight, against R responders in a queue
//! group. Every round trip (PUB with reply inbox → responder → MSG on the inbox) is recorded in
//! an HDR histogram. [`measure`] runs the same on another subject with the responders and the
//! requesters logged in as given users (`import`), and also returns the histogram.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::client::{Conn, Credentials};
use crate::error::{PerfError, Result};
use crate::proc;
use crate::proto::{encode_pub, encode_sub, Frame};
use crate::report::{Latency, RunResult};
use crate::scenarios::{base_result, server_stats, set_rate, Ctx, Params, Scenario};

const SUBJECT: &str = "perf.rr";
const QUEUE: &str = "perf_rr";
/// A request without a reply for this long ends that requester.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Requests per requester not recorded (connection warm-up).
const WARMUP: u64 = 50;

/// Where requests go and who sends and answers them.
pub struct RrSpec<'a> {
    /// The subject requests are published to (the responders subscribe to it).
    pub subject: &'a str,
    pub responder: Option<&'a Credentials>,
    pub requester: Option<&'a Credentials>,
}

/// Runs the scenario.
pub fn run(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let spec = RrSpec {
        subject: SUBJECT,
        responder: None,
        requester: None,
    };
    measure(p, ctx, &spec).map(|(r, _)| r)
}

/// One request/reply run as described by `spec`: the result, and the histogram of the recorded
/// round trips in nanoseconds.
pub fn measure(p: &Params, ctx: &Ctx<'_>, spec: &RrSpec<'_>) -> Result<(RunResult, Histogram<u64>)> {
    let mut responders = Vec::new();
    for _ in 0..p.subs {
        let mut setup = Vec::new();
        encode_sub(&mut setup, spec.subject, Some(QUEUE), 1);
        responders.push(Conn::connect_as(
            ctx.addr,
            ctx.handshake_timeout,
            spec.responder,
            &setup,
        )?);
    }
    let mut requesters = Vec::new();
    for i in 0..p.pubs {
        let mut setup = Vec::new();
        encode_sub(&mut setup, &format!("_INBOX.perf{i}.*"), None, 1);
        requesters.push(Conn::connect_as(
            ctx.addr,
            ctx.handshake_timeout,
            spec.requester,
            &setup,
        )?);
    }
    let subject = spec.subject;
    let payload = p.payload();
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let before = ctx.pid.and_then(proc::sample);
    let t0 = Instant::now();
    let deadline = t0 + p.duration();
    let npubs = p.pubs as u64;
    ctx.bar.set_length(p.msgs);
    ctx.bar.set_message("requests");

    let (req_results, resp_results) = thread::scope(|s| {
        let resp: Vec<_> = responders
            .into_iter()
            .map(|c| s.spawn(|| responder(c, &stop)))
            .collect();
        let reqs: Vec<_> = requesters
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let count = super::share(p.msgs, npubs, i);
                let (payload, done) = (&payload, &done);
                s.spawn(move || {
                    let out = requester(c, subject, i, count, payload, done, deadline);
                    (out, Instant::now())
                })
            })
            .collect();
        // The rate runs to the last requester's end (the responders stop after it).
        let req_results = super::join_timed(reqs, ctx.bar, &done, t0, "requester");
        stop.store(true, Relaxed);
        let resp_results: Vec<_> = resp
            .into_iter()
            .map(|h| h.join().map_err(|_| PerfError::Worker("responder".into()))?)
            .collect();
        (req_results, resp_results)
    });
    let after = ctx.pid.and_then(proc::sample);
    let (req_results, elapsed) = req_results?;

    let mut hist = new_histogram()?;
    let mut r = base_result(Scenario::Reqrep, p);
    let mut total = 0u64;
    for res in req_results {
        let (h, n, note) = res?;
        hist.add(&h)
            .map_err(|e| PerfError::Protocol(format!("histogram merge: {e}")))?;
        total += n;
        if let Some(note) = note {
            r.notes.push(note);
            r.complete = false;
        }
    }
    for res in resp_results {
        res?;
    }
    if total < p.msgs {
        r.complete = false;
        r.notes.push(format!("{total} of {} requests completed", p.msgs));
    }
    r.published = total;
    r.expected = p.msgs;
    r.delivered = total;
    set_rate(&mut r, total, p.size, elapsed);
    r.latency_us = latency(&hist);
    r.server = server_stats(before, after, total);
    Ok((r, hist))
}

/// An empty round-trip histogram (nanoseconds).
pub fn new_histogram() -> Result<Histogram<u64>> {
    // 1 ns .. 60 s at 3 significant digits.
    Histogram::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| PerfError::Protocol(format!("histogram: {e}")))
}

/// Percentiles in microseconds, or `None` for an empty histogram.
pub fn latency(h: &Histogram<u64>) -> Option<Latency> {
    if h.is_empty() {
        return None;
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    Some(Latency {
        count: h.len(),
        p50: us(h.value_at_quantile(0.50)),
        p90: us(h.value_at_quantile(0.90)),
        p99: us(h.value_at_quantile(0.99)),
        p999: us(h.value_at_quantile(0.999)),
        max: us(h.max()),
        mean: h.mean() / 1000.0,
    })
}

type RequesterOutcome = (Histogram<u64>, u64, Option<String>);

fn requester(
    mut conn: Conn,
    subject: &str,
    index: usize,
    count: u64,
    payload: &[u8],
    done: &AtomicU64,
    deadline: Instant,
) -> Result<RequesterOutcome> {
    let mut hist = new_histogram()?;
    let inbox = format!("_INBOX.perf{index}.r");
    let mut frame = Vec::with_capacity(payload.len() + 64);
    encode_pub(&mut frame, subject.as_bytes(), Some(inbox.as_bytes()), payload);
    let mut completed = 0u64;
    let warmup = WARMUP.min(count / 10);
    while completed < count && Instant::now() < deadline {
        let sent = Instant::now();
        conn.write_all(&frame)?;
        let mut got = false;
        while !got {
            got = conn.read_msgs()? > 0;
            if !got && sent.elapsed() > REPLY_TIMEOUT {
                let note = format!("requester {index}: no reply within {REPLY_TIMEOUT:?}");
                return Ok((hist, completed, Some(note)));
            }
        }
        let rtt = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
        completed += 1;
        done.fetch_add(1, Relaxed);
        if completed > warmup {
            hist.saturating_record(rtt);
        }
    }
    Ok((hist, completed, None))
}

fn responder(mut conn: Conn, stop: &AtomicBool) -> Result<()> {
    let mut out = Vec::with_capacity(64 * 1024);
    while !stop.load(Relaxed) {
        conn.read_frames(|f| {
            if let Frame::Msg(m) = f {
                if let Some(reply) = m.reply {
                    encode_pub(&mut out, reply, None, m.data);
                }
            }
            Ok(())
        })?;
        if !out.is_empty() {
            conn.write_all(&out)?;
            out.clear();
        }
    }
    Ok(())
}
