//! The io_uring reactor (Linux, feature `uring`): the shared event loop over one ring per
//! shard (`shards::uring::UringPoller`: multishot polls, one `io_uring_enter` per
//! wake-up).

use super::event_loop::{self, Poller, Ready};
use super::{Running, RuntimeConfig};
use shards::mesh::Notify;
use shards::uring::UringPoller;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Submission queue entries per shard ring (more are queued in memory).
pub const RING_ENTRIES: u32 = 1024;

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

    fn wait(&mut self, out: &mut Vec<Ready>, timeout: Duration) -> io::Result<()> {
        self.ring.wait(out, timeout)
    }
}

/// Start `cfg.nshards` io_uring shards serving `listener`.
pub fn start(cfg: RuntimeConfig, listener: std::net::TcpListener) -> io::Result<Running> {
    let pollers = (0..cfg.nshards)
        .map(|_| {
            Ok(IoUringPoller {
                ring: UringPoller::new(RING_ENTRIES)?,
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    event_loop::start(cfg, listener, pollers, "io_uring")
}
