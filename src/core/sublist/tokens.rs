//! The literal children of one level of the interest tree, keyed by subject token.
//!
//! A match looks each token up at several levels (once per wildcard branch that reaches
//! them), so the work is split: [`Tok::new`] packs a token and hashes it once per match, and
//! every lookup after that is a table probe whose key compare is one 16-byte compare. Tokens
//! of up to [`SHORT`] bytes (nearly all of them) are stored in place with their length, so
//! the compare needs no pointer to follow and no `memcmp` call; longer tokens live on the
//! heap and compare as bytes.
//!
//! The hash is `ahash` with a per-process random seed, so subscribers cannot pick tokens
//! that collide on every server.

use hashbrown::HashTable;
use std::sync::OnceLock;

/// Longest token kept in place: the 16th byte holds the length.
const SHORT: usize = 15;

/// A stored token.
#[derive(Clone, Debug)]
enum Key {
    Short([u8; 16]),
    Long(Box<[u8]>),
}

impl Key {
    fn bytes(&self) -> &[u8] {
        match self {
            Key::Short(b) => &b[..usize::from(b[SHORT])],
            Key::Long(b) => b,
        }
    }

    fn hash(&self) -> u64 {
        match self {
            Key::Short(b) => hash_packed(u128::from_le_bytes(*b)),
            Key::Long(b) => hash_long(b),
        }
    }
}

/// A token prepared for lookups: its bytes, its packed form when short, and its hash.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tok<'a> {
    bytes: &'a [u8],
    /// The in-place form; 0 (which no short key has: its length byte is not 0) when long.
    packed: u128,
    hash: u64,
}

impl<'a> Tok<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        // An empty token goes the long way: its packed form would be 0.
        if !bytes.is_empty() && bytes.len() <= SHORT {
            let packed = pack(bytes);
            Tok {
                bytes,
                packed,
                hash: hash_packed(packed),
            }
        } else {
            Tok {
                bytes,
                packed: 0,
                hash: hash_long(bytes),
            }
        }
    }

    fn key(&self) -> Key {
        if self.packed != 0 {
            Key::Short(self.packed.to_le_bytes())
        } else {
            Key::Long(self.bytes.into())
        }
    }

    #[inline(always)]
    fn is(&self, key: &Key) -> bool {
        match key {
            Key::Short(b) => u128::from_le_bytes(*b) == self.packed,
            Key::Long(b) => self.packed == 0 && **b == *self.bytes,
        }
    }
}

/// The in-place form of a token of 1 to [`SHORT`] bytes: its bytes in order from the
/// lowest, then zeros, and its length in the highest byte. Read with a few overlapping
/// word loads instead of a byte loop.
#[inline(always)]
fn pack(b: &[u8]) -> u128 {
    let n = b.len();
    let (lo, hi) = if n >= 8 {
        // Bytes 8.. are the top n - 8 bytes of the last word.
        let hi = if n > 8 { le64(&b[n - 8..]) >> ((16 - n) * 8) } else { 0 };
        (le64(b), hi)
    } else if n >= 4 {
        // Two words that overlap on identical bytes.
        (le32(b) | (le32(&b[n - 4..]) << ((n - 4) * 8)), 0)
    } else {
        let mut v = 0u64;
        for (i, x) in b.iter().enumerate() {
            v |= u64::from(*x) << (i * 8);
        }
        (v, 0)
    };
    // n is at most SHORT (15): the length byte is the only thing in the top byte.
    u128::from(lo) | (u128::from(hi | ((n as u64) << 56)) << 64)
}

#[inline(always)]
fn le64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn le32(b: &[u8]) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[..4]);
    u64::from(u32::from_le_bytes(w))
}

/// The process's hash state (`ahash`, as the rest of the core hashes; seeded at random
/// once per process).
fn state() -> &'static ahash::RandomState {
    static STATE: OnceLock<ahash::RandomState> = OnceLock::new();
    STATE.get_or_init(ahash::RandomState::new)
}

#[inline(always)]
fn hash_packed(p: u128) -> u64 {
    state().hash_one(p)
}

fn hash_long(bytes: &[u8]) -> u64 {
    state().hash_one(bytes)
}

