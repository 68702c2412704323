//! The acceptor: one thread accepts on the exclusive listener and hands each connection
//! to the next shard round-robin, so connections spread evenly and never migrate
//! afterwards (ARCHITECTURE.md, invariant 2). It uses mio so it runs on every target.

use super::Accepted;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const LISTENER: Token = Token(0);
const STOP: Token = Token(1);

/// Handle to stop the acceptor thread.
pub struct Acceptor {
    waker: Arc<Waker>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    /// Start accepting on `listener` (listener number `index`). `deliver(shard, conn)`
    /// queues a connection for a shard and wakes it.
    pub fn start(
        listener: std::net::TcpListener,
        index: usize,
        nshards: usize,
        deliver: Box<dyn Fn(usize, Accepted) + Send>,
    ) -> io::Result<Acceptor> {
        listener.set_nonblocking(true)?;
        let mut poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), STOP)?);
        let mut l = TcpListener::from_std(listener);
        poll.registry().register(&mut l, LISTENER, Interest::READABLE)?;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::Builder::new().name("acceptor".into()).spawn(move || {
            let mut events = Events::with_capacity(8);
            let mut next = 0usize;
            while !st.load(std::sync::atomic::Ordering::SeqCst) {
                if poll.poll(&mut events, Some(Duration::from_millis(500))).is_err() {
                    continue;
                }
                loop {
                    if st.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    match l.accept() {
                        Ok((s, peer)) => {
                            let stream = into_std(s);
                            super::prepare_stream(&stream);
                            let local = stream.local_addr().ok();
                            deliver(
                                next % nshards,
                                Accepted {
                                    stream,
                                    peer,
                                    local,
                                    listener: index,
                                },
                            );
                            next = next.wrapping_add(1);
                        }
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
        Ok(Acceptor {
            waker,
            stop,
            thread: Some(thread),
        })
    }

    /// Stop accepting and close the listener.
    pub fn stop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.waker.wake();
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
