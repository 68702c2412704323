//! `handshakes`: connections opened (TCP, TLS handshake or WebSocket upgrade as the
//! transport wants, then `CONNECT`/`PING`/`PONG`) and closed, by `--pubs` threads, `--msgs`
//! in all. Rate: completed handshakes per second. TLS sessions are never resumed.

use std::thread;
use std::time::Instant;

use crate::client::Conn;
use crate::error::Result;
use crate::proc;
use crate::report::RunResult;
use crate::scenarios::{base_result, server_stats, set_rate, share, Ctx, Params, Scenario};

/// Runs the scenario.
pub fn run(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let threads = p.pubs.max(1);
    let before = ctx.pid.and_then(proc::sample);
    let deadline = Instant::now() + p.duration();
    let t0 = Instant::now();
    ctx.bar.set_length(p.msgs);
    let (addr, timeout) = (ctx.addr, ctx.handshake_timeout);
    let done: Vec<Result<u64>> = thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let n = share(p.msgs, threads as u64, i);
                s.spawn(move || -> Result<u64> {
                    let mut ok = 0;
                    for _ in 0..n {
                        if Instant::now() >= deadline {
                            break;
                        }
                        let c = Conn::connect(addr, timeout, b"")?;
                        drop(c);
                        ok += 1;
                    }
                    Ok(ok)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or(Ok(0))).collect()
    });
    let elapsed = t0.elapsed();
    let after = ctx.pid.and_then(proc::sample);
    let mut total = 0;
    for d in done {
        total += d?;
    }
    ctx.bar.set_position(total);
    let mut r = base_result(Scenario::Handshakes, p);
    r.published = total;
    r.expected = p.msgs;
    r.complete = total == p.msgs;
    if !r.complete {
        r.notes
            .push(format!("{total} of {} handshakes within --duration", p.msgs));
    }
    set_rate(&mut r, total, 0, elapsed);
    r.server = server_stats(before, after, total);
    Ok(r)
}
