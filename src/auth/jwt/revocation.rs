//! Revocation lists (`revocations` of accounts and exports): public key (or `*` for all
//! keys) to a unix time; a JWT about that key issued at or before the time is revoked.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The key that revokes every key (jwt v2's `All`).
pub const REVOKE_ALL: &str = "*";

/// Public key → unix seconds. Serialized as a JSON object with sorted keys, as Go writes
/// maps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RevocationList(pub BTreeMap<String, i64>);

impl RevocationList {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Revokes `key` for JWTs issued at or before `at`; an existing entry with a later time
    /// is kept.
    pub fn revoke(&mut self, key: impl Into<String>, at: i64) {
        let key = key.into();
        match self.0.get(&key) {
            Some(&ts) if ts > at => {}
            _ => {
                self.0.insert(key, at);
            }
        }
    }

    /// Removes the entry for `key`.
    pub fn clear(&mut self, key: &str) {
        self.0.remove(key);
    }

    /// Is a JWT about `key` issued at `issued_at` revoked: by its own entry or by `*`, each
    /// counting when its time is `>= issued_at`.
    pub fn is_revoked(&self, key: &str, issued_at: i64) -> bool {
        let hit = |k: &str| self.0.get(k).is_some_and(|&ts| ts >= issued_at);
        hit(REVOKE_ALL) || hit(key)
    }

    /// Drops the entries a `*` entry already covers (time `<=` the `*` time); returns them.
    pub fn maybe_compact(&mut self) -> Vec<(String, i64)> {
        let Some(&all) = self.0.get(REVOKE_ALL) else {
            return Vec::new();
        };
        let covered: Vec<(String, i64)> = self
            .0
            .iter()
            .filter(|(k, &ts)| k.as_str() != REVOKE_ALL && all >= ts)
            .map(|(k, &ts)| (k.clone(), ts))
            .collect();
        for (k, _) in &covered {
            self.0.remove(k);
        }
        covered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revoked_at_or_before_the_time() {
        let mut r = RevocationList::default();
        r.revoke("U1", 100);
        let cases = [
            ("U1", 99, true),
            ("U1", 100, true),
            ("U1", 101, false),
            ("U2", 50, false),
        ];
        for (key, iat, want) in cases {
            assert_eq!(r.is_revoked(key, iat), want, "{key} {iat}");
        }
    }

    #[test]
    fn wildcard_revokes_everyone() {
        let mut r = RevocationList::default();
        r.revoke(REVOKE_ALL, 200);
        assert!(r.is_revoked("ANY", 200));
        assert!(!r.is_revoked("ANY", 201));
        r.revoke("U1", 150);
        r.revoke("U2", 300);
        let dropped = r.maybe_compact();
        assert_eq!(dropped, vec![("U1".to_string(), 150)]);
        assert!(r.0.contains_key("U2"));
    }

    #[test]
    fn revoke_never_moves_forward() {
        let mut r = RevocationList::default();
        r.revoke("U1", 100);
        r.revoke("U1", 50);
        assert_eq!(r.0.get("U1"), Some(&100));
        r.revoke("U1", 150);
        assert_eq!(r.0.get("U1"), Some(&150));
        r.clear("U1");
        assert!(r.is_empty());
    }
}
