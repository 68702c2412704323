//! `conns`: K idle connections, each subscribed to `perf.conns.*`. Measures the time to
//! connect them all (pipelined handshakes, in chunks), the server's RSS before and after (and
//! so per connection), then `msgs` publishes to `perf.conns.all` that must reach every one.

use std::time::{Duration, Instant};

use crate::client::Conn;
use crate::error::{PerfError, Result};
use crate::proc;
use crate::proto::{encode_pub, encode_sub};
use crate::report::{ConnsStats, RunResult};
use crate::scenarios::{base_result, server_stats, set_rate, Ctx, Params, Scenario};

/// Handshakes in flight at once.
const CHUNK: usize = 256;
/// Read buffer per idle connection.
const IDLE_BUF: usize = 16 * 1024;

/// Runs the scenario.
pub fn run(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let k = p.conns;
    let limit = proc::raise_fd_limit();
    if (k as u64) + 64 > limit {
        return Err(PerfError::Param(format!(
            "--conns {k} exceeds the open-file limit {limit}"
        )));
    }
    let mut setup = Vec::new();
    encode_sub(&mut setup, "perf.conns.*", None, 1);
    let deadline = Instant::now() + p.duration();
    ctx.bar.set_length(k as u64);
    ctx.bar.set_message("connecting");

    let before = ctx.pid.and_then(proc::sample);
    let t0 = Instant::now();
    let mut conns: Vec<Conn> = Vec::with_capacity(k);
    while conns.len() < k {
        if Instant::now() >= deadline {
            return Err(PerfError::Timeout {
                what: format!("{k} connections ({} made)", conns.len()),
                after: p.duration(),
            });
        }
        let first = conns.len();
        for _ in first..(first + CHUNK).min(k) {
            conns.push(Conn::start_with_buffer(
                ctx.addr,
                ctx.handshake_timeout,
                &setup,
                IDLE_BUF,
            )?);
        }
        for c in &mut conns[first..] {
            c.finish_handshake(ctx.handshake_timeout)?;
        }
        ctx.bar.set_position(conns.len() as u64);
    }
    let connect = t0.elapsed();
    let connected = ctx.pid.and_then(proc::sample);

    // Fan-out: one publisher, every idle connection must see every message.
    ctx.bar.set_message("fan-out");
    ctx.bar.set_position(0);
    let mut publisher = Conn::connect(ctx.addr, ctx.handshake_timeout, b"")?;
    let mut batch = Vec::new();
    let payload = p.payload();
    for _ in 0..p.msgs {
        encode_pub(&mut batch, b"perf.conns.all", None, &payload);
    }
    let t1 = Instant::now();
    publisher.write_all(&batch)?;
    publisher.flush(Duration::from_secs(15), &mut |_| Ok(()))?;
    let read_deadline = deadline.max(Instant::now()) + Duration::from_secs(5);
    let mut delivered = 0u64;
    let mut missing = 0usize;
    for c in &mut conns {
        let mut got = 0u64;
        while got < p.msgs && Instant::now() < read_deadline {
            got += c.read_msgs()?;
        }
        delivered += got;
        missing += usize::from(got < p.msgs);
        ctx.bar.inc(1);
    }
    let fanout = t1.elapsed();
    let after = ctx.pid.and_then(proc::sample);
    drop(conns);

    let mut r = base_result(Scenario::Conns, p);
    r.published = p.msgs;
    r.expected = p.msgs * k as u64;
    r.delivered = delivered;
    if missing > 0 {
        r.complete = false;
        r.notes.push(format!(
            "{missing} of {k} connections did not receive all {} messages",
            p.msgs
        ));
    }
    set_rate(&mut r, delivered, p.size, fanout);
    r.server = server_stats(before, after, delivered);
    let rss_before = before.map(|s| s.rss_kb);
    let rss_after = connected.map(|s| s.rss_kb);
    r.conns = Some(ConnsStats {
        conns: k,
        connect_s: connect.as_secs_f64(),
        conns_per_s: k as f64 / connect.as_secs_f64().max(1e-9),
        rss_kb_before: rss_before,
        rss_kb_after: rss_after,
        rss_per_conn_bytes: match (rss_before, rss_after) {
            (Some(b), Some(a)) => Some((a as f64 - b as f64) * 1024.0 / k as f64),
            _ => None,
        },
        fanout_s: fanout.as_secs_f64(),
    });
    Ok(r)
}
