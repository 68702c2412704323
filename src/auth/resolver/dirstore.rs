//! The directory store of the nats-based resolvers (`{ type: full | cache, dir, ... }`):
//! one file per account, `<account public key>.jwt`, holding the account JWT and nothing
//! else, directly in the directory (nats-server's unsharded `DirJWTStore`), so that a
//! directory written by nats-server serves rnats and the other way round.
//!
//! What the store keeps beside the files is an index of the JWTs it manages, as the
//! reference does: the SHA-256 of each (their XOR is the store hash that `$SYS.REQ.CLAIMS.PACK`
//! compares), when each expires (the JWT's `exp`, or for a cache `ttl` after it was last
//! used) and the order of use (a full cache evicts the least recently used JWT; a full
//! `full` store refuses new accounts with `jwt store is full`).
//!
//! Deletion follows the configured [`DeleteMode`]: refused, renamed to `<key>.jwt.deleted`,
//! or removed. Expired JWTs are removed from disk by [`DirStore::expire`] (called on a
//! timer by the resolver), as nats-server does for both kinds.
//!
//! Where rnats is stricter: every write goes to a temporary file (`.<key>.jwt.tmp`, a name
//! nats-server's scan ignores), is synced and renamed over the old file, and the directory
//! is synced, so a crash leaves the old or the new JWT, never a torn one; stale temporary
//! files are removed when the store opens. Files whose content does not decode as a JWT
//! (torn, empty, garbage) are neither indexed, listed nor served.

use crate::auth::config::DeleteMode;
use crate::auth::jwt::{decode_generic, KeyKind};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The suffix of a stored JWT.
pub const JWT_SUFFIX: &str = ".jwt";
/// The suffix a deleted JWT is renamed to (after [`JWT_SUFFIX`]).
pub const DELETED_SUFFIX: &str = ".deleted";
/// The suffix of rnats' temporary files (which start with a `.`).
const TMP_SUFFIX: &str = ".jwt.tmp";

/// nats-server's permissions for the store (directory and files).
const DIR_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;

/// The expiry check interval when nothing shorter is asked for.
const MAX_CHECK_INTERVAL: Duration = Duration::from_secs(60);

/// Why a store operation failed; the texts are nats-server's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("invalid public key")]
    InvalidKey,
    #[error("invalid JWT")]
    InvalidJwt,
    #[error("jwt store is full")]
    Full,
    #[error("store is not set up to for delete")]
    NoDelete,
    #[error("jwt subject nkey and provided nkey do not match")]
    SubjectMismatch,
    #[error("subject of existing and new jwt do not match")]
    ExistingSubjectMismatch,
    /// No usable JWT for the key (no file, or one whose content is not a JWT).
    #[error("no such file or directory")]
    NotFound,
    /// The new JWT does not decode (the JWT library's text).
    #[error("{0}")]
    Jwt(String),
    /// A file operation failed (Go's `op path: reason`).
    #[error("{0}")]
    Io(String),
}

/// How a store behaves (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    pub delete: DeleteMode,
    /// How many JWTs may be indexed.
    pub limit: u64,
    /// At the limit, evict the least recently used JWT (cache) instead of refusing.
    pub evict: bool,
    /// A JWT expires this long after it was stored or last read (`None`: at its `exp`).
    pub ttl: Option<Duration>,
}

/// One indexed JWT.
#[derive(Debug, Clone, Copy)]
struct Entry {
    hash: [u8; 32],
    /// Unix nanoseconds; `i64::MAX` is never.
    expires: i64,
    /// Position in the use order (larger is more recent).
    used: u64,
}

#[derive(Debug, Default)]
struct Index {
    entries: HashMap<String, Entry>,
    /// Use order: tick → key.
    order: BTreeMap<u64, String>,
    tick: u64,
    /// XOR of every entry's hash.
    hash: [u8; 32],
}

