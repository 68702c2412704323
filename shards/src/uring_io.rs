//! Completion I/O on a shard's ring: connections whose bytes arrive as completions of one
//! multishot receive into the shard's provided buffers ([`crate::uring_bufs`]), and whose
//! writes are submitted as sends, all of a loop turn's submissions going in with its one
//! `io_uring_enter`.
//!
//! - **Receive**: one `RECV` with `IORING_RECV_MULTISHOT` per connection for its whole
//!   life; each completion names the buffer it filled. When the buffers run out the kernel
//!   ends that receive with `ENOBUFS`; the connection waits (it is not failed) until
//!   buffers come back, then its receive is armed again. A paused connection's receive is
//!   cancelled; a new one is armed only after the old one's last completion, so bytes never
//!   arrive out of order.
//! - **Send** ([`crate::uring_send`]): at most one send in flight per connection, from a
//!   buffer the connection owns (the caller's bytes are copied, or a whole buffer handed
//!   over). A short send is continued; the caller hears of the send once all of it went
//!   (or it failed), and only then counts the bytes as written. Large sends may go
//!   zero-copy.
//! - **Registered files**: each connection's socket goes into the ring's file table (slot
//!   = its token) when the table has room, so its receives and sends name the slot and the
//!   kernel takes no reference to the file per request; a token past the table's end uses
//!   its descriptor. Removal empties the slot, so the socket closes with its descriptor.
//! - **Removal** cancels both; a send buffer the kernel may still read is kept until the
//!   last completion of every request that used it.

use crate::uring::{decode, user_data, Reg, UringPoller, KIND_IGNORE, KIND_RECV, KIND_SEND, KIND_ZC};
use crate::uring_bufs::BufRing;
use crate::uring_send::ZcTable;
use crate::Completion;
use io_uring::{cqueue, opcode, squeue, types};
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recv {
    Off,
    Armed,
    /// Cancelled; its last completion has not arrived yet.
    Ending,
}

/// One connection's completion I/O state.
pub(crate) struct ConnIo {
    /// The socket as requests name it.
    pub(crate) file: File,
    recv: Recv,
    /// Whether the connection wants its receive running (not paused).
    want_recv: bool,
    pub(crate) send: Vec<u8>,
    /// Where the bytes of this send started in `send`, and how far they went.
    pub(crate) send_start: usize,
    pub(crate) send_off: usize,
    pub(crate) sending: bool,
    /// A zero-copy send's hold (see [`crate::uring_send`]), and the user data of its
    /// request in flight.
    pub(crate) hold: Option<u32>,
    pub(crate) zc_ud: u64,
}

impl ConnIo {
    /// The user data of this connection's send request in flight (a zero-copy send's
    /// requests each have their own).
    fn send_ud(&self, token: usize, gen: u32) -> u64 {
        match self.hold {
            Some(_) => self.zc_ud,
            None => user_data(token, gen, KIND_SEND),
        }
    }
}

/// The shard-wide part: receive buffers, buffers of cancelled sends, waiting receives.
pub(crate) struct CompletionIo {
    bufs: BufRing,
    /// Connections whose receive ended for want of buffers: (token, generation).
    starved: Vec<(usize, u32)>,
    /// Send buffers of removed connections' plain sends, by the user data of the send.
    pub(crate) graveyard: HashMap<u64, Vec<u8>>,
    /// Large send buffers whose sends completed, for the owner to reuse.
    pub(crate) spent: Vec<Vec<u8>>,
    /// Zero-copy sends: threshold, requests in flight, buffers held for them.
    pub(crate) zc: ZcTable,
    /// Slots of the registered file table (0: none could be registered).
    file_slots: u32,
}

/// Receive buffers a shard hands the kernel at first (the pool grows from there).
pub const INITIAL_BUFFERS: u16 = 16;

/// Slots of a shard's registered file table (fewer where `RLIMIT_NOFILE` is lower): 128
/// KiB of kernel memory per shard; connections past it use their descriptors.
pub const FILE_SLOTS: u32 = 16 * 1024;

/// How a request names a connection's socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum File {
    Fd(RawFd),
    /// A slot of the ring's registered file table.
    Fixed(u32),
}

