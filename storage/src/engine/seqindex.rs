//! The per-sequence index of live messages: sequence -> entry, ordered, with cheap removal
//! at the front (limits), in the middle (deletes) and at the back (truncate).
//!
//! Sequences are grouped in chunks of [`CHUNK`] consecutive sequences. A chunk holds a
//! presence bitmap (128 bytes) and its live entries in sequence order, so memory follows the
//! live messages: a dense stream costs the entry plus ~1/8 byte per sequence, a chunk whose
//! messages are all gone is dropped, and a huge skipped range costs nothing. Lookup is a
//! binary search over chunks plus a popcount rank inside one.

use std::collections::VecDeque;

/// Sequences per chunk.
pub const CHUNK: u64 = 1024;
const WORDS: usize = (CHUNK / 64) as usize;

struct Chunk<E> {
    base: u64,
    bits: [u64; WORDS],
    entries: VecDeque<E>,
}

impl<E> Chunk<E> {
    fn new(base: u64) -> Chunk<E> {
        Chunk {
            base,
            bits: [0; WORDS],
            entries: VecDeque::new(),
        }
    }

    fn has(&self, off: usize) -> bool {
        self.bits.get(off / 64).is_some_and(|w| w & (1u64 << (off % 64)) != 0)
    }

    /// Number of live sequences below `off` in this chunk.
    fn rank(&self, off: usize) -> usize {
        let (w, b) = (off / 64, off % 64);
        let mut r: usize = self.bits.iter().take(w).map(|x| x.count_ones() as usize).sum();
        if let Some(word) = self.bits.get(w) {
            r += (word & ((1u64 << b) - 1)).count_ones() as usize;
        }
        r
    }

    /// The first live offset >= `off`.
    fn next_from(&self, off: usize) -> Option<usize> {
        next_in(&self.bits, off)
    }

    /// The last live offset <= `off`.
    fn prev_from(&self, off: usize) -> Option<usize> {
        let mut w = off / 64;
        let b = off % 64;
        let mask = if b == 63 { !0u64 } else { (1u64 << (b + 1)) - 1 };
        let mut word = self.bits.get(w)? & mask;
        loop {
            if word != 0 {
                return Some(w * 64 + 63 - word.leading_zeros() as usize);
            }
            if w == 0 {
                return None;
            }
            w -= 1;
            word = *self.bits.get(w)?;
        }
    }
}

/// Live entries by sequence.
pub struct SeqIndex<E> {
    chunks: VecDeque<Chunk<E>>,
    len: usize,
}

impl<E> Default for SeqIndex<E> {
    fn default() -> Self {
        SeqIndex {
            chunks: VecDeque::new(),
            len: 0,
        }
    }
}

fn next_in(bits: &[u64; WORDS], off: usize) -> Option<usize> {
    let mut w = off / 64;
    let mut word = bits.get(w)? & (!0u64 << (off % 64));
    loop {
        if word != 0 {
            return Some(w * 64 + word.trailing_zeros() as usize);
        }
        w += 1;
        word = *bits.get(w)?;
    }
}

fn split(seq: u64) -> (u64, usize) {
    (seq - seq % CHUNK, (seq % CHUNK) as usize)
}

impl<E> SeqIndex<E> {
    #[allow(dead_code)] // API of the index kept whole; not every store uses it yet
    pub fn len(&self) -> usize {
        self.len
    }

    #[allow(dead_code)] // API of the index kept whole; not every store uses it yet
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn chunk_pos(&self, base: u64) -> Result<usize, usize> {
        // Dense streams keep every chunk: the position follows from the first base
        // (a lookup runs for every message a consumer reads; the search took 4%).
        if let Some(front) = self.chunks.front() {
            if let Some(i) = base.checked_sub(front.base).map(|d| d / CHUNK) {
                let i = usize::try_from(i).unwrap_or(usize::MAX);
                if self.chunks.get(i).is_some_and(|c| c.base == base) {
                    return Ok(i);
                }
            }
        }
        self.chunks.binary_search_by(|c| c.base.cmp(&base))
    }

