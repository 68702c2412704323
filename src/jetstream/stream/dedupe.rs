//! The duplicate window: `Nats-Msg-Id`s seen within `duplicate_window`, with the sequence
//! each was stored at (a duplicate is acknowledged with the original's sequence).

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