impl Index {
    fn xor(&mut self, h: &[u8; 32]) {
        for (a, b) in self.hash.iter_mut().zip(h) {
            *a ^= b;
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Add or replace `key` (a new key becomes the most recently used).
    fn track(&mut self, key: &str, hash: [u8; 32], expires: i64) {
        if let Some(e) = self.entries.get_mut(key) {
            let old = e.hash;
            e.hash = hash;
            e.expires = expires;
            self.xor(&old);
        } else {
            let used = self.next_tick();
            self.order.insert(used, key.to_string());
            self.entries.insert(key.to_string(), Entry { hash, expires, used });
        }
        self.xor(&hash);
    }

    fn untrack(&mut self, key: &str) {
        if let Some(e) = self.entries.remove(key) {
            self.order.remove(&e.used);
            self.xor(&e.hash);
        }
    }

    /// `key` was used: renew its ttl and (for a cache) make it the most recent.
    fn touch(&mut self, key: &str, ttl_expiry: Option<i64>, lru: bool) {
        let tick = self.tick + 1;
        let Some(e) = self.entries.get_mut(key) else { return };
        if let Some(at) = ttl_expiry {
            e.expires = at;
        }
        if lru {
            let old = std::mem::replace(&mut e.used, tick);
            self.tick = tick;
            self.order.remove(&old);
            self.order.insert(tick, key.to_string());
        }
    }

    fn least_recent(&self) -> Option<String> {
        self.order.values().next().cloned()
    }
}

/// A directory of account JWTs (see the module documentation).
#[derive(Debug)]
pub struct DirStore {
    dir: PathBuf,
    opts: StoreOptions,
    index: Mutex<Index>,
}

/// Unix nanoseconds of `t`.
pub(crate) fn unix_nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn now_nanos() -> i64 {
    unix_nanos(SystemTime::now())
}

fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Go's `*PathError` text: `op path: reason`.
fn path_error(op: &str, path: &Path, e: &io::Error) -> StoreError {
    StoreError::Io(format!("{op} {}: {}", path.display(), conf::go_os_error(e)))
}

/// The content is something a client could be served: a JWT whose signature verifies.
fn usable(jwt: &str) -> bool {
    !jwt.is_empty() && decode_generic(jwt).is_ok()
}

/// The file name of a key, if it is a public nkey (of any kind).
fn file_name(key: &str) -> Option<String> {
    crate::auth::jwt::keys::key_kind(key)?;
    Some(format!("{key}{JWT_SUFFIX}"))
}

impl DirStore {
    /// Opens (creating it if needed) the store in `dir` and indexes the JWTs found there.
    pub fn open(dir: &Path, opts: StoreOptions) -> Result<DirStore, StoreError> {
        if dir.as_os_str().is_empty() {
            return Err(StoreError::Io("path is not specified".into()));
        }
        if !dir.is_dir() {
            if dir.exists() {
                let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
                return Err(StoreError::Io(format!(
                    "the path [{}] is not a directory",
                    abs.display()
                )));
            }
            fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(dir)
                .map_err(|e| path_error("mkdir", dir, &e))?;
        }
        let abs = std::path::absolute(dir).map_err(|e| path_error("abs", dir, &e))?;
        let store = DirStore {
            dir: abs,
            opts,
            index: Mutex::new(Index::default()),
        };
        store.scan(now_nanos())?;
        Ok(store)
    }

    /// The directory (absolute).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn options(&self) -> &StoreOptions {
        &self.opts
    }

    /// How often [`Self::expire`] should run: half the ttl, at most a minute.
    pub fn check_interval(&self) -> Duration {
        match self.opts.ttl {
            Some(ttl) if !ttl.is_zero() => (ttl / 2).clamp(Duration::from_millis(1), MAX_CHECK_INTERVAL),
            _ => MAX_CHECK_INTERVAL,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn path_for(&self, key: &str) -> Option<PathBuf> {
        file_name(key).map(|n| self.dir.join(n))
    }

    /// When a JWT stored now expires.
    fn expiry(&self, jwt: &str, now: i64) -> i64 {
        if let Some(ttl) = self.opts.ttl {
            return now.saturating_add(i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX));
        }
        let exp = decode_generic(jwt).map(|g| g.claims.expires).unwrap_or(0);
        if exp == 0 {
            i64::MAX
        } else {
            exp.saturating_mul(1_000_000_000)
        }
    }

    fn ttl_expiry(&self, now: i64) -> Option<i64> {
        self.opts
            .ttl
            .map(|ttl| now.saturating_add(i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX)))
    }

    /// Index what the directory holds (every usable `<key>.jwt`; the limit is not applied,
    /// as in the reference) and remove stale temporary files.
    fn scan(&self, now: i64) -> Result<(), StoreError> {
        let rd = fs::read_dir(&self.dir).map_err(|e| path_error("open", &self.dir, &e))?;
        let mut found: Vec<(String, String)> = Vec::new();
        for entry in rd.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let path = entry.path();
            if name.starts_with('.') && name.ends_with(TMP_SUFFIX) {
                let _ = fs::remove_file(&path);
                continue;
            }
            let Some(key) = name.strip_suffix(JWT_SUFFIX) else {
                continue;
            };
            if file_name(key).is_none() || !path.is_file() {
                continue;
            }
            match fs::read_to_string(&path) {
                Ok(jwt) if usable(&jwt) => found.push((key.to_string(), jwt)),
                _ => tracing::warn!("Ignoring unusable JWT file {}", path.display()),
            }
        }
        // The reference walks the directory in lexical order; the use order follows it.
        found.sort();
        let mut idx = self.lock();
        for (key, jwt) in found {
            let exp = self.expiry(&jwt, now);
            idx.track(&key, sha256(jwt.as_bytes()), exp);
        }
        Ok(())
    }

