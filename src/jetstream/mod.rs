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
//! - [`sourcing`]: mirrors and sources (internal consumers on the origins, run on the
//!   sourcing stream's shard).
//! - [`stream`]: a stream on its shard: store, ingest, dedupe, its directory.
//! - [`shard`]: the per-shard part ([`shard::ShardJs`], the shard's extension): the
//!   streams it owns, acknowledgements after group commit, timers.
//! - [`service`]: the `$JS.API.>` request handlers (on every shard, one queue group).
//!
//! Ownership: each stream and its consumers live on one shard (ARCHITECTURE.md invariant
//! 11), which opens its store and runs its consumers; publishes reach it through its
//! internal subscriptions like any subscriber, over the mesh from other shards. The API
//! service listens on every shard (one queue group per account) and hands stream-scoped
//! requests to the owning shard as jobs; the owning shard answers the requester itself.

pub mod advisory;
pub mod api;
pub mod consumer;
pub mod consumers;
pub mod registry;
pub mod service;
pub mod shard;
pub mod sourcing;
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
    /// `request_queue_limit` and `info_queue_limit` (resolved: > 0).
    pub request_queue_limit: i64,
    pub info_queue_limit: i64,
    /// `limits { batch { ... } }`: atomic and fast batch publish limits (0: the defaults).
    pub batch: stream::batch::BatchLimits,
    /// Encryption at rest (`key`, `cipher`, `prev_key`): message blocks are sealed with
    /// keys derived per account and stream, as the reference derives them.
    pub encryption: Option<storage::crypto::EncryptionConfig>,
    /// Operator mode: accounts get JetStream from their JWT's limits.
    pub operator: Option<Arc<crate::auth::operator::accounts::OperatorAccounts>>,
}

/// API counters: the server's (`/jsz`) and each account's (`$JS.API.INFO`'s `api`).
#[derive(Default)]
pub struct ApiStats {
    pub total: AtomicU64,
    pub errors: AtomicU64,
    /// Per account: (total, errors). Requests are rare next to messages; a lock is fine.
    accounts: std::sync::Mutex<std::collections::HashMap<AccountId, (u64, u64)>>,
}

impl ApiStats {
    /// The account's (total, errors).
    pub fn account(&self, acc: AccountId) -> (u64, u64) {
        self.accounts
            .lock()
            .map(|m| m.get(&acc).copied().unwrap_or_default())
            .unwrap_or_default()
    }
}

/// Bytes stored, by storage type (an account's, or the server's).
#[derive(Default, Debug)]
pub struct Usage {
    pub memory: std::sync::atomic::AtomicI64,
    pub store: std::sync::atomic::AtomicI64,
}

impl Usage {
    pub fn of(&self, memory: bool) -> &std::sync::atomic::AtomicI64 {
        if memory {
            &self.memory
        } else {
            &self.store
        }
    }
}

/// JetStream's shared state.
pub struct JetStream {
    pub settings: JsSettings,
    /// Bytes stored per account and in all, kept by the streams' shards (atomics: no lock
    /// on the message path).
    usage: Mutex<HashMap<AccountId, Arc<Usage>>>,
    pub total: Arc<Usage>,
    registry: Mutex<registry::Registry>,
    /// Bumped each time the registry is locked for a possible change
    /// ([`JetStream::registry`]): answers worked out from it stay good while it holds.
    registry_gen: std::sync::atomic::AtomicU64,
    pub api: ApiStats,
    /// The API request queues' pending counts ([`service::queue`]).
    pub queues: service::queue::ApiQueues,
    /// The server's name and id (advisories, cluster info).
    pub server_name: String,
    pub server_id: String,
}

impl JetStream {
    pub fn new(settings: JsSettings, shards: usize, server_name: String, server_id: String) -> Arc<JetStream> {
        Arc::new(JetStream {
            settings,
            registry: Mutex::new(registry::Registry::new(shards)),
            registry_gen: std::sync::atomic::AtomicU64::new(0),
            usage: Mutex::new(HashMap::new()),
            total: Arc::new(Usage::default()),
            api: ApiStats::default(),
            queues: Default::default(),
            server_name,
            server_id,
        })
    }

