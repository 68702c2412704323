//! io_uring shards (Linux, feature `uring`): probing whether io_uring can really be used,
//! and a readiness poller over one ring per shard.
//!
//! Each registered socket has one multishot `POLL_ADD` for input (one submission for the
//! socket's whole life; the kernel posts a completion each time data arrives), and a
//! one-shot `POLL_ADD` for output only while a write is blocked. A shard sleeps in one
//! `io_uring_enter` that submits what is queued and waits for completions or its next
//! deadline (`EXT_ARG` timeout), so a wake-up costs one system call. Other threads wake a
//! shard through an eventfd that has its own multishot poll ([`EventFdNotify`]).
//!
//! Why not an executor (glommio): measured here, its reactor made ~6 `io_uring_enter`
//! calls and a `membarrier` per wake-up (25 per request/reply round trip across two
//! shards), which tripled the CPU cost of request/reply compared with epoll.

use crate::mesh::Notify;
use crate::{Completion, Ready};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

/// Can io_uring really be used here? Sets up a ring as the shards will (`entries`
/// submissions) and round-trips a NOP: seccomp filters, `io_uring_disabled` and a too small
/// RLIMIT_MEMLOCK all show up here rather than in a shard.
pub fn probe(entries: u32) -> io::Result<()> {
    let mut ring: IoUring = IoUring::builder().setup_cqsize(entries * 8).build(entries)?;
    let nop = opcode::Nop::new().build().user_data(7);
    // SAFETY: a NOP entry references no buffers, so nothing must outlive the submission.
    unsafe {
        ring.submission()
            .push(&nop)
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
    }
    ring.submit_and_wait(1)?;
    let done = ring.completion().next().map(|c| c.user_data());
    match done {
        Some(7) => Ok(()),
        _ => Err(io::Error::other("io_uring NOP did not complete")),
    }
}

pub(crate) const KIND_READ: u64 = 0;
pub(crate) const KIND_WRITE: u64 = 1;
pub(crate) const KIND_IGNORE: u64 = 2;
/// A connection's multishot receive (completion I/O).
pub(crate) const KIND_RECV: u64 = 3;
/// A connection's send (completion I/O).
pub(crate) const KIND_SEND: u64 = 4;
/// A request of a zero-copy send (completion I/O): the token field is its slot.
pub(crate) const KIND_ZC: u64 = 5;
/// Token of the shard's own wake-up eventfd.
const WAKE_TOKEN: usize = (1 << 28) - 1;

pub(crate) fn user_data(token: usize, gen: u32, kind: u64) -> u64 {
    ((token as u64) << 35) | (u64::from(gen) << 3) | kind
}

pub(crate) fn decode(ud: u64) -> (usize, u32, u64) {
    ((ud >> 35) as usize, ((ud >> 3) & 0xffff_ffff) as u32, ud & 7)
}

pub(crate) struct Reg {
    pub(crate) fd: RawFd,
    pub(crate) gen: u32,
    pub(crate) write_armed: bool,
    /// Completion I/O: the receive and send state (`None`: watched by polls).
    pub(crate) io: Option<crate::uring_io::ConnIo>,
}

/// Wakes a shard that sleeps in [`UringPoller::wait`], from any thread.
pub struct EventFdNotify(Arc<OwnedFd>);

impl Notify for EventFdNotify {
    fn notify(&self) {
        signal(&self.0);
    }

    fn eventfd(&self) -> Option<i32> {
        Some(self.0.as_raw_fd())
    }
}

/// What a ring writes to an eventfd to wake its owner: it must outlive the submission, so
/// it is static.
static ONE: u64 = 1;

/// A new non-blocking, close-on-exec eventfd.
pub(crate) fn eventfd() -> io::Result<Arc<OwnedFd>> {
    // SAFETY: eventfd returns a new fd that we own from here on.
    let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if efd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `efd` was just created and is owned by nobody else.
    Ok(Arc::new(unsafe { OwnedFd::from_raw_fd(efd) }))
}

/// Add one to an eventfd's counter (what wakes a poll on it).
pub(crate) fn signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live local into an eventfd we own; a full counter
    // (EAGAIN) means a wake-up is pending anyway.
    let _ = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// A shard's ring and the sockets registered with it. Owned by one shard thread.
pub struct UringPoller {
    pub(crate) ring: IoUring,
    pub(crate) regs: Vec<Option<Reg>>,
    next_gen: u32,
    /// Entries that did not fit in the submission queue yet.
    backlog: Vec<squeue::Entry>,
    wake: Arc<OwnedFd>,
    /// Completion I/O: receive buffers, sends in flight (`None`: readiness only).
    pub(crate) cio: Option<crate::uring_io::CompletionIo>,
    /// Completions taken off the ring this turn (kept for its allocation).
    cqes: Vec<cqueue::Entry>,
    /// The wake-up eventfd fired since [`UringPoller::take_woken`] last looked.
    woken: bool,
}