    /// Add `seq`, which must be above every sequence present (appends only).
    /// Returns false (and drops nothing) if it is not.
    pub fn push(&mut self, seq: u64, e: E) -> bool {
        if self.last().is_some_and(|l| seq <= l) {
            return false;
        }
        let (base, off) = split(seq);
        if self.chunks.back().is_none_or(|c| c.base != base) {
            self.chunks.push_back(Chunk::new(base));
        }
        let Some(c) = self.chunks.back_mut() else {
            return false;
        };
        if let Some(w) = c.bits.get_mut(off / 64) {
            *w |= 1u64 << (off % 64);
        }
        c.entries.push_back(e);
        self.len += 1;
        true
    }

    pub fn get(&self, seq: u64) -> Option<&E> {
        let (base, off) = split(seq);
        let c = self.chunks.get(self.chunk_pos(base).ok()?)?;
        if !c.has(off) {
            return None;
        }
        c.entries.get(c.rank(off))
    }

    #[allow(dead_code)] // API of the index kept whole; not every store uses it yet
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut E> {
        let (base, off) = split(seq);
        let i = self.chunk_pos(base).ok()?;
        let c = self.chunks.get_mut(i)?;
        if !c.has(off) {
            return None;
        }
        let r = c.rank(off);
        c.entries.get_mut(r)
    }

    #[allow(dead_code)] // API of the index kept whole; not every store uses it yet
    pub fn contains(&self, seq: u64) -> bool {
        let (base, off) = split(seq);
        self.chunk_pos(base)
            .ok()
            .and_then(|i| self.chunks.get(i))
            .is_some_and(|c| c.has(off))
    }

    pub fn remove(&mut self, seq: u64) -> Option<E> {
        let (base, off) = split(seq);
        let i = self.chunk_pos(base).ok()?;
        let c = self.chunks.get_mut(i)?;
        if !c.has(off) {
            return None;
        }
        let r = c.rank(off);
        if let Some(w) = c.bits.get_mut(off / 64) {
            *w &= !(1u64 << (off % 64));
        }
        let e = c.entries.remove(r);
        if c.entries.is_empty() {
            self.chunks.remove(i);
        } else if c.entries.capacity() > 4 * c.entries.len() + 16 {
            c.entries.shrink_to_fit();
        }
        if e.is_some() {
            self.len -= 1;
        }
        e
    }

    #[allow(dead_code)] // API of the index kept whole; not every store uses it yet
    /// Live entries at or after `seq`, walking the shorter side of the chunk list (a chunk
    /// holds [`CHUNK`] sequences, so this touches at most half the chunks, not entries).
    pub fn count_from(&self, seq: u64) -> usize {
        let (base, off) = split(seq);
        let i = self.chunks.partition_point(|c| c.base < base);
        let (in_chunk, j) = match self.chunks.get(i) {
            Some(c) if c.base == base => (c.entries.len().saturating_sub(c.rank(off)), i + 1),
            _ => (0, i),
        };
        let after = if j > self.chunks.len() / 2 {
            self.chunks.iter().skip(j).map(|c| c.entries.len()).sum::<usize>()
        } else {
            let before: usize = self.chunks.iter().take(j).map(|c| c.entries.len()).sum();
            self.len.saturating_sub(before)
        };
        in_chunk + after
    }

    #[cfg(test)]
    pub fn first(&self) -> Option<u64> {
        let c = self.chunks.front()?;
        c.next_from(0).map(|o| c.base + o as u64)
    }

    pub fn last(&self) -> Option<u64> {
        let c = self.chunks.back()?;
        c.prev_from(CHUNK as usize - 1).map(|o| c.base + o as u64)
    }

