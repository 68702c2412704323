//! One shard's NATS state machine, free of I/O: the shard's connections, their
//! subscriptions, the local sublist, the remote-interest table and the staging buffers
//! of the mesh. A reactor thread (io_uring or mio) owns exactly one `ShardCore` and
//! drives it; nothing else touches it (ARCHITECTURE.md, invariant 1).
//!
//! Driver contract:
//! - [`ShardCore::accept`] a connection, feed what it reads to [`ShardCore::input`],
//!   write [`ShardCore::output`] to the socket and report it with [`ShardCore::written`];
//! - after every call, visit [`ShardCore::drain_wakeups`]: those connections have new
//!   output, were resumed, or are closing; [`ShardCore::status`] says what to do;
//! - when the socket is done, [`ShardCore::remove`] the connection;
//! - call [`ShardCore::poll_mesh`] when the mesh wakes the shard, and [`ShardCore::tick`]
//!   at [`ShardCore::next_deadline`]. Time always comes in as `now`.
//!
//! Submodules: `ops` (client protocol operations), `route` (publish routing and
//! delivery), `memo` (a connection's last publish subject, or the prefix that decided it,
//! and what it matched), `fan` (one frame per message for many local subscribers),
//! `run_deliver` (a run of messages from another shard to plain subscribers, their heads
//! put together once), `run_block` (a run given to each subscriber whole, its frames put
//! together once), `local_run` (a connection's publishes to plain subscribers on its
//! own shard, held in a run and delivered as one), `blob` (large messages between shards in one copy), `interest`
//! (subscriptions, interest replication and barriers), `accounts` (the shard's view of the
//! account table), `timers`, `transport` (what TLS and WebSocket connections need of the
//! core: deferred INFO, their INFO template and authenticator, the client certificate),
//! `hooks` (the server's observer of connections, for the system account's events, and
//! kick / lame duck notice of one client), `ext` (a subsystem that
//! keeps state on the shard and runs after each step and at its deadlines: JetStream).

mod accounts;
mod blob;
mod connect;
pub mod ext;
mod fan;
mod hooks;
mod imports;
mod interest;
pub mod internal;
mod latency;
mod local_run;
pub(crate) mod memo;
mod ops;
mod report;
mod route;
mod run_block;
mod run_deliver;
mod stall;
mod timers;
mod trace;
mod transport;

use super::accounts::state::ShardAccount;
use super::accounts::AccountTable;
use super::client::{Client, ClosedState, ConnKey, Pause, SubId, Subscription};
use super::config::CoreConfig;
use super::mesh_codec::{self, Batch};
use super::post::Post;
use super::stats::{Counters, Shared};
use super::FastMap;
use slab::Slab;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use ext::ShardExt;
pub use hooks::{ConnEvents, LdmRefused};
pub use transport::ConnSetup;

/// The shard's side of the mesh, implemented by the driver glue over `shards::mesh`.
pub trait MeshPort {
    /// Push a batch to shard `dst`; on a full ring the batch comes back.
    fn try_send(&mut self, dst: usize, batch: Batch) -> Result<(), Batch>;
    /// A batch buffer that `dst` handed back, for reuse.
    fn take_recycled(&mut self, dst: usize) -> Option<Batch>;
    /// The next batch from shard `src`.
    fn try_recv(&mut self, src: usize) -> Option<Batch>;
    /// Hand a consumed batch back to the shard that sent it.
    fn recycle(&mut self, src: usize, batch: Batch);
    /// Announce that the shard is about to sleep; false if mesh work arrived meanwhile.
    fn prepare_park(&self) -> bool;
    /// The shard is awake again.
    fn unpark(&self);
    /// Hold wakes of parked shards back until [`MeshPort::flush_wakes`] (`on`), or wake
    /// them at each push.
    fn defer_wakes(&mut self, _on: bool) {}
    /// Wake the parked shards pushed to since the last call: `post` is offered each one's
    /// eventfd and returns true if it will signal it with its next submission; otherwise
    /// the port wakes the shard itself, now.
    fn flush_wakes(&mut self, _post: &mut dyn FnMut(i32) -> bool) {}
    /// Batches waiting in the ring from shard `src` (monitoring).
    fn inbound_len(&self, _src: usize) -> usize {
        0
    }
}

