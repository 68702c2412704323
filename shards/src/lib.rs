//! Per-core runtime pieces for rnats. Nothing here knows the NATS protocol.
//!
//! Module map:
//! - [`cpus`]: which CPUs this process may run on (affinity mask and CPU quota), the
//!   default shard count derived from them, and spawning pinned shard threads.
//! - [`mesh`]: the full mesh of bounded single-producer single-consumer rings between
//!   shards, with a park/notify protocol so a sleeping shard is woken only when needed,
//!   and a return ring per link so buffers are recycled instead of freed cross-core.
//! - [`listener`]: exclusive TCP listeners (no `SO_REUSEPORT`), as nats-server binds them.
//! - `uring` (feature `uring`, Linux): probing whether io_uring can really be used, and the
//!   poller of the io_uring shards (multishot polls, one `io_uring_enter` per
//!   wake-up, an eventfd for wake-ups from other threads).
//! - `uring_io` (with `uring`): completion I/O on that ring: multishot receives into
//!   provided buffers and submitted sends.
//! - `uring_send` (with `uring`): the sends of completion I/O, plain or zero-copy
//!   (`SEND_ZC`) above a threshold.
//! - `uring_bufs` (with `uring`): the provided-buffer ring those receives fill.
//! - `uring_accept` (with `uring`): the acceptor's multishot accept on a ring of its own.

pub mod cpus;
pub mod listener;
pub mod mesh;

/// What one readiness wait reported for one connection token (both reactors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ready {
    pub token: usize,
    pub readable: bool,
    pub writable: bool,
}

/// What completion I/O reported for one connection token (io_uring only; a readiness
/// poller reports none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// `len` bytes arrived in receive buffer `bid` (hand it back once used).
    Data { token: usize, bid: u16, len: usize },
    /// The receive ended: the peer closed (`err` 0) or it failed (an errno).
    RecvEnd { token: usize, err: i32 },
    /// A send ended: all `n` bytes handed to it went out (`err` 0), or it failed.
    Sent { token: usize, n: usize, err: i32 },
    /// A connection watched by readiness polls has input. On a ring with completion I/O
    /// this comes in the completions' order, so that input on both kinds of connection
    /// is handled as it arrived.
    Readable { token: usize },
}

#[cfg(all(target_os = "linux", feature = "uring"))]
pub mod uring;
#[cfg(all(target_os = "linux", feature = "uring"))]
pub mod uring_accept;
#[cfg(all(target_os = "linux", feature = "uring"))]
pub mod uring_bufs;
#[cfg(all(target_os = "linux", feature = "uring"))]
pub mod uring_io;
#[cfg(all(target_os = "linux", feature = "uring"))]
pub mod uring_send;
