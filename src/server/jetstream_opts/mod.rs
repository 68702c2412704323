//! The server-level JetStream options (nats-server's `JetStream*`, `StoreDir`, `Sync*` and
//! `StreamMaxBuffered*` options): their defaults, the startup checks made on them, the
//! configuration they resolve to when JetStream starts (store directory, dynamic memory
//! and storage limits), the startup log lines, and what a reload may change.
//!
//! The config file's `jetstream` block is parsed by `config::jetstream`; `-js` and `-sd`
//! set [`JetStreamOptions::enabled`] and [`JetStreamOptions::store_dir`].
//!
//! - `mod.rs`: the options, their defaults and startup checks;
//! - `resolve`: what JetStream starts with, the host readings, the startup log lines;
//! - `reload`: what a reload may change.

mod reload;
mod resolve;

pub use reload::{reload_diff, JetStreamReload, JetStreamReloadError};
pub use resolve::{
    disk_available, friendly_bytes, go_join, go_memory_limit, prepare_store, resolve, resolve_with, startup_log,
    startup_log_lines, system_memory, HostResources, JetStreamStartError, LogLevel, ResolvedJetStream,
};

use crate::server::options::go_duration;
use std::time::Duration;

/// The filestore's default background sync interval (`defaultSyncInterval`).
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(120);
/// `JSDefaultRequestQueueLimit`.
pub const DEFAULT_REQUEST_QUEUE_LIMIT: i64 = 10_000;
/// The directory JetStream keeps under the store directory (`JetStreamStoreDir`).
pub const STORE_SUBDIR: &str = "jetstream";
/// Storage limit used when the free disk space cannot be read (1 TiB).
pub const MAX_STORE_FALLBACK: i64 = 1 << 40;
/// Memory limit used when the system memory cannot be read (256 MiB).
pub const MAX_MEMORY_FALLBACK: i64 = 256 << 20;
/// The TPM PCR used when none is configured.
pub const DEFAULT_TPM_PCR: i64 = 22;
/// `extension_hint` values.
pub const EXTENSION_WILL_EXTEND: &str = "will_extend";
pub const EXTENSION_NO_EXTEND: &str = "no_extend";

/// The cipher of encrypted stores (`cipher`; nats-server's `StoreCipher`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StoreCipher {
    #[default]
    ChaCha,
    Aes,
}

impl StoreCipher {
    /// The name nats-server prints (`ChaCha20-Poly1305`, `AES-GCM`).
    pub fn name(self) -> &'static str {
        match self {
            StoreCipher::ChaCha => "ChaCha20-Poly1305",
            StoreCipher::Aes => "AES-GCM",
        }
    }
}

impl std::fmt::Display for StoreCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `jetstream { limits { ... } }` (nats-server's `JSLimitOpts`); 0 means no server limit.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JetStreamLimitOptions {
    /// `max_request_batch`.
    pub max_request_batch: i64,
    /// `max_ack_pending`.
    pub max_ack_pending: i64,
    /// `max_ha_assets`.
    pub max_ha_assets: i64,
    /// `duplicate_window`: the largest duplicate window a stream may ask for.
    pub duplicate_window: Duration,
    /// `batch { max_inflight_per_stream }`.
    pub max_batch_inflight_per_stream: i64,
    /// `batch { max_inflight_total }`.
    pub max_batch_inflight_total: i64,
    /// `batch { max_msgs }`.
    pub max_batch_size: i64,
    /// `batch { timeout }`.
    pub max_batch_timeout: Duration,
}

impl JetStreamLimitOptions {
    /// Go's `%v` of the struct, as reload errors print it.
    fn go_value(&self) -> String {
        format!(
            "{{{} {} {} {} {} {} {} {}}}",
            self.max_request_batch,
            self.max_ack_pending,
            self.max_ha_assets,
            go_duration(self.duplicate_window),
            self.max_batch_inflight_per_stream,
            self.max_batch_inflight_total,
            self.max_batch_size,
            go_duration(self.max_batch_timeout)
        )
    }
}

