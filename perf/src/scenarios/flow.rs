//! The publish/subscribe engine shared by `pub`, `pubsub`, `fanout`, `fanin`, `queue` and
//! `subjects`: P publisher threads writing pre-built batches, S subscriber threads counting
//! `MSG` frames, and a monitor on the calling thread that drives the progress bar and enforces
//! the time limits.
//!
//! Flow control: publishers stay at most `window` deliveries ahead of the subscribers, so a
//! server is measured at the rate its subscribers really drain, and never trips its
//! slow-consumer limit (64 MiB by default) just because the generator outran it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use crate::client::{Conn, Credentials};
use crate::error::{PerfError, Result};
use crate::proc::{self, ProcSample};
use crate::proto::encode_pub;
use crate::scenarios::Ctx;

/// After the publishers finish, subscribers get this long without progress before the run
/// is declared incomplete.
const DRAIN_GRACE: Duration = Duration::from_secs(3);
/// Extra time the publisher's final flush may take.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(15);

/// A run of pre-encoded `PUB` frames written with one syscall.
pub struct Batch {
    buf: Vec<u8>,
    /// End offset of each frame in `buf`.
    ends: Vec<usize>,
    /// Cumulative deliveries expected after each frame.
    deliveries: Vec<u64>,
}

impl Batch {
    /// Builds a batch from (subject, expected deliveries) pairs sharing one payload.
    pub fn new<'a>(frames: impl IntoIterator<Item = (&'a str, u64)>, payload: &[u8]) -> Batch {
        let mut b = Batch {
            buf: Vec::new(),
            ends: Vec::new(),
            deliveries: Vec::new(),
        };
        let mut total = 0;
        for (subject, deliveries) in frames {
            encode_pub(&mut b.buf, subject.as_bytes(), None, payload);
            total += deliveries;
            b.ends.push(b.buf.len());
            b.deliveries.push(total);
        }
        b
    }

    /// A batch of about `target_bytes` frames to one subject.
    pub fn uniform(subject: &str, payload: &[u8], deliveries_each: u64, target_bytes: usize) -> Batch {
        let n = (target_bytes / super::frame_len(subject.len(), payload.len())).max(1);
        Batch::new(std::iter::repeat_n((subject, deliveries_each), n), payload)
    }

    fn frames(&self) -> usize {
        self.ends.len()
    }
}

/// What to run.
pub struct FlowSpec {
    pub publishers: usize,
    /// Setup bytes (SUB lines) for each subscriber connection.
    pub subscribers: Vec<Vec<u8>>,
    /// Batches every publisher cycles through (offset by its index).
    pub batches: Vec<Batch>,
    /// Publisher i writes only batch i (modulo their number) instead of cycling. With as
    /// many subscribers as publishers, subscriber i is taken to get exactly publisher i's
    /// messages (`pairs`), and each such pair has a window of its own.
    pub pinned: bool,
    /// Messages to publish in total, split across publishers.
    pub msgs: u64,
    /// Flow-control window in deliveries (applies only when there are subscribers).
    pub window: u64,
    pub duration: Duration,
    /// Who every connection (publishers and subscribers) logs in as.
    pub login: Option<Credentials>,
}

/// What happened.
#[derive(Debug, Clone)]
pub struct FlowOutcome {
    pub published: u64,
    pub expected: u64,
    pub delivered: u64,
    pub per_sub: Vec<u64>,
    /// From start until the last publisher's flush returned.
    pub pub_elapsed: Duration,
    /// From start until the last delivery.
    pub sub_elapsed: Duration,
    /// Time to connect the subscribers and have all their subscriptions confirmed.
    pub setup_elapsed: Duration,
    /// All published messages were delivered, and publishing was not cut short by the limit.
    pub complete: bool,
    pub notes: Vec<String>,
    pub before: Option<ProcSample>,
    pub after: Option<ProcSample>,
    /// This process (the load generator) at the same two instants.
    pub load_before: Option<ProcSample>,
    pub load_after: Option<ProcSample>,
    /// Wall-clock time between the two samples (from the flow's start).
    pub sampled: Duration,
}

