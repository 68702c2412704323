//! Remote interest: what the other shards are interested in, learned from their interest
//! records. A hint for routing, never the truth: the receiving shard matches its own
//! sublist, so a stale entry only costs one envelope that matches nobody.
//!
//! Ownership: one per shard, touched only by it. Entries are per (shard, subject, queue)
//! with a count: plain interest is 0 or 1 per shard (the owner sends only transitions),
//! queue interest counts members, which is the weight for picking a shard.

use super::sublist::{Matches, Sublist};
use slab::Slab;
use std::rc::Rc;

/// Handle of one remote-interest entry.
pub type RKey = u32;

/// One shard's interest in one (subject, queue).
pub struct REntry {
    pub shard: u16,
    pub count: u32,
}

/// The pattern itself is stored once, in the tree; an entry is found again through the
/// tree's exact lookup, so 100,000 remote subscriptions cost one tree, not three copies.
#[derive(Default)]
pub struct RemoteInterest {
    sublist: Sublist<RKey>,
    entries: Slab<REntry>,
}

impl RemoteInterest {
    /// Apply `delta` to shard `shard`'s interest in `subject`/`queue`.
    pub fn apply(&mut self, shard: u16, subject: &[u8], queue: Option<&[u8]>, delta: i32) {
        let found = self
            .sublist
            .exact(subject, queue)
            .iter()
            .copied()
            .find(|&rk| self.entries.get(rk as usize).is_some_and(|e| e.shard == shard));
        match found {
            Some(rk) => {
                let Some(e) = self.entries.get_mut(rk as usize) else {
                    return;
                };
                let n = i64::from(e.count) + i64::from(delta);
                if n > 0 {
                    e.count = n.min(i64::from(u32::MAX)) as u32;
                } else {
                    self.sublist.remove(subject, queue, rk);
                    self.entries.remove(rk as usize);
                }
            }
            None if delta > 0 => {
                let rk = self.entries.insert(REntry {
                    shard,
                    count: delta as u32,
                }) as RKey;
                if self.sublist.insert(subject, queue, rk).is_err() {
                    self.entries.remove(rk as usize);
                }
            }
            None => {}
        }
    }

    /// Remote interest in a literal subject.
    pub fn matches(&mut self, subject: &[u8]) -> Rc<Matches<RKey>> {
        self.sublist.matches(subject)
    }

    /// [`Self::matches`] for a one-shot subject (not cached).
    pub fn matches_once(&mut self, subject: &[u8]) -> Rc<Matches<RKey>> {
        self.sublist.matches_once(subject)
    }

    /// Does any other shard hold interest in exactly `subject` (in group `queue`, or
    /// plain), not through a wildcard?
    pub fn has_exact(&self, subject: &[u8], queue: Option<&[u8]>) -> bool {
        !self.sublist.exact(subject, queue).is_empty()
    }

    /// The entry behind a handle from [`RemoteInterest::matches`].
    pub fn entry(&self, rk: RKey) -> Option<&REntry> {
        self.entries.get(rk as usize)
    }

    /// Number of (shard, subject, queue) entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_removal() {
        let mut r = RemoteInterest::default();
        r.apply(1, b"foo.*", None, 1);
        r.apply(2, b"foo.*", Some(b"q"), 1);
        r.apply(2, b"foo.*", Some(b"q"), 1);
        let m = r.matches(b"foo.bar");
        assert_eq!(m.psubs.len(), 1);
        assert_eq!(r.entry(m.psubs[0]).map(|e| e.shard), Some(1));
        let q = &m.qsubs[0];
        assert_eq!(r.entry(q.members[0]).map(|e| (e.shard, e.count)), Some((2, 2)));
        r.apply(2, b"foo.*", Some(b"q"), -2);
        r.apply(1, b"foo.*", None, -1);
        assert!(r.matches(b"foo.bar").is_empty());
        assert!(r.is_empty());
        // A removal for something never added is ignored.
        r.apply(3, b"x", None, -1);
        assert!(r.is_empty());
    }
}
