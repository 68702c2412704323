//! What the consumer reports and answers: the persisted state, the ConsumerInfo stats,
//! interest retention (`needs`) and inactivity.

use super::engine::Consumer;
use super::ConsumerEnv;
use crate::jetstream::api::config::AckPolicy;
use crate::jetstream::api::GoTime;
use serde::Serialize;
use std::time::{Duration, Instant};
use storage::{ConsumerState, SeqPair};

/// A sequence pair with its last activity, as ConsumerInfo shows `delivered`/`ack_floor`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SequenceInfo {
    pub consumer_seq: u64,
    pub stream_seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_active: Option<GoTime>,
}

/// One priority group's state in ConsumerInfo.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PriorityGroupState {
    pub group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pinned_client_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_ts: Option<GoTime>,
}

/// The dynamic part of ConsumerInfo.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerStats {
    pub delivered: SequenceInfo,
    pub ack_floor: SequenceInfo,
    pub num_ack_pending: usize,
    pub num_redelivered: usize,
    pub num_waiting: usize,
    pub num_pending: u64,
    pub push_bound: bool,
    pub paused: bool,
    /// Nanoseconds (0 when not paused).
    pub pause_remaining: i64,
    pub priority_groups: Vec<PriorityGroupState>,
}

impl Consumer {
    /// Does this consumer still need `seq` (interest retention)?
    pub fn needs(&self, seq: u64, subject: &str) -> bool {
        if !self.filter.matches(subject) {
            return false;
        }
        let need = match self.cfg.ack_policy {
            AckPolicy::None | AckPolicy::All | AckPolicy::FlowControl => seq > self.asflr,
            AckPolicy::Explicit => seq > self.asflr && (seq >= self.sseq || self.pending.contains_key(&seq)),
        };
        need || self.rdc.contains_key(&seq)
    }

    /// The state to persist.
    pub fn state(&self) -> ConsumerState {
        let r = self.state_ref();
        ConsumerState {
            delivered: r.delivered,
            ack_floor: r.ack_floor,
            pending: r.pending.clone(),
            redelivered: r.redelivered.clone(),
        }
    }

    /// The state to persist, borrowed (no copy of the pending and redelivery maps).
    pub fn state_ref(&self) -> storage::consumer_state::StateRef<'_> {
        storage::consumer_state::StateRef {
            delivered: SeqPair {
                consumer: self.dseq.saturating_sub(1),
                stream: self.sseq.saturating_sub(1),
            },
            ack_floor: SeqPair {
                consumer: self.adflr,
                stream: self.asflr,
            },
            pending: &self.pending,
            redelivered: &self.rdc,
        }
    }

    /// Whether the state changed since the last call.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Messages left to deliver (matching the filter).
    pub(super) fn num_pending(&self, env: &mut dyn ConsumerEnv) -> u64 {
        let store = env.store();
        let lps = self.lss.is_some();
        let state = store.fast_state();
        if !lps {
            // Trusted only while it covers exactly what the store holds.
            if let Some((n, at, last)) = self.np_cache.get() {
                if at == self.sseq && last == state.last_seq {
                    return n.min(state.msgs);
                }
            }
        }
        let np = store.num_pending(self.sseq, &self.filter, lps);
        if !lps {
            self.np_cache.set(Some((np, self.sseq, state.last_seq)));
        }
        np.min(state.msgs)
    }

    /// What ConsumerInfo shows.
    pub fn stats(&mut self, env: &mut dyn ConsumerEnv) -> ConsumerStats {
        let now = self.last_now;
        if !self.cfg.is_push() {
            self.process_waiting(false, env, now);
        } else {
            // The subscriber may have come or left since the consumer last looked.
            let was_active = self.active;
            self.active = self.bound(env);
            if self.active && !was_active {
                self.wake = true;
            }
        }
        let wall = env.now_ns();
        let (paused, pause_remaining) = match self.cfg.pause_until {
            Some(t) if !t.is_zero() && t.0 > wall => (true, t.0.saturating_sub(wall)),
            _ => (false, 0),
        };
        let priority_groups = self
            .cfg
            .priority_groups
            .first()
            .map(|g| PriorityGroupState {
                group: g.clone(),
                pinned_client_id: self.pin_id.clone(),
                pinned_ts: (self.pinned_ts != 0).then_some(GoTime(self.pinned_ts)),
            })
            .into_iter()
            .collect();
        ConsumerStats {
            delivered: SequenceInfo {
                consumer_seq: self.delivered.consumer,
                stream_seq: self.delivered.stream,
                last_active: (self.ldt != 0).then_some(GoTime(self.ldt)),
            },
            ack_floor: SequenceInfo {
                consumer_seq: self.adflr,
                stream_seq: self.asflr,
                last_active: (self.lat != 0).then_some(GoTime(self.lat)),
            },
            num_ack_pending: self.pending.len(),
            num_redelivered: if self.cfg.max_deliver == 1 { 0 } else { self.rdc.len() },
            num_waiting: self.waiting.len(),
            num_pending: self.num_pending(env),
            push_bound: self.cfg.is_push() && self.active,
            paused,
            pause_remaining,
            priority_groups,
        }
    }

    /// Ephemerals and `inactive_threshold`: should the consumer be deleted now? Push
    /// consumers count as active while their deliver subject has interest, pull consumers
    /// while they receive pull requests (or hold ones whose requester still listens).
    pub fn inactive(&self, env: &mut dyn ConsumerEnv, now: Instant) -> bool {
        let Some(th) = self.inactive_threshold() else {
            return false;
        };
        if self.closed {
            return false;
        }
        if self.cfg.is_push() {
            if self.bound(env) {
                return false;
            }
            return now.saturating_duration_since(self.last_interest) >= th;
        }
        if now.saturating_duration_since(self.waiting_last) < th {
            return false;
        }
        !self.waiting.iter().any(|w| env.has_interest(&w.reply))
    }

    pub(super) fn inactive_threshold(&self) -> Option<Duration> {
        (self.cfg.inactive_threshold > 0).then(|| Self::dur(self.cfg.inactive_threshold))
    }
}
