//! Glue between the sans-IO core and the reactors. This is the only place that knows both
//! `ShardCore` and sockets. Protocol decisions stay in the core: a driver moves bytes,
//! keeps time and follows `ShardCore::status`.
//!
//! - [`accept`]: the acceptor thread that hands connections to shards round-robin
//!   (`accept_uring`: its multishot accept on io_uring).
//! - [`event_loop`]: the shard loop both reactors share, over a `Poller` (readiness, and
//!   on io_uring completion I/O for plain TCP).
//! - `completion`: the loop's handling of receive and send completions.
//! - [`uring`] (feature `uring`, Linux): the io_uring poller (multishot polls).
//! - [`mio`]: the portable poller (epoll, kqueue, IOCP).
//! - `transport`: the event loop's handling of TLS and WebSocket connections (their
//!   state machines are `crate::transport`'s).

pub mod accept;
#[cfg(all(target_os = "linux", feature = "uring"))]
mod accept_uring;
mod completion;
pub mod event_loop;
pub mod mio;
mod transport;
#[cfg(all(target_os = "linux", feature = "uring"))]
pub mod uring;

use crate::core::config::CoreConfig;
pub use crate::core::mesh_codec::Batch;
use crate::core::post::{Job, Post};
use crate::core::shard::MeshPort;
use crate::core::stats::Shared;
use shards::mesh::Endpoint;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Capacity of each mesh ring, in batches. Deep enough that a full ring is rare
/// (RUNTIME-NOTES: below ~512 items producers park constantly).
pub const MESH_RING_CAPACITY: usize = 1024;

/// A connection accepted for a shard.
pub struct Accepted {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    /// The server's end of the connection (for log lines).
    pub local: Option<SocketAddr>,
    /// Which listener accepted it (an index into [`RuntimeConfig::transports`]; 0 is
    /// the client port).
    pub listener: usize,
}

/// How each listener's connections start (TLS, WebSocket), by listener index; missing or
/// `None` is plain TCP. Replaced on reload: new connections use the new settings.
pub type Transports = Arc<std::sync::RwLock<Vec<Option<Arc<crate::transport::ListenerTransport>>>>>;

/// The client listener's index.
pub const CLIENT_LISTENER: usize = 0;
/// The WebSocket listener's index.
pub const WEBSOCKET_LISTENER: usize = 1;

/// What the rest of the process tells a shard (each shard drains its queue when woken).
pub enum Control {
    /// A new connection to own.
    Accept(Accepted),
    /// New configuration (reload).
    Reconfigure(Arc<CoreConfig>),
    /// Lame duck mode: tell clients (INFO with `ldm: true`).
    LameDuck,
    /// Lame duck mode: close this many clients now.
    CloseClients(usize),
    /// Run a job on the shard (see `core::post`).
    Run(Job),
}

/// The per-shard control queues, and the wake-up that goes with them.
#[derive(Clone)]
pub struct Controls {
    txs: Vec<std::sync::mpsc::Sender<Control>>,
    wakers: shards::mesh::Waker,
}

impl Controls {
    fn new(txs: Vec<std::sync::mpsc::Sender<Control>>, wakers: shards::mesh::Waker) -> Self {
        Controls { txs, wakers }
    }

    /// Queue `c` for `shard` and wake it.
    pub fn send(&self, shard: usize, c: Control) {
        if let Some(tx) = self.txs.get(shard) {
            let _ = tx.send(c);
            self.wakers.wake(shard);
        }
    }

    /// Wake every shard (to notice a stop).
    pub fn wake_all(&self) {
        for s in 0..self.len() {
            self.wakers.wake(s);
        }
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.txs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.txs.is_empty()
    }
}

impl Post for Controls {
    fn post(&self, shard: usize, job: Job) -> bool {
        match self.txs.get(shard) {
            Some(tx) => {
                let sent = tx.send(Control::Run(job)).is_ok();
                self.wakers.wake(shard);
                sent
            }
            None => false,
        }
    }

    fn shards(&self) -> usize {
        self.txs.len()
    }
}

/// Per-shard control queues for `n` shards.
fn control_queues(
    n: usize,
) -> (
    Vec<std::sync::mpsc::Sender<Control>>,
    Vec<std::sync::mpsc::Receiver<Control>>,
) {
    (0..n).map(|_| std::sync::mpsc::channel::<Control>()).unzip()
}

/// The mesh endpoint as the core's port.
pub struct MeshAdapter(pub Endpoint<Batch>);

