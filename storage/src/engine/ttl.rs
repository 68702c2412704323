//! Per-message TTL expiry: a hashed timing wheel. Adding and firing cost O(1) amortised per
//! entry whatever the number of pending TTLs (millions are fine: 16 bytes each); the wheel
//! has [`SLOTS`] slots of one second, an entry further than one turn away stays in its slot
//! until its turn comes round. Removal is lazy: a message deleted before its TTL leaves its
//! entry behind, and the store ignores a fired entry whose sequence is gone (sequences are
//! not reused while entries for them can exist: truncation clears the wheel above the cut).

const SLOTS: usize = 4096;
const TICK: i64 = 1_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtlEntry {
    pub seq: u64,
    pub expires: i64,
}

/// The wheel. Times are Unix nanoseconds.
pub struct TtlWheel {
    slots: Vec<Vec<TtlEntry>>,
    /// Tick (expires / TICK) processed up to, exclusive.
    cursor: Option<i64>,
    count: usize,
    /// Lower bound of every pending expiry (exact after `expire`).
    earliest: Option<i64>,
}

impl Default for TtlWheel {
    fn default() -> Self {
        TtlWheel {
            slots: (0..SLOTS).map(|_| Vec::new()).collect(),
            cursor: None,
            count: 0,
            earliest: None,
        }
    }
}

fn slot_of(expires: i64) -> usize {
    (expires.div_euclid(TICK)).rem_euclid(SLOTS as i64) as usize
}

impl TtlWheel {
    pub fn len(&self) -> usize {
        self.count
    }

    #[allow(dead_code)] // API of the index kept whole; not every store uses it yet
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn add(&mut self, seq: u64, expires: i64) {
        if let Some(s) = self.slots.get_mut(slot_of(expires)) {
            s.push(TtlEntry { seq, expires });
            self.count += 1;
            self.earliest = Some(self.earliest.map_or(expires, |e| e.min(expires)));
            if let Some(c) = self.cursor {
                if expires.div_euclid(TICK) < c {
                    self.cursor = Some(expires.div_euclid(TICK));
                }
            }
        }
    }

    /// When the next entry is due (a lower bound; firing early finds nothing and resets it).
    pub fn next_expiry(&self) -> Option<i64> {
        self.earliest
    }

    /// Take every entry due at `now`, in no particular order.
    pub fn expire(&mut self, now: i64, out: &mut Vec<TtlEntry>) {
        if self.count == 0 {
            self.earliest = None;
            return;
        }
        if self.earliest.is_some_and(|e| e > now) {
            return;
        }
        let now_tick = now.div_euclid(TICK);
        let start = self
            .cursor
            .unwrap_or(i64::MIN)
            .max(self.earliest.unwrap_or(now).div_euclid(TICK));
        let span = (now_tick - start + 1).clamp(1, SLOTS as i64);
        for t in 0..span {
            let idx = slot_of((start + t).saturating_mul(TICK));
            let Some(slot) = self.slots.get_mut(idx) else { continue };
            let before = slot.len();
            slot.retain(|e| {
                if e.expires <= now {
                    out.push(*e);
                    false
                } else {
                    true
                }
            });
            self.count -= before - slot.len();
        }
        self.cursor = Some(now_tick);
        self.earliest = self.scan_earliest(now_tick);
    }

    /// A lower bound of the earliest pending expiry: the first tick after `now_tick` whose
    /// slot holds an entry of that very tick (one turn of the wheel at most); entries further
    /// away than a turn are found by a full pass, which only happens when nothing is nearer.
    fn scan_earliest(&self, now_tick: i64) -> Option<i64> {
        if self.count == 0 {
            return None;
        }
        for k in 0..SLOTS as i64 {
            let tick = now_tick + k;
            let Some(slot) = self.slots.get(slot_of(tick.saturating_mul(TICK))) else {
                continue;
            };
            if let Some(m) = slot
                .iter()
                .filter(|e| e.expires.div_euclid(TICK) == tick)
                .map(|e| e.expires)
                .min()
            {
                return Some(m);
            }
        }
        self.slots.iter().flat_map(|s| s.iter().map(|e| e.expires)).min()
    }

    /// Keep only the entries whose sequence `keep` accepts (after a replay, the entries of
    /// messages that were removed since).
    pub fn retain(&mut self, keep: impl Fn(u64) -> bool) {
        for s in &mut self.slots {
            let before = s.len();
            s.retain(|e| keep(e.seq));
            self.count -= before - s.len();
        }
        self.earliest = self.slots.iter().flat_map(|s| s.iter().map(|e| e.expires)).min();
    }

    /// Drop the entries of sequences above `seq` (truncate).
    pub fn remove_above(&mut self, seq: u64) {
        for s in &mut self.slots {
            let before = s.len();
            s.retain(|e| e.seq <= seq);
            self.count -= before - s.len();
        }
    }

    /// Every pending entry (for encoding state).
    #[allow(dead_code)] // API of the index kept whole; not every store uses it yet
    pub fn entries(&self) -> impl Iterator<Item = &TtlEntry> + '_ {
        self.slots.iter().flatten()
    }

    pub fn clear(&mut self) {
        for s in &mut self.slots {
            s.clear();
        }
        self.count = 0;
        self.earliest = None;
        self.cursor = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_in_time_far_and_near() {
        let mut w = TtlWheel::default();
        let t0 = 1_700_000_000 * TICK;
        w.add(1, t0 + TICK);
        w.add(2, t0 + 5 * TICK);
        // Beyond one turn of the wheel: shares a slot with earlier ticks.
        w.add(3, t0 + (SLOTS as i64 + 5) * TICK);
        w.add(4, t0 + TICK / 2);
        assert_eq!(w.next_expiry(), Some(t0 + TICK / 2));
        let mut out = Vec::new();
        w.expire(t0, &mut out);
        assert!(out.is_empty());
        w.expire(t0 + TICK, &mut out);
        let mut seqs: Vec<_> = out.iter().map(|e| e.seq).collect();
        seqs.sort();
        assert_eq!(seqs, vec![1, 4]);
        out.clear();
        w.expire(t0 + 5 * TICK, &mut out);
        assert_eq!(out.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2]);
        out.clear();
        assert_eq!(w.next_expiry(), Some(t0 + (SLOTS as i64 + 5) * TICK));
        w.expire(t0 + 6 * TICK, &mut out);
        assert!(out.is_empty(), "entry one turn ahead must wait");
        w.expire(t0 + (SLOTS as i64 + 6) * TICK, &mut out);
        assert_eq!(out.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3]);
        assert!(w.is_empty());
        assert_eq!(w.next_expiry(), None);
    }

    #[test]
    fn a_million_entries() {
        let mut w = TtlWheel::default();
        let t0 = 1_000 * TICK;
        for i in 0..1_000_000u64 {
            w.add(i, t0 + (i % 600) as i64 * TICK);
        }
        let mut out = Vec::new();
        w.expire(t0 + 299 * TICK, &mut out);
        assert_eq!(out.len(), 500_100);
    }
}
