//! The send side of completion I/O ([`crate::uring_io`]): at most one send in flight per
//! connection, from a buffer the connection owns, continued here when it comes back
//! short; the caller hears of it once all of it went (or it failed).
//!
//! **Zero-copy sends** (`IORING_OP_SEND_ZC`, Linux 6.0): with a threshold set
//! ([`UringPoller::set_send_zc`]), a send of at least that many bytes lets the NIC read the
//! connection's buffer instead of the kernel copying it. Such a send completes twice: its
//! result (flagged `MORE`), then a notification once the kernel no longer reads the
//! buffer. Every request's last completion is the one without `MORE`, so a connection
//! counts its requests whose last completion has not come (`ops`) and reports the send
//! only when that count is back to zero: until then the buffer stays put, and so does a
//! removed connection's buffer (kept in the graveyard with the same count). A kernel or
//! socket that refuses zero-copy (`EOPNOTSUPP`, `EINVAL`) turns it off for the ring and
//! the bytes go again as a plain send.

use crate::uring::{user_data, Reg, UringPoller, KIND_SEND};
use crate::uring_io::{CompletionIo, ConnIo, File};
use crate::Completion;
use io_uring::{cqueue, opcode, squeue, types};

/// Most bytes one send takes from the caller.
pub const SEND_MAX: usize = 256 * 1024;
/// A connection keeps a send buffer up to this size between sends; larger ones go back
/// (through [`UringPoller::take_spent`]) once their send completes, so an idle
/// connection holds little.
const KEEP_SEND: usize = 4 * 1024;

impl UringPoller {
    /// Send buffers of at least `min` bytes zero-copy from now on (0: never). Use it where
    /// the NIC can read user memory (over loopback the kernel copies anyway, and the
    /// extra completion only costs).
    pub fn set_send_zc(&mut self, min: usize) {
        if let Some(c) = &mut self.cio {
            c.zc_min = min;
        }
    }

    /// The zero-copy threshold in force (0: off, or turned off by a refusal).
    pub fn send_zc(&self) -> usize {
        self.cio.as_ref().map_or(0, |c| c.zc_min)
    }

    /// Zero-copy requests submitted so far, and notifications of them received.
    pub fn zc_counts(&self) -> (u64, u64) {
        self.cio.as_ref().map_or((0, 0), |c| (c.zc_requests, c.zc_notifs))
    }

    /// A send of `token` is in flight (or its buffer is still the kernel's).
    pub fn send_busy(&self, token: usize) -> bool {
        matches!(self.regs.get(token), Some(Some(Reg { io: Some(io), .. })) if io.sending)
    }

    /// Submit `send[off..]` of `token`, which the caller just filled.
    fn submit_send(&mut self, token: usize, off: usize) {
        let zc_min = self.cio.as_ref().map_or(0, |c| c.zc_min);
        let Some(Some(Reg { gen, io: Some(io), .. })) = self.regs.get_mut(token) else {
            return;
        };
        io.send_start = off;
        io.send_off = off;
        io.sending = true;
        io.outcome = None;
        let e = next_send(io, user_data(token, *gen, KIND_SEND), zc_min);
        if io.zc {
            if let Some(c) = &mut self.cio {
                c.zc_requests += 1;
            }
        }
        self.queue(e);
    }

    /// Send (a copy of) up to [`SEND_MAX`] bytes of `data`; returns how many were taken.
    /// Nothing while a send of `token` is in flight.
    pub fn send(&mut self, token: usize, data: &[u8]) -> usize {
        let Some(io) = self.conn_io(token) else { return 0 };
        if io.sending || data.is_empty() {
            return 0;
        }
        let n = data.len().min(SEND_MAX);
        io.send.clear();
        io.send.reserve_exact(n);
        io.send.extend_from_slice(data.get(..n).unwrap_or_default());
        self.submit_send(token, 0);
        n
    }

