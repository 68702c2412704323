//! Delivery: [`Consumer::poll`] picks the next message (redeliveries first, lowest stream
//! sequence first; then the last-per-subject start list; then new messages matching the
//! filter), stops at max ack pending, paused, no push interest or a flow-control stall,
//! holds a message back for replay timing or the rate limit, and sends it with its ack
//! subject to the deliver subject or the chosen pull request.

use super::engine::{Consumer, Held};
use super::wire::{self, AckInfo};
use super::ConsumerEnv;
use crate::jetstream::api::config::{AckPolicy, PriorityPolicy};
use std::time::{Duration, Instant};
use storage::{StoreError, StoredMsg};

/// Deliveries per [`Consumer::poll`] call.
const POLL_BUDGET: usize = 256;

enum Next {
    Msg(StoredMsg, u64),
    /// Nothing now; whether this is the end of the stream (not a max ack pending stall).
    None {
        eos: bool,
    },
}

enum Step {
    Sent,
    Stop {
        eos: bool,
    },
    /// A held delivery is not due yet.
    Wait,
}

impl Consumer {
    /// Deliver what can be delivered now, at most a bounded amount; true when more is left.
    pub fn poll(&mut self, env: &mut dyn ConsumerEnv, now: Instant) -> bool {
        self.last_now = now;
        if self.closed {
            return false;
        }
        self.wake = false;
        if self.cfg.is_push() {
            self.refresh_interest(env, now);
        }
        for _ in 0..POLL_BUDGET {
            match self.step(env, now) {
                Step::Sent => {}
                Step::Wait => return false,
                Step::Stop { eos } => {
                    if self.replay && self.sseq > self.replay_last_seq {
                        self.replay = false;
                    }
                    if !self.cfg.is_push() {
                        self.process_waiting(eos, env, now);
                    }
                    return false;
                }
            }
        }
        self.wake = true;
        true
    }

    /// Push: is someone subscribed on exactly the deliver subject (in the deliver group)?
    pub(super) fn bound(&self, env: &mut dyn ConsumerEnv) -> bool {
        env.has_delivery_interest(&self.cfg.deliver_subject, &self.cfg.deliver_group)
    }

    /// Push: read the deliver subject's interest.
    pub(super) fn refresh_interest(&mut self, env: &mut dyn ConsumerEnv, now: Instant) {
        let active = self.bound(env);
        if active {
            self.last_interest = now;
        }
        self.active = active;
    }

    fn step(&mut self, env: &mut dyn ConsumerEnv, now: Instant) -> Step {
        if self.paused(now) {
            return Step::Stop { eos: true };
        }
        if self.cfg.is_push() {
            if !self.active || (self.maxpb > 0 && self.pbytes > self.maxpb) {
                return Step::Stop { eos: true };
            }
        } else if self.waiting.is_empty() && self.held.is_none() {
            return Step::Stop { eos: true };
        }
        if let Some(h) = self.held.take() {
            if now < h.not_before {
                self.held = Some(h);
                return Step::Wait;
            }
            self.send(env, h, now);
            return Step::Sent;
        }
        let (msg, dc) = match self.next_msg(env) {
            Next::Msg(m, dc) => (m, dc),
            Next::None { eos } => return Step::Stop { eos },
        };
        let pending = self.num_pending(env);
        let info = AckInfo {
            deliveries: dc,
            stream_seq: msg.seq,
            consumer_seq: self.dseq,
            ts: msg.ts,
            pending,
        };
        let reply = wire::ack_subject(&self.stream, &self.name, &info);
        let (mut hdr, payload) = if self.cfg.headers_only {
            (headers_only(&msg.headers, msg.payload.len()), bytes::Bytes::new())
        } else {
            (msg.headers.to_vec(), msg.payload.clone())
        };
        let mut sz = (msg.subject.len() + reply.len() + hdr.len() + payload.len()) as i64;
        let (to, req_left) = if self.cfg.is_push() {
            (String::new(), None)
        } else if let Some(t) = self.next_waiting(sz, env, now) {
            if self.cfg.priority_policy == PriorityPolicy::PinnedClient {
                hdr = wire::add_header(&hdr, wire::PIN_ID, &self.pin_id);
                sz = (msg.subject.len() + reply.len() + hdr.len() + payload.len()) as i64;
            }
            self.touch_request(&t, now);
            (t.reply, Some((t.n, t.b)))
        } else {
            // Nobody to take it: put it back.
            if dc == 1 && msg.seq + 1 == self.sseq {
                self.sseq -= 1;
            } else {
                self.undo_delivery_count(msg.seq);
                self.rdq.insert(msg.seq);
            }
            return Step::Stop { eos: true };
        };
        let mut delay = Duration::ZERO;
        if self.replay && self.lts > 0 {
            let gap = Self::dur(msg.ts.saturating_sub(self.lts));
            if gap > Duration::from_millis(1) {
                delay = gap;
            }
        }
        self.lts = msg.ts;
        if let Some(rl) = &mut self.rate {
            delay = delay.max(rl.reserve(now, usize::try_from(sz).unwrap_or(0)));
        }
        let held = Held {
            to,
            msg,
            reply,
            hdr,
            payload,
            not_before: now + delay,
            req_left,
        };
        if delay > Duration::ZERO {
            self.held = Some(held);
            return Step::Wait;
        }
        self.send(env, held, now);
        Step::Sent
    }

