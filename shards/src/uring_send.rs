//! The send side of completion I/O ([`crate::uring_io`]): at most one send in flight per
//! connection, from a buffer the connection owns, continued here when it comes back
//! short; the caller hears of it once all of it went (or it failed).
//!
//! **Zero-copy sends** (`IORING_OP_SEND_ZC`, Linux 6.0): with a threshold set
//! ([`UringPoller::set_send_zc`]), a send of at least that many bytes lets the NIC read the
//! connection's buffer instead of the kernel copying it. Each such request completes twice:
//! its result (flagged `MORE`), then a notification once the kernel no longer reads the
//! buffer, which for TCP is when the peer acknowledged the bytes. Waiting for that before
//! the next send would hold each connection to one send per round trip, so:
//! - the connection hears of its send at the result, as with a plain send, and goes on;
//! - its buffer moves to a **hold** that counts the requests not yet notified, and goes
//!   back (through [`UringPoller::take_spent`]) when the last notification comes;
//! - each request gets user data of its own (kind `KIND_ZC`, a slot of [`ZcTable`]),
//!   so a notification names exactly the request it ends, whatever order they come in.
//!
//! A removed connection's hold waits for its notifications the same way. A kernel or
//! socket that refuses zero-copy (`EOPNOTSUPP`, `EINVAL`) turns it off for the ring; the
//! refused bytes go again as a plain request of the same send.

use crate::uring::{decode, user_data, Reg, UringPoller, KIND_SEND, KIND_ZC};
use crate::uring_io::{ConnIo, File};
use crate::Completion;
use io_uring::{cqueue, opcode, squeue, types};

/// Most bytes one send takes from the caller.
pub const SEND_MAX: usize = 256 * 1024;
/// A connection keeps a send buffer up to this size between sends; larger ones go back
/// (through [`UringPoller::take_spent`]) once their send completes, so an idle
/// connection holds little.
const KEEP_SEND: usize = 4 * 1024;

/// A `$op` (`Send` or `SendZc`) of `$data` on `$file`, by descriptor or registered slot.
macro_rules! send_sqe {
    ($op:ident, $file:expr, $data:expr) => {{
        let data: &[u8] = $data;
        let (ptr, len) = (data.as_ptr(), data.len() as u32);
        match $file {
            File::Fd(fd) => opcode::$op::new(types::Fd(fd), ptr, len)
                .flags(libc::MSG_NOSIGNAL)
                .build(),
            File::Fixed(i) => opcode::$op::new(types::Fixed(i), ptr, len)
                .flags(libc::MSG_NOSIGNAL)
                .build(),
        }
    }};
}

/// One request of a zero-copy send: whose it is, and which hold keeps its bytes.
struct ZcReq {
    token: usize,
    gen: u32,
    hold: u32,
}

/// A zero-copy send's buffer, kept until the kernel let go of it.
#[derive(Default)]
struct Hold {
    /// The buffer, once its connection is done with it (empty before).
    buf: Vec<u8>,
    /// Requests using it whose last completion has not come.
    refs: u32,
    /// The connection is done with it (its send ended, or it was removed).
    released: bool,
}

/// The ring's zero-copy state: threshold, requests in flight and holds.
#[derive(Default)]
pub(crate) struct ZcTable {
    /// Sends of at least this many bytes go zero-copy (0: none).
    pub(crate) min: usize,
    reqs: Vec<Option<ZcReq>>,
    free_reqs: Vec<u32>,
    holds: Vec<Hold>,
    free_holds: Vec<u32>,
    /// Zero-copy requests submitted, and notifications received, so far.
    pub(crate) requests: u64,
    pub(crate) notifs: u64,
}

impl ZcTable {
    fn new_hold(&mut self) -> u32 {
        if let Some(h) = self.free_holds.pop() {
            return h;
        }
        self.holds.push(Hold::default());
        (self.holds.len() - 1) as u32
    }

    fn new_req(&mut self, r: ZcReq) -> u32 {
        if let Some(h) = self.holds.get_mut(r.hold as usize) {
            h.refs += 1;
        }
        match self.free_reqs.pop() {
            Some(i) => {
                if let Some(slot) = self.reqs.get_mut(i as usize) {
                    *slot = Some(r);
                }
                i
            }
            None => {
                self.reqs.push(Some(r));
                (self.reqs.len() - 1) as u32
            }
        }
    }

