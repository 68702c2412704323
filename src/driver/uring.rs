//! The io_uring reactor (Linux, feature `uring`): the shared event loop over one ring per
//! shard (`shards::uring::UringPoller`: one `io_uring_enter` per loop turn). Plain TCP
//! connections use completion I/O (multishot receives into provided buffers, submitted
//! sends) where the kernel has it; TLS and WebSocket connections, and every connection
//! with `--reactor uring-poll` or on an older kernel, use multishot readiness polls.

use super::event_loop::{self, Completion, Poller, Ready};
use super::{Running, RuntimeConfig};
use shards::mesh::Notify;
use shards::uring::UringPoller;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Submission queue entries per shard ring (more are queued in memory).
pub const RING_ENTRIES: u32 = 1024;
/// Receive buffers per shard (completion I/O), and their size: 4 MiB a shard. A
/// completion carries up to one buffer, and each costs a step of the core (the mesh
/// drained, the input processed, staged records flushed): 64 KiB buffers (not 16) gave a
/// 1 KiB publisher 1.41x the msgs/s at 0.69x the CPU, a 16 B queue group 1.63x at 0.62x.
/// Buffers come back as soon as their completion is processed, so 64 are enough for a
/// turn's worth of reads; 100 publishers at once measured 1.10x.
pub const RECV_BUFFERS: u16 = 64;
pub const RECV_BUFFER_SIZE: usize = 64 * 1024;

/// The shard's ring as the event loop's poller.
pub struct IoUringPoller {
    ring: UringPoller,
}

impl Poller for IoUringPoller {
    type Stream = TcpStream;

    fn notifier(&self) -> Box<dyn Notify> {
        Box::new(self.ring.notifier())
    }

    fn wrap(s: TcpStream) -> TcpStream {
        s
    }

    fn add(&mut self, s: &mut TcpStream, token: usize) -> io::Result<()> {
        self.ring.add(s.as_raw_fd(), token);
        Ok(())
    }

    fn remove(&mut self, _s: &mut TcpStream, token: usize) {
        self.ring.remove(token);
    }

    fn want_write(&mut self, _s: &mut TcpStream, token: usize) {
        self.ring.want_write(token);
    }

    fn wait(&mut self, out: &mut Vec<Ready>, done: &mut Vec<Completion>, timeout: Duration) -> io::Result<()> {
        self.ring.wait(out, done, timeout)
    }

    fn add_completion(&mut self, s: &mut TcpStream, token: usize) -> bool {
        self.ring.add_stream(s.as_raw_fd(), token)
    }

    fn data(&self, bid: u16, len: usize) -> &[u8] {
        self.ring.data(bid, len)
    }

    fn recycle(&mut self, bid: u16) {
        self.ring.recycle(bid)
    }

    fn send(&mut self, token: usize, data: &[u8]) -> usize {
        self.ring.send(token, data)
    }

    fn io_wake(&self) -> Option<storage::io::Wake> {
        Some(storage::io::Wake(self.ring.wake_fd()))
    }

    fn take_woken(&mut self) -> bool {
        self.ring.take_woken()
    }

    fn send_owned(&mut self, token: usize, buf: Vec<u8>, off: usize) -> Vec<u8> {
        self.ring.send_owned(token, buf, off)
    }

    fn take_spent(&mut self) -> Option<Vec<u8>> {
        self.ring.take_spent()
    }

    fn send_busy(&self, token: usize) -> bool {
        self.ring.send_busy(token)
    }

    fn pause_recv(&mut self, token: usize) {
        self.ring.pause_recv(token)
    }

    fn resume_recv(&mut self, token: usize) {
        self.ring.resume_recv(token)
    }

    fn signals_in_ring(&self) -> bool {
        true
    }

    fn signal_in_ring(&mut self, fd: i32) -> bool {
        self.ring.signal_later(fd);
        true
    }
}

/// Start `cfg.nshards` io_uring shards serving `listener`, with completion I/O when
/// `completion` (the caller probed it).
pub fn start(cfg: RuntimeConfig, listener: std::net::TcpListener, completion: bool) -> io::Result<Running> {
    let sqpoll = u32::try_from(cfg.sqpoll_ms).unwrap_or(u32::MAX);
    if sqpoll > 0 {
        tracing::info!("io_uring submission threads poll {sqpoll} ms before they sleep (--sqpoll_ms)");
    }
    if cfg.send_zc > 0 && completion {
        tracing::info!("sends of {} bytes or more go zero-copy (--send_zc)", cfg.send_zc);
    }
    let pollers = (0..cfg.nshards)
        .map(|_| {
            let mut ring = match sqpoll {
                0 => UringPoller::new(RING_ENTRIES)?,
                ms => UringPoller::with_sqpoll(RING_ENTRIES, ms).or_else(|e| {
                    tracing::warn!("io_uring submission thread refused ({e}), the shard submits its own I/O");
                    UringPoller::new(RING_ENTRIES)
                })?,
            };
            if completion {
                // The probe passed, so this fails only for want of memory: that shard then
                // serves its connections through readiness polls.
                match ring.enable_completion(RECV_BUFFERS, RECV_BUFFER_SIZE) {
                    Ok(()) => ring.set_send_zc(cfg.send_zc),
                    Err(e) => {
                        tracing::warn!(
                            "io_uring completion I/O unavailable on a shard ({e}), using readiness polls there"
                        )
                    }
                }
            }
            Ok(IoUringPoller { ring })
        })
        .collect::<io::Result<Vec<_>>>()?;
    event_loop::start(
        cfg,
        listener,
        pollers,
        if completion { "io_uring" } else { "io_uring-poll" },
    )
}