/// Children of one level by token.
pub(crate) struct TokenMap<V> {
    table: HashTable<(Key, V)>,
}

impl<V> Default for TokenMap<V> {
    fn default() -> Self {
        TokenMap {
            table: HashTable::new(),
        }
    }
}

impl<V> TokenMap<V> {
    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    #[inline(always)]
    pub(crate) fn get(&self, t: &Tok<'_>) -> Option<&V> {
        self.table.find(t.hash, |(k, _)| t.is(k)).map(|(_, v)| v)
    }

    pub(crate) fn get_mut(&mut self, t: &Tok<'_>) -> Option<&mut V> {
        self.table.find_mut(t.hash, |(k, _)| t.is(k)).map(|(_, v)| v)
    }

    /// The child under `t`, made empty first if there is none.
    pub(crate) fn get_or_default(&mut self, t: &Tok<'_>) -> &mut V
    where
        V: Default,
    {
        let entry = self.table.entry(t.hash, |(k, _)| t.is(k), |(k, _)| k.hash());
        &mut entry.or_insert_with(|| (t.key(), V::default())).into_mut().1
    }

    pub(crate) fn remove(&mut self, t: &Tok<'_>) -> Option<V> {
        match self.table.find_entry(t.hash, |(k, _)| t.is(k)) {
            Ok(e) => Some(e.remove().0 .1),
            Err(_) => None,
        }
    }

    /// Every child with its token, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.table.iter().map(|(k, v)| (k.bytes(), v))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_long_and_boundary_tokens_are_told_apart() {
        let mut m = TokenMap::default();
        let toks: Vec<Vec<u8>> = vec![
            b"a".to_vec(),
            b"a\0".to_vec(),
            vec![b'x'; 15],
            vec![b'x'; 16],
            vec![b'x'; 17],
            vec![b'x'; 40],
            b"0123456789abcde".to_vec(),
        ];
        for (i, t) in toks.iter().enumerate() {
            *m.get_or_default(&Tok::new(t)) = i;
        }
        for (i, t) in toks.iter().enumerate() {
            assert_eq!(m.get(&Tok::new(t)), Some(&i), "{t:?}");
        }
        assert_eq!(m.get(&Tok::new(b"b")), None);
        assert_eq!(m.get(&Tok::new(&[b'x'; 18])), None);
        let mut seen: Vec<Vec<u8>> = m.iter().map(|(k, _)| k.to_vec()).collect();
        seen.sort();
        let mut want = toks.clone();
        want.sort();
        assert_eq!(seen, want);
        assert_eq!(m.remove(&Tok::new(&[b'x'; 16])), Some(3));
        assert_eq!(m.remove(&Tok::new(&[b'x'; 16])), None);
        assert_eq!(m.get(&Tok::new(&[b'x'; 17])), Some(&4));
    }

    #[test]
    fn packing_keeps_every_byte_and_the_length() {
        for n in 1..=SHORT {
            let t: Vec<u8> = (1..=n as u8).collect();
            let mut want = [0u8; 16];
            want[..n].copy_from_slice(&t);
            want[SHORT] = n as u8;
            assert_eq!(pack(&t).to_le_bytes(), want, "{n}");
        }
    }

    proptest! {
        /// The map agrees with a `HashMap` over any mix of inserts and removes.
        #[test]
        fn agrees_with_a_hash_map(ops in proptest::collection::vec(
            (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..24)), 0..200)) {
            let mut m = TokenMap::default();
            let mut r = std::collections::HashMap::new();
            for (i, (insert, t)) in ops.iter().enumerate() {
                if *insert {
                    *m.get_or_default(&Tok::new(t)) = i;
                    r.insert(t.clone(), i);
                } else {
                    prop_assert_eq!(m.remove(&Tok::new(t)), r.remove(t));
                }
            }
            for (t, v) in &r {
                prop_assert_eq!(m.get(&Tok::new(t)), Some(v));
            }
            let mut keys: Vec<Vec<u8>> = m.iter().map(|(k, _)| k.to_vec()).collect();
            keys.sort();
            let mut want: Vec<Vec<u8>> = r.keys().cloned().collect();
            want.sort();
            prop_assert_eq!(keys, want);
        }
    }
}
