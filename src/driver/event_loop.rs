//! The shard event loop shared by both reactors: one loop per shard thread over a
//! readiness [`Poller`] (io_uring multishot polls, or mio's epoll/kqueue/IOCP), one shared
//! read buffer per shard, edge-style readiness (read until `WouldBlock`, write until
//! `WouldBlock` and then ask for writability). All protocol decisions are the core's; this
//! loop moves bytes, keeps time and follows [`ShardCore::status`].

use super::{Accepted, Control, Controls, MeshAdapter, Running, RuntimeConfig, Stop, Transports, MESH_RING_CAPACITY};
use crate::core::client::{ClosedState, ConnKey};
use crate::core::post::Post;
use crate::core::shard::{ConnSetup, ConnStatus, ShardCore};
use crate::transport::tls::TlsPeer;
use crate::transport::Transport;
use shards::mesh::Notify;
use slab::Slab;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Reads per connection per loop turn before others get a go.
const READ_BUDGET: usize = 16;
/// Shard read buffer.
const READ_BUF: usize = 256 * 1024;
/// How long a closing connection may take to flush.
pub(super) const FLUSH_GRACE: Duration = Duration::from_millis(100);

pub use shards::{Completion, Ready};

/// A reactor's readiness source, owned by one shard thread.
pub trait Poller: Send + 'static {
    type Stream: Read + Write;
    /// Wakes this poller's thread from any thread (for the mesh and control queue).
    fn notifier(&self) -> Box<dyn Notify>;
    /// Make an accepted socket usable with this poller.
    fn wrap(s: std::net::TcpStream) -> Self::Stream;
    /// Watch a connection under `token`.
    fn add(&mut self, s: &mut Self::Stream, token: usize) -> io::Result<()>;
    /// Stop watching it (before it is closed).
    fn remove(&mut self, s: &mut Self::Stream, token: usize);
    /// A write would block: report the connection writable when it has room.
    fn want_write(&mut self, s: &mut Self::Stream, token: usize);
    /// Wait up to `timeout` (or until woken); append readiness to `out` and completions
    /// to `done`.
    fn wait(&mut self, out: &mut Vec<Ready>, done: &mut Vec<Completion>, timeout: Duration) -> io::Result<()>;

    /// Completion I/O (io_uring): bytes of `s` arrive as [`Completion::Data`] and its
    /// writes are submitted with [`Poller::send`]. False where the poller only reports
    /// readiness (the caller then uses [`Poller::add`]).
    fn add_completion(&mut self, _s: &mut Self::Stream, _token: usize) -> bool {
        false
    }
    /// The bytes of a [`Completion::Data`].
    fn data(&self, _bid: u16, _len: usize) -> &[u8] {
        &[]
    }
    /// Give a [`Completion::Data`]'s buffer back.
    fn recycle(&mut self, _bid: u16) {}
    /// Submit a send of (a copy of) a prefix of `data`; returns its length. Its
    /// [`Completion::Sent`] says when it went.
    fn send(&mut self, _token: usize, _data: &[u8]) -> usize {
        0
    }
    /// Submit a send of `buf[off..]` from `buf` itself; returns the buffer to reuse (the
    /// connection's previous one, or `buf` if nothing was submitted).
    fn send_owned(&mut self, _token: usize, buf: Vec<u8>, _off: usize) -> Vec<u8> {
        buf
    }
    /// A send buffer back from a completed send.
    fn take_spent(&mut self) -> Option<Vec<u8>> {
        None
    }
    /// A send of `token` is in flight.
    fn send_busy(&self, _token: usize) -> bool {
        false
    }
    /// Stop receiving for `token` until [`Poller::resume_recv`].
    fn pause_recv(&mut self, _token: usize) {}
    fn resume_recv(&mut self, _token: usize) {}
    /// An eventfd that wakes this poller's thread, for storage backends to signal their
    /// completions with (`None`: they are looked for on a timer).
    fn io_wake(&self) -> Option<storage::io::Wake> {
        None
    }
    /// Whether [`Poller::signal_in_ring`] can post wake-ups: the shard then defers its
    /// wakes of other shards to the end of each turn.
    fn signals_in_ring(&self) -> bool {
        false
    }
    /// Add one to eventfd `fd` with the next submission (true), or refuse (false).
    fn signal_in_ring(&mut self, _fd: i32) -> bool {
        false
    }
    /// Whether [`Poller::io_wake`] (or another wake-up) fired since the last call.
    fn take_woken(&mut self) -> bool {
        false
    }
}