impl MeshPort for MeshAdapter {
    fn try_send(&mut self, dst: usize, batch: Batch) -> Result<(), Batch> {
        self.0.try_send(dst, batch)
    }
    fn take_recycled(&mut self, dst: usize) -> Option<Batch> {
        self.0.take_recycled(dst)
    }
    fn try_recv(&mut self, src: usize) -> Option<Batch> {
        self.0.try_recv(src)
    }
    fn recycle(&mut self, src: usize, batch: Batch) {
        self.0.recycle(src, batch)
    }
    fn prepare_park(&self) -> bool {
        self.0.prepare_park()
    }
    fn unpark(&self) {
        self.0.unpark()
    }
    fn defer_wakes(&mut self, on: bool) {
        self.0.defer_wakes(on)
    }
    fn flush_wakes(&mut self, post: &mut dyn FnMut(i32) -> bool) {
        self.0.flush_wakes(&mut |n| {
            if !n.eventfd().is_some_and(&mut *post) {
                n.notify();
            }
        })
    }
    fn inbound_len(&self, src: usize) -> usize {
        self.0.inbound_len(src)
    }
}

/// What every shard needs to run.
#[derive(Clone)]
pub struct RuntimeConfig {
    pub nshards: usize,
    /// CPUs to pin shards to (shard i on `cpus[i % len]`); empty: no pinning.
    pub cpus: Vec<usize>,
    pub core: Arc<CoreConfig>,
    pub shared: Arc<Shared>,
    /// Busy-poll before parking, microseconds.
    pub spin_us: u64,
    /// io_uring: idle time of each shard's kernel submission thread, ms (0: none).
    pub sqpoll_ms: u64,
    /// io_uring completion I/O: sends of at least this many bytes go zero-copy (0: none).
    pub send_zc: usize,
    /// TLS and WebSocket settings per listener.
    pub transports: Transports,
}

/// Shared stop signal for the shards.
#[derive(Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    pub fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A running reactor: stop it and wait for it.
pub struct Running {
    pub(crate) stop: Stop,
    pub(crate) controls: Controls,
    pub(crate) acceptor: accept::Acceptor,
    /// Acceptors of further listeners (WebSocket).
    pub(crate) more: Vec<accept::Acceptor>,
    pub(crate) threads: Vec<std::thread::JoinHandle<()>>,
    pub name: &'static str,
}

impl Running {
    /// Give every shard a new configuration.
    pub fn reconfigure(&self, cfg: Arc<CoreConfig>) {
        for s in 0..self.controls.len() {
            self.controls.send(s, Control::Reconfigure(cfg.clone()));
        }
    }

    /// Lame duck mode, first step: stop accepting (the listener closes) and send every
    /// client that understands async INFO an INFO with `ldm: true`.
    pub fn enter_lame_duck(&mut self) {
        self.acceptor.stop();
        for a in &mut self.more {
            a.stop();
        }
        for s in 0..self.controls.len() {
            self.controls.send(s, Control::LameDuck);
        }
    }

    /// Lame duck mode: close `n` clients of shard `shard`.
    pub fn close_clients(&self, shard: usize, n: usize) {
        self.controls.send(shard, Control::CloseClients(n));
    }

    /// Start the acceptor, which hands connections to shards through `controls`.
    pub(crate) fn accepting(
        listener: std::net::TcpListener,
        controls: &Controls,
        with: accept::AcceptWith,
    ) -> std::io::Result<accept::Acceptor> {
        Self::accepting_as(listener, CLIENT_LISTENER, controls, with)
    }

    fn accepting_as(
        listener: std::net::TcpListener,
        index: usize,
        controls: &Controls,
        with: accept::AcceptWith,
    ) -> std::io::Result<accept::Acceptor> {
        let c = controls.clone();
        accept::Acceptor::start(
            listener,
            index,
            controls.len(),
            Box::new(move |shard, acc| c.send(shard, Control::Accept(acc))),
            with,
        )
    }

    /// Accept on another listener too; its connections are set up by
    /// `transports[index]`.
    pub fn add_listener(&mut self, listener: std::net::TcpListener, index: usize) -> std::io::Result<()> {
        let with = self.acceptor.with();
        let a = Self::accepting_as(listener, index, &self.controls, with)?;
        self.more.push(a);
        Ok(())
    }

    /// Close the listener, close every client (flushing what is queued, briefly), and
    /// wait for all shards to finish.
    pub fn shutdown(mut self) {
        self.acceptor.stop();
        for a in &mut self.more {
            a.stop();
        }
        self.stop.set();
        self.controls.wake_all();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}
