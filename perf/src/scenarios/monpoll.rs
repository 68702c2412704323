//! `monpoll`: does monitoring stall the server? K idle connections (each with a
//! subscription) are opened, then the `pubsub` flow runs three times: without monitoring
//! traffic, with `/connz?subs=1` and `/metrics` each requested every `--poll-ms` (100 ms) on
//! the server's monitoring port (`--monitor host:port`), and without again. The result is
//! the polled throughput, with the mean of the two unpolled runs and their ratio.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::client::Conn;
use crate::error::{PerfError, Result};
use crate::proc;
use crate::proto::encode_sub;
use crate::report::{MonitorStats, RunResult};
use crate::scenarios::{pubsub, Ctx, Params, Scenario};

/// Handshakes in flight at once.
const CHUNK: usize = 256;
/// Read buffer per idle connection.
const IDLE_BUF: usize = 4 * 1024;
/// The monitoring paths polled.
const PATHS: [&str; 2] = ["/connz?subs=1", "/metrics"];

/// One `GET` over HTTP/1.0: the status and body length.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, usize)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: perf\r\n\r\n")?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(buf.len());
    let status = buf
        .get(9..12)
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, buf.len().saturating_sub(head_end + 4)))
}

/// What the pollers saw.
#[derive(Default)]
struct Polls {
    latencies_ms: Vec<f64>,
    errors: u64,
    connz_bytes: usize,
}

/// Poll every path every `every` until `stop`.
fn poll(
    addr: SocketAddr,
    every: Duration,
    stop: Arc<AtomicBool>,
    out: Arc<Mutex<Polls>>,
) -> Vec<thread::JoinHandle<()>> {
    PATHS
        .iter()
        .map(|path| {
            let (stop, out) = (stop.clone(), out.clone());
            thread::spawn(move || {
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let r = get(addr, path);
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
                    match r {
                        Ok((200, len)) => {
                            o.latencies_ms.push(ms);
                            if path.starts_with("/connz") {
                                o.connz_bytes = len;
                            }
                        }
                        _ => o.errors += 1,
                    }
                    drop(o);
                    next += every;
                    let now = Instant::now();
                    if next > now {
                        thread::sleep(next - now);
                    } else {
                        next = now;
                    }
                }
            })
        })
        .collect()
}

fn resolve(monitor: &str) -> Result<SocketAddr> {
    let addr: SocketAddr = monitor
        .parse()
        .map_err(|_| PerfError::Param(format!("--monitor {monitor:?} is not host:port")))?;
    if !addr.ip().is_loopback() {
        return Err(PerfError::Param("--monitor must be a loopback address".into()));
    }
    Ok(addr)
}

/// Runs the scenario.
pub fn run(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let Some(monitor) = p.monitor.as_deref() else {
        return Err(PerfError::Param(
            "monpoll needs --monitor host:port (the server's monitoring port, -m)".into(),
        ));
    };
    let maddr = resolve(monitor)?;
    get(maddr, "/varz").map_err(|e| PerfError::Param(format!("monitoring port {maddr}: {e}")))?;
    let k = p.conns;
    let limit = proc::raise_fd_limit();
    if (k as u64) + 64 > limit {
        return Err(PerfError::Param(format!(
            "--conns {k} exceeds the open-file limit {limit}"
        )));
    }
    ctx.bar.set_message("connecting");
    let mut idle: Vec<Conn> = Vec::with_capacity(k);
    while idle.len() < k {
        let first = idle.len();
        for i in first..(first + CHUNK).min(k) {
            let mut setup = Vec::new();
            encode_sub(&mut setup, &format!("perf.idle.{i}"), None, 1);
            idle.push(Conn::start_with_buffer(
                ctx.addr,
                ctx.handshake_timeout,
                &setup,
                IDLE_BUF,
            )?);
        }
        for c in &mut idle[first..] {
            c.finish_handshake(ctx.handshake_timeout)?;
        }
    }

    let base1 = pubsub::run(Scenario::Pubsub, p, ctx)?;
    let stop = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(Mutex::new(Polls::default()));
    let pollers = poll(
        maddr,
        Duration::from_millis(p.poll_ms.max(1)),
        stop.clone(),
        polls.clone(),
    );
    let polled = pubsub::run(Scenario::Pubsub, p, ctx);
    stop.store(true, Ordering::Relaxed);
    for h in pollers {
        let _ = h.join();
    }
    let polled = polled?;
    let base2 = pubsub::run(Scenario::Pubsub, p, ctx)?;
    drop(idle);

    let baseline = (base1.msgs_per_s + base2.msgs_per_s) / 2.0;
    let mut r = polled;
    r.scenario = Scenario::Monpoll;
    r.complete = r.complete && base1.complete && base2.complete;
    let mut o = polls.lock().unwrap_or_else(|e| e.into_inner());
    o.latencies_ms.sort_by(f64::total_cmp);
    let pct = |q: f64| -> f64 {
        let n = o.latencies_ms.len();
        if n == 0 {
            return 0.0;
        }
        let i = ((n as f64 - 1.0) * q).round() as usize;
        o.latencies_ms.get(i).copied().unwrap_or(0.0)
    };
    if o.errors > 0 {
        r.notes.push(format!("{} monitoring requests failed", o.errors));
    }
    r.monitor = Some(MonitorStats {
        baseline_msgs_per_s: baseline,
        baseline_runs: vec![base1.msgs_per_s, base2.msgs_per_s],
        polled_msgs_per_s: r.msgs_per_s,
        ratio: if baseline > 0.0 { r.msgs_per_s / baseline } else { 0.0 },
        polls: o.latencies_ms.len() as u64,
        poll_errors: o.errors,
        poll_p50_ms: pct(0.5),
        poll_max_ms: pct(1.0),
        connz_bytes: o.connz_bytes,
        idle_conns: k,
    });
    Ok(r)
}