    /// The connection is done with `hold`'s send: the buffer waits there for the
    /// requests still out. Returns it at once if none is.
    fn release(&mut self, hold: u32, buf: Vec<u8>, spent: &mut Vec<Vec<u8>>) {
        let Some(h) = self.holds.get_mut(hold as usize) else {
            return;
        };
        h.buf = buf;
        h.released = true;
        self.settle(hold, spent);
    }

    /// Request `slot` had its last completion.
    fn finish_req(&mut self, slot: u32, spent: &mut Vec<Vec<u8>>) {
        let Some(r) = self.reqs.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        self.free_reqs.push(slot);
        if let Some(h) = self.holds.get_mut(r.hold as usize) {
            h.refs = h.refs.saturating_sub(1);
        }
        self.settle(r.hold, spent);
    }

    /// Free `hold` if its connection is done with it and the kernel too.
    fn settle(&mut self, hold: u32, spent: &mut Vec<Vec<u8>>) {
        let Some(h) = self.holds.get_mut(hold as usize) else {
            return;
        };
        if h.released && h.refs == 0 {
            let buf = std::mem::take(&mut h.buf);
            h.released = false;
            self.free_holds.push(hold);
            if buf.capacity() > KEEP_SEND {
                spent.push(buf);
            }
        }
    }

    /// Requests whose last completion has not come.
    pub(crate) fn live(&self) -> usize {
        self.reqs.len() - self.free_reqs.len()
    }
}

impl UringPoller {
    /// Send buffers of at least `min` bytes zero-copy from now on (0: never). Use it where
    /// the NIC can read user memory (over loopback the kernel copies anyway, and the
    /// extra completion only costs).
    pub fn set_send_zc(&mut self, min: usize) {
        if let Some(c) = &mut self.cio {
            c.zc.min = min;
        }
    }

    /// The zero-copy threshold in force (0: off, or turned off by a refusal).
    pub fn send_zc(&self) -> usize {
        self.cio.as_ref().map_or(0, |c| c.zc.min)
    }

    /// Zero-copy requests submitted so far, notifications of them received, and requests
    /// whose last completion has not come.
    pub fn zc_counts(&self) -> (u64, u64, usize) {
        self.cio
            .as_ref()
            .map_or((0, 0, 0), |c| (c.zc.requests, c.zc.notifs, c.zc.live()))
    }

    /// A send of `token` is in flight.
    pub fn send_busy(&self, token: usize) -> bool {
        matches!(self.regs.get(token), Some(Some(Reg { io: Some(io), .. })) if io.sending)
    }

