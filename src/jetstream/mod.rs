//! JetStream on one server: streams, consumers, the `$JS.API` services, KV and object
//! store support (FEATURES.md §14.1-14.3).
//!
//! - [`advisory`]: stream/consumer action advisories and the API audit.
//! - [`api`]: the API's wire shapes (configs, requests, responses, the error table).
//! - [`consumer`]: the sans-IO consumer engine a stream's shard drives (deliveries, acks,
//!   pull requests, redelivery, push heartbeats and flow control).
//! - [`consumers`]: a stream's consumers on its shard (engine, subscriptions, state).
//! - [`registry`]: which streams exist and where they live (server-wide, locked only by
//!   API requests).
//! - [`stream`]: a stream on its shard: store, ingest, dedupe, its directory.
//! - [`shard`]: the per-shard part ([`shard::ShardJs`], the shard's extension): the
//!   streams it owns, acknowledgements after group commit, timers.
//! - [`service`]: the `$JS.API.>` request handlers.
//!
//! Ownership: each stream and its consumers live on one shard (ARCHITECTURE.md invariant
//! 11), which opens its store and runs its consumers; publishes reach it through its
//! internal subscriptions like any subscriber, over the mesh from other shards. The API
//! service listens on shard 0 and hands stream-scoped requests to the owning shard as
//! jobs; the owning shard answers the requester itself.

pub mod advisory;
pub mod api;
pub mod consumer;
pub mod consumers;
pub mod registry;
pub mod service;
pub mod shard;
pub mod stream;

use crate::auth::config::AccountJetStream;
use crate::core::accounts::AccountId;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The server's JetStream settings, resolved at startup.
#[derive(Clone, Debug)]
pub struct JsSettings {
    /// `<store_dir>/jetstream`.
    pub root: PathBuf,
    pub max_memory: i64,
    pub max_store: i64,
    pub domain: String,
    pub strict: bool,
    pub store: stream::StoreOptions,
    /// Per-account settings by account name; `None`: only the global account (no
    /// accounts configured), which gets JetStream.
    pub accounts: Option<HashMap<String, AccountJetStream>>,
    /// `limits { max_ack_pending }` of the server (-1: none).
    pub max_ack_pending: i64,
    /// `limits { duplicate_window }` of the server (0: none).
    pub max_duplicate_window: i64,
    pub max_request_batch: i64,
    /// Encryption at rest (`key`, `cipher`, `prev_key`): message blocks are sealed with
    /// keys derived per account and stream, as the reference derives them.
    pub encryption: Option<storage::crypto::EncryptionConfig>,
}

/// API counters (`$JS.API.INFO`'s `api`).
#[derive(Default)]
pub struct ApiStats {
    pub total: AtomicU64,
    pub errors: AtomicU64,
}

/// JetStream's shared state.
pub struct JetStream {
    pub settings: JsSettings,
    pub registry: Mutex<registry::Registry>,
    pub api: ApiStats,
    /// The server's name and id (advisories, cluster info).
    pub server_name: String,
    pub server_id: String,
}

impl JetStream {
    pub fn new(settings: JsSettings, shards: usize, server_name: String, server_id: String) -> Arc<JetStream> {
        Arc::new(JetStream {
            settings,
            registry: Mutex::new(registry::Registry::new(shards)),
            api: ApiStats::default(),
            server_name,
            server_id,
        })
    }

    pub fn registry(&self) -> std::sync::MutexGuard<'_, registry::Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Is JetStream enabled for the account `name` (the system account never is)?
    pub fn enabled_for(&self, name: &str, is_system: bool) -> bool {
        if is_system {
            return false;
        }
        match &self.settings.accounts {
            None => name == "$G",
            Some(m) => m.get(name).is_some_and(|j| !matches!(j, AccountJetStream::Disabled)),
        }
    }

    /// The account's JetStream limits (unlimited where not configured).
    pub fn account_limits(&self, name: &str) -> crate::auth::config::JetStreamAccountLimits {
        match self.settings.accounts.as_ref().and_then(|m| m.get(name)) {
            Some(AccountJetStream::Limits(l)) => l.clone(),
            _ => Default::default(),
        }
    }

    pub(crate) fn count_request(&self, error: bool) {
        self.api.total.fetch_add(1, Ordering::Relaxed);
        if error {
            self.api.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The account's stream directory root, `<root>/<account>/streams`.
    pub fn streams_dir(&self, account: &str) -> PathBuf {
        stream::persist::streams_dir(&self.settings.root, account)
    }
}

/// Account ids are what the shards use; the registry is keyed by them.
pub type AccountKey = AccountId;