/// A port for a single-shard server: nothing to send to, nothing to receive.
pub struct NoMesh;

impl MeshPort for NoMesh {
    fn try_send(&mut self, _dst: usize, batch: Batch) -> Result<(), Batch> {
        Err(batch)
    }
    fn take_recycled(&mut self, _dst: usize) -> Option<Batch> {
        None
    }
    fn try_recv(&mut self, _src: usize) -> Option<Batch> {
        None
    }
    fn recycle(&mut self, _src: usize, _batch: Batch) {}
    fn prepare_park(&self) -> bool {
        true
    }
    fn unpark(&self) {}
}

/// What the driver should do with a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnStatus {
    /// Open; read from it if `read`.
    Open { read: bool },
    /// Closing: write what is queued (briefly), then close.
    Flush,
    /// Close now; nothing more will be written.
    Close,
    /// Unknown connection (already removed).
    Gone,
}

/// Staged bytes for one destination beyond which publishers pause.
const MESH_BACKLOG_LIMIT: usize = 4 * 1024 * 1024;
/// Batches are handed to the ring once they reach this size, even mid-read.
const MESH_BATCH_TARGET: usize = 64 * 1024;
/// Batches taken per source shard per `poll_mesh` call (fairness with sockets).
const MESH_POLL_BUDGET: usize = 64;

struct PendingBarrier {
    conn: ConnKey,
    remaining: usize,
}

/// One shard's protocol state. See the module documentation for the driver contract.
pub struct ShardCore {
    idx: usize,
    nshards: usize,
    cfg: Arc<CoreConfig>,
    shared: Arc<Shared>,
    mesh: Box<dyn MeshPort>,
    clients: Slab<Client>,
    next_gen: u32,
    subs: Slab<Subscription>,
    /// Routing state per account, indexed by account id (grown on demand).
    accts: Vec<ShardAccount>,
    /// The account table this shard last took from the registry, and its generation.
    table: Arc<AccountTable>,
    table_gen: u64,
    staging: Vec<Batch>,
    /// Per destination, the run of plain messages that ends its staging batch, which the
    /// next message of the same shape extends (`core::mesh_run`).
    runs: Vec<Option<crate::core::mesh_run::RunMark>>,
    /// Blob buffers this shard filled, back from the shards that wrote them out, for
    /// the next large messages (`blob.rs`); and their bytes.
    blob_pool: Vec<Vec<u8>>,
    blob_pool_bytes: usize,
    /// Scratch for the `MSG` line a blob delivery writes into the blob's room.
    line_buf: Vec<u8>,
    /// Some staged records found their ring full at the last flush (only then can a
    /// staging buffer grow past the backlog limit: the per-message check looks here first
    /// instead of at every shard's buffer).
    ring_was_full: bool,
    /// A message with a reply subject was published or delivered here since the driver
    /// last asked ([`ShardCore::take_conversing`]): somebody waits for an answer.
    conversing: bool,
    barriers: FastMap<u64, PendingBarrier>,
    next_barrier: u64,
    mesh_waiters: Vec<ConnKey>,
    /// Producers held back for consumers falling behind (module `stall`).
    stalled: Vec<stall::Stalled>,
    /// A delivery asked to hold the producer back after its event: (producer, consumer,
    /// how long).
    stall_req: Option<(ConnKey, ConnKey, Duration)>,
    timers: BinaryHeap<Reverse<(Instant, ConnKey)>>,
    wakeups: Vec<ConnKey>,
    /// The route memo of messages from other shards, by prefix only (`memo::store`).
    remote_memo: Option<memo::RouteMemo>,
    /// The frame of the message being delivered to many subscribers (module `fan`).
    fan: fan::FanFrame,
    /// The `MSG` heads of a run's subscribers (module `run_deliver`).
    run_heads: Vec<u8>,
    /// A payload's frame tail for several subscribers (module `run_deliver`).
    run_tail: Vec<u8>,
    /// A run's frames for several subscribers (module `run_block`).
    run_block: run_block::RunBlock,
    /// Publishes held for this shard's own plain subscribers (module `local_run`).
    local_run: local_run::LocalRun,
    counters: Counters,
    rng: u64,
    /// Posts jobs to shards (set by the runtime; `None` in a bare core).
    post: Option<Arc<dyn Post>>,
    /// Next sweep of expired service response mappings.
    resp_sweep_at: Option<Instant>,
    /// Internal clients, their subscriptions' handlers and pending requests.
    internals: internal::Internals,
    /// Set while delivering a message another shard routed here.
    delivering_remote: bool,
    /// Closed connections and their counters, for monitoring.
    reports: report::ReportState,
    /// Responders' details of tracked responses forwarded by other shards, by subject.
    resp_infos: FastMap<Box<[u8]>, Vec<u8>>,
    /// The server's observer of this shard's connections (system account events).
    events: Option<Box<dyn ConnEvents>>,
    /// The traced message being routed, if any (module `trace`).
    tracing: Option<Box<trace::Active>>,
    /// Subsystems living on this shard (JetStream), module `ext`.
    ext: Option<Box<dyn ext::ShardExt>>,
    /// What storage backends on this shard signal when their writes complete.
    io_wake: Option<storage::io::Wake>,
    /// The extension is in use (inside [`ShardCore::with_ext`]): internal handlers wait
    /// for the end of the step, since they may need it.
    ext_busy: bool,
    /// Traces this shard owns, waiting for other shards' parts.
    traces: trace::Traces,
}

