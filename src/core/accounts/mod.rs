//! Accounts: the isolation boundary of NATS (ARCHITECTURE.md, invariant 13). Every
//! connection belongs to exactly one account; subjects, interest, queue groups and
//! limits are per account, and only an import moves a message from one account to
//! another.
//!
//! - this file: account ids, the immutable [`AccountDef`] and the [`AccountTable`]
//!   snapshot every shard reads;
//! - [`registry`]: the server-wide [`AccountRegistry`] that hands out stable ids and
//!   publishes new snapshots (reload, JWT account updates);
//! - [`links`]: imports and exports resolved into the routing entries a shard uses;
//! - [`state`]: the per-shard, per-account routing state (sublist, remote interest,
//!   import matchers, response maps).
//!
//! Ownership: definitions and tables are read-only and shared through `Arc`s; the only
//! shared mutable numbers are per-account connection counters (atomics, for limits).
//! Everything a message touches lives in the shard's own [`state::ShardAccount`].

pub mod build;
pub mod links;
pub mod registry;
pub mod state;

pub use registry::AccountRegistry;

use crate::core::transform::MappingSet;
use links::{ServiceImport, StreamLink};
use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

/// An account's handle, the same on every shard and stable across reloads (ids are never
/// reused for another name). It travels in mesh records.
pub type AccountId = u32;

/// The global account `$G`: every connection's account when no accounts are configured.
pub const GLOBAL: AccountId = 0;
/// Its name.
pub const GLOBAL_NAME: &str = "$G";
/// The default name of the system account.
pub const DEFAULT_SYSTEM_ACCOUNT: &str = "$SYS";

/// Account limits (`accounts { A { limits { ... } } }` or account JWT claims); -1 means
/// unlimited, as in nats-server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccountLimits {
    pub max_connections: i64,
    pub max_subscriptions: i64,
    pub max_payload: i64,
    pub max_leafnodes: i64,
}

impl Default for AccountLimits {
    fn default() -> Self {
        AccountLimits {
            max_connections: -1,
            max_subscriptions: -1,
            max_payload: -1,
            max_leafnodes: -1,
        }
    }
}

/// One account's definition: what configuration or claims say about it. Immutable; a
/// change makes a new definition in a new table.
#[derive(Debug)]
pub struct AccountDef {
    pub id: AccountId,
    pub name: String,
    /// The account's public nkey (operator mode, or `accounts { A { nkey } }`).
    pub nkey: Option<String>,
    pub limits: AccountLimits,
    /// Subject mappings applied to every message published in the account.
    pub mappings: MappingSet,
    /// Stream exports of this account that other accounts import: where a message
    /// published here is also delivered.
    pub stream_links: Vec<StreamLink>,
    /// Service imports of this account: subjects whose messages go to another account.
    pub service_imports: Vec<ServiceImport>,
    /// Open connections of this account on the whole server (shared by every definition
    /// of the same account, so a reload keeps counting).
    pub conns: Arc<AtomicI64>,
    /// The account is known but may not be used (expired or deleted JWT).
    pub disabled: bool,
    /// Where sampled `traceparent` messages are traced (`msg_trace`), if anywhere.
    pub msg_trace: Option<MsgTrace>,
    /// The account JWT's `name` (operator mode); empty otherwise.
    pub jwt_name: String,
}

/// An account's trace destination for messages carrying a sampled W3C `traceparent`
/// (`msg_trace { dest, sampling }`, or the `trace` of an account JWT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsgTrace {
    pub dest: String,
    /// Percent of the sampled messages traced, 1 to 100.
    pub sampling: u8,
}

impl AccountDef {
    /// A plain account with no imports, exports or limits.
    pub fn plain(id: AccountId, name: &str) -> AccountDef {
        AccountDef {
            id,
            name: name.to_string(),
            nkey: None,
            limits: AccountLimits::default(),
            mappings: MappingSet::new(),
            stream_links: Vec::new(),
            service_imports: Vec::new(),
            conns: Arc::new(AtomicI64::new(0)),
            disabled: false,
            msg_trace: None,
            jwt_name: String::new(),
        }
    }

    /// What nats-server calls the account's name tag (events, `/connz`, `/accountz`):
    /// its JWT's `name`, or its name when there is none.
    pub fn name_tag(&self) -> &str {
        if self.jwt_name.is_empty() {
            &self.name
        } else {
            &self.jwt_name
        }
    }

    /// How log lines name the account: `<name>/<JWT name>`, or its name.
    pub fn log_label(&self) -> String {
        if self.jwt_name.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.name, self.jwt_name)
        }
    }
}

/// A snapshot of every account, indexed by id.
#[derive(Debug, Default)]
pub struct AccountTable {
    defs: Vec<Option<Arc<AccountDef>>>,
    by_name: HashMap<String, AccountId>,
    system: Option<AccountId>,
}

impl AccountTable {
    /// The definition of `id`, if it exists in this snapshot.
    pub fn get(&self, id: AccountId) -> Option<&Arc<AccountDef>> {
        self.defs.get(id as usize).and_then(Option::as_ref)
    }

    /// The account called `name`.
    pub fn by_name(&self, name: &str) -> Option<&Arc<AccountDef>> {
        self.by_name.get(name).and_then(|&id| self.get(id))
    }

    /// The system account, unless `no_system_account`.
    pub fn system(&self) -> Option<AccountId> {
        self.system
    }

    /// The account's name, or `""`.
    pub fn name(&self, id: AccountId) -> &str {
        self.get(id).map_or("", |d| d.name.as_str())
    }

    /// The account's name tag ([`AccountDef::name_tag`]), or `""`.
    pub fn name_tag(&self, id: AccountId) -> &str {
        self.get(id).map_or("", |d| d.name_tag())
    }

    /// Every account, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<AccountDef>> {
        self.defs.iter().flatten()
    }

    /// Number of accounts.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// One past the highest id.
    pub fn id_bound(&self) -> usize {
        self.defs.len()
    }
}
