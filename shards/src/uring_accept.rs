//! A multishot accept on a ring of its own (io_uring, Linux 5.19+): the kernel posts one
//! completion per connection, so accepting costs no system call per connection, and the
//! sockets arrive non-blocking and close-on-exec. An eventfd with its own poll on the same
//! ring wakes the waiting thread to stop. [`AcceptRing::new`] refuses where the kernel
//! does not take a multishot accept (the caller accepts another way then).

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

const ACCEPT: u64 = 1;
const STOP: u64 = 2;

fn accept_entry(fd: RawFd) -> squeue::Entry {
    opcode::AcceptMulti::new(types::Fd(fd))
        .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
        .build()
        .user_data(ACCEPT)
}

/// Wakes a thread waiting in [`AcceptRing::wait`] (which then reports the stop).
#[derive(Clone)]
pub struct AcceptStop(Arc<OwnedFd>);

impl AcceptStop {
    pub fn wake(&self) {
        crate::uring::signal(&self.0);
    }
}

/// Accepts on one listener through a multishot accept.
pub struct AcceptRing {
    ring: IoUring,
    /// The listener (closed with the ring).
    listener: TcpListener,
    wake: Arc<OwnedFd>,
    /// The multishot accept is in the kernel (it ends on some errors and must be re-armed).
    armed: bool,
    /// Connections that arrived with the set-up's own completions.
    early: Vec<TcpStream>,
}

