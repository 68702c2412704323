//! Account resolvers (operator mode): where account JWTs come from and where updates
//! pushed through the system account go (FEATURES.md §8: `resolver: MEMORY`,
//! `URL(...)`, `{ type: full|cache, dir, ... }`).
//!
//! The operator authenticator asks [`AccountResolver::lookup`] (or, for resolvers that
//! need the network, [`AccountResolver::fetch`]) when a user of an unknown account
//! connects; the system account's claims services (`src/system/claims.rs`) call
//! `store`, `delete` and `list`.
//!
//! Ownership: one resolver per server, shared by every shard and the services through an
//! `Arc`; implementations lock internally (never on the message path: only at connect
//! time and for `$SYS` claim requests).
//!
//! Implementations: [`memory`] (`MEMORY`), [`url`] (`URL(...)`, over the small HTTP client
//! in `http`), [`dir`] (`full` and `cache`, over the directory store in [`dirstore`]);
//! [`from_config`] builds the configured one with the reference's startup checks.

mod build;
pub mod dir;
pub mod dirstore;
mod http;
pub mod memory;
pub mod url;

#[cfg(test)]
pub(crate) mod testkit;

pub use build::{from_config, from_config_with_tls};

use std::fmt::Debug;

/// Why a resolver refused a request (the text goes into `$SYS` responses and logs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolverError {
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
}

/// The kinds of resolver nats-server has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolverKind {
    Memory,
    Url,
    Full,
    Cache,
}

/// Called with the JWT found (or `None`) when an asynchronous fetch ends; runs on a
/// resolver thread.
pub type FetchDone = Box<dyn FnOnce(Option<String>) + Send>;

/// A source of account JWTs.
pub trait AccountResolver: Send + Sync + Debug {
    fn kind(&self) -> ResolverKind;

    /// The account JWT stored for `account` (a public account key), if known now. Must
    /// not wait on the network (a local file read is fine).
    fn lookup(&self, account: &str) -> Option<String>;

    /// True if lookups may need the network ([`Self::fetch`] then answers later).
    fn is_remote(&self) -> bool {
        false
    }

    /// Fetch `account` without blocking the caller: `done` runs later on another thread.
    /// The default answers at once from [`Self::lookup`].
    fn fetch(&self, account: &str, done: FetchDone) {
        done(self.lookup(account))
    }

    /// Store an account JWT (an update pushed through `$SYS`, or a preload). The caller
    /// has verified it. Read-only resolvers refuse.
    fn store(&self, account: &str, jwt: &str) -> Result<(), ResolverError>;

    /// Delete accounts (`$SYS.REQ.CLAIMS.DELETE`): refused unless the resolver allows it.
    fn delete(&self, accounts: &[String]) -> Result<(), ResolverError> {
        let _ = accounts;
        Err(ResolverError::Refused("delete not supported".into()))
    }

    /// Every account stored (`$SYS.REQ.CLAIMS.LIST`).
    fn list(&self) -> Vec<String> {
        Vec::new()
    }

    /// Updates through `$SYS` are accepted.
    fn accepts_updates(&self) -> bool {
        true
    }

    /// The directory store of a `full` or `cache` resolver (what the claims services
    /// need beyond this trait: the delete mode, the store hash and packs, lookups that tell
    /// "absent" from "invalid key"). `None` for the others.
    fn dir_store(&self) -> Option<&dirstore::DirStore> {
        None
    }
}