    /// The next message to deliver and its delivery count.
    fn next_msg(&mut self, env: &mut dyn ConsumerEnv) -> Next {
        while let Some(seq) = self.rdq.pop_first() {
            let redeliveries = self.rdc.entry(seq).or_insert(0);
            *redeliveries += 1;
            let dc = *redeliveries + 1;
            if self.maxdc > 0 && dc > self.maxdc {
                if dc == self.maxdc + 1 {
                    self.max_deliveries_advisory(env, seq, dc - 1);
                }
                self.pending.remove(&seq);
                self.dirty = true;
                continue;
            }
            match env.store().load_msg(seq) {
                Ok(m) => return Next::Msg(m, dc),
                Err(_) => {
                    self.undo_delivery_count(seq);
                    if let Some(p) = self.pending.get(&seq).copied() {
                        self.terminate(env, seq, p.sequence, dc - 1, "Unacknowledged message was deleted");
                    }
                }
            }
        }
        if self.maxp > 0 && self.pending.len() >= self.maxp {
            return Next::None { eos: false };
        }
        while let Some(l) = &mut self.lss {
            let Some(seq) = l.seqs.pop_front() else {
                self.lss = None;
                break;
            };
            if l.seqs.is_empty() {
                self.sseq = l.resume;
                self.lss = None;
            } else {
                self.sseq = seq;
            }
            self.sseq += 1;
            if let Ok(m) = env.store().load_msg(seq) {
                return Next::Msg(m, 1);
            }
        }
        let store = env.store();
        // Only what the store holds durably is delivered (file streams acknowledge after
        // their sync): a message a consumer has seen never vanishes in a crash. The
        // consumer is woken again when the sync completes.
        let durable = store.durable_seq();
        if self.sseq > durable && durable < store.fast_state().last_seq {
            return Next::None { eos: false };
        }
        match store.load_next_msg(&self.filter, self.sseq) {
            Ok(m) if m.seq > durable => Next::None { eos: false },
            Ok(m) => {
                if m.seq >= self.sseq {
                    // The count from the old start less this message is the count from
                    // the new one (nothing between them matches the filter).
                    if let Some((n, at, last)) = self.np_cache.get() {
                        if at == self.sseq {
                            self.np_cache.set(Some((n.saturating_sub(1), m.seq + 1, last)));
                        }
                    }
                    self.sseq = m.seq + 1;
                }
                Next::Msg(m, 1)
            }
            Err(StoreError::Eof) => {
                let last = store.fast_state().last_seq;
                if last >= self.sseq {
                    if let Some((_, at, l)) = self.np_cache.get() {
                        if at == self.sseq {
                            self.np_cache.set(Some((0, last + 1, l)));
                        }
                    }
                    self.sseq = last + 1;
                    self.dirty = true;
                }
                Next::None { eos: true }
            }
            Err(_) => Next::None { eos: true },
        }
    }