fn recv_entry(file: File, ud: u64, group: u16) -> squeue::Entry {
    match file {
        File::Fd(fd) => opcode::RecvMulti::new(types::Fd(fd), group).build(),
        File::Fixed(i) => opcode::RecvMulti::new(types::Fixed(i), group).build(),
    }
    .user_data(ud)
}

fn cancel_entry(target: u64, token: usize, gen: u32) -> squeue::Entry {
    opcode::AsyncCancel::new(target)
        .build()
        .user_data(user_data(token, gen, KIND_IGNORE))
}

impl UringPoller {
    /// Receive and send through completions from now on: up to `count` receive buffers
    /// of `size` bytes ([`INITIAL_BUFFERS`] at first, more as traffic needs them). Fails
    /// where the kernel lacks provided-buffer rings.
    pub fn enable_completion(&mut self, count: u16, size: usize) -> io::Result<()> {
        let bufs = BufRing::new(&self.ring.submitter(), count, size, 0, INITIAL_BUFFERS)?;
        // The kernel refuses a table larger than the descriptor limit.
        let slots = FILE_SLOTS.min(nofile_limit());
        // Without a table (an old kernel) requests name descriptors, as before.
        let file_slots = match self.ring.submitter().register_files_sparse(slots) {
            Ok(()) => slots,
            Err(_) => 0,
        };
        self.cio = Some(CompletionIo {
            bufs,
            starved: Vec::new(),
            graveyard: HashMap::new(),
            spent: Vec::new(),
            zc: ZcTable::default(),
            file_slots,
        });
        Ok(())
    }

    /// How many connections' sockets are in the registered file table now (tests).
    #[cfg(test)]
    pub(crate) fn fixed_files(&self) -> usize {
        self.regs
            .iter()
            .flatten()
            .filter(|r| matches!(&r.io, Some(io) if matches!(io.file, File::Fixed(_))))
            .count()
    }

    /// Put `fd` in the file table at slot `token` if the table reaches that far.
    fn fix_file(&mut self, fd: RawFd, token: usize) -> File {
        let slots = self.cio.as_ref().map_or(0, |c| c.file_slots);
        match u32::try_from(token) {
            Ok(i) if i < slots => match self.ring.submitter().register_files_update(i, &[fd]) {
                Ok(1) => File::Fixed(i),
                _ => File::Fd(fd),
            },
            _ => File::Fd(fd),
        }
    }

    /// Empty the file table's slot of a removed connection (the table holds a reference
    /// to the socket: it would not close with its descriptor otherwise).
    pub(crate) fn unfix_file(&mut self, file: File) {
        if let File::Fixed(i) = file {
            // Only a slot past the table's end fails, and `fix_file` gave none such.
            let _ = self.ring.submitter().register_files_update(i, &[-1]);
        }
    }

    /// Whether connections can be added with [`UringPoller::add_stream`].
    pub fn completion(&self) -> bool {
        self.cio.is_some()
    }

    /// Receive from `fd` under `token` through completions. False without completion I/O.
    pub fn add_stream(&mut self, fd: RawFd, token: usize) -> bool {
        let Some(group) = self.cio.as_ref().map(|c| c.bufs.group()) else {
            return false;
        };
        let file = self.fix_file(fd, token);
        let io = ConnIo {
            file,
            recv: Recv::Armed,
            want_recv: true,
            send: Vec::new(),
            send_start: 0,
            send_off: 0,
            sending: false,
            hold: None,
            zc_ud: 0,
        };
        let gen = self.register(fd, token, Some(io));
        self.queue(recv_entry(file, user_data(token, gen, KIND_RECV), group));
        true
    }

    /// The bytes a [`Completion::Data`] reported.
    pub fn data(&self, bid: u16, len: usize) -> &[u8] {
        self.cio.as_ref().map_or(&[][..], |c| c.bufs.get(bid, len))
    }

    /// Give a [`Completion::Data`]'s buffer back.
    pub fn recycle(&mut self, bid: u16) {
        if let Some(c) = &mut self.cio {
            c.bufs.recycle(bid);
        }
    }

    /// Receive buffers the kernel can fill now.
    pub fn free_buffers(&self) -> usize {
        self.cio.as_ref().map_or(0, |c| c.bufs.free())
    }

    /// Receive buffers handed to the kernel so far (the pool's size now).
    pub fn posted_buffers(&self) -> usize {
        self.cio.as_ref().map_or(0, |c| c.bufs.posted())
    }