pub(super) struct Conn<S> {
    pub(super) stream: S,
    /// The core's connection; `None` while a WebSocket upgrade is pending (the
    /// connection is not a NATS client yet).
    pub(super) key: Option<ConnKey>,
    pub(super) peer: std::net::SocketAddr,
    pub(super) local: Option<std::net::SocketAddr>,
    /// TLS / WebSocket (`None` for plain TCP).
    pub(super) transport: Option<Box<Transport>>,
    /// The client certificate of a WebSocket connection whose upgrade is pending.
    pub(super) tls_peer: Option<Arc<TlsPeer>>,
    /// The transport deadline last put in the heap.
    pub(super) deadline: Option<Instant>,
    /// Readiness seen and not yet exhausted (edge-triggered).
    pub(super) readable: bool,
    pub(super) writable: bool,
    pub(super) closing_since: Option<Instant>,
    /// Completion I/O: received bytes arrive as completions, sends are submitted.
    pub(super) completion: bool,
    /// Completion I/O: bytes that arrived while the core paused reading, and how the
    /// receive ended meanwhile (an errno, 0 for the peer's close).
    pub(super) held: Vec<u8>,
    pub(super) held_end: Option<i32>,
    pub(super) recv_paused: bool,
}

/// Start one shard thread per poller, serving `listener`.
pub(super) fn start<P: Poller>(
    cfg: RuntimeConfig,
    listener: std::net::TcpListener,
    pollers: Vec<P>,
    name: &'static str,
) -> io::Result<Running> {
    let n = pollers.len();
    let notifiers: Vec<Box<dyn Notify>> = pollers.iter().map(|p| p.notifier()).collect();
    let eps = shards::mesh::build::<crate::driver::Batch>(notifiers, MESH_RING_CAPACITY);
    let wakers = eps
        .first()
        .map(|e| e.waker())
        .ok_or_else(|| io::Error::other("no shards"))?;
    let stop = Stop::default();
    let (txs, rxs) = super::control_queues(n);
    let controls = Controls::new(txs, wakers);
    let post: Arc<dyn Post> = Arc::new(controls.clone());
    let mut threads = Vec::with_capacity(n);
    for (i, ((poller, ep), rx)) in pollers.into_iter().zip(eps).zip(rxs).enumerate() {
        let cfg = cfg.clone();
        let stop = stop.clone();
        let post = post.clone();
        let cpu = (!cfg.cpus.is_empty()).then(|| cfg.cpus[i % cfg.cpus.len()]);
        let h = shards::cpus::spawn_pinned(format!("rnats-shard-{i}"), cpu, move || {
            let mut core = ShardCore::new(
                i,
                cfg.nshards,
                cfg.core.clone(),
                cfg.shared.clone(),
                Box::new(MeshAdapter(ep)),
            );
            core.set_post(post);
            let mut el = EventLoop::new(core, poller, rx, stop, cfg.spin_us, cfg.transports.clone());
            el.stats = Some((cfg.shared.clone(), i));
            el.run();
        })?;
        threads.push(h);
    }
    // On io_uring shards the acceptor uses a ring too (it falls back to mio by itself).
    let with = if name == "mio" {
        super::accept::AcceptWith::Mio
    } else {
        super::accept::AcceptWith::Ring
    };
    let acceptor = Running::accepting(listener, &controls, with)?;
    Ok(Running {
        stop,
        controls,
        acceptor,
        more: Vec::new(),
        threads,
        name,
    })
}

/// How often a busy-polling shard yields its CPU to a runnable thread there.
const YIELD_EVERY: Duration = Duration::from_micros(50);

/// How long after the last message with a reply subject a shard still busy-polls
/// between bursts of work ([`spins`]).
const CONVERSATION: Duration = Duration::from_millis(10);