impl AcceptRing {
    /// Arm a multishot accept on `listener`. Fails where io_uring or multishot accept is
    /// not available.
    pub fn new(listener: TcpListener) -> io::Result<AcceptRing> {
        // One thread submits and waits: its accepts run when it waits, not as interrupts
        // of whatever it does (kernels before 6.1 lack the flags).
        let ring: IoUring = match IoUring::builder().setup_single_issuer().setup_defer_taskrun().build(64) {
            Ok(r) => r,
            Err(_) => IoUring::new(64)?,
        };
        let wake = crate::uring::eventfd()?;
        let mut a = AcceptRing {
            ring,
            listener,
            wake,
            armed: false,
            early: Vec::new(),
        };
        let poll = opcode::PollAdd::new(types::Fd(a.wake.as_raw_fd()), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(STOP);
        // SAFETY: neither entry points at memory of ours (the accept has no address
        // buffer); both descriptors live as long as the ring (fields of `a`).
        let pushed = unsafe {
            let mut sq = a.ring.submission();
            sq.push(&accept_entry(a.listener.as_raw_fd())).is_ok() && sq.push(&poll).is_ok()
        };
        if !pushed {
            return Err(io::Error::other("submission queue full"));
        }
        a.armed = true;
        a.ring.submit()?;
        // A kernel without multishot accept refuses it at once.
        let first: Vec<cqueue::Entry> = a.ring.completion().collect();
        for cqe in &first {
            if cqe.user_data() == ACCEPT && cqe.result() == -libc::EINVAL {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
        }
        let mut errs = Vec::new();
        let mut early = Vec::new();
        a.take(&first, &mut early, &mut errs);
        a.early = early;
        Ok(a)
    }

    /// A handle that wakes [`AcceptRing::wait`] from another thread.
    pub fn stopper(&self) -> AcceptStop {
        AcceptStop(self.wake.clone())
    }

    /// Wait for connections or the stop wake-up: accepted sockets go to `out`, accept
    /// errors (out of descriptors, ...) to `errs`. True when woken to stop.
    pub fn wait(&mut self, out: &mut Vec<TcpStream>, errs: &mut Vec<io::Error>) -> bool {
        // Connections taken at the set-up go first, without waiting for more.
        let early = !self.early.is_empty();
        out.append(&mut self.early);
        if !self.armed {
            // SAFETY: as in `new`, the entry references no memory of ours.
            self.armed = unsafe { self.ring.submission().push(&accept_entry(self.listener.as_raw_fd())) }.is_ok();
        }
        let want = usize::from(!early);
        if let Err(e) = self.ring.submit_and_wait(want) {
            if e.raw_os_error() != Some(libc::EINTR) {
                errs.push(e);
            }
        }
        let cqes: Vec<cqueue::Entry> = self.ring.completion().collect();
        self.take(&cqes, out, errs)
    }

    fn take(&mut self, cqes: &[cqueue::Entry], out: &mut Vec<TcpStream>, errs: &mut Vec<io::Error>) -> bool {
        let mut stop = false;
        for cqe in cqes {
            if cqe.user_data() == STOP {
                stop = true;
                continue;
            }
            let res = cqe.result();
            if res >= 0 {
                // SAFETY: the completion hands us a new connected socket's descriptor.
                out.push(unsafe { TcpStream::from_raw_fd(res) });
            } else if res != -libc::ECANCELED {
                errs.push(io::Error::from_raw_os_error(-res));
            }
            if !cqueue::more(cqe.flags()) {
                self.armed = false;
            }
        }
        stop
    }
}

impl Drop for AcceptRing {
    /// Cancel the accept and wait (briefly) for its last completion, so the kernel holds
    /// the listener no longer once this returns: the port is free for a new bind at once
    /// (a ring's own teardown releases it later, from a kernel worker).
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let cancel = opcode::AsyncCancel::new(ACCEPT).build().user_data(STOP + 1);
        // SAFETY: a cancel entry references no memory.
        if unsafe { self.ring.submission().push(&cancel) }.is_err() {
            return;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while std::time::Instant::now() < deadline {
            let ts = types::Timespec::new().nsec(50_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            for cqe in self.ring.completion() {
                if cqe.user_data() == ACCEPT {
                    if cqe.result() >= 0 {
                        // SAFETY: a connection accepted while stopping: closed here.
                        drop(unsafe { TcpStream::from_raw_fd(cqe.result()) });
                    }
                    if !cqueue::more(cqe.flags()) {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn connections_arrive_and_the_stop_wakes() {
        if crate::uring::probe(8).is_err() {
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let Ok(mut a) = AcceptRing::new(l.try_clone().unwrap()) else {
            eprintln!("no multishot accept here; skipping");
            return;
        };
        let addr = l.local_addr().unwrap();
        let clients: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let (mut got, mut errs) = (Vec::new(), Vec::new());
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < clients.len() {
            assert!(Instant::now() < deadline, "only {} of 20 accepted", got.len());
            assert!(!a.wait(&mut got, &mut errs));
        }
        assert!(errs.is_empty(), "{errs:?}");
        let mut peers: Vec<_> = got.iter().map(|s| s.peer_addr().unwrap()).collect();
        let mut locals: Vec<_> = clients.iter().map(|c| c.local_addr().unwrap()).collect();
        peers.sort();
        locals.sort();
        assert_eq!(peers, locals);
        // Non-blocking, as asked of the kernel.
        let mut buf = [0u8; 1];
        let e = std::io::Read::read(&mut &got[0], &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        // The stop wakes a thread waiting on its own ring (the ring is its thread's: made,
        // submitted to and waited on there).
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let mut a = AcceptRing::new(l.try_clone().unwrap()).unwrap();
            tx.send(a.stopper()).unwrap();
            let (mut o, mut e) = (Vec::new(), Vec::new());
            a.wait(&mut o, &mut e)
        });
        let stop = rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        stop.wake();
        assert!(t.join().unwrap(), "woken to stop");
    }

    #[test]
    fn a_connection_queued_before_the_accept_is_armed_comes_at_once() {
        if crate::uring::probe(8).is_err() {
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let Ok(mut a) = AcceptRing::new(l.try_clone().unwrap()) else {
            return;
        };
        // The first wait hands it over without waiting for another connection (a blocked
        // wait here would hang: nothing else arrives).
        let (mut got, mut errs) = (Vec::new(), Vec::new());
        let t = std::time::Instant::now();
        while got.is_empty() {
            assert!(t.elapsed() < Duration::from_secs(5), "the queued connection never came");
            let stop = a.stopper();
            let waker = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(3));
                stop.wake();
            });
            a.wait(&mut got, &mut errs);
            assert!(t.elapsed() < Duration::from_secs(1), "handed only when woken");
            drop(waker);
        }
        assert_eq!(got[0].peer_addr().unwrap(), c.local_addr().unwrap());
    }

    #[test]
    fn the_port_is_free_once_dropped() {
        if crate::uring::probe(8).is_err() {
            return;
        }
        for _ in 0..20 {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let Ok(a) = AcceptRing::new(l.try_clone().unwrap()) else {
                return;
            };
            drop(l);
            drop(a);
            // Exclusive bind (no SO_REUSEADDR games): fails while anything holds the port.
            TcpListener::bind(addr).expect("port still held after the drop");
        }
    }
}