    /// Send `buf[off..]` from `buf` itself (no copy): the buffer is the connection's until
    /// the send completes, then comes back through [`UringPoller::take_spent`]. Returns
    /// the buffer the connection held before (or `buf`, untouched, if a send is in flight
    /// or the token is not a completion connection), for the caller to reuse.
    pub fn send_owned(&mut self, token: usize, buf: Vec<u8>, off: usize) -> Vec<u8> {
        let Some(io) = self.conn_io(token) else { return buf };
        if io.sending || off >= buf.len() {
            return buf;
        }
        let old = std::mem::replace(&mut io.send, buf);
        self.submit_send(token, off);
        old
    }

    /// A send buffer given back after its send completed.
    pub fn take_spent(&mut self) -> Option<Vec<u8>> {
        self.cio.as_mut()?.spent.pop()
    }
}

/// A send completion of a live connection: continue a short send, or report the send
/// once its outcome is known and the kernel is done with its buffer.
pub(crate) fn complete_send(
    c: &mut CompletionIo,
    io: &mut ConnIo,
    token: usize,
    cqe: &cqueue::Entry,
    rearm: &mut Vec<squeue::Entry>,
    done: &mut Vec<Completion>,
) {
    let (res, flags) = (cqe.result(), cqe.flags());
    if !cqueue::more(flags) {
        io.ops = io.ops.saturating_sub(1);
    }
    if cqueue::notif(flags) {
        // The kernel let go of a zero-copy send's bytes.
        c.zc_notifs += 1;
        finish_if_done(c, io, token, done);
        return;
    }
    if io.zc && (res == -libc::EOPNOTSUPP || res == -libc::EINVAL) {
        // Zero-copy refused here: plain sends from now on, starting with these bytes.
        c.zc_min = 0;
        rearm.push(next_send(io, cqe.user_data(), 0));
        return;
    }
    if res < 0 || (res == 0 && io.send_off < io.send.len()) {
        let err = if res < 0 { -res } else { libc::EPIPE };
        io.outcome = Some((0, err));
    } else {
        io.send_off += res as usize;
        if io.send_off < io.send.len() {
            // A short send: the rest goes now, in order (a zero-copy send's earlier bytes
            // may still be the kernel's; the buffer does not move).
            rearm.push(next_send(io, cqe.user_data(), c.zc_min));
            c.zc_requests += u64::from(io.zc);
            return;
        }
        io.outcome = Some((io.send.len() - io.send_start, 0));
    }
    finish_if_done(c, io, token, done);
}

/// Report the send if its outcome is known and no request of it is still out.
fn finish_if_done(c: &mut CompletionIo, io: &mut ConnIo, token: usize, done: &mut Vec<Completion>) {
    if io.ops > 0 {
        return;
    }
    let Some((n, err)) = io.outcome.take() else {
        return;
    };
    io.sending = false;
    if io.send.capacity() > KEEP_SEND {
        c.spent.push(std::mem::take(&mut io.send));
    }
    done.push(Completion::Sent { token, n, err });
}

/// The request sending `io.send[io.send_off..]`, counted as out; zero-copy when `zc_min`
/// is set and the bytes reach it.
fn next_send(io: &mut ConnIo, ud: u64, zc_min: usize) -> squeue::Entry {
    let data = io.send.get(io.send_off..).unwrap_or_default();
    let (ptr, len) = (data.as_ptr(), data.len() as u32);
    let zc = zc_min > 0 && data.len() >= zc_min;
    io.zc = zc;
    io.ops += 1;
    match (io.file, zc) {
        (File::Fd(fd), false) => opcode::Send::new(types::Fd(fd), ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build(),
        (File::Fixed(i), false) => opcode::Send::new(types::Fixed(i), ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build(),
        (File::Fd(fd), true) => opcode::SendZc::new(types::Fd(fd), ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build(),
        (File::Fixed(i), true) => opcode::SendZc::new(types::Fixed(i), ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build(),
    }
    .user_data(ud)
}

#[cfg(test)]
#[path = "uring_send_tests.rs"]
mod tests;