/// When the busy-poll pays: the shard's work comes back within the spin window of the
/// work before it (`flowing`, and the window is not over yet), and some of that work is
/// request/reply (a message with a reply subject within [`CONVERSATION`]). There a client
/// waits on each round trip, and a busy-poll saves it two wake-ups (the request's shard
/// and the reply's). A one-way stream is different: its shards sleep between bursts, so
/// work gathers while they sleep (bigger writes, fewer turns); busy-polling it cost a
/// queue group's receiving shard three times the CPU per message.
fn spins(now: Instant, last_work: Instant, last_conversation: Option<Instant>, flowing: bool, spin: Duration) -> bool {
    flowing
        && now.saturating_duration_since(last_work) < spin
        && last_conversation.is_some_and(|c| now.saturating_duration_since(c) < CONVERSATION)
}

pub(super) struct EventLoop<P: Poller> {
    pub(super) core: ShardCore,
    pub(super) poller: P,
    controls: Receiver<Control>,
    stop: Stop,
    spin: Duration,
    pub(super) conns: Slab<Conn<P::Stream>>,
    /// Token of each core connection, by key index.
    pub(super) tokens: Vec<Option<usize>>,
    pub(super) ready: Vec<usize>,
    pub(super) wake_list: Vec<ConnKey>,
    pub(super) buf: Vec<u8>,
    /// Where this loop publishes its turns, wake-ups and busy time (`/shardz`).
    stats: Option<(Arc<crate::core::stats::Shared>, usize)>,
    /// Listener settings (TLS, WebSocket).
    pub(super) transports: Transports,
    /// Protocol bytes a transport decoded, on their way to the core.
    pub(super) app: Vec<u8>,
    /// Transport deadlines (handshake timeouts, fallback delays), by token.
    pub(super) deadlines: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Connections without a core connection that need writing or closing.
    pub(super) pre_wake: Vec<usize>,
    /// Completions of the last wait, not yet handled.
    pub(super) done: Vec<Completion>,
}

impl<P: Poller> EventLoop<P> {
    fn new(
        core: ShardCore,
        poller: P,
        controls: Receiver<Control>,
        stop: Stop,
        spin_us: u64,
        transports: Transports,
    ) -> Self {
        let mut core = core;
        core.set_io_wake(poller.io_wake());
        core.mesh_defer_wakes(poller.signals_in_ring());
        EventLoop {
            core,
            poller,
            controls,
            stop,
            spin: Duration::from_micros(spin_us),
            conns: Slab::new(),
            tokens: Vec::new(),
            ready: Vec::new(),
            wake_list: Vec::new(),
            buf: vec![0u8; READ_BUF],
            stats: None,
            transports,
            app: Vec::new(),
            deadlines: BinaryHeap::new(),
            pre_wake: Vec::new(),
            done: Vec::new(),
        }
    }