    pub(super) fn undo_delivery_count(&mut self, seq: u64) {
        if let Some(r) = self.rdc.get_mut(&seq) {
            *r = r.saturating_sub(1);
            if *r == 0 {
                self.rdc.remove(&seq);
            }
        }
    }

    /// Send a prepared delivery and account for it.
    fn send(&mut self, env: &mut dyn ConsumerEnv, h: Held, now: Instant) {
        let dseq = self.dseq;
        self.dseq += 1;
        let seq = h.msg.seq;
        let to_len = if h.to.is_empty() {
            self.cfg.deliver_subject.len()
        } else {
            h.to.len()
        };
        let psz = (to_len + h.reply.len() + h.hdr.len() + h.payload.len()) as u64;
        if self.maxpb > 0 {
            self.pbytes += psz;
        }
        let wall = env.now_ns();
        self.ldt = wall;
        self.delivered.consumer = self.delivered.consumer.max(dseq);
        self.delivered.stream = self.delivered.stream.max(seq);
        self.dirty = true;
        if self.cfg.ack_policy == AckPolicy::None {
            self.adflr = dseq;
            self.asflr = seq;
        } else {
            self.track_pending(seq, dseq, wall, now);
        }
        let hdr = (!h.hdr.is_empty()).then_some(h.hdr.as_slice());
        let to = if h.to.is_empty() {
            self.cfg.deliver_subject.as_str()
        } else {
            h.to.as_str()
        };
        env.deliver(to, &h.msg.subject, &h.reply, hdr, &h.payload);
        if self.maxpb > 0 && self.need_flow_control(psz) {
            self.send_flow_control(env);
        }
        if !self.cfg.is_push() {
            self.waiting_last = now;
        }
        if let Some((n, b)) = h.req_left {
            if n <= 0 && b > 0 {
                env.publish(
                    &h.to,
                    "",
                    Some(&wire::status_pending(409, "Batch Completed", n, b)),
                    b"",
                );
            }
        }
        if self.cfg.is_push() && self.cfg.idle_heartbeat > 0 {
            self.hb_next = Some(now + Self::dur(self.cfg.idle_heartbeat));
        }
        if self.cfg.ack_policy == AckPolicy::None {
            self.note_acked([seq]);
        }
    }

    /// Record a delivery awaiting its ack and arm the redelivery timer.
    pub(super) fn track_pending(&mut self, seq: u64, dseq: u64, wall: i64, now: Instant) {
        self.pending
            .entry(seq)
            .and_modify(|p| p.timestamp = wall)
            .or_insert(storage::Pending {
                sequence: dseq,
                timestamp: wall,
            });
        let mut delay = self.ack_wait(Duration::ZERO);
        if !self.cfg.backoff.is_empty() {
            let i = usize::try_from(self.rdc.get(&seq).copied().unwrap_or(0))
                .unwrap_or(usize::MAX)
                .min(self.cfg.backoff.len() - 1);
            if let Some(b) = self.cfg.backoff.get(i) {
                delay = self.ack_wait(Self::dur(*b));
            }
        }
        let deadline = now + delay;
        if self.ptmr.is_none_or(|t| t > deadline) {
            self.ptmr = Some(deadline);
        }
    }
}

/// Headers-only delivery: the message's headers (or a bare `NATS/1.0`) plus
/// `Nats-Msg-Size: <payload length>`.
pub(super) fn headers_only(hdr: &[u8], payload_len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(hdr.len() + 40);
    if hdr.len() >= 2 {
        out.extend_from_slice(hdr.get(..hdr.len() - 2).unwrap_or(hdr));
    } else {
        out.extend_from_slice(b"NATS/1.0\r\n");
    }
    out.extend_from_slice(format!("{}: {payload_len}\r\n\r\n", wire::MSG_SIZE).as_bytes());
    out
}