    /// The usage counters of an account (created on first use).
    pub fn usage(&self, acc: AccountId) -> Arc<Usage> {
        self.usage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(acc)
            .or_default()
            .clone()
    }

    /// The registry, for reading or changing it. Every call counts as a change
    /// ([`JetStream::registry_gen`] moves on once the lock is held, before the holder
    /// can change anything).
    pub fn registry(&self) -> std::sync::MutexGuard<'_, registry::Registry> {
        let g = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        self.registry_gen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        g
    }

    /// The registry, to read only: waits for the lock but does not move the generation
    /// (a request path that falls back to the lock must not make every shard's
    /// remembered answers stale).
    pub fn registry_to_read(&self) -> std::sync::MutexGuard<'_, registry::Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The registry's generation: what was read from it under a generation is still true
    /// while the generation is the same. Read it before locking the registry with
    /// [`JetStream::try_registry`] to read.
    pub fn registry_gen(&self) -> u64 {
        self.registry_gen.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The registry if no one holds it now, to read only (it does not move the
    /// generation; a caller that must not wait, or may hold it already).
    pub fn try_registry(&self) -> Option<std::sync::MutexGuard<'_, registry::Registry>> {
        match self.registry.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// The account's JetStream setting: from its JWT in operator mode, else from the
    /// config (`$G` only when no accounts are configured).
    pub fn account_setting(&self, name: &str) -> AccountJetStream {
        if let Some(op) = &self.settings.operator {
            let Some(known) = op.known(name) else {
                return AccountJetStream::Disabled;
            };
            let limits = &known.claims.nats.limits;
            if !limits.is_js_enabled() {
                return AccountJetStream::Disabled;
            }
            let l = limits
                .jetstream_tiered
                .get("R1")
                .or_else(|| limits.jetstream_tiered.values().next())
                .unwrap_or(&limits.jetstream);
            return AccountJetStream::Limits(crate::auth::config::JetStreamAccountLimits {
                max_memory: l.mem_storage,
                max_store: l.disk_storage,
                max_streams: if l.streams == 0 { -1 } else { l.streams },
                max_consumers: if l.consumer == 0 { -1 } else { l.consumer },
                max_ack_pending: if l.max_ack_pending == 0 { -1 } else { l.max_ack_pending },
                memory_max_stream_bytes: if l.mem_max_stream_bytes == 0 {
                    -1
                } else {
                    l.mem_max_stream_bytes
                },
                store_max_stream_bytes: if l.disk_max_stream_bytes == 0 {
                    -1
                } else {
                    l.disk_max_stream_bytes
                },
                max_bytes_required: l.max_bytes_required,
                ..Default::default()
            });
        }
        match &self.settings.accounts {
            None if name == "$G" => AccountJetStream::Enabled,
            None => AccountJetStream::Disabled,
            Some(m) => m.get(name).cloned().unwrap_or_default(),
        }
    }

    /// Is JetStream enabled for the account `name` (the system account never is)?
    pub fn enabled_for(&self, name: &str, is_system: bool) -> bool {
        !is_system && !matches!(self.account_setting(name), AccountJetStream::Disabled)
    }

    /// The account's JetStream limits (unlimited where not configured).
    pub fn account_limits(&self, name: &str) -> crate::auth::config::JetStreamAccountLimits {
        match self.account_setting(name) {
            AccountJetStream::Limits(l) => l,
            _ => Default::default(),
        }
    }

    /// Count one API request of `acc` (answered with an error or not).
    pub(crate) fn count_request(&self, acc: AccountId, error: bool) {
        self.api.total.fetch_add(1, Ordering::Relaxed);
        if error {
            self.api.errors.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(mut m) = self.api.accounts.lock() {
            let e = m.entry(acc).or_default();
            e.0 += 1;
            e.1 += u64::from(error);
        }
    }

    /// The account's stream directory root, `<root>/<account>/streams`.
    pub fn streams_dir(&self, account: &str) -> PathBuf {
        stream::persist::streams_dir(&self.settings.root, account)
    }
}

/// Account ids are what the shards use; the registry is keyed by them.
pub type AccountKey = AccountId;