    /// The JWT stored for `key` (read from disk; a use for the cache's ttl and order).
    pub fn load(&self, key: &str) -> Result<String, StoreError> {
        self.load_at(key, now_nanos())
    }

    pub(crate) fn load_at(&self, key: &str, now: i64) -> Result<String, StoreError> {
        let path = self.path_for(key).ok_or(StoreError::InvalidKey)?;
        let mut idx = self.lock();
        let jwt = match fs::read_to_string(&path) {
            Ok(j) => j,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(StoreError::NotFound),
            Err(e) => return Err(path_error("open", &path, &e)),
        };
        if !usable(&jwt) {
            return Err(StoreError::NotFound);
        }
        idx.touch(key, self.ttl_expiry(now), self.opts.evict);
        Ok(jwt)
    }

    /// Store `jwt` for `key` unconditionally (nats-server's `save`). `Ok(true)` if the
    /// stored JWT changed.
    pub fn save(&self, key: &str, jwt: &str) -> Result<bool, StoreError> {
        self.save_at(key, jwt, now_nanos())
    }

    pub(crate) fn save_at(&self, key: &str, jwt: &str, now: i64) -> Result<bool, StoreError> {
        let path = self.path_for(key).ok_or(StoreError::InvalidKey)?;
        let mut idx = self.lock();
        self.write(&mut idx, &path, key, jwt, now)
    }

    /// Store `jwt` for `key` unless what is stored is the same JWT or a newer one
    /// (nats-server's `saveIfNewer`, its `Store`). `Ok(true)` if the stored JWT changed.
    pub fn save_if_newer(&self, key: &str, jwt: &str) -> Result<bool, StoreError> {
        self.save_if_newer_at(key, jwt, now_nanos())
    }

    pub(crate) fn save_if_newer_at(&self, key: &str, jwt: &str, now: i64) -> Result<bool, StoreError> {
        let path = self.path_for(key).ok_or(StoreError::InvalidKey)?;
        let mut idx = self.lock();
        if path.exists() {
            let new = decode_generic(jwt).map_err(|e| StoreError::Jwt(e.to_string()))?;
            let existing = fs::read_to_string(&path).map_err(|e| path_error("open", &path, &e))?;
            // What is there and does not decode is simply replaced.
            if let Ok(old) = decode_generic(&existing) {
                if old.claims.id == new.claims.id || old.claims.issued_at > new.claims.issued_at {
                    return Ok(false);
                }
                if new.claims.subject != key {
                    return Err(StoreError::SubjectMismatch);
                }
                if old.claims.subject != new.claims.subject {
                    return Err(StoreError::ExistingSubjectMismatch);
                }
            }
        }
        self.write(&mut idx, &path, key, jwt, now)
    }

