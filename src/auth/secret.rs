//! Secrets as nats-server compares them: bcrypt hashes (`$2a$...`) are verified with
//! bcrypt, anything else with a constant-time comparison.

/// nats-server's test for a bcrypt hash: `$2a$`, `$2b$`, `$2x$` or `$2y$`, two digits, `$`.
pub fn is_bcrypt(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 7
        && b.starts_with(b"$2")
        && matches!(b.get(2), Some(b'a' | b'b' | b'x' | b'y'))
        && b.get(3) == Some(&b'$')
        && b.get(4).is_some_and(u8::is_ascii_digit)
        && b.get(5).is_some_and(u8::is_ascii_digit)
        && b.get(6) == Some(&b'$')
}

/// A configured password or token against what the client sent: bcrypt when the
/// configured one is a bcrypt hash, otherwise a constant-time comparison.
pub fn password_matches(configured: &str, given: &str) -> bool {
    if is_bcrypt(configured) {
        bcrypt_matches(configured, given)
    } else {
        ct_eq(configured.as_bytes(), given.as_bytes())
    }
}

/// Successful bcrypt verifications, by SHA-256 of (hash, password). A bcrypt check costs
/// tens of milliseconds, which would stall a whole shard; a reconnecting client with the
/// same credentials is verified once.
fn bcrypt_matches(hash: &str, given: &str) -> bool {
    use sha2::{Digest, Sha256};
    use std::collections::HashSet;
    use std::sync::Mutex;
    static VERIFIED: Mutex<Option<HashSet<[u8; 32]>>> = Mutex::new(None);
    const MAX_CACHED: usize = 4096;
    let mut h = Sha256::new();
    h.update(hash.as_bytes());
    h.update([0u8]);
    h.update(given.as_bytes());
    let key: [u8; 32] = h.finalize().into();
    if let Ok(cache) = VERIFIED.lock() {
        if cache.as_ref().is_some_and(|c| c.contains(&key)) {
            return true;
        }
    }
    let ok = bcrypt::verify(given, hash).unwrap_or(false);
    if ok {
        if let Ok(mut cache) = VERIFIED.lock() {
            let set = cache.get_or_insert_with(HashSet::new);
            if set.len() >= MAX_CACHED {
                set.clear();
            }
            set.insert(key);
        }
    }
    ok
}

/// Equality without early exit, for credentials.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcrypt_prefixes() {
        assert!(is_bcrypt("$2a$11$abc"));
        assert!(is_bcrypt("$2y$04$"));
        assert!(!is_bcrypt("$2c$11$abc"));
        assert!(!is_bcrypt("$2a$1$abc"));
        assert!(!is_bcrypt("2a$11$abc"));
    }

    #[test]
    fn plain_and_bcrypt_secrets() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        assert!(password_matches(&hash, "s3cret"));
        assert!(password_matches(&hash, "s3cret"), "cached verification");
        assert!(!password_matches(&hash, "nope"));
        assert!(password_matches("pa", "pa"));
        assert!(!password_matches("pa", "pb"));
        assert!(!password_matches("pa", ""));
    }
}