impl UringPoller {
    /// A ring sized for `entries` submissions per loop turn (more are queued in memory).
    pub fn new(entries: u32) -> io::Result<UringPoller> {
        // Completions whose work must run in this thread (receives copying data) wait for
        // the thread's next system call instead of interrupting it; a flag in the ring
        // tells a busy loop that such work waits (see `wait`). Older kernels lack it.
        let ring: IoUring = match IoUring::builder()
            .setup_cqsize(entries * 8)
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .build(entries)
        {
            Ok(r) => r,
            Err(_) => IoUring::builder().setup_cqsize(entries * 8).build(entries)?,
        };
        Self::with_ring(ring)
    }

    /// [`UringPoller::new`] with a kernel thread (`IORING_SETUP_SQPOLL`) that takes the
    /// submissions as they are queued and runs the completions' work itself, polling for
    /// `idle_ms` after its last work before it sleeps. While it polls, queuing a send and
    /// reaping a completion are memory operations: a busy shard makes no system call for
    /// its I/O (it still blocks in one when it has nothing to do). The thread needs a CPU of
    /// its own to pay.
    pub fn with_sqpoll(entries: u32, idle_ms: u32) -> io::Result<UringPoller> {
        let ring: IoUring = IoUring::builder()
            .setup_cqsize(entries * 8)
            .setup_sqpoll(idle_ms)
            .build(entries)?;
        Self::with_ring(ring)
    }

    fn with_ring(ring: IoUring) -> io::Result<UringPoller> {
        let wake = eventfd()?;
        let efd = wake.as_raw_fd();
        let mut p = UringPoller {
            ring,
            regs: Vec::new(),
            next_gen: 1,
            backlog: Vec::new(),
            wake,
            cio: None,
            cqes: Vec::new(),
            woken: false,
        };
        let ud = user_data(WAKE_TOKEN, 0, KIND_READ);
        p.queue(Self::poll_in(efd, ud));
        Ok(p)
    }

    /// The wake-up eventfd itself, for others that signal this thread (storage rings post
    /// their completions to it).
    pub fn wake_fd(&self) -> Arc<OwnedFd> {
        self.wake.clone()
    }

    /// Whether the wake-up eventfd fired since the last call.
    pub fn take_woken(&mut self) -> bool {
        std::mem::take(&mut self.woken)
    }

    /// A notifier that wakes this poller's thread.
    pub fn notifier(&self) -> EventFdNotify {
        EventFdNotify(self.wake.clone())
    }

    fn poll_in(fd: RawFd, ud: u64) -> squeue::Entry {
        let flags = (libc::POLLIN | libc::POLLRDHUP | libc::POLLERR | libc::POLLHUP) as u32;
        opcode::PollAdd::new(types::Fd(fd), flags)
            .multi(true)
            .build()
            .user_data(ud)
    }

    pub(crate) fn queue(&mut self, e: squeue::Entry) {
        if !self.backlog.is_empty() {
            self.backlog.push(e);
            return;
        }
        // SAFETY: entries queued here reference fds, plain values, static memory
        // (`signal_later`) or a connection's send buffer, which stays in place and
        // unchanged until the send's last completion (see `uring_send`).
        let pushed = unsafe { self.ring.submission().push(&e).is_ok() };
        if !pushed {
            self.backlog.push(e);
        }
    }

    pub(crate) fn drain_backlog(&mut self) {
        while !self.backlog.is_empty() {
            let mut sq = self.ring.submission();
            let mut moved = 0;
            for e in &self.backlog {
                // SAFETY: as in `queue`.
                if unsafe { sq.push(e).is_err() } {
                    break;
                }
                moved += 1;
            }
            drop(sq);
            self.backlog.drain(..moved);
            if self.backlog.is_empty() || self.ring.submit().is_err() {
                break;
            }
        }
    }

    /// Add one to the eventfd `fd` (another shard's wake-up, see [`EventFdNotify`]) with
    /// the next submission instead of a `write` system call now. The caller keeps `fd`
    /// open until then (the mesh holds every shard's notifier for its whole life).
    pub fn signal_later(&mut self, fd: RawFd) {
        let e = opcode::Write::new(types::Fd(fd), std::ptr::addr_of!(ONE).cast(), 8)
            .build()
            .user_data(user_data(0, 0, KIND_IGNORE));
        self.queue(e);
    }