    /// The first live sequence >= `seq`, with its entry.
    pub fn next_at_or_after(&self, seq: u64) -> Option<(u64, &E)> {
        let (base, off) = split(seq);
        let mut i = match self.chunk_pos(base) {
            Ok(i) => i,
            Err(i) => {
                let c = self.chunks.get(i)?;
                let o = c.next_from(0)?;
                return Some((c.base + o as u64, c.entries.front()?));
            }
        };
        let mut from = off;
        loop {
            let c = self.chunks.get(i)?;
            if let Some(o) = c.next_from(from) {
                return c.entries.get(c.rank(o)).map(|e| (c.base + o as u64, e));
            }
            i += 1;
            from = 0;
        }
    }

    /// The last live sequence <= `seq`, with its entry.
    pub fn prev_at_or_before(&self, seq: u64) -> Option<(u64, &E)> {
        let (base, off) = split(seq);
        let (mut i, mut from) = match self.chunk_pos(base) {
            Ok(i) => (i, off),
            Err(0) => return None,
            Err(i) => (i - 1, CHUNK as usize - 1),
        };
        loop {
            let c = self.chunks.get(i)?;
            if let Some(o) = c.prev_from(from) {
                return c.entries.get(c.rank(o)).map(|e| (c.base + o as u64, e));
            }
            if i == 0 {
                return None;
            }
            i -= 1;
            from = CHUNK as usize - 1;
        }
    }

    /// Iterate live entries with sequence >= `seq`, in order.
    pub fn iter_from(&self, seq: u64) -> Iter<'_, E> {
        let (base, off) = split(seq);
        let (ci, off) = match self.chunk_pos(base) {
            Ok(i) => (i, off),
            Err(i) => (i, 0),
        };
        let rank = self.chunks.get(ci).map_or(0, |c| c.rank(off));
        Iter {
            idx: self,
            ci,
            off,
            rank,
        }
    }

    pub fn iter(&self) -> Iter<'_, E> {
        self.iter_from(0)
    }

    /// Remove every entry with sequence < `seq`, handing each to `f` in order.
    pub fn remove_below(&mut self, seq: u64, mut f: impl FnMut(u64, E)) {
        while let Some(c) = self.chunks.front_mut() {
            if c.base + CHUNK <= seq {
                let Some(c) = self.chunks.pop_front() else { break };
                let mut off = c.next_from(0);
                let mut it = c.entries.into_iter();
                while let (Some(o), Some(e)) = (off, it.next()) {
                    f(c.base + o as u64, e);
                    self.len -= 1;
                    off = next_in(&c.bits, o + 1);
                }
                continue;
            }
            // Partial chunk: pop from its front.
            while let Some(o) = c.next_from(0) {
                let s = c.base + o as u64;
                if s >= seq {
                    break;
                }
                if let Some(w) = c.bits.get_mut(o / 64) {
                    *w &= !(1u64 << (o % 64));
                }
                if let Some(e) = c.entries.pop_front() {
                    self.len -= 1;
                    f(s, e);
                }
            }
            if c.entries.is_empty() {
                self.chunks.pop_front();
            }
            break;
        }
    }

    /// Remove every entry with sequence > `seq`, handing each to `f` (highest first).
    pub fn remove_above(&mut self, seq: u64, mut f: impl FnMut(u64, E)) {
        while let Some(last) = self.last() {
            if last <= seq {
                break;
            }
            if let Some(e) = self.remove(last) {
                f(last, e);
            }
        }
    }

    /// Drop everything.
    #[allow(dead_code)] // API of the index kept whole; not every store uses it yet
    pub fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }

    /// Approximate heap bytes held (for memory reports).
    pub fn heap_bytes(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| std::mem::size_of::<Chunk<E>>() + c.entries.capacity() * std::mem::size_of::<E>())
            .sum()
    }
}

/// Iterator over `(seq, &entry)` in sequence order.
pub struct Iter<'a, E> {
    idx: &'a SeqIndex<E>,
    ci: usize,
    off: usize,
    rank: usize,
}