    fn run(&mut self) {
        let mut events: Vec<Ready> = Vec::with_capacity(1024);
        let mut last_work = Instant::now();
        let mut counters = crate::core::stats::LoopCounters::default();
        let mut awake_since = last_work;
        // Traffic flows: the last work came within the spin window of the work before it
        // (busy-polling then saves the wake-up of the next message; otherwise sleep at once).
        let mut flowing = false;
        let mut last_conversation = None;
        let mut last_yield = last_work;
        loop {
            let now = Instant::now();
            counters.turns += 1;
            counters.busy_ns += now.saturating_duration_since(awake_since).as_nanos() as u64;
            if let Some((shared, i)) = &self.stats {
                if let Some(s) = shared.shards.get(*i) {
                    s.publish_loop(&counters);
                }
            }
            let busy = !self.ready.is_empty() || self.core.has_wakeups();
            let next = [
                self.core.next_deadline(),
                self.deadlines.peek().map(|Reverse((t, _))| *t),
            ]
            .into_iter()
            .flatten()
            .min();
            let mut timeout = match next {
                Some(d) => d.saturating_duration_since(now),
                None => Duration::from_secs(1),
            }
            .min(Duration::from_secs(1));
            if busy {
                timeout = Duration::ZERO;
            } else if spins(now, last_work, last_conversation, flowing, self.spin) {
                // Busy-poll, but let a runnable client of this CPU go first now and then:
                // the spin then takes little time anybody else wants. A turn with nothing
                // to do costs no system call (the ring's completions and flags and the mesh
                // are read from memory), so only the yields would add calls: one after
                // each `YIELD_EVERY` of spinning without work, not one a turn (a short gap
                // between two bursts of work costs none).
                if now.duration_since(last_yield.max(last_work)) >= YIELD_EVERY {
                    std::thread::yield_now();
                    last_yield = now;
                } else {
                    std::hint::spin_loop();
                }
                timeout = Duration::ZERO;
            } else if !self.wake_list.is_empty() || !self.pre_wake.is_empty() {
                // A closing connection waits to flush: look again soon.
                timeout = timeout.min(Duration::from_millis(10));
            }
            // Wakes of parked shards this turn pushed to go in with this wait's submission.
            let poller = &mut self.poller;
            self.core.mesh_flush_wakes(&mut |fd| poller.signal_in_ring(fd));
            let parked = !timeout.is_zero() && self.core.mesh_prepare_park();
            if !parked {
                timeout = Duration::ZERO;
            }
            events.clear();
            if self.poller.wait(&mut events, &mut self.done, timeout).is_err() {
                events.clear();
            }
            if parked {
                self.core.mesh_unpark();
                counters.wakeups += 1;
            }
            let now = Instant::now();
            awake_since = now;
            if self.poller.take_woken() {
                // A storage completion may be what woke us: its owner looks now.
                self.core.woken(now);
            }
            let mut worked = false;
            for ev in events.iter() {
                if let Some(c) = self.conns.get_mut(ev.token) {
                    if ev.readable && !c.readable {
                        c.readable = true;
                        self.ready.push(ev.token);
                    }
                    // Only news when a write was blocked (epoll reports writability with
                    // every edge).
                    if ev.writable && !c.writable {
                        c.writable = true;
                        match c.key {
                            Some(k) => self.wake_list.push(k),
                            None => self.pre_wake.push(ev.token),
                        }
                    }
                }
            }
            if self.stop.is_set() {
                break;
            }
            // The mesh first: a shard that posts a job after records (a stream's interest,
            // then its create response) flushes the records first, so they apply before it.
            if self.core.poll_mesh(now) > 0 {
                worked = true;
            }
            while let Ok(c) = self.controls.try_recv() {
                match c {
                    Control::Accept(acc) => self.accept(acc, now),
                    Control::Reconfigure(cfg) => self.core.reconfigure(cfg, now),
                    Control::LameDuck => self.core.lame_duck(now),
                    Control::CloseClients(n) => {
                        self.core.close_clients(n, now);
                    }
                    Control::Run(job) => self.core.run_job(job, now),
                }
                worked = true;
            }
            if self.core.poll_mesh(now) > 0 {
                worked = true;
            }
            worked |= self.on_completions(now);
            worked |= self.read_ready(now);
            if self.core.next_deadline().is_some_and(|d| d <= now) {
                self.core.tick(now);
            }
            if self.deadlines.peek().is_some_and(|Reverse((d, _))| *d <= now) {
                self.transport_timers(now);
            }
            self.service(now);
            self.service_pre(now);
            if worked {
                flowing = now.duration_since(last_work) < self.spin;
                last_work = now;
                if self.core.take_conversing() {
                    last_conversation = Some(now);
                }
            }
        }
        self.shutdown();
    }