    /// The write both saves share: index bookkeeping, the limit, the atomic file write.
    fn write(&self, idx: &mut Index, path: &Path, key: &str, jwt: &str, now: i64) -> Result<bool, StoreError> {
        if jwt.is_empty() {
            return Err(StoreError::InvalidJwt);
        }
        let hash = sha256(jwt.as_bytes());
        if let Some(e) = idx.entries.get(key) {
            let same = e.hash == hash;
            idx.touch(key, self.ttl_expiry(now), self.opts.evict);
            if same && path.is_file() {
                return Ok(false);
            }
        } else if idx.entries.len() as u64 >= self.opts.limit {
            if !self.opts.evict {
                return Err(StoreError::Full);
            }
            if let Some(victim) = idx.least_recent() {
                if let Some(vpath) = self.path_for(&victim) {
                    match fs::remove_file(&vpath) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(path_error("remove", &vpath, &e)),
                    }
                }
                idx.untrack(&victim);
            }
        }
        write_atomic(&self.dir, path, key, jwt.as_bytes())?;
        let exp = self.expiry(jwt, now);
        idx.track(key, hash, exp);
        Ok(true)
    }

    /// Delete the JWT of `key` as the delete mode says. `Ok(true)` if there was one,
    /// `Ok(false)` if there was no file (not an error, as in the reference).
    pub fn delete(&self, key: &str) -> Result<bool, StoreError> {
        if self.opts.delete == DeleteMode::NoDelete {
            return Err(StoreError::NoDelete);
        }
        let path = self.path_for(key).ok_or(StoreError::InvalidKey)?;
        let mut idx = self.lock();
        let done = if self.opts.delete == DeleteMode::Rename {
            let mut to = path.clone().into_os_string();
            to.push(DELETED_SUFFIX);
            let to = PathBuf::from(to);
            // Go's `*LinkError` text names both paths.
            fs::rename(&path, &to).map_err(|e| (e, format!("rename {} {}", path.display(), to.display())))
        } else {
            fs::remove_file(&path).map_err(|e| (e, format!("remove {}", path.display())))
        };
        match done {
            Ok(()) => {}
            Err((e, _)) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err((e, what)) => return Err(StoreError::Io(format!("{what}: {}", conf::go_os_error(&e)))),
        }
        sync_dir(&self.dir);
        idx.untrack(key);
        Ok(true)
    }

    /// Every indexed JWT that is usable and not expired by its `exp`, sorted by key (what
    /// `$SYS.REQ.CLAIMS.PACK` sends and `$SYS.REQ.CLAIMS.LIST` names).
    pub fn pack(&self) -> Vec<(String, String)> {
        self.pack_at(now_nanos())
    }

    pub(crate) fn pack_at(&self, now: i64) -> Vec<(String, String)> {
        let mut keys: Vec<String> = self.lock().entries.keys().cloned().collect();
        keys.sort();
        let now_secs = now / 1_000_000_000;
        keys.into_iter()
            .filter_map(|key| {
                let jwt = fs::read_to_string(self.path_for(&key)?).ok()?;
                let claims = decode_generic(&jwt).ok()?;
                let exp = claims.claims.expires;
                (exp <= 0 || exp >= now_secs).then_some((key, jwt))
            })
            .collect()
    }

    /// The keys of [`Self::pack`].
    pub fn list(&self) -> Vec<String> {
        self.pack().into_iter().map(|(k, _)| k).collect()
    }

    /// The store hash: XOR of the SHA-256 of every indexed JWT.
    pub fn hash(&self) -> [u8; 32] {
        self.lock().hash
    }

    /// Number of indexed JWTs.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True if `key` is indexed.
    pub fn contains(&self, key: &str) -> bool {
        self.lock().entries.contains_key(key)
    }

    /// Remove the JWTs whose time is up (file and index); returns their keys.
    pub fn expire(&self) -> Vec<String> {
        self.expire_at(now_nanos())
    }

    pub(crate) fn expire_at(&self, now: i64) -> Vec<String> {
        let mut idx = self.lock();
        let mut due: Vec<(i64, String)> = idx
            .entries
            .iter()
            .filter(|(_, e)| e.expires <= now)
            .map(|(k, e)| (e.expires, k.clone()))
            .collect();
        due.sort();
        let mut removed = Vec::new();
        for (_, key) in due {
            let Some(path) = self.path_for(&key) else { continue };
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::error!(
                        "Could not remove expired JWT {}: {}",
                        path.display(),
                        conf::go_os_error(&e)
                    );
                    continue;
                }
            }
            idx.untrack(&key);
            removed.push(key);
        }
        removed
    }
}

/// Write `data` to `path` through a synced temporary file and a rename.
fn write_atomic(dir: &Path, path: &Path, key: &str, data: &[u8]) -> Result<(), StoreError> {
    let tmp = dir.join(format!(".{key}{TMP_SUFFIX}"));
    let res = (|| -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(FILE_MODE)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)
    })();
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(path_error("open", path, &e));
    }
    sync_dir(dir);
    Ok(())
}

/// Make a rename or removal in `dir` durable (best effort).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// True if `key` names an account (what the resolvers fetch).
pub fn is_account(key: &str) -> bool {
    crate::auth::jwt::keys::key_kind(key) == Some(KeyKind::Account)
}

#[cfg(test)]
#[path = "dirstore_tests.rs"]
mod tests;