    /// The completion state of `token`, if it is a completion connection.
    pub(crate) fn conn_io(&mut self, token: usize) -> Option<&mut ConnIo> {
        self.regs.get_mut(token)?.as_mut()?.io.as_mut()
    }

    /// Stop receiving for `token` (its bytes already received still arrive).
    pub fn pause_recv(&mut self, token: usize) {
        let Some(Some(Reg { gen, io: Some(io), .. })) = self.regs.get_mut(token) else {
            return;
        };
        io.want_recv = false;
        if io.recv == Recv::Armed {
            io.recv = Recv::Ending;
            let e = cancel_entry(user_data(token, *gen, KIND_RECV), token, *gen);
            self.queue(e);
        }
    }

    /// Receive again for `token` (once a cancelled receive has ended).
    pub fn resume_recv(&mut self, token: usize) {
        let Some(group) = self.cio.as_ref().map(|c| c.bufs.group()) else {
            return;
        };
        let Some(Some(Reg { gen, io: Some(io), .. })) = self.regs.get_mut(token) else {
            return;
        };
        io.want_recv = true;
        if io.recv == Recv::Off {
            io.recv = Recv::Armed;
            let e = recv_entry(io.file, user_data(token, *gen, KIND_RECV), group);
            self.queue(e);
        }
    }

    /// A removed connection's I/O: cancel what is in flight, keep a send's buffer until
    /// the kernel is done with it.
    pub(crate) fn forget_io(&mut self, token: usize, gen: u32, mut io: ConnIo) {
        if io.recv == Recv::Armed {
            self.queue(cancel_entry(user_data(token, gen, KIND_RECV), token, gen));
        }
        if io.sending {
            let ud = io.send_ud(token, gen);
            if !self.forget_zc(&mut io) {
                if let Some(c) = &mut self.cio {
                    c.graveyard.insert(ud, io.send);
                }
            }
            self.queue(cancel_entry(ud, token, gen));
        }
        if let Some(c) = &mut self.cio {
            c.starved.retain(|(t, g)| !(*t == token && *g == gen));
        }
    }

    /// Arm again the receives that ended for want of buffers, now that some are back.
    pub(crate) fn rearm_starved(&mut self) {
        let Some(c) = &mut self.cio else { return };
        if c.starved.is_empty() || c.bufs.free() == 0 {
            return;
        }
        let group = c.bufs.group();
        let starved = std::mem::take(&mut c.starved);
        for (token, gen) in starved {
            if let Some(Some(Reg {
                gen: g, io: Some(io), ..
            })) = self.regs.get_mut(token)
            {
                if *g == gen && io.want_recv && io.recv == Recv::Off {
                    io.recv = Recv::Armed;
                    let e = recv_entry(io.file, user_data(token, gen, KIND_RECV), group);
                    self.queue(e);
                }
            }
        }
    }

    /// A receive's completion (sends: [`crate::uring_send`]).
    pub(crate) fn complete_recv(
        &mut self,
        token: usize,
        gen: u32,
        cqe: &cqueue::Entry,
        rearm: &mut Vec<squeue::Entry>,
        done: &mut Vec<Completion>,
    ) {
        let (res, flags) = (cqe.result(), cqe.flags());
        let Some(c) = &mut self.cio else { return };
        let bid = cqueue::buffer_select(flags);
        if bid.is_some() {
            c.bufs.taken();
        }
        let live = match self.regs.get_mut(token) {
            Some(Some(r)) if r.gen == gen && r.io.is_some() => Some(r),
            _ => None,
        };
        let Some(reg) = live else {
            // An earlier registration of this token: return what it holds.
            if let Some(b) = bid {
                c.bufs.recycle(b);
            }
            return;
        };
        let Some(io) = reg.io.as_mut() else {
            return;
        };
        let file = io.file;
        let more = cqueue::more(flags);
        if res > 0 {
            if let Some(b) = bid {
                done.push(Completion::Data {
                    token,
                    bid: b,
                    len: res as usize,
                });
            }
        } else if res == 0 {
            io.recv = Recv::Off;
            io.want_recv = false;
            done.push(Completion::RecvEnd { token, err: 0 });
            return;
        } else if res == -libc::ENOBUFS {
            // Out of buffers: hand out more if any are left (the receive is armed again
            // at the next turn), else wait for recycled ones.
            c.bufs.grow();
            if !more {
                io.recv = Recv::Off;
                if io.want_recv {
                    c.starved.push((token, gen));
                }
            }
            return;
        } else if res != -libc::ECANCELED {
            io.recv = Recv::Off;
            io.want_recv = false;
            done.push(Completion::RecvEnd { token, err: -res });
            return;
        }
        if !more {
            // The receive ended (cancelled, or the kernel stopped it): arm it again if it
            // is still wanted.
            io.recv = Recv::Off;
            if io.want_recv {
                io.recv = Recv::Armed;
                rearm.push(recv_entry(file, cqe.user_data(), c.bufs.group()));
            }
        }
    }

