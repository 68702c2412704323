//! The nats-based resolvers, `{ type: full, dir, allow_delete, hard_delete, limit,
//! interval, timeout }` and `{ type: cache, dir, limit, ttl }` (nats-server's
//! `DirAccResolver` and `CacheDirAccResolver`): account JWTs kept in a [`DirStore`] and
//! updated through the system account (`src/system/claims.rs`).
//!
//! - `full` keeps every account it is given: no limit unless `limit` is set (then new
//!   accounts are refused with `jwt store is full`), deletes as `allow_delete` /
//!   `hard_delete` say, expired JWTs removed.
//! - `cache` keeps up to `limit` accounts (1000 by default), evicting the least recently
//!   used, each for `ttl` after its last use (or until its `exp` without a ttl); deletes
//!   remove the file.
//!
//! A timer thread per resolver runs the store's expiry; it ends with the resolver.
//! Standalone, lookups are answered from the directory only: asking the other servers of
//! a cluster (`$SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP`, within `timeout`) and the periodic
//! `$SYS.REQ.CLAIMS.PACK` sync (`interval`) need routes, which rnats does not have yet; the
//! values are kept ([`DirectoryResolver::fetch_timeout`], [`DirectoryResolver::sync_interval`]).

use super::dirstore::{is_account, DirStore, StoreOptions};
use super::url::DEFAULT_FETCH_TIMEOUT;
use super::{AccountResolver, ResolverError, ResolverKind};
use crate::auth::config::{DeleteMode, DirResolver as DirConfig};
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// The cache's default `limit`.
pub const DEFAULT_CACHE_LIMIT: u64 = 1000;
/// The full resolver's default sync `interval`.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(60);

/// A `full` or `cache` resolver.
#[derive(Debug)]
pub struct DirectoryResolver {
    kind: ResolverKind,
    store: Arc<DirStore>,
    fetch_timeout: Duration,
    sync_interval: Duration,
    /// Dropping it stops the expiry thread.
    _stop: mpsc::Sender<()>,
}

fn fetch_timeout(cfg: &DirConfig) -> Result<Duration, ResolverError> {
    match cfg.timeout {
        // The config keeps no sign: a negative timeout arrives as zero.
        Some(t) if t.is_zero() => Err(ResolverError::Refused("Fetch timeout 0s is too smal".into())),
        Some(t) => Ok(t),
        None => Ok(DEFAULT_FETCH_TIMEOUT),
    }
}

impl DirectoryResolver {
    /// `{ type: full, ... }`.
    pub fn full(cfg: &DirConfig) -> Result<Self, ResolverError> {
        let opts = StoreOptions {
            delete: cfg.delete,
            limit: u64::try_from(cfg.limit).ok().filter(|l| *l > 0).unwrap_or(u64::MAX),
            evict: false,
            ttl: None,
        };
        let interval = if cfg.interval.is_zero() {
            DEFAULT_SYNC_INTERVAL
        } else {
            cfg.interval
        };
        Self::open(ResolverKind::Full, &cfg.dir, opts, fetch_timeout(cfg)?, interval)
    }

    /// `{ type: cache, ... }`.
    pub fn cache(cfg: &DirConfig) -> Result<Self, ResolverError> {
        let opts = StoreOptions {
            delete: DeleteMode::Hard,
            limit: u64::try_from(cfg.limit)
                .ok()
                .filter(|l| *l > 0)
                .unwrap_or(DEFAULT_CACHE_LIMIT),
            evict: true,
            ttl: (!cfg.ttl.is_zero()).then_some(cfg.ttl),
        };
        Self::open(ResolverKind::Cache, &cfg.dir, opts, fetch_timeout(cfg)?, Duration::ZERO)
    }

    fn open(
        kind: ResolverKind,
        dir: &str,
        opts: StoreOptions,
        fetch_timeout: Duration,
        sync_interval: Duration,
    ) -> Result<Self, ResolverError> {
        let store = Arc::new(DirStore::open(Path::new(dir), opts).map_err(|e| ResolverError::Io(e.to_string()))?);
        let (stop, stopped) = mpsc::channel::<()>();
        let s = store.clone();
        let every = store.check_interval();
        let spawned = std::thread::Builder::new()
            .name("rnats-jwt-expiry".into())
            .spawn(move || loop {
                for key in s.expire() {
                    tracing::debug!("Removed expired JWT of {key}");
                }
                match stopped.recv_timeout(every) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
            });
        if let Err(e) = spawned {
            return Err(ResolverError::Io(format!("could not start the expiry thread: {e}")));
        }
        Ok(DirectoryResolver {
            kind,
            store,
            fetch_timeout,
            sync_interval,
            _stop: stop,
        })
    }

    /// How long a lookup may wait for other servers (kept for clustering).
    pub fn fetch_timeout(&self) -> Duration {
        self.fetch_timeout
    }

    /// How often a full resolver compares its store with other servers (kept for
    /// clustering; zero for a cache).
    pub fn sync_interval(&self) -> Duration {
        self.sync_interval
    }
}

impl AccountResolver for DirectoryResolver {
    fn kind(&self) -> ResolverKind {
        self.kind
    }

    fn lookup(&self, account: &str) -> Option<String> {
        if !is_account(account) {
            return None;
        }
        self.store.load(account).ok()
    }

    /// The reference's `Store`: written unless the stored JWT is the same or newer.
    fn store(&self, account: &str, jwt: &str) -> Result<(), ResolverError> {
        self.store
            .save_if_newer(account, jwt)
            .map(|_| ())
            .map_err(|e| ResolverError::Refused(e.to_string()))
    }

    /// Each account in turn; the errors (one line each) after trying all.
    fn delete(&self, accounts: &[String]) -> Result<(), ResolverError> {
        let errs: Vec<String> = accounts
            .iter()
            .filter_map(|a| self.store.delete(a).err().map(|e| e.to_string()))
            .collect();
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ResolverError::Refused(errs.join("\n")))
        }
    }

    fn list(&self) -> Vec<String> {
        self.store.list()
    }

    fn dir_store(&self) -> Option<&DirStore> {
        Some(&self.store)
    }
}

#[cfg(test)]
#[path = "dir_tests.rs"]
mod tests;
