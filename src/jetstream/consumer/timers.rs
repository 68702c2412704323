//! Time-driven work: [`Consumer::tick`] runs what is due (the pending check that queues
//! redeliveries after ack wait or backoff and drops messages at max deliver, pull request
//! expiry and heartbeats, push idle heartbeats, the end of a pause, the pinned client's
//! TTL) and [`Consumer::next_deadline`] says when it is next needed. Push flow control
//! lives here too: when to ask, and the answer.

use super::engine::Consumer;
use super::wire;
use super::ConsumerEnv;
use crate::jetstream::api::config::AckPolicy;
use rand::Rng;
use std::time::{Duration, Instant};

const FC_DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// How often a push consumer without interest checks its deliver subject again.
const INTEREST_RECHECK: std::time::Duration = std::time::Duration::from_millis(20);

impl Consumer {
    /// When [`Consumer::tick`] next has work.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        // Deadlines already passed at the last call and still pending (a held delivery
        // that cannot go out, an inactivity the caller did not act on) are left out, so
        // a blocked consumer does not spin its shard.
        let ahead = |t: Instant| (t > self.last_now).then_some(t);
        let inactivity = self.inactive_threshold().and_then(|th| {
            ahead(if self.cfg.is_push() {
                self.last_interest + th
            } else {
                self.waiting_last + th
            })
        });
        [
            self.ptmr,
            self.held.as_ref().and_then(|h| ahead(h.not_before)),
            self.waiting_deadline(),
            self.hb_next,
            self.pause_end,
            self.pin_deadline,
            inactivity,
            // A push consumer nobody listens to yet looks for interest again soon (the
            // shard does not announce subscriptions to it).
            (self.cfg.is_push() && !self.active).then(|| self.last_now + INTEREST_RECHECK),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Run what is due at `now`, then deliver what became deliverable.
    pub fn tick(&mut self, env: &mut dyn ConsumerEnv, now: Instant) {
        self.last_now = now;
        if self.closed {
            return;
        }
        if self.ptmr.is_some_and(|t| now >= t) {
            self.check_pending(env, now);
        }
        if self.cfg.is_push() {
            let was_active = self.active;
            self.refresh_interest(env, now);
            if self.active && !was_active {
                self.wake = true;
            }
            if let Some(t) = self.hb_next.filter(|t| now >= *t) {
                let _ = t;
                if self.active {
                    let hb = wire::heartbeat(self.dseq.saturating_sub(1), self.sseq.saturating_sub(1), &self.fcid);
                    env.publish(&self.cfg.deliver_subject, "", Some(&hb), b"");
                    if self.cfg.ack_policy == AckPolicy::FlowControl && !self.pending.is_empty() && self.fcid.is_empty()
                    {
                        self.send_flow_control(env);
                    }
                }
                self.hb_next = Some(now + Self::dur(self.cfg.idle_heartbeat));
            }
        } else {
            self.process_waiting(false, env, now);
            // Requests whose requester still listens keep a pull consumer alive.
            if let Some(th) = self.inactive_threshold() {
                if now >= self.waiting_last + th && !self.waiting.is_empty() {
                    self.waiting_last = now;
                }
            }
        }
        if self.pause_end.is_some_and(|t| now >= t) {
            self.pause_end = None;
            self.pause_advisory(env);
            self.wake = true;
        }
        if self.pin_deadline.is_some_and(|t| now >= t) {
            let group = self.cfg.priority_groups.first().cloned().unwrap_or_default();
            if !self.pin_id.is_empty() {
                self.unassign_pin();
                self.unpinned_advisory(env, &group, "timeout");
            }
            self.pin_deadline = None;
            self.wake = true;
        }
        if self.held.as_ref().is_some_and(|h| now >= h.not_before) {
            self.wake = true;
        }
        if self.wake {
            self.poll(env, now);
        }
    }

    /// Max deliver reached for `seq` (after its last delivery's ack wait): drop it from
    /// pending, keep it counted as redelivered, and publish the advisory once.
    fn has_max_deliveries(&mut self, env: &mut dyn ConsumerEnv, seq: u64) -> bool {
        if self.maxdc == 0 {
            return false;
        }
        let dc = self.rdc.get(&seq).copied().unwrap_or(0) + 1;
        if dc < self.maxdc {
            return false;
        }
        self.max_deliveries_advisory(env, seq, dc);
        if self.maxp > 0 && self.pending.len() >= self.maxp {
            self.wake = true;
        }
        self.pending.remove(&seq);
        self.rdc.insert(seq, dc);
        self.dirty = true;
        true
    }

    /// Review pending deliveries: drop what the stream no longer has, queue what waited
    /// longer than its ack wait (or backoff step) for redelivery, re-arm the timer.
    pub(super) fn check_pending(&mut self, env: &mut dyn ConsumerEnv, now: Instant) {
        let ttl = self.cfg.ack_wait;
        if ttl <= 0 {
            self.ptmr = None;
            return;
        }
        let fseq = env.store().fast_state().first_seq;
        let wall = env.now_ns();
        let backoff = self.cfg.backoff.clone();
        let mut next = match backoff.last() {
            Some(b) => *b,
            None => i64::try_from(self.ack_wait(Duration::ZERO).as_nanos()).unwrap_or(i64::MAX),
        };
        let mut expired = Vec::new();
        let seqs: Vec<(u64, storage::Pending)> = self.pending.iter().map(|(s, p)| (*s, *p)).collect();
        for (seq, p) in seqs {
            if seq < fseq || seq <= self.asflr {
                self.pending.remove(&seq);
                self.rdc.remove(&seq);
                self.rdq.remove(&seq);
                self.asflr = self.asflr.max(seq);
                self.adflr = self.adflr.max(p.sequence);
                self.dirty = true;
                continue;
            }
            let elapsed = wall.saturating_sub(p.timestamp);
            let mut deadline = ttl;
            if !backoff.is_empty() {
                let last = backoff.len() - 1;
                let dc = usize::try_from(self.rdc.get(&seq).copied().unwrap_or(0)).unwrap_or(usize::MAX);
                let (cur, nbi) = if dc >= last { (last, last) } else { (dc, dc + 1) };
                deadline = backoff.get(cur).copied().unwrap_or(ttl);
                if let Some(nb) = backoff.get(nbi) {
                    next = next.min(*nb);
                }
            }
            if elapsed >= deadline {
                if !self.rdq.contains(&seq) && !self.has_max_deliveries(env, seq) {
                    expired.push(seq);
                }
            } else if deadline.saturating_sub(elapsed) < next {
                next = deadline.saturating_sub(elapsed);
            }
        }
        if let Some(first) = expired.first().and_then(|s| self.pending.get(s)) {
            // Redelivery restarts the clock, keeping the order between them.
            let off = wall.saturating_sub(first.timestamp);
            for s in &expired {
                if let Some(p) = self.pending.get_mut(s) {
                    p.timestamp = p.timestamp.saturating_add(off);
                }
                self.rdq.insert(*s);
            }
            self.dirty = true;
            self.wake = true;
        }
        if self.pending.is_empty() {
            self.ptmr = None;
            self.rdq.clear();
            self.adflr = self.dseq - 1;
            self.asflr = self.sseq - 1;
        } else {
            self.ptmr = Some(now + Self::dur(next.max(0)));
        }
    }

    /// Should a flow control request go out now?
    pub(super) fn need_flow_control(&mut self, sz: u64) -> bool {
        if self.maxpb == 0 {
            return false;
        }
        if self.fcid.is_empty() && self.pbytes > self.maxpb / 2 {
            return true;
        }
        if self.fcid.is_empty()
            && self.cfg.ack_policy == AckPolicy::FlowControl
            && self.maxp > 0
            && self.pending.len() >= self.maxp
        {
            return true;
        }
        if !self.fcid.is_empty() && self.pbytes.saturating_sub(self.fcsz) >= self.maxpb {
            self.fcsz += sz;
        }
        false
    }

    /// Send `100 FlowControl Request` with a fresh `$JS.FC.<S>.<C>.<id>` reply.
    pub(super) fn send_flow_control(&mut self, env: &mut dyn ConsumerEnv) {
        if !self.cfg.is_push() {
            return;
        }
        let mut rng = rand::thread_rng();
        let id: String = (0..4)
            .map(|_| char::from(FC_DIGITS.get(rng.gen_range(0..62)).copied().unwrap_or(b'0')))
            .collect();
        self.fcid = format!("$JS.FC.{}.{}.{id}", self.stream, self.name);
        self.fcsz = self.pbytes;
        let fcid = self.fcid.clone();
        env.publish(&self.cfg.deliver_subject, &fcid, Some(wire::FLOW_CONTROL), b"");
    }

    /// A flow-control reply (`$JS.FC.<S>.<C>.<id>`) with its headers: with `ack_policy: flow_control` its
    /// `Nats-Last-Stream` / `Nats-Last-Consumer` acknowledge everything up to them.
    /// Returns the stream sequences acknowledged.
    pub fn on_flow_control_reply(
        &mut self,
        env: &mut dyn ConsumerEnv,
        subject: &str,
        header: Option<&[u8]>,
        now: Instant,
    ) -> Vec<u64> {
        self.last_now = now;
        if self.fcid.is_empty() || subject != self.fcid {
            return Vec::new();
        }
        if self.maxpb < self.pblimit {
            self.maxpb = (self.maxpb * 2).min(self.pblimit);
        }
        self.pbytes = self.pbytes.saturating_sub(self.fcsz);
        self.fcid.clear();
        self.fcsz = 0;
        self.wake = true;
        if self.cfg.ack_policy != AckPolicy::FlowControl {
            return Vec::new();
        }
        let num = |k: &str| {
            header
                .and_then(|h| wire::header_value(h, k))
                .and_then(|v| v.parse::<i64>().ok())
        };
        match (num("Nats-Last-Stream"), num("Nats-Last-Consumer")) {
            (Some(s), c) if s > 0 => {
                let c = u64::try_from(c.unwrap_or(0).max(0)).unwrap_or(0);
                self.ack_msg(env, s as u64, c, 1, false).unwrap_or_default()
            }
            _ => Vec::new(),
        }
    }
}
