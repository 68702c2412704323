//! The duplicate window: `Nats-Msg-Id`s seen within `duplicate_window`, with the sequence
//! each was stored at (a duplicate is acknowledged with the original's sequence), and its
//! rebuild from the stored messages when a stream is recovered.

use super::Stream;
use crate::proto::headers;
use std::collections::{HashMap, VecDeque};

/// Message ids by arrival, expiring after the window.
#[derive(Default)]
pub struct Dedupe {
    ids: HashMap<String, (u64, i64)>,
    order: VecDeque<(i64, String)>,
}

impl Dedupe {
    /// The sequence `id` was stored at, if it is still in the window at `now` (Unix ns).
    pub fn check(&mut self, id: &str, now: i64, window: i64) -> Option<u64> {
        self.expire(now, window);
        self.ids.get(id).map(|(seq, _)| *seq)
    }

    pub fn insert(&mut self, id: &str, seq: u64, ts: i64) {
        if self.ids.insert(id.to_string(), (seq, ts)).is_none() {
            self.order.push_back((ts, id.to_string()));
        }
    }

    /// Forget ids older than the window.
    pub fn expire(&mut self, now: i64, window: i64) {
        if window <= 0 {
            return;
        }
        while let Some((ts, _)) = self.order.front() {
            if now.saturating_sub(*ts) < window {
                break;
            }
            if let Some((ts, id)) = self.order.pop_front() {
                if self.ids.get(&id).is_some_and(|(_, t)| *t == ts) {
                    self.ids.remove(&id);
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

impl Stream {
    /// After a restart: remember the `Nats-Msg-Id`s of the stored messages that are still
    /// inside the duplicate window at `now` (Unix ns), and the last message's id (for
    /// `Nats-Expected-Last-Msg-Id`), as nats-server does when it recovers a stream.
    pub fn rebuild_dedupe(&mut self, now: i64) {
        let last = self.store.fast_state().last_seq;
        let window = self.cfg.duplicate_window;
        if last == 0 || window <= 0 {
            return;
        }
        let start = self.store.seq_from_time(now.saturating_sub(window)).max(1);
        for seq in start..=last {
            let Ok(m) = self.store.load_msg(seq) else { continue };
            let id = headers::get(&m.headers, "Nats-Msg-Id")
                .and_then(|v| std::str::from_utf8(v).ok())
                .unwrap_or("");
            if !id.is_empty() {
                self.dedupe.insert(id, seq, m.ts);
            }
            if seq == last {
                self.last_msg_id = id.to_string();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Dedupe;

    #[test]
    fn ids_expire_after_the_window() {
        let mut d = Dedupe::default();
        d.insert("a", 1, 100);
        d.insert("b", 2, 150);
        assert_eq!(d.check("a", 120, 50), Some(1));
        assert_eq!(d.check("a", 160, 50), None);
        assert_eq!(d.check("b", 160, 50), Some(2));
        assert_eq!(d.check("b", 200, 50), None);
        assert!(d.is_empty());
    }
}