/// One pinned publisher's deliveries expected and received, for its own window. On a
/// cache line of its own: the pairs must share nothing, here as in the server.
#[repr(align(128))]
#[derive(Default)]
struct Lane {
    expected: AtomicU64,
    delivered: AtomicU64,
}

struct Shared {
    t0: Instant,
    published: AtomicU64,
    expected: AtomicU64,
    delivered: AtomicU64,
    pubs_done: AtomicUsize,
    stop: AtomicBool,
}

impl Shared {
    fn finished(&self, pubs: usize) -> bool {
        self.pubs_done.load(Relaxed) == pubs && self.delivered.load(Relaxed) >= self.expected.load(Relaxed)
    }
}

/// Connects everything, runs the flow, and measures the server around it.
pub fn run(ctx: &Ctx<'_>, spec: &FlowSpec) -> Result<FlowOutcome> {
    if spec.batches.is_empty() || spec.batches.iter().any(|b| b.frames() == 0) || spec.publishers == 0 {
        return Err(PerfError::Param(
            "a flow needs at least one publisher and one batch".into(),
        ));
    }
    let timeout = ctx.handshake_timeout;
    // Subscriptions are sent pipelined on every connection, then each handshake PING/PONG
    // confirms them: after that the server routes to them.
    ctx.bar.set_message("subscribing");
    let setup_start = Instant::now();
    let mut subs = Vec::with_capacity(spec.subscribers.len());
    for setup in &spec.subscribers {
        subs.push(Conn::start_as(ctx.addr, timeout, spec.login.as_ref(), setup)?);
    }
    let setup_timeout = timeout.max(spec.duration);
    for c in &mut subs {
        c.finish_handshake(setup_timeout)?;
    }
    let setup_elapsed = setup_start.elapsed();
    let mut pubs = Vec::with_capacity(spec.publishers);
    for _ in 0..spec.publishers {
        pubs.push(Conn::connect_as(ctx.addr, timeout, spec.login.as_ref(), b"")?);
    }
    ctx.bar.set_message(if spec.subscribers.is_empty() {
        "publishing"
    } else {
        "delivering"
    });
    let before = ctx.pid.and_then(proc::sample);
    let load_before = proc::sample(std::process::id());
    let shared = Shared {
        t0: Instant::now(),
        published: AtomicU64::new(0),
        expected: AtomicU64::new(0),
        delivered: AtomicU64::new(0),
        pubs_done: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    };
    let deadline = shared.t0 + spec.duration;
    let npubs = spec.publishers as u64;
    let has_subs = !spec.subscribers.is_empty();
    let window = has_subs.then_some(spec.window);
    let lanes: Vec<Lane> = if spec.pinned && spec.subscribers.len() == spec.publishers {
        (0..spec.publishers).map(|_| Lane::default()).collect()
    } else {
        Vec::new()
    };

    let (pub_results, sub_results, monitor_notes) = thread::scope(|s| {
        let pub_handles: Vec<_> = pubs
            .into_iter()
            .enumerate()
            .map(|(i, conn)| {
                let count = super::share(spec.msgs, npubs, i);
                let shared = &shared;
                let batches = match spec.batches.get(i % spec.batches.len()) {
                    Some(b) if spec.pinned => std::slice::from_ref(b),
                    _ => &spec.batches[..],
                };
                let lane = lanes.get(i);
                s.spawn(move || {
                    let r = publisher(conn, batches, i, count, window, shared, lane, deadline);
                    if r.is_err() {
                        shared.stop.store(true, Relaxed);
                    }
                    shared.pubs_done.fetch_add(1, Relaxed);
                    r
                })
            })
            .collect();
        let sub_handles: Vec<_> = subs
            .into_iter()
            .enumerate()
            .map(|(i, conn)| {
                let shared = &shared;
                let lane = lanes.get(i);
                s.spawn(move || {
                    let r = subscriber(conn, shared, lane, spec.publishers);
                    if r.is_err() {
                        shared.stop.store(true, Relaxed);
                    }
                    r
                })
            })
            .collect();
        let notes = monitor(ctx.bar, &shared, spec, has_subs, deadline);
        let pr: Vec<_> = pub_handles.into_iter().map(join).collect();
        let sr: Vec<_> = sub_handles.into_iter().map(join).collect();
        (pr, sr, notes)
    });
    let after = ctx.pid.and_then(proc::sample);
    let load_after = proc::sample(std::process::id());
    let sampled = shared.t0.elapsed();

    let mut pub_elapsed = Duration::ZERO;
    let mut cut_short = false;
    for r in pub_results {
        let (elapsed, sent_all) = r?;
        pub_elapsed = pub_elapsed.max(elapsed);
        cut_short |= !sent_all;
    }
    let mut per_sub = Vec::new();
    let mut sub_elapsed = Duration::ZERO;
    for r in sub_results {
        let (count, last) = r?;
        per_sub.push(count);
        sub_elapsed = sub_elapsed.max(last);
    }
    let published = shared.published.load(Relaxed);
    let expected = shared.expected.load(Relaxed);
    let delivered: u64 = per_sub.iter().sum();
    let mut notes = monitor_notes;
    if cut_short {
        notes.push(format!(
            "publishing stopped at the {:?} limit after {published} messages",
            spec.duration
        ));
    }
    if has_subs && delivered < expected {
        notes.push(format!("only {delivered} of {expected} expected deliveries arrived"));
    }
    if delivered > expected {
        notes.push(format!("{delivered} deliveries, more than the {expected} expected"));
    }
    let complete = !cut_short && (!has_subs || delivered == expected);
    Ok(FlowOutcome {
        published,
        expected,
        delivered,
        per_sub,
        pub_elapsed,
        sub_elapsed,
        setup_elapsed,
        complete,
        notes,
        before,
        after,
        load_before,
        load_after,
        sampled,
    })
}