impl ShardCore {
    pub fn new(idx: usize, nshards: usize, cfg: Arc<CoreConfig>, shared: Arc<Shared>, mesh: Box<dyn MeshPort>) -> Self {
        let table = shared.accounts.snapshot();
        let table_gen = shared.accounts.generation();
        let mut core = ShardCore {
            idx,
            nshards,
            cfg,
            shared,
            mesh,
            clients: Slab::new(),
            next_gen: 1,
            subs: Slab::new(),
            accts: Vec::new(),
            table,
            table_gen,
            staging: (0..nshards).map(|_| Batch::default()).collect(),
            runs: vec![None; nshards],
            blob_pool: Vec::new(),
            blob_pool_bytes: 0,
            line_buf: Vec::new(),
            ring_was_full: false,
            conversing: false,
            barriers: FastMap::default(),
            next_barrier: 1,
            mesh_waiters: Vec::new(),
            stalled: Vec::new(),
            stall_req: None,
            timers: BinaryHeap::new(),
            wakeups: Vec::new(),
            remote_memo: None,
            fan: fan::FanFrame::default(),
            run_heads: Vec::new(),
            run_tail: Vec::new(),
            run_block: run_block::RunBlock::default(),
            local_run: local_run::LocalRun::default(),
            counters: Counters::default(),
            rng: 0x9E37_79B9_7F4A_7C15 ^ ((idx as u64 + 1) << 32) ^ u64::from(std::process::id()),
            post: None,
            resp_sweep_at: None,
            internals: internal::Internals::default(),
            delivering_remote: false,
            reports: report::ReportState::default(),
            resp_infos: FastMap::default(),
            events: None,
            tracing: None,
            traces: trace::Traces::default(),
            ext: None,
            io_wake: None,
            ext_busy: false,
        };
        core.apply_table();
        core
    }

    /// Attach the runtime's job poster: verdicts that arrive later, and work other shards
    /// or threads ask of this one, come through it.
    pub fn set_post(&mut self, post: Arc<dyn Post>) {
        self.post = Some(post);
    }

    /// The job poster, if a runtime attached one.
    pub fn post(&self) -> Option<&Arc<dyn Post>> {
        self.post.as_ref()
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.nshards
    }

    /// This shard's index.
    pub fn index(&self) -> usize {
        self.idx
    }

