//! The ack protocol: acks (`+ACK`, `+OK`, empty), `-NAK` with an optional delay, `+WPI`,
//! `+NXT` (ack and pull), `+TERM [reason]`; acks for stale or unknown sequences are
//! ignored; an ack sent as a request is answered with an empty message. Ack floors move
//! as the reference moves them; sampled acks publish the ack metric.

use super::engine::Consumer;
use super::wire::{self, AckKind};
use super::ConsumerEnv;
use crate::jetstream::api::config::AckPolicy;
use rand::Rng;
use std::time::{Duration, Instant};

impl Consumer {
    /// A message on the ack subject, with its reply (a double ack gets an empty answer).
    /// Returns the stream sequences acknowledged, for retention.
    pub fn on_ack(
        &mut self,
        env: &mut dyn ConsumerEnv,
        subject: &str,
        reply: &str,
        body: &[u8],
        now: Instant,
    ) -> Vec<u64> {
        self.last_now = now;
        if self.closed {
            return Vec::new();
        }
        let Some(info) = wire::parse_ack_subject(subject).filter(|a| a.stream_seq != 0) else {
            return Vec::new();
        };
        let (sseq, dseq, dc) = (info.stream_seq, info.consumer_seq, info.deliveries);
        let mut answer = true;
        let mut acked = Vec::new();
        match wire::parse_ack(body) {
            AckKind::Ack => match self.ack_msg(env, sseq, dseq, dc, true) {
                Some(seqs) => acked = seqs,
                None => answer = false,
            },
            AckKind::Next(req) => {
                if let Some(seqs) = self.ack_msg(env, sseq, dseq, dc, true) {
                    acked = seqs;
                }
                self.on_pull(env, reply, None, req, now);
                answer = false;
            }
            AckKind::Nak(delay) => self.nak(env, sseq, dseq, dc, delay, now),
            AckKind::Progress => {
                let wall = env.now_ns();
                if let Some(p) = self.pending.get_mut(&sseq) {
                    p.timestamp = wall;
                    self.dirty = true;
                }
            }
            AckKind::Term(reason) => match self.ack_msg(env, sseq, dseq, dc, false) {
                Some(seqs) => {
                    acked = seqs;
                    self.terminated_advisory(env, sseq, dseq, dc, &reason);
                }
                None => {
                    self.terminated_advisory(env, sseq, dseq, dc, &reason);
                    answer = false;
                }
            },
            AckKind::Unknown => {}
        }
        if answer && !reply.is_empty() {
            env.publish(reply, "", None, b"");
        }
        acked
    }

    /// Process one ack. `None` when it was refused (beyond what was delivered);
    /// otherwise the stream sequences it acknowledged.
    pub(super) fn ack_msg(
        &mut self,
        env: &mut dyn ConsumerEnv,
        sseq: u64,
        dseq: u64,
        dc: u64,
        sample: bool,
    ) -> Option<Vec<u64>> {
        if sseq >= self.sseq && !self.cfg.flow_control {
            return None;
        }
        let mut out = Vec::new();
        let was_full = self.maxp > 0 && self.pending.len() >= self.maxp;
        match self.cfg.ack_policy {
            AckPolicy::Explicit => {
                if let Some(p) = self.pending.get(&sseq).copied() {
                    if sample {
                        self.sample_ack(env, sseq, dseq, dc, p.timestamp);
                    }
                    self.pending.remove(&sseq);
                    let d = p.sequence;
                    if self.pending.is_empty() {
                        self.adflr = self.dseq - 1;
                        self.asflr = self.sseq - 1;
                    } else if d == self.adflr + 1 {
                        self.adflr = d;
                        self.asflr = sseq;
                        let next = self.pending.range(sseq.saturating_add(1)..).next();
                        if let Some((s, q)) = next.filter(|(s, _)| **s < self.sseq) {
                            if q.sequence > 0 {
                                self.adflr = q.sequence - 1;
                                self.asflr = s - 1;
                            }
                        }
                    }
                }
                self.rdc.remove(&sseq);
                self.rdq.remove(&sseq);
                out.push(sseq);
            }
            AckPolicy::All | AckPolicy::FlowControl => {
                if dseq <= self.adflr || sseq <= self.asflr {
                    return Some(out);
                }
                self.adflr = dseq;
                self.asflr = sseq;
                // What this consumer held in the range: its pending deliveries (the rest
                // was acknowledged before, or never matched its filter).
                let gone: Vec<u64> = self.pending.range(..=sseq).map(|(s, _)| *s).collect();
                for s in &gone {
                    self.pending.remove(s);
                }
                self.rdc.retain(|s, _| *s > sseq);
                self.rdq.retain(|s| *s > sseq);
                out = gone;
                if out.last() != Some(&sseq) {
                    out.push(sseq);
                }
            }
            AckPolicy::None => return Some(out),
        }
        self.lat = env.now_ns();
        self.dirty = true;
        if was_full {
            self.wake = true;
        }
        Some(out)
    }

    fn nak(&mut self, env: &mut dyn ConsumerEnv, sseq: u64, dseq: u64, dc: u64, delay: Option<i64>, now: Instant) {
        if dseq <= self.adflr || dseq > self.dseq || !self.pending.contains_key(&sseq) {
            return;
        }
        self.nak_advisory(env, sseq, dseq, dc);
        if let Some(d) = delay {
            self.rdq.remove(&sseq);
            let wall = env.now_ns();
            let ack_wait = self.cfg.ack_wait;
            if let Some(p) = self.pending.get_mut(&sseq) {
                // Expired at now - ack_wait; the delay counts from there.
                p.timestamp = wall.saturating_sub(ack_wait).saturating_add(d);
                self.dirty = true;
                if self.ptmr.is_some() {
                    self.ptmr = Some(now + Duration::from_millis(10));
                }
            }
            return;
        }
        self.rdq.insert(sseq);
        self.wake = true;
    }

    /// Treat a message as acknowledged and publish the terminated advisory (a removed
    /// message that was still pending, or `+TERM`).
    pub(super) fn terminate(&mut self, env: &mut dyn ConsumerEnv, sseq: u64, dseq: u64, dc: u64, reason: &str) {
        if let Some(seqs) = self.ack_msg(env, sseq, dseq, dc, false) {
            self.note_acked(seqs);
        }
        self.terminated_advisory(env, sseq, dseq, dc, reason);
    }

    fn sample_ack(&mut self, env: &mut dyn ConsumerEnv, sseq: u64, dseq: u64, dc: u64, delivered_at: i64) {
        let sample = match self.sfreq {
            f if f <= 0 => false,
            f if f >= 100 => true,
            f => rand::thread_rng().gen_range(0..100) <= f,
        };
        if sample {
            let ack_time = env.now_ns().saturating_sub(delivered_at);
            self.ack_metric(env, sseq, dseq, dc, ack_time);
        }
    }
}