impl FlowOutcome {
    /// A scenario's result with this flow's counts, completeness and notes.
    pub fn result(&mut self, scenario: super::Scenario, p: &super::Params) -> crate::report::RunResult {
        let mut r = super::base_result(scenario, p);
        r.published = self.published;
        r.expected = self.expected;
        r.delivered = self.delivered;
        r.complete = self.complete;
        r.notes = std::mem::take(&mut self.notes);
        r
    }

    /// Sets the result's server and load-generator CPU for `counted` messages.
    pub fn set_cpu(&self, r: &mut crate::report::RunResult, counted: u64) {
        r.server = super::server_stats(self.before, self.after, counted);
        r.load = super::load_stats(
            self.load_before,
            self.load_after,
            self.sampled,
            counted,
            r.server.as_ref(),
        );
    }
}

fn join<T>(h: thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    h.join().map_err(|e| {
        let text = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_default();
        PerfError::Worker(text)
    })?
}

/// Updates the bar and stops the run at the deadline, or when deliveries stall after the
/// publishers are done.
fn monitor(bar: &ProgressBar, shared: &Shared, spec: &FlowSpec, has_subs: bool, deadline: Instant) -> Vec<String> {
    let mut notes = Vec::new();
    let hard_deadline = deadline + DRAIN_GRACE + FLUSH_TIMEOUT;
    bar.set_length(spec.msgs);
    let mut last_progress = (0u64, Instant::now());
    loop {
        thread::sleep(Duration::from_millis(50));
        let published = shared.published.load(Relaxed);
        let delivered = shared.delivered.load(Relaxed);
        let done = shared.pubs_done.load(Relaxed);
        if has_subs {
            let expected = shared.expected.load(Relaxed);
            let est_total = if done == spec.publishers {
                expected
            } else {
                expected.max(1) * spec.msgs / published.max(1)
            };
            bar.set_length(est_total.max(1));
            bar.set_position(delivered);
        } else {
            bar.set_position(published);
        }
        if done == spec.publishers && (!has_subs || shared.finished(spec.publishers)) {
            break;
        }
        if shared.stop.load(Relaxed) && done == spec.publishers {
            break;
        }
        let now = Instant::now();
        if delivered != last_progress.0 {
            last_progress = (delivered, now);
        } else if has_subs && done == spec.publishers && now - last_progress.1 > DRAIN_GRACE {
            notes.push(format!("deliveries stalled for {DRAIN_GRACE:?} after publishing ended"));
            shared.stop.store(true, Relaxed);
            break;
        }
        if now > hard_deadline {
            notes.push("hard time limit reached".into());
            shared.stop.store(true, Relaxed);
            break;
        }
    }
    shared.stop.store(true, Relaxed);
    notes
}