    /// The configuration in force.
    pub fn config(&self) -> &Arc<CoreConfig> {
        &self.cfg
    }

    /// Apply a new configuration (reload). Limits, timers and authentication apply to the
    /// next operation of every connection; when authentication changed, connected clients
    /// are checked against it at once (see `recheck_auth`).
    pub fn reconfigure(&mut self, cfg: Arc<CoreConfig>, now: Instant) {
        let auth_changed = !Arc::ptr_eq(&cfg.authenticator, &self.cfg.authenticator);
        self.cfg = cfg;
        if auth_changed {
            self.recheck_auth(now);
        }
        self.trim_connections(now);
        self.finish(now);
    }

    /// Close connections of this shard while the server still has more than a reload's
    /// lower `max_connections` allows (`Shared::conn_trim`, set by the reload and shared
    /// by every shard), each as a connection over the limit is refused. nats-server closes
    /// the ones its map iteration happens to give first; here, a shard's in slot order.
    fn trim_connections(&mut self, now: Instant) {
        use std::sync::atomic::Ordering;
        if self.shared.conn_trim.load(Ordering::Acquire) <= 0 {
            return;
        }
        let open: Vec<ConnKey> = self
            .clients
            .iter()
            .filter(|(_, c)| !c.internal && c.closing.is_none())
            .map(|(i, c)| ConnKey {
                idx: i as u32,
                gen: c.gen,
            })
            .collect();
        for key in open {
            let take = |n: i64| (n > 0).then(|| n - 1);
            if self
                .shared
                .conn_trim
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, take)
                .is_err()
            {
                break;
            }
            self.max_connections_exceeded(key, now);
        }
    }

    /// Number of open connections on this shard (internal clients not counted).
    pub fn connections(&self) -> usize {
        self.clients.len() - self.internals.client_count()
    }

    /// A new connection from `peer`. Queues the INFO (and, past `max_connections`, the
    /// error that closes it). TLS and WebSocket connections use
    /// [`ShardCore::accept_with`] (module `transport`).
    pub fn accept(&mut self, peer: SocketAddr, now: Instant) -> ConnKey {
        self.accept_with(peer, transport::ConnSetup::default(), now)
    }

    /// Bytes read from a connection.
    pub fn input(&mut self, key: ConnKey, data: &[u8], now: Instant) {
        self.sync_accounts();
        let Some(c) = self.client_mut(key) else { return };
        if c.closing.is_some() {
            return;
        }
        if c.pause != Pause::Running {
            c.stash.extend_from_slice(data);
            return;
        }
        // A new read: the producer may be held back again (module `stall`).
        c.stall_total = Duration::ZERO;
        // Apply what other shards already sent before acting on new input: a client that
        // saw another connection's SUB processed (its PONG, or a reply) and then publishes
        // here must find that interest (ARCHITECTURE.md, invariant 4).
        if self.nshards > 1 {
            self.drain_mesh(now);
            // Those deliveries may have cut this very connection off as a slow consumer.
            if self.client(key).is_none_or(|c| c.closing.is_some()) {
                self.finish(now);
                return;
            }
        }
        self.process(key, data, now);
        self.finish(now);
    }

    /// How many bytes are queued for a connection in all (`output` shows the next chunk).
    pub fn pending_len(&self, key: ConnKey) -> usize {
        self.client(key).map_or(0, |c| c.out.len())
    }

    /// The bytes waiting to be written to a connection.
    pub fn output(&self, key: ConnKey) -> &[u8] {
        self.client(key).map_or(&[][..], |c| c.out.pending())
    }

    /// Lend the driver the buffer of `key`'s next finished output chunk, to send from
    /// without copying: the buffer and where its unwritten bytes start. Its bytes count as
    /// pending until [`ShardCore::written`] reports them; the driver gives the buffer back
    /// with [`crate::core::outbuf::recycle_chunk`]. `None` when the next bytes are in the
    /// chunk still being appended to (send those from [`ShardCore::output`]).
    pub fn take_output_chunk(&mut self, key: ConnKey) -> Option<(Vec<u8>, usize)> {
        self.client_mut(key)?.out.take_front()
    }

    /// `n` bytes of [`ShardCore::output`] reached the socket.
    /// Call after every write attempt; with output still queued (the socket is full),
    /// this arms the write deadline.
    pub fn written(&mut self, key: ConnKey, n: usize, now: Instant) {
        if let Some(c) = self.client_mut(key) {
            c.out.consume(n, now);
            if !c.out.is_empty() {
                self.schedule(key);
            }
        }
        if !self.stalled.is_empty() && self.consumer_drained(key, now) {
            self.finish(now);
        }
    }

    /// What the driver should do with `key` now.
    pub fn status(&self, key: ConnKey) -> ConnStatus {
        match self.client(key) {
            None => ConnStatus::Gone,
            Some(c) => match c.closing {
                Some(reason) if reason.skips_flush() || c.out.is_empty() => ConnStatus::Close,
                Some(_) => ConnStatus::Flush,
                None => ConnStatus::Open {
                    read: c.pause == Pause::Running,
                },
            },
        }
    }

    /// The peer closed the connection or the socket failed.
    pub fn disconnected(&mut self, key: ConnKey, reason: ClosedState, now: Instant) {
        self.close(key, reason);
        self.finish(now);
    }

    /// The driver closed the socket: forget the connection.
    pub fn remove(&mut self, key: ConnKey, now: Instant) {
        if self.client(key).is_none() {
            return;
        }
        self.close(key, ClosedState::ClientClosed);
        self.clients.remove(key.idx as usize);
        self.counters.connections = self.counters.connections.saturating_sub(1);
        self.shared
            .open_conns
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.mesh_waiters.retain(|k| *k != key);
        self.finish(now);
    }

    /// Lame duck mode: send an INFO with `ldm: true` to every client that understands
    /// async INFO (protocol 1, CONNECT and first PONG done), as nats-server does.
    pub fn lame_duck(&mut self, now: Instant) {
        let keys: Vec<ConnKey> = self
            .clients
            .iter()
            .filter(|(_, c)| c.closing.is_none() && c.opts.protocol >= 1 && c.first_pong_sent)
            .map(|(i, c)| ConnKey {
                idx: i as u32,
                gen: c.gen,
            })
            .collect();
        let mut info = self.cfg.info.clone();
        info.auth_required = self.cfg.authenticator.advertised();
        info.ldm = true;
        for k in keys {
            let Some(c) = self.client_mut(k) else { continue };
            info.client_id = c.cid;
            info.client_ip = c.peer.ip().to_string();
            info.write_line(&mut c.out.writer(now));
            self.queued(k);
        }
        self.finish(now);
    }

    /// Lame duck mode: close up to `n` clients (oldest first). Returns how many closed.
    pub fn close_clients(&mut self, n: usize, now: Instant) -> usize {
        let mut open: Vec<(u64, ConnKey)> = self
            .clients
            .iter()
            .filter(|(_, c)| c.closing.is_none() && !c.internal)
            .map(|(i, c)| {
                (
                    c.cid,
                    ConnKey {
                        idx: i as u32,
                        gen: c.gen,
                    },
                )
            })
            .collect();
        open.sort_unstable();
        let mut closed = 0;
        for (_, k) in open.into_iter().take(n) {
            self.close(k, ClosedState::ServerShutdown);
            closed += 1;
        }
        self.finish(now);
        closed
    }

    /// Close every connection (server shutdown).
    pub fn shutdown(&mut self, now: Instant) {
        let keys: Vec<ConnKey> = self
            .clients
            .iter()
            .map(|(i, c)| ConnKey {
                idx: i as u32,
                gen: c.gen,
            })
            .collect();
        for k in keys {
            self.close(k, ClosedState::ServerShutdown);
        }
        self.finish(now);
    }

    /// Visit (and forget) the connections whose state changed since the last visit.
    pub fn drain_wakeups(&mut self, mut f: impl FnMut(ConnKey)) {
        let list = std::mem::take(&mut self.wakeups);
        for k in &list {
            if let Some(c) = self.clients.get_mut(k.idx as usize) {
                if c.gen == k.gen {
                    c.woken = false;
                }
            }
        }
        for k in &list {
            f(*k);
        }
        let mut list = list;
        list.clear();
        if self.wakeups.is_empty() {
            self.wakeups = list;
        }
    }

    /// Whether a message with a reply subject was published or delivered here since the
    /// last call. Request/reply is where a client waits on the server's round trip, so
    /// the driver busy-polls only while it sees some (a one-way stream gains nothing from
    /// it and pays in CPU and smaller writes).
    pub fn take_conversing(&mut self) -> bool {
        std::mem::take(&mut self.conversing)
    }

    /// True if some connection awaits the driver's attention, or internal work is
    /// left for the next step.
    pub fn has_wakeups(&self) -> bool {
        !self.wakeups.is_empty() || self.internals.busy() || self.traces.has_ready()
    }

    /// Process batches from other shards. Returns how many were taken.
    pub fn poll_mesh(&mut self, now: Instant) -> usize {
        self.sync_accounts();
        let taken = self.drain_mesh(now);
        self.finish(now);
        taken
    }

    fn drain_mesh(&mut self, now: Instant) -> usize {
        let mut taken = 0;
        for src in 0..self.nshards {
            if src == self.idx {
                continue;
            }
            for _ in 0..MESH_POLL_BUDGET {
                let Some(mut batch) = self.mesh.try_recv(src) else {
                    break;
                };
                taken += 1;
                self.apply_batch(src, &mut batch, now);
                batch.clear();
                // Blobs of `src` written out by now go back with it.
                crate::core::outbuf::take_spent_blobs(src as u16, &mut batch.blobs);
                self.mesh.recycle(src, batch);
            }
        }
        taken
    }

    /// Hand staged records to the mesh. Called at the end of every step; drivers call it
    /// again when the mesh reports room.
    pub fn flush_mesh(&mut self, now: Instant) {
        let mut full = false;
        for dst in 0..self.nshards {
            if dst == self.idx || self.staging[dst].is_empty() {
                continue;
            }
            // Whatever happens to the batch, its run is not extended any more.
            if let Some(r) = self.runs.get_mut(dst) {
                *r = None;
            }
            let mut spare = self.mesh.take_recycled(dst).unwrap_or_default();
            self.keep_blobs(&mut spare.blobs);
            let batch = std::mem::replace(&mut self.staging[dst], spare);
            if let Err(batch) = self.mesh.try_send(dst, batch) {
                self.counters.mesh_ring_full += 1;
                full = true;
                // Ring full: put it back in front of anything staged since.
                let mut batch = batch;
                batch.append(&mut self.staging[dst]);
                self.staging[dst] = batch;
            }
        }
        self.ring_was_full = full;
        if !self.mesh_waiters.is_empty() && !self.mesh_backlogged() {
            for key in std::mem::take(&mut self.mesh_waiters) {
                self.resume(key, now);
            }
        }
    }

    /// About to sleep: false if mesh work arrived meanwhile (then do not sleep).
    pub fn mesh_prepare_park(&self) -> bool {
        self.mesh.prepare_park()
    }

    /// Awake again after sleeping.
    pub fn mesh_unpark(&self) {
        self.mesh.unpark()
    }

    /// Hold wakes of parked shards back until [`ShardCore::mesh_flush_wakes`] (`on`).
    pub fn mesh_defer_wakes(&mut self, on: bool) {
        self.mesh.defer_wakes(on)
    }

    /// End of a loop turn: wake the parked shards this one pushed to (see
    /// [`MeshPort::flush_wakes`]).
    pub fn mesh_flush_wakes(&mut self, post: &mut dyn FnMut(i32) -> bool) {
        self.mesh.flush_wakes(post)
    }

    /// Records are waiting for a ring that is full.
    pub fn mesh_pending(&self) -> bool {
        self.staging.iter().any(|s| !s.is_empty())
    }

    fn mesh_backlogged(&self) -> bool {
        self.ring_was_full && self.staging.iter().any(|s| s.len() > MESH_BACKLOG_LIMIT)
    }

    /// End of a processing step: run internal handlers, push staged records, publish
    /// statistics.
    fn finish(&mut self, now: Instant) {
        // (Empty by now: the input that filled it delivered it.)
        self.flush_local_run(now);
        self.run_handlers(now);
        self.ext_after_step(now);
        if self.nshards > 1 {
            self.flush_mesh(now);
        }
        self.publish_counters();
    }

    /// Publish what routing deferred and the ready traces, then run queued internal
    /// deliveries: at the end of a step, or earlier when a PING must come after them.
    /// Nothing when handlers are already running (or an extension holds the shard).
    pub(super) fn run_handlers(&mut self, now: Instant) {
        if (self.internals.busy() || self.traces.has_ready()) && !self.internals.running && !self.ext_busy {
            self.internals.running = true;
            self.publish_deferred(now);
            self.publish_traces(now);
            self.run_internal(now);
            self.internals.running = false;
        }
    }

    /// Make this shard's counters visible to monitoring now (the end of every step
    /// does; a job that answers before its step ends calls it first).
    pub fn publish_counters(&mut self) {
        self.counters.subscriptions = self.subs.len() as u64;
        if let Some(s) = self.shared.shards.get(self.idx) {
            s.publish(&self.counters);
        }
    }

    fn client(&self, key: ConnKey) -> Option<&Client> {
        self.clients.get(key.idx as usize).filter(|c| c.gen == key.gen)
    }

    fn client_mut(&mut self, key: ConnKey) -> Option<&mut Client> {
        self.clients.get_mut(key.idx as usize).filter(|c| c.gen == key.gen)
    }

    fn label(&self, key: ConnKey) -> String {
        self.client(key).map(|c| c.label.clone()).unwrap_or_default()
    }

    /// Ask the driver to look at `key`.
    fn wake(&mut self, key: ConnKey) {
        if let Some(c) = self.clients.get_mut(key.idx as usize) {
            if c.gen == key.gen && !c.woken && !c.internal {
                c.woken = true;
                self.wakeups.push(key);
            }
        }
    }

    fn next_rand(&mut self) -> u64 {
        // xorshift64*: plenty for picking queue members.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A random number below `n` (> 0), by multiply and shift: a division per queue
    /// message showed in profiles.
    #[inline]
    fn rand_below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_rand()) * u128::from(n)) >> 64) as u64
    }

    /// Mark a connection closing for `reason`: drop its interest, and (unless the reason
    /// skips it) let the driver flush what is queued.
    fn close(&mut self, key: ConnKey, reason: ClosedState) {
        self.record_closed(key, reason);
        let debug = self.cfg.debug;
        let Some(c) = self.client_mut(key) else { return };
        if c.closing.is_some() {
            return;
        }
        c.closing = Some(reason);
        if reason.skips_flush() {
            c.out.clear();
        }
        c.stash = Vec::new();
        if debug {
            tracing::debug!("{} - Client connection closed: {}", c.label, reason.as_str());
        }
        let pause = c.pause;
        let sids: Vec<SubId> = c.subs.drain().map(|(_, s)| s).collect();
        for s in sids {
            self.remove_sub(s);
        }
        self.unbind_account(key);
        if let Pause::Barrier(id) = pause {
            self.barriers.remove(&id);
        }
        if self.events.is_some() && !self.client(key).is_some_and(|c| c.internal) {
            self.notify_closed(key, reason, std::time::Instant::now());
        }
        self.wake(key);
    }

    fn send_err(&mut self, key: ConnKey, text: &str, now: Instant) {
        let trace = self.cfg.trace;
        if let Some(c) = self.client_mut(key) {
            if trace {
                tracing::trace!("{} - ->> [-ERR {}]", c.label, text);
            }
            crate::proto::reply::err(&mut c.out.writer(now), text);
        }
        self.queued(key);
    }

    fn send_bytes(&mut self, key: ConnKey, b: &[u8], now: Instant) {
        if let Some(c) = self.client_mut(key) {
            c.out.writer(now).extend_from_slice(b);
        }
        self.queued(key);
    }

    /// Output was queued for `key`: hold it to `max_pending` (nats-server applies the
    /// limit to every write, protocol replies included, so a client that pipelines PINGs
    /// and never reads is cut off too) and ask the driver to write.
    fn queued(&mut self, key: ConnKey) {
        let max = self.cfg.max_pending;
        if let Some(c) = self.client(key) {
            if c.closing.is_none() && c.out.len() > max {
                tracing::info!("{} - Slow Consumer Detected: MaxPending of {} Exceeded", c.label, max);
                self.counters.slow_consumers += 1;
                self.close(key, ClosedState::SlowConsumerPendingBytes);
            }
        }
        self.wake(key);
    }

    fn stage(&mut self, dst: usize) -> &mut Vec<u8> {
        &mut self.staging[dst].records
    }

    /// Stage a plain message for `dst` in the run its batch ends with, or a new run.
    fn stage_run(&mut self, dst: usize, shape: &crate::core::mesh_run::Shape<'_>, data: &[u8]) {
        let (Some(batch), Some(mark)) = (self.staging.get_mut(dst), self.runs.get_mut(dst)) else {
            return;
        };
        crate::core::mesh_run::put_run(&mut batch.records, mark, shape, data);
    }

    /// The staged batch for `dst`, for records that bring blobs.
    fn stage_batch(&mut self, dst: usize) -> &mut Batch {
        &mut self.staging[dst]
    }

    /// A staging buffer grew large: hand it over now rather than at the end of the step.
    fn maybe_flush_early(&mut self, dst: usize, now: Instant) {
        if self.staging[dst].len() >= MESH_BATCH_TARGET {
            self.flush_mesh(now);
        }
    }

    fn apply_batch(&mut self, src: usize, batch: &mut Batch, now: Instant) {
        let Batch { records, blobs, .. } = batch;
        let mut blobs = blobs.drain(..);
        for rec in mesh_codec::records(records) {
            match rec {
                mesh_codec::Record::Msg(m) if m.blob_head.is_some() => match blobs.next() {
                    Some(blob) => self.deliver_remote_blob(src, &m, blob, now),
                    // Only our own shards write batches; a record without its blob ends it.
                    None => break,
                },
                mesh_codec::Record::Msg(m) => self.deliver_remote(src, &m, now),
                mesh_codec::Record::Run(r) => self.deliver_remote_run(src, &r, now),
                mesh_codec::Record::Interest {
                    account,
                    subject,
                    queue,
                    delta,
                } => self.acct(account).remote.apply(src as u16, subject, queue, delta),
                mesh_codec::Record::Barrier(id) => {
                    mesh_codec::put_barrier(self.stage(src), id, true);
                }
                mesh_codec::Record::BarrierAck(id) => self.barrier_acked(id, now),
                mesh_codec::Record::RespInfo { subject, info, .. } => self.keep_resp_info(subject, info),
                mesh_codec::Record::TracePart {
                    id,
                    leg,
                    children,
                    steps,
                } => self.trace_part(id, leg, &children, steps),
            }
        }
    }
}

/// A connection's nonce as nats-server makes them: 11 random bytes, base64url without
/// padding (15 characters).
fn new_nonce(rng: &mut u64) -> String {
    use rand::RngCore;
    let mut raw = [0u8; 11];
    rand::thread_rng().fill_bytes(&mut raw);
    // Mix in the shard's own generator so two shards never share a stream by accident.
    *rng ^= u64::from_le_bytes([raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]]);
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(15);
    let mut bits = 0u32;
    let mut nbits = 0;
    for b in raw {
        bits = (bits << 8) | u32::from(b);
        nbits += 8;
        while nbits >= 6 {
            nbits -= 6;
            out.push(char::from(ALPHABET[((bits >> nbits) & 63) as usize]));
        }
    }
    if nbits > 0 {
        out.push(char::from(ALPHABET[((bits << (6 - nbits)) & 63) as usize]));
    }
    out
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