    fn accept(&mut self, acc: Accepted, now: Instant) {
        let lt = self
            .transports
            .read()
            .ok()
            .and_then(|v| v.get(acc.listener).cloned().flatten())
            .filter(|l| !l.is_plain());
        let mut stream = P::wrap(acc.stream);
        let entry = self.conns.vacant_entry();
        let t = entry.key();
        // `connection_rate_limit` (TLS-only client listener): a refused client never
        // starts TLS; it gets the INFO (unless the handshake was to come first), the
        // error and a close, in plaintext, as from the reference.
        let throttle = lt.as_ref().and_then(|l| {
            let m = l.tls.as_ref().filter(|m| l.ws.is_none() && !m.allow_non_tls)?;
            let r = m.rate.as_ref()?;
            (!r.allow(now)).then_some(m.handshake_first)
        });
        let mut transport = match throttle {
            Some(_) => None,
            None => lt.map(|l| Box::new(Transport::new(&l, now))),
        };
        let key = match &mut transport {
            None if throttle.is_some() => {
                let setup = ConnSetup {
                    defer_info: throttle.unwrap_or_default(),
                    throttled: true,
                    ..Default::default()
                };
                Some(self.core.accept_with(acc.peer, setup, now))
            }
            None => Some(self.core.accept(acc.peer, now)),
            Some(tr) if tr.is_websocket() => None,
            Some(tr) => {
                let setup = ConnSetup {
                    defer_info: tr.defers_info(),
                    ..Default::default()
                };
                let key = self.core.accept_with(acc.peer, setup, now);
                if tr.wants_raw() {
                    // The INFO goes out before TLS starts.
                    let n = {
                        let out = self.core.output(key);
                        tr.push_raw(out);
                        out.len()
                    };
                    self.core.written(key, n, now);
                }
                if tr.in_tls_handshake() {
                    super::transport::log_tls_start(&self.core, key);
                }
                Some(key)
            }
        };
        // Plain TCP goes through completions where the poller has them; TLS and WebSocket
        // read and write through their state machines on readiness.
        let completion = transport.is_none() && self.poller.add_completion(&mut stream, t);
        if !completion && self.poller.add(&mut stream, t).is_err() {
            if let Some(key) = key {
                self.core.remove(key, now);
            }
            return;
        }
        let deadline = transport.as_ref().and_then(|tr| tr.deadline());
        entry.insert(Conn {
            stream,
            key,
            peer: acc.peer,
            local: acc.local,
            transport,
            tls_peer: None,
            deadline,
            readable: !completion,
            writable: true,
            closing_since: None,
            completion,
            held: Vec::new(),
            held_end: None,
            recv_paused: false,
        });
        if let Some(d) = deadline {
            self.deadlines.push(Reverse((d, t)));
        }
        if let Some(key) = key {
            self.map_token(key, t);
        } else {
            self.pre_wake.push(t);
        }
        self.ready.push(t);
    }

    pub(super) fn map_token(&mut self, key: ConnKey, t: usize) {
        let i = key.idx as usize;
        if self.tokens.len() <= i {
            self.tokens.resize(i + 1, None);
        }
        if let Some(slot) = self.tokens.get_mut(i) {
            *slot = Some(t);
        }
    }

    /// Read from connections with pending readiness. Returns whether anything was read.
    fn read_ready(&mut self, now: Instant) -> bool {
        let mut any = false;
        let list = std::mem::take(&mut self.ready);
        for t in list {
            any |= self.read_conn(t, now);
        }
        any
    }

