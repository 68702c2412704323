//! A set of the numbers 0 to 255 in four words: the shards a message goes to, the first
//! bytes of the import patterns' first tokens.

/// Numbers 0 to 255; larger ones are never members (inserting one does nothing).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Set256([u64; 4]);

impl Set256 {
    pub fn insert(&mut self, n: usize) {
        if let Some(w) = self.0.get_mut(n / 64) {
            *w |= 1 << (n % 64);
        }
    }

    #[inline]
    pub fn contains(&self, n: usize) -> bool {
        self.0.get(n / 64).is_some_and(|w| w & (1 << (n % 64)) != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::Set256;

    #[test]
    fn members_in_every_word_and_none_past_the_end() {
        let mut s = Set256::default();
        assert!(s.is_empty());
        for n in [0, 63, 64, 127, 200, 255] {
            s.insert(n);
        }
        s.insert(256);
        for n in 0..300 {
            assert_eq!(s.contains(n), [0, 63, 64, 127, 200, 255].contains(&n), "{n}");
        }
        assert!(!s.is_empty());
    }
}
