//! Event ids as nats-server makes them (a NATS "nuid"): 22 base-62 characters, a random
//! 12-character prefix followed by a 10-character sequence that advances by a random step
//! and renews the prefix when it runs out. One generator per shard: no lock, no shared
//! state, ids unique with overwhelming probability.

use rand::Rng;

const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const PREFIX_LEN: usize = 12;
const SEQ_LEN: usize = 10;
/// 62^10.
const MAX_SEQ: u64 = 839_299_365_868_340_224;
const MIN_INC: u64 = 33;
const MAX_INC: u64 = 333;

/// A nuid generator.
pub struct Nuid {
    prefix: [u8; PREFIX_LEN],
    seq: u64,
    inc: u64,
}

impl Default for Nuid {
    fn default() -> Self {
        Self::new()
    }
}

impl Nuid {
    pub fn new() -> Nuid {
        let mut rng = rand::thread_rng();
        let mut n = Nuid {
            prefix: [b'0'; PREFIX_LEN],
            seq: rng.gen_range(0..MAX_SEQ),
            inc: rng.gen_range(MIN_INC..MAX_INC),
        };
        n.renew_prefix();
        n
    }

    fn renew_prefix(&mut self) {
        let mut rng = rand::thread_rng();
        for b in &mut self.prefix {
            *b = DIGITS[rng.gen_range(0..DIGITS.len())];
        }
    }

    /// The next id.
    pub fn next_id(&mut self) -> String {
        self.seq += self.inc;
        if self.seq >= MAX_SEQ {
            self.renew_prefix();
            let mut rng = rand::thread_rng();
            self.seq = rng.gen_range(0..MAX_SEQ);
            self.inc = rng.gen_range(MIN_INC..MAX_INC);
        }
        let mut out = [0u8; PREFIX_LEN + SEQ_LEN];
        out[..PREFIX_LEN].copy_from_slice(&self.prefix);
        let mut l = self.seq;
        for b in out[PREFIX_LEN..].iter_mut().rev() {
            *b = DIGITS[(l % 62) as usize];
            l /= 62;
        }
        out.iter().map(|&b| char::from(b)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_22_base62_characters_sharing_a_prefix_and_distinct() {
        let mut n = Nuid::new();
        let a = n.next_id();
        let b = n.next_id();
        assert_eq!(a.len(), 22);
        assert!(a.bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b);
        assert_eq!(a[..PREFIX_LEN], b[..PREFIX_LEN]);
    }

    #[test]
    fn running_out_of_sequence_renews_the_prefix() {
        let mut n = Nuid::new();
        let before = n.next_id();
        n.seq = MAX_SEQ - 1;
        let after = n.next_id();
        assert_eq!(after.len(), 22);
        assert_ne!(before[..PREFIX_LEN], after[..PREFIX_LEN]);
    }
}
