//! Which streams exist, in which account, on which shard: the server-wide view the API
//! needs for names, lists, subject overlap checks and placement. The streams themselves
//! (stores, consumers) live on their shards; this holds only their configurations.
//!
//! Ownership: one `Registry` behind a mutex in [`super::JetStream`], locked only by API
//! requests and stream lifecycle changes, never on the message path.

use super::api::config::StreamConfig;
use super::api::GoTime;
use crate::core::accounts::AccountId;
use std::collections::{BTreeMap, HashMap};

/// A stream as the registry knows it.
#[derive(Clone, Debug)]
pub struct Entry {
    pub shard: usize,
    pub cfg: StreamConfig,
    pub created: GoTime,
    /// Its consumers' names (kept in step by the owning shard).
    pub consumers: std::collections::BTreeSet<String>,
}

/// Streams of every account.
#[derive(Default)]
pub struct Registry {
    accounts: HashMap<AccountId, BTreeMap<String, Entry>>,
    /// Streams placed on each shard.
    load: Vec<usize>,
}

impl Registry {
    pub fn new(shards: usize) -> Registry {
        Registry {
            accounts: HashMap::new(),
            load: vec![0; shards.max(1)],
        }
    }

    pub fn get(&self, acc: AccountId, name: &str) -> Option<&Entry> {
        self.accounts.get(&acc)?.get(name)
    }

    pub fn get_mut(&mut self, acc: AccountId, name: &str) -> Option<&mut Entry> {
        self.accounts.get_mut(&acc)?.get_mut(name)
    }

    /// The account's streams, by name.
    pub fn streams(&self, acc: AccountId) -> impl Iterator<Item = (&String, &Entry)> {
        self.accounts.get(&acc).into_iter().flat_map(|m| m.iter())
    }

    /// Every stream of every account.
    pub fn all(&self) -> impl Iterator<Item = &Entry> {
        self.accounts.values().flat_map(|m| m.values())
    }

    pub fn count(&self, acc: AccountId) -> usize {
        self.accounts.get(&acc).map_or(0, BTreeMap::len)
    }

    /// The shard with the fewest streams (ties: the lowest index).
    pub fn pick_shard(&self) -> usize {
        self.load
            .iter()
            .enumerate()
            .min_by_key(|(i, n)| (**n, *i))
            .map_or(0, |(i, _)| i)
    }

    /// Count a stream that is about to be placed on `shard` (recovery).
    pub fn reserve(&mut self, shard: usize) {
        if let Some(n) = self.load.get_mut(shard) {
            *n += 1;
        }
    }

    /// Undo a [`Registry::reserve`].
    pub fn unreserve(&mut self, shard: usize) {
        if let Some(n) = self.load.get_mut(shard) {
            *n = n.saturating_sub(1);
        }
    }

    pub fn insert(&mut self, acc: AccountId, entry: Entry) {
        if let Some(n) = self.load.get_mut(entry.shard) {
            *n += 1;
        }
        let name = entry.cfg.name.clone();
        if let Some(old) = self.accounts.entry(acc).or_default().insert(name, entry) {
            if let Some(n) = self.load.get_mut(old.shard) {
                *n = n.saturating_sub(1);
            }
        }
    }

    pub fn remove(&mut self, acc: AccountId, name: &str) -> Option<Entry> {
        let e = self.accounts.get_mut(&acc)?.remove(name)?;
        if let Some(n) = self.load.get_mut(e.shard) {
            *n = n.saturating_sub(1);
        }
        Some(e)
    }

    /// A stream of `acc` other than `except` whose subjects overlap `subjects`.
    pub fn overlapping(&self, acc: AccountId, except: &str, subjects: &[String]) -> Option<String> {
        self.streams(acc)
            .filter(|(n, _)| n.as_str() != except)
            .find(|(_, e)| {
                subjects.iter().any(|a| {
                    e.cfg
                        .subjects
                        .iter()
                        .any(|b| crate::core::subject::subjects_collide(a, b))
                })
            })
            .map(|(n, _)| n.clone())
    }
}
