//! The portable reactor: the shared event loop over mio (epoll, kqueue, IOCP). Used where
//! io_uring is missing or forbidden, and on every non-Linux target.

use super::event_loop::{self, Completion, Poller, Ready};
use super::{Running, RuntimeConfig};
use fallback::reactor::{shard_poll, MioNotify, ShardPoll, WAKE_TOKEN};
use mio::net::TcpStream;
use mio::{Events, Interest, Token};
use shards::mesh::Notify;
use std::io;
use std::time::Duration;

/// A shard's mio poller: sockets registered edge-triggered for reading and writing.
pub struct MioPoller {
    sp: ShardPoll,
    events: Events,
}

impl Poller for MioPoller {
    type Stream = TcpStream;

    fn notifier(&self) -> Box<dyn Notify> {
        Box::new(MioNotify(self.sp.waker.clone()))
    }

    fn wrap(s: std::net::TcpStream) -> TcpStream {
        TcpStream::from_std(s)
    }

    fn add(&mut self, s: &mut TcpStream, token: usize) -> io::Result<()> {
        self.sp
            .poll
            .registry()
            .register(s, Token(token), Interest::READABLE | Interest::WRITABLE)
    }

    fn remove(&mut self, s: &mut TcpStream, _token: usize) {
        let _ = self.sp.poll.registry().deregister(s);
    }

    /// Registered for writability from the start: edges arrive without asking.
    fn want_write(&mut self, _s: &mut TcpStream, _token: usize) {}

    fn wait(&mut self, out: &mut Vec<Ready>, _done: &mut Vec<Completion>, timeout: Duration) -> io::Result<()> {
        self.sp.poll.poll(&mut self.events, Some(timeout))?;
        for ev in self.events.iter() {
            if ev.token() == WAKE_TOKEN {
                continue;
            }
            out.push(Ready {
                token: ev.token().0,
                readable: ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                writable: ev.is_writable() || ev.is_write_closed(),
            });
        }
        Ok(())
    }
}

/// Start `cfg.nshards` mio shards serving `listener`.
pub fn start(cfg: RuntimeConfig, listener: std::net::TcpListener) -> io::Result<Running> {
    let pollers = (0..cfg.nshards)
        .map(|_| {
            Ok(MioPoller {
                sp: shard_poll()?,
                events: Events::with_capacity(1024),
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    event_loop::start(cfg, listener, pollers, "mio")
}
