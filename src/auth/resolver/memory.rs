//! `resolver: MEMORY`: account JWTs held in memory, filled by `resolver_preload` (nats-server's
//! `MemAccResolver`).
//!
//! Updates pushed through the system account do not go here: as in the reference, the
//! claims service applies them to accounts already registered and leaves the resolver as it
//! was (so an account registered later starts from its preload again). The resolver is
//! writable (preloads are allowed) and has nothing to list or delete through `$SYS`.

use super::{AccountResolver, ResolverError, ResolverKind};
use std::collections::HashMap;
use std::sync::RwLock;

/// The memory resolver.
#[derive(Debug, Default)]
pub struct MemoryResolver {
    jwts: RwLock<HashMap<String, String>>,
}

impl MemoryResolver {
    pub fn new() -> Self {
        Self::default()
    }
}

impl AccountResolver for MemoryResolver {
    fn kind(&self) -> ResolverKind {
        ResolverKind::Memory
    }

    fn lookup(&self, account: &str) -> Option<String> {
        self.jwts
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(account)
            .cloned()
    }

    /// Stores under `account` whatever the caller gives (the reference does not look
    /// inside either).
    fn store(&self, account: &str, jwt: &str) -> Result<(), ResolverError> {
        self.jwts
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(account.to_string(), jwt.to_string());
        Ok(())
    }

    fn list(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .jwts
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_and_looks_up_by_key() {
        let r = MemoryResolver::new();
        assert_eq!(r.kind(), ResolverKind::Memory);
        assert!(!r.is_remote());
        assert_eq!(r.lookup("AB"), None);
        assert_eq!(r.store("AB", "jwt-1"), Ok(()));
        assert_eq!(r.store("AA", "jwt-2"), Ok(()));
        assert_eq!(r.lookup("AB").as_deref(), Some("jwt-1"));
        assert_eq!(r.store("AB", "jwt-3"), Ok(()));
        assert_eq!(r.lookup("AB").as_deref(), Some("jwt-3"), "a store replaces");
        assert_eq!(r.list(), ["AA", "AB"]);
        assert!(
            r.delete(&["AB".to_string()]).is_err(),
            "nothing is deleted through $SYS"
        );
        assert_eq!(r.lookup("AB").as_deref(), Some("jwt-3"));
        assert!(r.dir_store().is_none());
    }

    #[test]
    fn fetch_answers_at_once_from_memory() {
        let r = MemoryResolver::new();
        r.store("AK", "j").unwrap();
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        for key in ["AK", "missing"] {
            let g = got.clone();
            r.fetch(key, Box::new(move |j| g.lock().unwrap().push(j)));
        }
        assert_eq!(*got.lock().unwrap(), vec![Some("j".to_string()), None]);
    }
}