/// `jetstream { tpm { ... } }` (nats-server's `JSTpmOpts`). The block's `cipher` sets
/// [`JetStreamOptions::cipher`], as in the reference.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JetStreamTpmOptions {
    /// `keys_file`: TPM use is on when set.
    pub keys_file: String,
    /// `encryption_password`.
    pub encryption_password: String,
    /// `srk_password`.
    pub srk_password: String,
    /// `pcr` (0: [`DEFAULT_TPM_PCR`] when the keys are loaded).
    pub pcr: i64,
}

/// The server's JetStream options. Field names follow the config keys; the comments name
/// nats-server's `Options` fields where they differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JetStreamOptions {
    /// `-js`, `jetstream: enabled`, `jetstream { enabled }` (`JetStream`).
    pub enabled: bool,
    /// `strict` (`!NoJetStreamStrict`): strict JSON checks of API requests. Default true.
    pub strict: bool,
    /// `-sd`, `store_dir` at the top level or in the block (`StoreDir`; also where OCSP
    /// staples are kept). JetStream's files go under `<store_dir>/jetstream`.
    pub store_dir: String,
    /// `max_mem`/`max_mem_store`/`max_memory_store` in bytes; -1 (the default, or any
    /// negative value): 75% of the system memory when JetStream starts.
    pub max_memory: i64,
    /// `max_file`/`max_file_store` in bytes; -1 (the default, or any negative value): 75%
    /// of the disk space available at the store directory when JetStream starts.
    pub max_store: i64,
    /// `domain`.
    pub domain: String,
    /// `extension_hint` (`JetStreamExtHint`).
    pub extension_hint: String,
    /// `key`/`ek`/`encryption_key`: encryption at rest is on when set.
    pub key: String,
    /// `prev_key`/`prev_ek`/`prev_encryption_key` (`JetStreamOldKey`).
    pub prev_key: String,
    /// `cipher` (in the block or in `tpm`).
    pub cipher: StoreCipher,
    /// `unique_tag`, trimmed and lower-cased.
    pub unique_tag: String,
    /// `limits { }`.
    pub limits: JetStreamLimitOptions,
    /// `tpm { }`.
    pub tpm: JetStreamTpmOptions,
    /// `max_outstanding_catchup` in bytes (`JetStreamMaxCatchup`; 0: the server's default).
    pub max_outstanding_catchup: i64,
    /// `request_queue_limit` (default [`DEFAULT_REQUEST_QUEUE_LIMIT`]; 0 or less: the
    /// default).
    pub request_queue_limit: i64,
    /// `info_queue_limit` (0 or less: `request_queue_limit`).
    pub info_queue_limit: i64,
    /// `meta_compact` (`JetStreamMetaCompact`).
    pub meta_compact: u64,
    /// `meta_compact_size` in bytes.
    pub meta_compact_size: u64,
    /// `meta_compact_sync`.
    pub meta_compact_sync: bool,
    /// `max_buffered_msgs` (`StreamMaxBufferedMsgs`).
    pub max_buffered_msgs: i64,
    /// `max_buffered_size` in bytes (`StreamMaxBufferedSize`).
    pub max_buffered_size: i64,
    /// `sync`/`sync_interval`: `None` when not given ([`DEFAULT_SYNC_INTERVAL`] applies).
    /// `sync: always` gives the default interval with [`Self::sync_always`].
    pub sync_interval: Option<Duration>,
    /// `sync: always`: flush after every write.
    pub sync_always: bool,
}

impl Default for JetStreamOptions {
    fn default() -> Self {
        JetStreamOptions {
            enabled: false,
            strict: true,
            store_dir: String::new(),
            max_memory: -1,
            max_store: -1,
            domain: String::new(),
            extension_hint: String::new(),
            key: String::new(),
            prev_key: String::new(),
            cipher: StoreCipher::ChaCha,
            unique_tag: String::new(),
            limits: JetStreamLimitOptions::default(),
            tpm: JetStreamTpmOptions::default(),
            max_outstanding_catchup: 0,
            request_queue_limit: DEFAULT_REQUEST_QUEUE_LIMIT,
            info_queue_limit: 0,
            meta_compact: 0,
            meta_compact_size: 0,
            meta_compact_sync: false,
            max_buffered_msgs: 0,
            max_buffered_size: 0,
            sync_interval: None,
            sync_always: false,
        }
    }
}

