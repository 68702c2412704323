//! `sysevents`: what the system account's events cost the server. While the `pubsub` flow
//! runs on `foo.bench` (as `plain`), clients connect and disconnect at 1,000 per second
//! (each a full `CONNECT`/`PING`/`PONG` handshake, then a close). The flow runs three times
//! under that churn: nobody listening to the system events, then with a system account user
//! subscribed to `$SYS.>` (every connect and disconnect produces its event and two account
//! connection counts, the STATSZ broadcasts go out), then nobody listening again. The result
//! is the listened run's throughput against the mean of the two quiet ones, with the churn
//! rate reached and the events received in each run. Runs on the lab's auth configuration
//! ([`crate::authlab`]: its `sys` user is in the system account).
//!
//! Before measuring, the scenario checks that the watcher sees the `CONNECT` event of a
//! client of account A, so a server without the lab's configuration fails loudly.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::authlab::User;
use crate::client::{Conn, Credentials};
use crate::error::{PerfError, Result};
use crate::proto::{encode_sub, Frame};
use crate::report::RunResult;
use crate::scenarios::{perms, pubsub, Ctx, Params, Scenario};

/// The subject of the flow.
const SUBJECT: &str = "foo.bench";
/// Connects per second during every measured run.
pub const CONNECT_RATE: u64 = 1000;
/// Threads opening and closing connections.
const CHURNERS: u64 = 4;

/// Opens and closes connections as `plain` at [`CONNECT_RATE`] until stopped.
struct Churn {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    threads: Vec<thread::JoinHandle<()>>,
    started: Instant,
}

impl Churn {
    fn start(ctx: &Ctx<'_>) -> Churn {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let every = Duration::from_nanos(1_000_000_000 * CHURNERS / CONNECT_RATE);
        let threads = (0..CHURNERS)
            .map(|_| {
                let (stop, done, failed) = (stop.clone(), done.clone(), failed.clone());
                let (addr, timeout) = (ctx.addr, ctx.handshake_timeout);
                let login = User::Plain.credentials();
                thread::spawn(move || {
                    let mut next = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        match Conn::connect_as(addr, timeout, Some(&login), b"") {
                            Ok(c) => {
                                drop(c);
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(_) => {
                                failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        next += every;
                        let now = Instant::now();
                        if next > now {
                            thread::sleep(next - now);
                        } else if now - next > Duration::from_millis(100) {
                            // Behind by more than a moment: do not try to catch up in a burst.
                            next = now;
                        }
                    }
                })
            })
            .collect();
        Churn {
            stop,
            done,
            failed,
            threads,
            started: Instant::now(),
        }
    }

    /// Stop; the connects per second reached and the failures.
    fn finish(self) -> (f64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        (
            self.done.load(Ordering::Relaxed) as f64 / secs,
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// A system account user reading `$SYS.>` on its own thread.
struct Watcher {
    stop: Arc<AtomicBool>,
    events: Arc<AtomicU64>,
    thread: thread::JoinHandle<Result<()>>,
}

impl Watcher {
    fn start(ctx: &Ctx<'_>) -> Result<Watcher> {
        let mut sub = Vec::new();
        encode_sub(&mut sub, "$SYS.>", None, 1);
        let mut conn = Conn::connect_as(ctx.addr, ctx.handshake_timeout, Some(&User::System.credentials()), &sub)?;
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(AtomicU64::new(0));
        let (s2, e2) = (stop.clone(), events.clone());
        let thread = thread::spawn(move || -> Result<()> {
            while !s2.load(Ordering::Relaxed) {
                let n = conn.read_msgs()?;
                e2.fetch_add(n, Ordering::Relaxed);
            }
            Ok(())
        });
        Ok(Watcher { stop, events, thread })
    }

    /// Stop; the events received.
    fn finish(self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| PerfError::Config("the $SYS watcher thread panicked".into()))??;
        Ok(self.events.load(Ordering::Relaxed))
    }
}

/// The flow under churn, with or without a watcher; adds what happened to the notes.
fn churned_flow(p: &Params, ctx: &Ctx<'_>, watched: bool, label: &str) -> Result<RunResult> {
    let login: Credentials = User::Plain.credentials();
    let watcher = if watched { Some(Watcher::start(ctx)?) } else { None };
    let churn = Churn::start(ctx);
    let run = pubsub::run_on(Scenario::Pubsub, p, ctx, SUBJECT, Some(&login));
    let (rate, failed) = churn.finish();
    let events = match watcher {
        Some(w) => Some(w.finish()?),
        None => None,
    };
    let mut r = run?;
    r.notes.push(format!("{label}: {rate:.0} connects/s"));
    if failed > 0 {
        r.notes.push(format!("{label}: {failed} connects failed"));
    }
    if let Some(n) = events {
        r.notes.push(format!("{label}: {n} system events received"));
    }
    if let Some(s) = &r.server {
        r.notes.push(format!("{label}: server CPU {:.2} s", s.cpu_s));
    }
    Ok(r)
}

/// Checks that the lab's `sys` user sees account A's connect events.
fn verify(ctx: &Ctx<'_>) -> Result<Vec<String>> {
    let mut sub = Vec::new();
    encode_sub(&mut sub, "$SYS.ACCOUNT.A.CONNECT", None, 1);
    let mut w = Conn::connect_as(ctx.addr, ctx.handshake_timeout, Some(&User::System.credentials()), &sub)
        .map_err(|e| PerfError::Config(format!("the system account user cannot log in: {e}")))?;
    let c = Conn::connect_as(ctx.addr, ctx.handshake_timeout, Some(&User::Plain.credentials()), b"")?;
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut seen = false;
    while !seen && Instant::now() < deadline {
        w.read_frames(|f| {
            if let Frame::Msg(m) = f {
                seen |= m.subject == b"$SYS.ACCOUNT.A.CONNECT";
            }
            Ok(())
        })?;
    }
    drop(c);
    if !seen {
        return Err(PerfError::Config(
            "no $SYS.ACCOUNT.A.CONNECT event within 2 s (is the server running the lab's auth config?)".into(),
        ));
    }
    Ok(vec!["sys: $SYS.ACCOUNT.A.CONNECT seen for a plain client".into()])
}

/// Runs the scenario.
pub fn run(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let checks = verify(ctx)?;
    let warm = Params {
        msgs: (p.msgs / 10).max(1),
        ..p.clone()
    };
    churned_flow(&warm, ctx, true, "warm-up")?;
    let base1 = churned_flow(p, ctx, false, "quiet run 1")?;
    let measured = churned_flow(p, ctx, true, "watched run")?;
    let base2 = churned_flow(p, ctx, false, "quiet run 2")?;
    Ok(perms::combine(
        Scenario::Sysevents,
        measured,
        [base1, base2],
        "nobody listening to $SYS",
        checks,
    ))
}