    /// Watch `fd` for input under `token` (reported as readable on every arrival).
    pub fn add(&mut self, fd: RawFd, token: usize) {
        let gen = self.register(fd, token, None);
        self.queue(Self::poll_in(fd, user_data(token, gen, KIND_READ)));
    }

    /// Record `fd` under `token` with a new generation (returned): completions of an
    /// earlier registration of the token are recognised by theirs.
    pub(crate) fn register(&mut self, fd: RawFd, token: usize, io: Option<crate::uring_io::ConnIo>) -> u32 {
        if self.regs.len() <= token {
            self.regs.resize_with(token + 1, || None);
        }
        let gen = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1).max(1);
        self.regs[token] = Some(Reg {
            fd,
            gen,
            write_armed: false,
            io,
        });
        gen
    }

    /// A write on `token` would block: report it writable once it has room.
    pub fn want_write(&mut self, token: usize) {
        let Some(Some(r)) = self.regs.get_mut(token) else {
            return;
        };
        if r.write_armed {
            return;
        }
        r.write_armed = true;
        let ud = user_data(token, r.gen, KIND_WRITE);
        let e = opcode::PollAdd::new(types::Fd(r.fd), libc::POLLOUT as u32)
            .build()
            .user_data(ud);
        self.queue(e);
    }

    /// Stop watching `token`. The removal is submitted at once, so the socket can close.
    pub fn remove(&mut self, token: usize) {
        let Some(r) = self.regs.get_mut(token).and_then(Option::take) else {
            return;
        };
        let ignore = user_data(token, r.gen, KIND_IGNORE);
        if let Some(io) = r.io {
            let file = io.file;
            self.forget_io(token, r.gen, io);
            self.submit_now();
            // After the cancels went in: requests in flight hold their own reference.
            self.unfix_file(file);
            return;
        }
        self.queue(
            opcode::PollRemove::new(user_data(token, r.gen, KIND_READ))
                .build()
                .user_data(ignore),
        );
        if r.write_armed {
            self.queue(
                opcode::PollRemove::new(user_data(token, r.gen, KIND_WRITE))
                    .build()
                    .user_data(ignore),
            );
        }
        self.submit_now();
    }

    /// Submits everything queued before the caller closes a socket. With a kernel
    /// submission thread, "submitted" means taken off the queue by that thread: an entry
    /// still queued names the socket by its descriptor number, which a new connection may
    /// get once it is closed, so this waits (briefly: the thread is polling, or is woken
    /// here) until the queue is empty.
    fn submit_now(&mut self) {
        self.drain_backlog();
        let _ = self.ring.submit();
        if self.ring.params().is_setup_sqpoll() {
            while !self.backlog.is_empty() || !self.ring.submission().is_empty() {
                std::thread::yield_now();
                self.drain_backlog();
                let _ = self.ring.submit();
            }
        }
    }

    /// Submit what is queued and wait up to `timeout` for readiness and completions;
    /// append them to `out` and `done`.
    pub fn wait(&mut self, out: &mut Vec<Ready>, done: &mut Vec<Completion>, timeout: Duration) -> io::Result<()> {
        self.rearm_starved();
        self.drain_backlog();
        let r = if timeout.is_zero() {
            // A busy turn with nothing to submit needs no system call, unless completion
            // work waits for one (the ring's task-run flag) or an overflowed completion
            // queue must be flushed.
            let idle = {
                let sq = self.ring.submission();
                sq.is_empty() && !sq.cq_overflow() && !sq.taskrun()
            };
            if idle {
                Ok(0)
            } else {
                self.ring.submit()
            }
        } else {
            let ts = types::Timespec::new()
                .sec(timeout.as_secs())
                .nsec(timeout.subsec_nanos());
            let args = types::SubmitArgs::new().timespec(&ts);
            if self.ring.params().is_setup_sqpoll() && self.ring.submission().is_empty() {
                // Nothing to submit: wait without waking a sleeping submission thread
                // (the library's wait would, and the thread would then poll for its idle
                // time: an idle server would burn that much CPU at every timer wake-up).
                // SAFETY: an enter that submits nothing and waits for one completion, with
                // `args` (a timeout that lives through the call) as its extended argument.
                unsafe {
                    self.ring.submitter().enter(
                        0,
                        1,
                        (io_uring::EnterFlags::GETEVENTS | io_uring::EnterFlags::EXT_ARG).bits(),
                        Some(&args),
                    )
                }
            } else {
                self.ring.submitter().submit_with_args(1, &args)
            }
        };
        match r {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ETIME) || e.raw_os_error() == Some(libc::EINTR) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(e) => return Err(e),
        }
        self.reap(out, done);
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<Ready>, done: &mut Vec<Completion>) {
        let mut rearm: Vec<squeue::Entry> = Vec::new();
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.extend(self.ring.completion());
        for cqe in cqes.drain(..) {
            let (token, gen, kind) = decode(cqe.user_data());
            if kind == KIND_IGNORE {
                continue;
            }
            if kind == KIND_RECV {
                self.complete_recv(token, gen, &cqe, &mut rearm, done);
                continue;
            }
            if kind == KIND_SEND {
                self.complete_plain(token, gen, &cqe, &mut rearm, done);
                continue;
            }
            if kind == KIND_ZC {
                self.complete_zc(&cqe, &mut rearm, done);
                continue;
            }
            let more = cqueue::more(cqe.flags());
            if token == WAKE_TOKEN {
                self.woken = true;
                if !more {
                    rearm.push(Self::poll_in(self.wake.as_raw_fd(), cqe.user_data()));
                }
                continue;
            }
            let Some(Some(r)) = self.regs.get_mut(token) else {
                continue;
            };
            if r.gen != gen {
                continue; // a completion of an earlier registration of this token
            }
            match kind {
                KIND_READ => {
                    if !more {
                        // The multishot poll ended (error or overflow): arm it again.
                        rearm.push(Self::poll_in(r.fd, cqe.user_data()));
                    }
                    if self.cio.is_some() {
                        done.push(Completion::Readable { token });
                    } else {
                        out.push(Ready {
                            token,
                            readable: true,
                            writable: false,
                        });
                    }
                }
                _ => {
                    r.write_armed = false;
                    out.push(Ready {
                        token,
                        readable: false,
                        writable: true,
                    });
                }
            }
        }
        self.cqes = cqes;
        for e in rearm {
            self.queue(e);
        }
    }
}