    /// Read `t` until it would block (or its budget is spent: then it goes back on the
    /// ready list). Returns whether anything was read.
    pub(super) fn read_conn(&mut self, t: usize, now: Instant) -> bool {
        let mut any = false;
        let Some(c) = self.conns.get_mut(t) else { return false };
        if !c.readable {
            return false;
        }
        let mut again = false;
        for round in 0..READ_BUDGET {
            let Some(c) = self.conns.get_mut(t) else { break };
            match c.key {
                Some(key) if self.core.status(key) != (ConnStatus::Open { read: true }) => break,
                None if c.closing_since.is_some() => break,
                _ => {}
            }
            let key = c.key;
            match c.stream.read(&mut self.buf) {
                Ok(0) => {
                    c.readable = false;
                    self.on_eof(t, now);
                    break;
                }
                Ok(n) => {
                    any = true;
                    if c.transport.is_some() {
                        self.on_transport_read(t, n, now);
                    } else if let Some(key) = key {
                        self.core.input(key, self.buf.get(..n).unwrap_or_default(), now);
                    }
                    if round + 1 == READ_BUDGET {
                        again = true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    c.readable = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    c.readable = false;
                    match key {
                        Some(key) => self.core.disconnected(key, ClosedState::ReadError, now),
                        None => self.drop_token(t),
                    }
                    break;
                }
            }
        }
        if again && !self.ready.contains(&t) {
            self.ready.push(t);
        }
        any
    }

    /// End of file from the peer.
    pub(super) fn on_eof(&mut self, t: usize, now: Instant) {
        let Some(c) = self.conns.get_mut(t) else { return };
        let failed = c.transport.as_mut().and_then(|tr| tr.on_eof());
        match (c.key, failed) {
            (Some(key), Some(e)) => self.transport_failed(t, key, e, now),
            (Some(key), None) => self.core.disconnected(key, ClosedState::ClientClosed, now),
            (None, _) => self.drop_token(t),
        }
    }

    /// Write, close or resume every connection the core pointed at.
    /// Connections still flushing on close go back to `wake_list` for a later turn.
    fn service(&mut self, now: Instant) {
        let mut list = std::mem::take(&mut self.wake_list);
        for _ in 0..8 {
            self.core.drain_wakeups(|k| list.push(k));
            if list.is_empty() {
                break;
            }
            for key in list.drain(..) {
                self.service_one(key, now);
            }
        }
        if self.wake_list.is_empty() {
            // Keep the allocation.
            self.wake_list = list;
        }
    }

    fn token(&self, key: ConnKey) -> Option<usize> {
        let t = (*self.tokens.get(key.idx as usize)?)?;
        self.conns.get(t).filter(|c| c.key == Some(key)).map(|_| t)
    }

    fn service_one(&mut self, key: ConnKey, now: Instant) {
        let Some(t) = self.token(key) else { return };
        let status = self.core.status(key);
        match status {
            ConnStatus::Gone => self.drop_conn(t, key),
            ConnStatus::Close => self.flush_closing(t, key, now),
            ConnStatus::Open { .. } | ConnStatus::Flush => {
                self.write(t, key, now);
                match self.core.status(key) {
                    ConnStatus::Open { read: true } => {
                        if let Some(c) = self.conns.get(t) {
                            if c.completion {
                                if c.recv_paused || !c.held.is_empty() || c.held_end.is_some() {
                                    self.resume_completion(t, key, now);
                                }
                            } else if c.readable && !self.ready.contains(&t) {
                                self.ready.push(t);
                            }
                        }
                    }
                    ConnStatus::Flush => {
                        let expired = match self.conns.get_mut(t) {
                            Some(c) => now.duration_since(*c.closing_since.get_or_insert(now)) >= FLUSH_GRACE,
                            None => true,
                        };
                        if expired {
                            self.drop_conn(t, key);
                        } else {
                            // Come back when writable or at the grace deadline.
                            self.wake_list.push(key);
                        }
                    }
                    ConnStatus::Close => self.flush_closing(t, key, now),
                    ConnStatus::Gone => self.drop_conn(t, key),
                    ConnStatus::Open { read: false } => {}
                }
            }
        }
    }

    /// The core is done with a connection: write what its transport still holds (a
    /// close frame, an alert), briefly, then close.
    fn flush_closing(&mut self, t: usize, key: ConnKey, now: Instant) {
        // The WebSocket close frame and the TLS close_notify follow what was queued.
        if let Some(reason) = self.core.closing_reason(key) {
            if let Some(tr) = self.conns.get_mut(t).and_then(|c| c.transport.as_mut()) {
                tr.close(reason);
            }
        }
        let pending = self
            .conns
            .get(t)
            .and_then(|c| c.transport.as_ref())
            .is_some_and(|tr| tr.wants_write());
        if !pending {
            self.drop_conn(t, key);
            return;
        }
        self.write(t, key, now);
        let Some(c) = self.conns.get_mut(t) else { return };
        let still = c.transport.as_ref().is_some_and(|tr| tr.wants_write());
        let expired = now.duration_since(*c.closing_since.get_or_insert(now)) >= FLUSH_GRACE;
        if still && !expired {
            self.wake_list.push(key);
        } else {
            self.drop_conn(t, key);
        }
    }

    pub(super) fn write(&mut self, t: usize, key: ConnKey, now: Instant) {
        if self.conns.get(t).is_some_and(|c| c.transport.is_some()) {
            self.write_transport(t, key, now);
            return;
        }
        if self.conns.get(t).is_some_and(|c| c.completion) {
            // One send in flight; its completion counts the bytes and comes back here. A
            // finished output chunk is sent from its own buffer; the chunk still being
            // appended to is copied.
            if !self.poller.send_busy(t) {
                if let Some((chunk, off)) = self.core.take_output_chunk(key) {
                    let old = self.poller.send_owned(t, chunk, off);
                    crate::core::outbuf::recycle_chunk(old);
                } else {
                    let out = self.core.output(key);
                    if !out.is_empty() {
                        self.poller.send(t, out);
                    }
                }
            }
            return;
        }
        loop {
            let out = self.core.output(key);
            if out.is_empty() {
                return;
            }
            let Some(c) = self.conns.get_mut(t) else { return };
            if !c.writable {
                self.core.written(key, 0, now);
                return;
            }
            match c.stream.write(out) {
                Ok(0) => {
                    self.core.disconnected(key, ClosedState::WriteError, now);
                    return;
                }
                Ok(n) => self.core.written(key, n, now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    c.writable = false;
                    self.poller.want_write(&mut c.stream, t);
                    self.core.written(key, 0, now);
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.core.disconnected(key, ClosedState::WriteError, now);
                    return;
                }
            }
        }
    }

    pub(super) fn drop_conn(&mut self, t: usize, key: ConnKey) {
        self.drop_token(t);
        self.core.remove(key, Instant::now());
    }

    /// Close the socket of `t` (its core connection, if any, is the caller's business).
    pub(super) fn drop_token(&mut self, t: usize) {
        if let Some(mut c) = self.conns.try_remove(t) {
            self.poller.remove(&mut c.stream, t);
            if let Some(key) = c.key {
                if let Some(slot) = self.tokens.get_mut(key.idx as usize) {
                    *slot = None;
                }
            }
        }
        self.ready.retain(|r| *r != t);
    }

    fn shutdown(&mut self) {
        // From here on nothing flushes at turn ends: wakes still owed go out now.
        self.core.mesh_defer_wakes(false);
        let start = Instant::now();
        // Completions the last wait reaped come first: a send the ring finished but the
        // core has not yet counted would otherwise go out a second time.
        self.on_completions(start);
        self.core.shutdown(start);
        self.service(start);
        let pre: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.key.is_none())
            .map(|(t, _)| t)
            .collect();
        for t in pre {
            self.drop_token(t);
        }
        let mut events: Vec<Ready> = Vec::with_capacity(256);
        while !self.conns.is_empty() && start.elapsed() < Duration::from_secs(1) {
            events.clear();
            let _ = self.poller.wait(&mut events, &mut self.done, Duration::from_millis(10));
            self.on_completions(Instant::now());
            for ev in events.iter() {
                if let Some(c) = self.conns.get_mut(ev.token) {
                    if ev.writable {
                        c.writable = true;
                    }
                }
            }
            let keys: Vec<ConnKey> = self.conns.iter().filter_map(|(_, c)| c.key).collect();
            self.wake_list.extend(keys);
            self.service(Instant::now());
        }
        let all: Vec<(usize, Option<ConnKey>)> = self.conns.iter().map(|(t, c)| (t, c.key)).collect();
        for (t, k) in all {
            match k {
                Some(k) => self.drop_conn(t, k),
                None => self.drop_token(t),
            }
        }
    }
}

#[cfg(test)]
mod spin_tests {
    use super::*;

    #[test]
    fn busy_polls_only_for_flowing_request_reply() {
        let spin = Duration::from_micros(100);
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        // Flowing, within the window, a reply subject seen 1 ms ago: spin.
        assert!(spins(at(1_050), at(1_000), Some(at(0)), true, spin));
        // No request/reply seen, or too long ago: sleep.
        assert!(!spins(at(1_050), at(1_000), None, true, spin));
        let late = t0 + CONVERSATION + Duration::from_millis(1);
        assert!(!spins(late, late - Duration::from_micros(10), Some(t0), true, spin));
        // Not flowing (the last work came alone), or the window is over: sleep.
        assert!(!spins(at(1_050), at(1_000), Some(at(0)), false, spin));
        assert!(!spins(at(1_101), at(1_000), Some(at(0)), true, spin));
        assert!(
            !spins(at(1_050), at(1_000), Some(at(0)), true, Duration::ZERO),
            "--spin_us 0"
        );
    }
}