/// A JetStream option nats-server refuses at startup (`validateJetStreamOptions`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JetStreamOptionsError {
    #[error("invalid domain name: derived {0:?} is not a valid subject")]
    DomainSubject(String),
    #[error("invalid domain name: may not contain ., * or >")]
    DomainName,
    #[error("jetstream cluster requires `server_name` to be set")]
    ClusterServerName,
    #[error("jetstream cluster requires `cluster.name` to be set")]
    ClusterName,
    #[error("expected 'no_extend' for string value, got '{0}'")]
    ExtensionHint(String),
    #[error("jetstream max catchup cannot be negative")]
    NegativeCatchup,
}

impl JetStreamOptions {
    /// nats-server's `setBaselineOptions` for JetStream: the queue limits' defaults. (Unset
    /// memory and storage limits are already -1.) The sync interval stays `None` when not
    /// given: its default is applied where it is read ([`Self::sync_interval`]), because an
    /// unset interval selects group commit ([`Self::store_sync`]).
    pub fn apply_baseline(&mut self) {
        if self.request_queue_limit <= 0 {
            self.request_queue_limit = DEFAULT_REQUEST_QUEUE_LIMIT;
        }
        if self.info_queue_limit <= 0 {
            self.info_queue_limit = self.request_queue_limit;
        }
    }

    /// The sync interval in force.
    pub fn sync_interval(&self) -> Duration {
        self.sync_interval.unwrap_or(DEFAULT_SYNC_INTERVAL)
    }

    /// When the file store counts a write as durable (and so when a PubAck may leave):
    /// `sync: always` syncs every write, an explicit `sync`/`sync_interval` is the
    /// reference's lazy mode (acknowledged when stored, synced every interval), and by
    /// default a PubAck waits for the fdatasync of the batch that wrote its message.
    pub fn store_sync(&self) -> storage::SyncMode {
        if self.sync_always {
            storage::SyncMode::Always
        } else if let Some(d) = self.sync_interval {
            storage::SyncMode::Interval(d)
        } else {
            storage::SyncMode::GroupCommit
        }
    }

    /// The checks nats-server makes at startup whether or not JetStream is on (the
    /// domain's), then, for a clustered JetStream server, the cluster's. Clustering
    /// does not exist in rnats yet, so the cluster checks run only when asked with
    /// [`Self::validate_clustered`].
    pub fn validate(&self) -> Result<(), JetStreamOptionsError> {
        if !self.domain.is_empty() {
            let subject = format!("$JS.{}.API.>", self.domain);
            if !crate::core::subject::is_valid_subject(subject.as_bytes()) {
                return Err(JetStreamOptionsError::DomainSubject(subject));
            }
            if !is_valid_name(&self.domain) {
                return Err(JetStreamOptionsError::DomainName);
            }
        }
        Ok(())
    }

    /// The rest of `validateJetStreamOptions`, for a server with JetStream on and a
    /// cluster port: names required, `extension_hint` normalized (lower case).
    pub fn validate_clustered(&mut self, server_name: &str, cluster_name: &str) -> Result<(), JetStreamOptionsError> {
        self.validate()?;
        if !self.enabled {
            return Ok(());
        }
        if server_name.is_empty() {
            return Err(JetStreamOptionsError::ClusterServerName);
        }
        if cluster_name.is_empty() {
            return Err(JetStreamOptionsError::ClusterName);
        }
        let hint = self.extension_hint.to_lowercase();
        match hint.as_str() {
            "" | EXTENSION_WILL_EXTEND | EXTENSION_NO_EXTEND => self.extension_hint = hint,
            _ => return Err(JetStreamOptionsError::ExtensionHint(hint)),
        }
        if self.max_outstanding_catchup < 0 {
            return Err(JetStreamOptionsError::NegativeCatchup);
        }
        Ok(())
    }
}

/// nats-server's `isValidName`: non-empty, without whitespace, `.`, `*` or `>`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains([' ', '\t', '\r', '\n', '\x0c', '.', '*', '>'])
}

#[cfg(test)]
mod tests;
