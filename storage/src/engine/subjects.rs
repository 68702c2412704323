//! The per-subject index: every subject with live messages, its message count and first and
//! last sequence, interned as a small integer id that the sequence index stores per message.
//!
//! Memory per subject is its bytes in one shared arena (no allocation per subject), a
//! 40-byte slot and ~5 bytes of hash table: about 45 bytes plus the subject's length, so a
//! million 20-byte subjects cost ~65 MB. First and last sequences may be stale after a
//! removal; they are marked and recomputed on demand from the sequence index (as the
//! reference's `firstNeedsUpdate`), so a removal never scans.

use ahash::RandomState;
use hashbrown::HashTable;

/// Interned subject id.
pub type SubjectId = u32;

#[derive(Clone, Copy, Debug, Default)]
pub struct SubjectState {
    pub msgs: u64,
    pub first: u64,
    pub last: u64,
    pub first_stale: bool,
    pub last_stale: bool,
}

struct Slot {
    off: u32,
    len: u32,
    st: SubjectState,
}

/// Subjects with live messages.
pub struct SubjectTable {
    arena: Vec<u8>,
    garbage: usize,
    slots: Vec<Option<Slot>>,
    free: Vec<SubjectId>,
    table: HashTable<SubjectId>,
    hasher: RandomState,
    live: usize,
}

impl Default for SubjectTable {
    fn default() -> Self {
        SubjectTable {
            arena: Vec::new(),
            garbage: 0,
            slots: Vec::new(),
            free: Vec::new(),
            table: HashTable::new(),
            hasher: RandomState::with_seeds(0x5eed, 0x17, 0x2a, 0x99),
            live: 0,
        }
    }
}

impl SubjectTable {
    pub fn len(&self) -> usize {
        self.live
    }

    #[allow(dead_code)] // API of the index kept whole; not every store uses it yet
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn raw<'a>(arena: &'a [u8], s: &Slot) -> &'a [u8] {
        arena
            .get(s.off as usize..(s.off as usize + s.len as usize))
            .unwrap_or(&[])
    }

    fn text<'a>(arena: &'a [u8], s: &Slot) -> &'a str {
        std::str::from_utf8(Self::raw(arena, s)).unwrap_or("")
    }

    pub fn find(&self, subject: &str) -> Option<SubjectId> {
        let h = self.hasher.hash_one(subject);
        let (arena, slots) = (&self.arena, &self.slots);
        self.table
            .find(h, |&id| {
                slots
                    .get(id as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|s| Self::raw(arena, s) == subject.as_bytes())
            })
            .copied()
    }

    /// The id of `subject`, interning it (with an empty state) if new.
    pub fn intern(&mut self, subject: &str) -> SubjectId {
        if let Some(id) = self.find(subject) {
            return id;
        }
        let off = self.arena.len() as u32;
        self.arena.extend_from_slice(subject.as_bytes());
        let slot = Slot {
            off,
            len: subject.len() as u32,
            st: SubjectState::default(),
        };
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(s) = self.slots.get_mut(id as usize) {
                    *s = Some(slot);
                }
                id
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as SubjectId
            }
        };
        let h = self.hasher.hash_one(subject);
        let (arena, slots, hasher) = (&self.arena, &self.slots, &self.hasher);
        self.table.insert_unique(h, id, |&i| {
            let t = slots
                .get(i as usize)
                .and_then(Option::as_ref)
                .map_or("", |s| Self::text(arena, s));
            hasher.hash_one(t)
        });
        self.live += 1;
        id
    }

    pub fn name(&self, id: SubjectId) -> &str {
        self.slots
            .get(id as usize)
            .and_then(Option::as_ref)
            .map_or("", |s| Self::text(&self.arena, s))
    }

    pub fn state(&self, id: SubjectId) -> Option<&SubjectState> {
        self.slots.get(id as usize).and_then(Option::as_ref).map(|s| &s.st)
    }

    pub fn state_mut(&mut self, id: SubjectId) -> Option<&mut SubjectState> {
        self.slots
            .get_mut(id as usize)
            .and_then(Option::as_mut)
            .map(|s| &mut s.st)
    }

    /// Forget `id` (its last message is gone).
    pub fn release(&mut self, id: SubjectId) {
        let Some(slot) = self.slots.get_mut(id as usize).and_then(Option::take) else {
            return;
        };
        let name = Self::text(&self.arena, &slot).to_string();
        let h = self.hasher.hash_one(name.as_str());
        if let Ok(e) = self.table.find_entry(h, |&i| i == id) {
            e.remove();
        }
        self.garbage += slot.len as usize;
        self.free.push(id);
        self.live -= 1;
        if self.garbage > 4096 && self.garbage * 2 > self.arena.len() {
            self.compact_arena();
        }
    }

    fn compact_arena(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for s in self.slots.iter_mut().flatten() {
            let start = s.off as usize;
            let b = self.arena.get(start..start + s.len as usize).unwrap_or(&[]);
            s.off = arena.len() as u32;
            arena.extend_from_slice(b);
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// Every live subject id.
    pub fn ids(&self) -> impl Iterator<Item = SubjectId> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| i as SubjectId)
    }

    pub fn clear(&mut self) {
        *self = SubjectTable::default();
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.arena.capacity()
            + self.slots.capacity() * std::mem::size_of::<Option<Slot>>()
            + self.table.capacity() * (std::mem::size_of::<SubjectId>() + 1)
            + self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intern_release_reuse() {
        let mut t = SubjectTable::default();
        let a = t.intern("a.b");
        let b = t.intern("c.d");
        assert_eq!(t.intern("a.b"), a);
        assert_eq!(t.name(b), "c.d");
        t.release(a);
        assert_eq!(t.find("a.b"), None);
        assert_eq!(t.len(), 1);
        let c = t.intern("e.f");
        assert_eq!(c, a, "freed ids are reused");
        assert_eq!(t.find("c.d"), Some(b));
        for i in 0..10_000 {
            let id = t.intern(&format!("k.{i}"));
            if i % 2 == 0 {
                t.release(id);
            }
        }
        assert_eq!(t.find("k.9999").map(|i| t.name(i).to_string()), Some("k.9999".into()));
        assert_eq!(t.find("k.9998"), None);
        assert_eq!(t.len(), 2 + 5000);
    }
}