impl<'a, E> Iterator for Iter<'a, E> {
    type Item = (u64, &'a E);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let c = self.idx.chunks.get(self.ci)?;
            if self.off < CHUNK as usize {
                if let Some(o) = c.next_from(self.off) {
                    let e = c.entries.get(self.rank)?;
                    self.off = o + 1;
                    self.rank += 1;
                    return Some((c.base + o as u64, e));
                }
            }
            self.ci += 1;
            self.off = 0;
            self.rank = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn agrees_with_a_btreemap() {
        let mut idx = SeqIndex::default();
        let mut model = BTreeMap::new();
        let mut seq = 1u64;
        let mut x: u64 = 12345;
        for round in 0..6000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            match (x >> 33) % 10 {
                0..=5 => {
                    seq += 1 + (x >> 40) % 3 + if round % 977 == 0 { 5000 } else { 0 };
                    assert!(idx.push(seq, seq * 10));
                    model.insert(seq, seq * 10);
                }
                6 | 7 => {
                    let s = (x >> 20) % (seq + 1);
                    assert_eq!(idx.remove(s), model.remove(&s));
                }
                8 => {
                    let s = (x >> 20) % (seq + 1);
                    let n = idx.next_at_or_after(s).map(|(a, b)| (a, *b));
                    let m = model.range(s..).next().map(|(a, b)| (*a, *b));
                    assert_eq!(n, m);
                    let p = idx.prev_at_or_before(s).map(|(a, b)| (a, *b));
                    let q = model.range(..=s).next_back().map(|(a, b)| (*a, *b));
                    assert_eq!(p, q);
                    let it: Vec<_> = idx.iter_from(s).take(50).map(|(a, b)| (a, *b)).collect();
                    let mt: Vec<_> = model.range(s..).take(50).map(|(a, b)| (*a, *b)).collect();
                    assert_eq!(it, mt);
                }
                _ => {
                    if round % 3 == 0 {
                        let s = (x >> 20) % (seq / 4 + 1);
                        let mut got = Vec::new();
                        idx.remove_below(s, |q, e| got.push((q, e)));
                        let want: Vec<_> = model.range(..s).map(|(a, b)| (*a, *b)).collect();
                        model.retain(|k, _| *k >= s);
                        assert_eq!(got, want);
                    }
                }
            }
            assert_eq!(idx.len(), model.len());
            assert_eq!(idx.first(), model.keys().next().copied());
            assert_eq!(idx.last(), model.keys().next_back().copied());
        }
        let all: Vec<_> = idx.iter().map(|(a, b)| (a, *b)).collect();
        let want: Vec<_> = model.iter().map(|(a, b)| (*a, *b)).collect();
        assert_eq!(all, want);
        let mut got = Vec::new();
        let cut = seq / 2;
        idx.remove_above(cut, |q, _| got.push(q));
        model.retain(|k, _| *k <= cut);
        assert_eq!(idx.len(), model.len());
        assert!(got.windows(2).all(|w| w[0] > w[1]));
    }

    #[test]
    fn skipped_ranges_cost_nothing() {
        let mut idx = SeqIndex::default();
        idx.push(1, 1u8);
        idx.push(1 << 40, 2u8);
        assert_eq!(idx.heap_bytes() / std::mem::size_of::<Chunk<u8>>(), 2);
        assert_eq!(idx.next_at_or_after(2).map(|(s, _)| s), Some(1 << 40));
        assert!(!idx.push(5, 3));
    }

    #[test]
    fn count_from_matches_a_walk() {
        let mut x: SeqIndex<u64> = SeqIndex::default();
        for seq in 1..=5000u64 {
            if seq % 7 != 0 && !(2000..2100).contains(&seq) {
                x.push(seq, seq);
            }
        }
        x.remove(1500);
        for start in [0u64, 1, 2, 1023, 1024, 1025, 1500, 2050, 3000, 4999, 5000, 5001, 9000] {
            let walk = x.iter_from(start).count();
            assert_eq!(x.count_from(start), walk, "from {start}");
        }
    }
}
