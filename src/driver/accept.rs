//! The acceptor: one thread accepts on the exclusive listener and hands each connection
//! to the next shard round-robin, so connections spread evenly and never migrate
//! afterwards (ARCHITECTURE.md, invariant 2). With the shards on io_uring it accepts
//! through a multishot accept on a ring of its own (`accept_uring`); otherwise, or where
//! the kernel lacks that, it uses mio, so it runs on every target.

use super::Accepted;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const LISTENER: Token = Token(0);
const STOP: Token = Token(1);

/// Which mechanism accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptWith {
    Mio,
    /// A multishot accept on an io_uring ring (falls back to mio where refused).
    Ring,
}

/// Hands accepted connections to the shards, round-robin.
pub(super) struct Handoff {
    index: usize,
    nshards: usize,
    next: usize,
    deliver: Box<dyn Fn(usize, Accepted) + Send>,
}

impl Handoff {
    /// Give a non-blocking `stream` to the next shard (with `TCP_NODELAY` set). `peer`
    /// when the accept reported it (else it is asked of the socket); a stream whose peer
    /// is already gone is dropped.
    pub(super) fn hand(&mut self, stream: TcpStream, peer: Option<SocketAddr>) {
        // No Nagle (Go's default too).
        let _ = stream.set_nodelay(true);
        let Some(peer) = peer.or_else(|| stream.peer_addr().ok()) else {
            return;
        };
        let local = stream.local_addr().ok();
        (self.deliver)(
            self.next % self.nshards,
            Accepted {
                stream,
                peer,
                local,
                listener: self.index,
            },
        );
        self.next = self.next.wrapping_add(1);
    }
}

/// Handle to stop the acceptor thread.
pub struct Acceptor {
    wake: Box<dyn Fn() + Send>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    with: AcceptWith,
}

impl Acceptor {
    /// Start accepting on `listener` (listener number `index`). `deliver(shard, conn)`
    /// queues a connection for a shard and wakes it.
    pub fn start(
        listener: std::net::TcpListener,
        index: usize,
        nshards: usize,
        deliver: Box<dyn Fn(usize, Accepted) + Send>,
        with: AcceptWith,
    ) -> io::Result<Acceptor> {
        let stop = Arc::new(AtomicBool::new(false));
        let handoff = Handoff {
            index,
            nshards: nshards.max(1),
            next: 0,
            deliver,
        };
        #[cfg(all(target_os = "linux", feature = "uring"))]
        let handoff = if with == AcceptWith::Ring {
            match super::accept_uring::spawn(&listener, handoff, stop.clone()) {
                Ok((thread, stopper)) => {
                    // The ring holds its own descriptor of the listener.
                    drop(listener);
                    return Ok(Acceptor {
                        wake: Box::new(move || stopper.wake()),
                        stop,
                        thread: Some(thread),
                        with,
                    });
                }
                Err(super::accept_uring::SpawnError::Unavailable(e, h)) => {
                    tracing::debug!("multishot accept unavailable ({e}); accepting with mio");
                    h
                }
                Err(super::accept_uring::SpawnError::Failed(e)) => return Err(e),
            }
        } else {
            handoff
        };
        // Without io_uring there is only mio to accept with.
        let _ = with;
        Self::start_mio(listener, handoff, stop)
    }

    fn start_mio(listener: std::net::TcpListener, mut handoff: Handoff, stop: Arc<AtomicBool>) -> io::Result<Acceptor> {
        listener.set_nonblocking(true)?;
        let mut poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), STOP)?);
        let mut l = TcpListener::from_std(listener);
        poll.registry().register(&mut l, LISTENER, Interest::READABLE)?;
        let st = stop.clone();
        let thread = std::thread::Builder::new().name("acceptor".into()).spawn(move || {
            let mut events = Events::with_capacity(8);
            while !st.load(Ordering::SeqCst) {
                if poll.poll(&mut events, Some(Duration::from_millis(500))).is_err() {
                    continue;
                }
                loop {
                    if st.load(Ordering::SeqCst) {
                        return;
                    }
                    match l.accept() {
                        // mio's sockets are non-blocking already.
                        Ok((s, peer)) => handoff.hand(into_std(s), Some(peer)),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            tracing::error!("Temporary Client Accept Error({e}), sleeping 10ms");
                            std::thread::sleep(Duration::from_millis(10));
                            break;
                        }
                    }
                }
            }
            drop(l);
        })?;
        let w = waker.clone();
        Ok(Acceptor {
            wake: Box::new(move || {
                let _ = w.wake();
            }),
            stop,
            thread: Some(thread),
            with: AcceptWith::Mio,
        })
    }

    /// What accepts (after any fallback).
    pub fn with(&self) -> AcceptWith {
        self.with
    }

    /// Stop accepting and close the listener.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        (self.wake)();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(unix)]
fn into_std(s: mio::net::TcpStream) -> std::net::TcpStream {
    use std::os::fd::{FromRawFd, IntoRawFd};
    // SAFETY: the fd comes straight out of a mio stream we own; ownership moves over.
    unsafe { std::net::TcpStream::from_raw_fd(s.into_raw_fd()) }
}

#[cfg(windows)]
fn into_std(s: mio::net::TcpStream) -> std::net::TcpStream {
    use std::os::windows::io::{FromRawSocket, IntoRawSocket};
    // SAFETY: the socket comes straight out of a mio stream we own; ownership moves over.
    unsafe { std::net::TcpStream::from_raw_socket(s.into_raw_socket()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    fn round_robin(with: AcceptWith) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = channel::<(usize, Accepted)>();
        let tx = std::sync::Mutex::new(tx);
        let mut a = Acceptor::start(
            l,
            3,
            3,
            Box::new(move |shard, acc| {
                let _ = tx.lock().map(|t| t.send((shard, acc)));
            }),
            with,
        )
        .unwrap();
        #[cfg(all(target_os = "linux", feature = "uring"))]
        if with == AcceptWith::Ring && shards::uring::probe(8).is_ok() {
            assert_eq!(a.with(), AcceptWith::Ring);
        }
        let clients: Vec<TcpStream> = (0..6).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let (mut shards_seen, mut peers) = (Vec::new(), Vec::new());
        for _ in &clients {
            let (shard, acc) = rx.recv_timeout(Duration::from_secs(5)).expect("accepted");
            shards_seen.push(shard);
            assert_eq!(acc.listener, 3);
            assert_eq!(acc.local, Some(addr));
            peers.push(acc.peer);
        }
        let mut want: Vec<SocketAddr> = clients.iter().map(|c| c.local_addr().unwrap()).collect();
        want.sort();
        peers.sort();
        assert_eq!(peers, want);
        assert_eq!(shards_seen, vec![0, 1, 2, 0, 1, 2]);
        a.stop();
        // The listener is closed once stop returns: the port can be bound again.
        std::net::TcpListener::bind(addr).expect("listener still open after stop");
    }

    #[test]
    fn mio_hands_connections_round_robin() {
        round_robin(AcceptWith::Mio);
    }

    #[test]
    fn the_ring_hands_connections_round_robin() {
        round_robin(AcceptWith::Ring);
    }
}