impl Drop for UringPoller {
    fn drop(&mut self) {
        self.quiesce();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn ring() -> Option<UringPoller> {
        if probe(64).is_err() {
            eprintln!("io_uring unavailable here; skipping");
            return None;
        }
        Some(UringPoller::new(64).unwrap())
    }

    #[test]
    fn readiness_wake_and_removal() {
        let Some(mut p) = ring() else { return };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        s.set_nonblocking(true).unwrap();
        p.add(s.as_raw_fd(), 3);
        let mut out = Vec::new();
        p.wait(&mut out, &mut Vec::new(), Duration::from_millis(20)).unwrap();
        assert!(out.is_empty(), "nothing to read yet: {out:?}");
        c.write_all(b"hi").unwrap();
        p.wait(&mut out, &mut Vec::new(), Duration::from_secs(5)).unwrap();
        assert_eq!(
            out,
            vec![Ready {
                token: 3,
                readable: true,
                writable: false
            }]
        );
        // Multishot: a second arrival is reported without re-registering.
        out.clear();
        c.write_all(b"again").unwrap();
        p.wait(&mut out, &mut Vec::new(), Duration::from_secs(5)).unwrap();
        assert!(out.iter().any(|r| r.token == 3 && r.readable));
        let mut buf = [0u8; 16];
        assert_eq!((&s).read(&mut buf).unwrap(), 7);
        // Write interest fires once.
        out.clear();
        p.want_write(3);
        p.wait(&mut out, &mut Vec::new(), Duration::from_secs(5)).unwrap();
        assert!(out.iter().any(|r| r.token == 3 && r.writable));
        // A notifier from another thread ends a long wait.
        out.clear();
        let n = p.notifier();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            n.notify();
        });
        let start = std::time::Instant::now();
        p.wait(&mut out, &mut Vec::new(), Duration::from_secs(10)).unwrap();
        assert!(start.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
        // Another ring can post the wake-up with its own submission.
        let fd = p.wake_fd();
        let t = std::thread::spawn(move || {
            let mut other = UringPoller::new(8).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            other.signal_later(fd.as_raw_fd());
            // Queued only: nothing reaches the kernel before the next submission.
            std::thread::sleep(Duration::from_millis(50));
            let submitting = std::time::Instant::now();
            other.wait(&mut Vec::new(), &mut Vec::new(), Duration::ZERO).unwrap();
            submitting
        });
        p.take_woken();
        let start = std::time::Instant::now();
        p.wait(&mut out, &mut Vec::new(), Duration::from_secs(10)).unwrap();
        let woke = std::time::Instant::now();
        let submitting = t.join().unwrap();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(p.take_woken(), "the eventfd fired");
        assert!(woke >= submitting, "woken by the submission, not when queued");
        // After removal nothing more is reported for the token.
        p.remove(3);
        c.write_all(b"late").unwrap();
        out.clear();
        p.wait(&mut out, &mut Vec::new(), Duration::from_millis(50)).unwrap();
        assert!(!out.iter().any(|r| r.token == 3), "{out:?}");
    }
}