    /// Before the ring and the buffers go: cancel every receive and send and wait
    /// (briefly) for their last completions, so the kernel no longer uses our memory.
    pub(crate) fn quiesce(&mut self) {
        let Some(c) = &self.cio else { return };
        let mut cancels = Vec::new();
        // Last completions to wait for: one per receive, per plain send, per zero-copy
        // request.
        let mut pending = c.graveyard.len() + c.zc.live();
        for (token, r) in self.regs.iter().enumerate() {
            let Some(Reg { gen, io: Some(io), .. }) = r else {
                continue;
            };
            if io.recv != Recv::Off {
                cancels.push(cancel_entry(user_data(token, *gen, KIND_RECV), token, *gen));
                pending += 1;
            }
            if io.sending {
                if io.hold.is_none() {
                    pending += 1;
                }
                cancels.push(cancel_entry(io.send_ud(token, *gen), token, *gen));
            }
        }
        for e in cancels {
            self.queue(e);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while pending > 0 && std::time::Instant::now() < deadline {
            self.drain_backlog();
            let ts = types::Timespec::new().nsec(10_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            for cqe in self.ring.completion() {
                let (_, _, kind) = decode(cqe.user_data());
                if (kind == KIND_RECV || kind == KIND_SEND || kind == KIND_ZC) && !cqueue::more(cqe.flags()) {
                    pending = pending.saturating_sub(1);
                }
            }
        }
        if let Some(c) = &self.cio {
            c.bufs.unregister(&self.ring.submitter());
        }
    }
}

/// The soft limit on open descriptors (what a sparse file table may not exceed).
fn nofile_limit() -> u32 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into a local struct of the right type.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 0;
    }
    u32::try_from(r.rlim_cur).unwrap_or(u32::MAX)
}

/// Can this kernel do completion I/O (provided-buffer rings, multishot receive, send)?
/// Round-trips bytes both ways over a socket pair on a small ring.
pub fn probe_completion() -> io::Result<()> {
    let mut p = UringPoller::new(8)?;
    p.enable_completion(2, 64)?;
    let mut fds = [0; 2];
    // SAFETY: socketpair fills the two fds, which we own and close below.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } < 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    let (a, b) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    use std::os::fd::AsRawFd;
    p.add_stream(a.as_raw_fd(), 1);
    p.send(1, b"ping");
    // SAFETY: writes 4 bytes from a static slice to a socket we own.
    unsafe { libc::write(b.as_raw_fd(), b"pong".as_ptr().cast(), 4) };
    let (mut got, mut sent) = (Vec::new(), false);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let mut done = Vec::new();
    while (got.len() < 4 || !sent) && std::time::Instant::now() < deadline {
        p.wait(&mut Vec::new(), &mut done, std::time::Duration::from_millis(50))?;
        for c in done.drain(..) {
            match c {
                Completion::Data { bid, len, .. } => {
                    got.extend_from_slice(p.data(bid, len));
                    p.recycle(bid);
                }
                Completion::Sent { n: 4, err: 0, .. } => sent = true,
                other => return Err(io::Error::other(format!("unexpected {other:?}"))),
            }
        }
    }
    let mut buf = [0u8; 8];
    // SAFETY: reads into a local buffer of the given size.
    let n = unsafe { libc::read(b.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if got != b"pong" || !sent || n != 4 || buf.get(..4) != Some(&b"ping"[..]) {
        return Err(io::Error::other("completion receive or send did not round-trip"));
    }
    p.remove(1);
    drop(a);
    Ok(())
}

#[cfg(test)]
#[path = "uring_io_tests.rs"]
pub(crate) mod tests;