    /// Submit `send[off..]` of `token`, which the caller just filled.
    fn submit_send(&mut self, token: usize, off: usize) {
        let Some(c) = &mut self.cio else { return };
        let Some(Some(Reg { gen, io: Some(io), .. })) = self.regs.get_mut(token) else {
            return;
        };
        io.send_start = off;
        io.send_off = off;
        io.sending = true;
        let len = io.send.len() - off;
        let e = if c.zc.min > 0 && len >= c.zc.min {
            io.hold = Some(c.zc.new_hold());
            zc_request(&mut c.zc, io, token, *gen)
        } else {
            let data = io.send.get(off..).unwrap_or_default();
            plain_entry(io.file, data, user_data(token, *gen, KIND_SEND))
        };
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

    /// A removed connection's zero-copy send: its buffer waits in the hold for the
    /// requests still out. False if the send was a plain one.
    pub(crate) fn forget_zc(&mut self, io: &mut ConnIo) -> bool {
        let (Some(c), Some(hold)) = (self.cio.as_mut(), io.hold.take()) else {
            return false;
        };
        c.zc.release(hold, std::mem::take(&mut io.send), &mut c.spent);
        true
    }

    /// A plain send's completion.
    pub(crate) fn complete_plain(
        &mut self,
        token: usize,
        gen: u32,
        cqe: &cqueue::Entry,
        rearm: &mut Vec<squeue::Entry>,
        done: &mut Vec<Completion>,
    ) {
        let Some(c) = &mut self.cio else { return };
        let io = match self.regs.get_mut(token) {
            Some(Some(Reg {
                gen: g, io: Some(io), ..
            })) if *g == gen => io,
            _ => {
                // An earlier registration of this token: its buffer can go.
                c.graveyard.remove(&cqe.user_data());
                return;
            }
        };
        match step(io, cqe.result()) {
            Step::More => {
                let data = io.send.get(io.send_off..).unwrap_or_default();
                rearm.push(plain_entry(io.file, data, cqe.user_data()));
            }
            Step::Done(n, err) => {
                io.sending = false;
                if io.send.capacity() > KEEP_SEND {
                    c.spent.push(std::mem::take(&mut io.send));
                }
                done.push(Completion::Sent { token, n, err });
            }
        }
    }

    /// A completion of a zero-copy send's request: its result (go on with the send, as
    /// a plain one would) or its notification (the kernel let go of the bytes).
    pub(crate) fn complete_zc(
        &mut self,
        cqe: &cqueue::Entry,
        rearm: &mut Vec<squeue::Entry>,
        done: &mut Vec<Completion>,
    ) {
        let Some(c) = &mut self.cio else { return };
        let (slot, _, _) = decode(cqe.user_data());
        let slot = slot as u32;
        let (res, flags) = (cqe.result(), cqe.flags());
        let last = !cqueue::more(flags);
        // A result goes to the connection if it is still the one that sent; a
        // notification only counts (the hold learns of it below).
        let sender = match c.zc.reqs.get(slot as usize).and_then(Option::as_ref) {
            Some(&ZcReq { token, gen, hold }) if !cqueue::notif(flags) => match self.regs.get_mut(token) {
                Some(Some(Reg {
                    gen: g, io: Some(io), ..
                })) if *g == gen && io.hold == Some(hold) => Some((token, gen, hold, io)),
                _ => None,
            },
            _ => None,
        };
        if cqueue::notif(flags) {
            c.zc.notifs += 1;
        }
        if let Some((token, gen, hold, io)) = sender {
            // Refused here: plain requests from now on, these bytes first.
            let refused = c.zc.min > 0 && (res == -libc::EOPNOTSUPP || res == -libc::EINVAL);
            if refused {
                c.zc.min = 0;
            }
            match if refused { Step::More } else { step(io, res) } {
                Step::More => rearm.push(zc_request(&mut c.zc, io, token, gen)),
                Step::Done(n, err) => {
                    io.sending = false;
                    io.hold = None;
                    c.zc.release(hold, std::mem::take(&mut io.send), &mut c.spent);
                    done.push(Completion::Sent { token, n, err });
                }
            }
        }
        if last {
            c.zc.finish_req(slot, &mut c.spent);
        }
    }
}

/// What a send's result means for it.
enum Step {
    /// Part went: the rest must follow.
    More,
    /// It ended: all `n` bytes went (errno 0), or it failed.
    Done(usize, i32),
}

fn step(io: &mut ConnIo, res: i32) -> Step {
    if res < 0 || (res == 0 && io.send_off < io.send.len()) {
        let err = if res < 0 { -res } else { libc::EPIPE };
        return Step::Done(0, err);
    }
    io.send_off += res as usize;
    if io.send_off < io.send.len() {
        return Step::More;
    }
    Step::Done(io.send.len() - io.send_start, 0)
}

/// The next request of `io`'s zero-copy send (`io.hold` set): `send[send_off..]`, under a
/// slot of its own; zero-copy unless the ring turned it off.
fn zc_request(zc: &mut ZcTable, io: &mut ConnIo, token: usize, gen: u32) -> squeue::Entry {
    let hold = io.hold.unwrap_or_default();
    let slot = zc.new_req(ZcReq { token, gen, hold });
    let ud = user_data(slot as usize, 0, KIND_ZC);
    io.zc_ud = ud;
    let data = io.send.get(io.send_off..).unwrap_or_default();
    if zc.min == 0 {
        return plain_entry(io.file, data, ud);
    }
    zc.requests += 1;
    send_sqe!(SendZc, io.file, data).user_data(ud)
}

fn plain_entry(file: File, data: &[u8], ud: u64) -> squeue::Entry {
    send_sqe!(Send, file, data).user_data(ud)
}

#[cfg(test)]
#[path = "uring_send_tests.rs"]
mod tests;
