//! [`TailBuf`]: the bytes of a block that are not all on disk yet (`Block::buf`).
//!
//! Records are appended at the end; when a batch completes, the written prefix is
//! dropped ([`TailBuf::advance`]). Dropping it used to shift the rest (the records
//! appended while the batch was in flight) to the front at every completion: a copy of
//! most bytes a busy stream stores. Here the dropped prefix is only skipped; the live
//! bytes move to the front when an append would otherwise grow the vector, so they move
//! once per fill of the memory the buffer already has, not once per batch.

/// Live bytes `v[skip..]`; `v[..skip]` was written out and is dead.
#[derive(Default)]
pub(crate) struct TailBuf {
    v: Vec<u8>,
    skip: usize,
}

impl TailBuf {
    pub fn len(&self) -> usize {
        self.v.len() - self.skip
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn live(&self) -> &[u8] {
        self.v.get(self.skip..).unwrap_or(&[])
    }

    pub fn get(&self, r: std::ops::Range<usize>) -> Option<&[u8]> {
        self.live().get(r)
    }

    pub fn get_mut(&mut self, r: std::ops::Range<usize>) -> Option<&mut [u8]> {
        let skip = self.skip;
        self.v.get_mut(skip..).and_then(|l| l.get_mut(r))
    }

    /// The vector to append up to `need` bytes to (records are encoded straight into
    /// it). The live bytes move to the front first if the append would otherwise grow
    /// the vector while a dead prefix takes room.
    pub fn appender(&mut self, need: usize) -> &mut Vec<u8> {
        if self.skip > 0 && self.v.len() + need > self.v.capacity() {
            self.v.drain(..self.skip);
            self.skip = 0;
        }
        &mut self.v
    }

    /// Drop the first `n` live bytes (written out).
    pub fn advance(&mut self, n: usize) {
        self.skip = self.skip.saturating_add(n).min(self.v.len());
        if self.skip == self.v.len() {
            self.v.clear();
            self.skip = 0;
        }
    }
}

impl From<Vec<u8>> for TailBuf {
    fn from(v: Vec<u8>) -> TailBuf {
        TailBuf { v, skip: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends and advances in any mix keep exactly the live bytes, and live bytes move
    /// only when the memory is full.
    #[test]
    fn keeps_the_live_bytes_and_moves_them_only_when_full() {
        let mut t = TailBuf::from(Vec::with_capacity(64));
        let mut model: Vec<u8> = Vec::new();
        let mut next = 0u8;
        for step in 0..2000usize {
            let n = step % 13 + 1;
            let piece: Vec<u8> = (0..n)
                .map(|_| {
                    next = next.wrapping_add(1);
                    next
                })
                .collect();
            let cap = t.v.capacity();
            let room = cap - t.v.len();
            t.appender(n).extend_from_slice(&piece);
            if n <= room {
                assert_eq!(t.v.capacity(), cap, "no move and no growth while there is room");
            }
            model.extend_from_slice(&piece);
            if step % 3 == 0 {
                let cut = (step * 7) % (model.len() + 1);
                t.advance(cut);
                model.drain(..cut);
            }
            assert_eq!(t.live(), &model[..]);
            assert_eq!(t.len(), model.len());
        }
        assert!(t.v.capacity() < 1024, "bounded by the live bytes, not by all appended");
        if t.len() >= 2 {
            assert_eq!(t.get(1..2), Some(&model[1..2]));
            if let Some(b) = t.get_mut(0..1) {
                b[0] = 0xee;
            }
            assert_eq!(t.live()[0], 0xee);
        }
        assert_eq!(t.get(0..t.len() + 1), None);
        t.advance(usize::MAX / 2);
        assert!(t.is_empty());
        assert_eq!(t.skip, 0);
    }
}