/// Returns (time until the server confirmed everything, whether all `count` were sent).
/// With a `lane` the window counts only this publisher's deliveries.
#[allow(clippy::too_many_arguments)]
fn publisher(
    mut conn: Conn,
    batches: &[Batch],
    index: usize,
    count: u64,
    window: Option<u64>,
    shared: &Shared,
    lane: Option<&Lane>,
    deadline: Instant,
) -> Result<(Duration, bool)> {
    let mut sent = 0u64;
    let mut bi = index;
    let mut last_poll = Instant::now();
    // The deliveries this publisher's window counts: its own pair's, or everyone's.
    let (expected, delivered) = match lane {
        Some(l) => (&l.expected, &l.delivered),
        None => (&shared.expected, &shared.delivered),
    };
    while sent < count {
        if shared.stop.load(Relaxed) || Instant::now() >= deadline {
            break;
        }
        let b = &batches[bi % batches.len()];
        bi += 1;
        let n = usize::try_from(count - sent).unwrap_or(usize::MAX).min(b.frames());
        let (end, deliveries) = (b.ends[n - 1], b.deliveries[n - 1]);
        if let Some(window) = window {
            wait_for_window(shared, expected, delivered, window, deliveries, deadline);
        }
        if let Some(l) = lane {
            l.expected.fetch_add(deliveries, Relaxed);
        }
        shared.expected.fetch_add(deliveries, Relaxed);
        conn.write_all(&b.buf[..end])?;
        sent += n as u64;
        shared.published.fetch_add(n as u64, Relaxed);
        if last_poll.elapsed() > Duration::from_millis(50) {
            conn.poll_nonblocking()?;
            last_poll = Instant::now();
        }
    }
    // The PING barrier: once its PONG is back the server has processed every PUB.
    conn.flush(FLUSH_TIMEOUT, &mut |_| Ok(()))?;
    Ok((shared.t0.elapsed(), sent == count))
}

/// Waits until `expected - delivered` leaves room for `next` more deliveries.
fn wait_for_window(
    shared: &Shared,
    expected: &AtomicU64,
    delivered: &AtomicU64,
    window: u64,
    next: u64,
    deadline: Instant,
) {
    let mut spins = 0u32;
    loop {
        let lag = expected.load(Relaxed).saturating_sub(delivered.load(Relaxed));
        if lag == 0 || lag + next <= window || shared.stop.load(Relaxed) || Instant::now() >= deadline {
            return;
        }
        spins += 1;
        if spins < 16 {
            thread::yield_now();
        } else {
            thread::sleep(Duration::from_micros(100));
        }
    }
}

/// Returns (messages received, time of the last one since start).
fn subscriber(mut conn: Conn, shared: &Shared, lane: Option<&Lane>, pubs: usize) -> Result<(u64, Duration)> {
    let mut count = 0u64;
    let mut last = Duration::ZERO;
    while !shared.stop.load(Relaxed) && !shared.finished(pubs) {
        let n = conn.read_msgs()?;
        if n > 0 {
            count += n;
            if let Some(l) = lane {
                l.delivered.fetch_add(n, Relaxed);
            }
            shared.delivered.fetch_add(n, Relaxed);
            last = shared.t0.elapsed();
        }
    }
    Ok((count, last))
}
