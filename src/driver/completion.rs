//! The event loop's completion I/O (io_uring): plain TCP connections whose bytes arrive
//! as receive completions and whose output goes out as submitted sends (see
//! `shards::uring_io`). The core sees the same calls as on the readiness path: `input`
//! with what arrived, `written` once bytes really went, `disconnected` at the end.

use super::event_loop::{Completion, EventLoop, Poller};
use crate::core::client::{ClosedState, ConnKey};
use crate::core::shard::ConnStatus;
use std::time::Instant;

impl<P: Poller> EventLoop<P> {
    /// Handle the completions of the last wait. Returns whether there were any.
    pub(super) fn on_completions(&mut self, now: Instant) -> bool {
        if self.done.is_empty() {
            return false;
        }
        let mut list = std::mem::take(&mut self.done);
        for ev in list.drain(..) {
            match ev {
                Completion::Data { token, bid, len } => {
                    self.on_data(token, bid, len, now);
                    self.poller.recycle(bid);
                }
                Completion::RecvEnd { token, err } => {
                    let Some(c) = self.conns.get_mut(token) else { continue };
                    if c.recv_paused || !c.held.is_empty() {
                        // Bytes before the end are still held: the end waits for them.
                        c.held_end = Some(err);
                    } else {
                        self.recv_ended(token, err, now);
                    }
                }
                Completion::Readable { token } => {
                    // A TLS or WebSocket connection: read it now, in arrival order with
                    // the received bytes around it.
                    let Some(c) = self.conns.get_mut(token) else { continue };
                    c.readable = true;
                    self.read_conn(token, now);
                }
                Completion::Sent { token, n, err } => {
                    let Some(key) = self.conns.get(token).and_then(|c| c.key) else {
                        continue;
                    };
                    if err != 0 {
                        self.core.disconnected(key, ClosedState::WriteError, now);
                    } else {
                        self.core.written(key, n, now);
                    }
                    // Send more, or finish a close that waited for this send.
                    self.wake_list.push(key);
                }
            }
        }
        self.done = list;
        // Send buffers back from completed sends: lent output chunks return to the pool.
        while let Some(v) = self.poller.take_spent() {
            crate::core::outbuf::recycle_chunk(v);
        }
        true
    }

    /// Bytes for `t`: to the core, or held while the core has paused its reading (the
    /// receive is stopped then, as a readiness loop stops reading).
    fn on_data(&mut self, t: usize, bid: u16, len: usize, now: Instant) {
        let Some(c) = self.conns.get_mut(t) else { return };
        let Some(key) = c.key else { return };
        match self.core.status(key) {
            ConnStatus::Open { read: true } if c.held.is_empty() && c.held_end.is_none() => {
                let data = self.poller.data(bid, len);
                self.core.input(key, data, now);
            }
            ConnStatus::Open { .. } => {
                c.held.extend_from_slice(self.poller.data(bid, len));
                if !c.recv_paused {
                    c.recv_paused = true;
                    self.poller.pause_recv(t);
                }
            }
            // Closing: what arrives now is not read, as on the readiness path.
            _ => {}
        }
    }

    /// The core reads `key` again: hand it what was held, then receive again.
    pub(super) fn resume_completion(&mut self, t: usize, key: ConnKey, now: Instant) {
        let Some(c) = self.conns.get_mut(t) else { return };
        let held = std::mem::take(&mut c.held);
        let end = c.held_end.take();
        let paused = std::mem::replace(&mut c.recv_paused, false);
        if !held.is_empty() {
            self.core.input(key, &held, now);
        }
        match end {
            Some(err) => self.recv_ended(t, err, now),
            None if paused => self.poller.resume_recv(t),
            None => {}
        }
    }

    /// The receive of `t` ended: the peer closed (`err` 0) or the socket failed.
    fn recv_ended(&mut self, t: usize, err: i32, now: Instant) {
        if err == 0 {
            self.on_eof(t, now);
            return;
        }
        if let Some(key) = self.conns.get(t).and_then(|c| c.key) {
            self.core.disconnected(key, ClosedState::ReadError, now);
        }
    }
}
