//! One stream on its owning shard: its configuration, its store, the duplicate window,
//! the acknowledgements waiting for durability, and its consumers.
//!
//! - [`acks`]: the PubAcks waiting for durability, without an allocation each.
//! - [`ingest`]: a publish into the stream (the reference's header checks, dedupe,
//!   rollups, TTLs, limits) and its PubAck.
//! - [`direct`]: direct get (`allow_direct`).
//! - [`import`]: a stream directory written by nats-server, replayed on first open.
//! - [`dedupe`]: the `Nats-Msg-Id` window.
//! - [`persist`]: the stream's directory (`meta.inf`, `meta.sum`, `msgs/`, `obs/`).
//! - [`counter`]: message counters (`Nats-Incr`).
//! - [`batch`]: atomic batch publish (`Nats-Batch-*`) and fast batch publish (`.$FI`
//!   replies).
//! - [`schedule`], [`schedule_pattern`]: message schedules (`Nats-Schedule`).
//! - [`transform`]: the input subject transform and the republish transform.
//! - [`republish`]: republishing stored messages.
//! - [`markers`]: subject delete markers left by max age and TTL expiry.
//!
//! Ownership: a `Stream` lives in its shard's `ShardJs` and is only touched there.

pub mod acks;
pub mod batch;
pub mod batch_fast;
pub mod counter;
pub mod dedupe;
pub mod direct;
pub mod import;
pub mod ingest;
pub mod markers;
pub mod persist;
pub mod republish;
pub mod schedule;
pub mod schedule_pattern;
pub mod transform;

use super::api::config::{Compression, DiscardPolicy, StorageType, StreamConfig};
use super::api::GoTime;
use crate::core::accounts::AccountId;
use crate::core::client::SubId;
use std::path::PathBuf;
use std::time::Duration;
use storage::{FileStore, FileStoreConfig, MemStore, Store, StoreConfig, SyncMode};

/// A stream owned by this shard.
pub struct Stream {
    pub account: AccountId,
    pub name: String,
    pub cfg: StreamConfig,
    pub created: GoTime,
    pub store: Box<dyn Store>,
    /// The stream's directory (file storage).
    pub dir: Option<PathBuf>,
    /// The ingest subscriptions (one per subject) and the service ones (direct get, ...).
    pub subs: Vec<SubId>,
    pub dedupe: dedupe::Dedupe,
    /// The last `Nats-Msg-Id` stored (for `Nats-Expected-Last-Msg-Id`).
    pub last_msg_id: String,
    /// PubAcks waiting for their write to be durable, in sequence order.
    pub acks: acks::AckQueue,
    /// How many of [`Stream::acks`] are durable and go out at the end of this release.
    pub acks_ready: usize,
    /// The store has buffered writes to submit.
    pub dirty: bool,
    /// The consumers, by name.
    pub consumers: std::collections::BTreeMap<String, crate::jetstream::consumers::Slot>,
    /// Stream sequences acknowledged since the last poll (interest and work-queue
    /// retention remove them once no consumer needs them).
    pub acked: Vec<u64>,
    /// The account's and the server's usage counters, and the bytes this stream has
    /// counted in them.
    pub usage: Option<(
        std::sync::Arc<crate::jetstream::Usage>,
        std::sync::Arc<crate::jetstream::Usage>,
    )>,
    pub counted: i64,
    /// The account's and the server's byte limits for this stream's storage (-1: none).
    pub limits: (i64, i64),
    /// Its mirror or sources, when it has them.
    pub sourcing: Option<Box<crate::jetstream::sourcing::Sourcing>>,
    /// How the message being ingested came in (see [`ingest::Mode`]).
    pub ingest_mode: ingest::Mode,
    /// Batches being published.
    pub batches: batch::Batches,
    /// The stream's message schedules.
    pub schedules: schedule::Schedules,
    /// The compiled subject transforms (rebuilt by [`Stream::config_changed`]).
    pub flows: transform::Flows,
    /// Messages to publish once the shard no longer holds the stream (republish).
    pub outbox: Vec<republish::Outgoing>,
}

/// What the store of a stream enforces, from its configuration.
pub fn store_config(cfg: &StreamConfig) -> StoreConfig {
    let mut s = StoreConfig::new(&cfg.name);
    s.max_msgs = cfg.max_msgs;
    s.max_bytes = cfg.max_bytes;
    s.max_age = Duration::from_nanos(cfg.max_age.max(0) as u64);
    s.max_msgs_per_subject = cfg.max_msgs_per_subject;
    s.max_msg_size = i64::from(cfg.max_msg_size);
    s.discard = match cfg.discard {
        DiscardPolicy::Old => storage::Discard::Old,
        DiscardPolicy::New => storage::Discard::New,
    };
    s.discard_new_per_subject = cfg.discard_new_per_subject;
    s.allow_msg_ttl = cfg.allow_msg_ttl;
    s.first_seq = cfg.first_seq;
    s
}

/// How file stores are opened on this server.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    pub sync: SyncMode,
    pub block_size: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            sync: SyncMode::GroupCommit,
            block_size: 8 * 1024 * 1024,
        }
    }
}

/// Open (or create) the store of a stream: in memory, or under `dir/msgs` (sealed with
/// `keys` when encryption at rest is on).
pub fn open_store(
    cfg: &StreamConfig,
    dir: Option<&PathBuf>,
    opts: &StoreOptions,
    keys: Option<&storage::crypto::StreamKeys>,
    wake: Option<&storage::io::Wake>,
) -> Result<Box<dyn Store>, String> {
    let scfg = store_config(cfg);
    match (cfg.storage, dir) {
        (StorageType::Memory, _) | (StorageType::File, None) => Ok(Box::new(MemStore::new(scfg))),
        (StorageType::File, Some(dir)) => {
            let mut f = FileStoreConfig::new(dir.join("msgs"));
            f.sync = opts.sync;
            f.block_size = opts.block_size;
            f.wake = wake.cloned();
            if let Some(k) = keys {
                f.cipher = Some(std::sync::Arc::new(k.record_sealer()));
            }
            f.compression = match cfg.compression {
                Compression::None => storage::filestore::Compression::None,
                Compression::S2 => storage::filestore::Compression::S2,
            };
            FileStore::open(f, scfg)
                .map(|s| Box::new(s) as Box<dyn Store>)
                .map_err(|e| e.to_string())
        }
    }
}

impl Stream {
    pub fn new(
        account: AccountId,
        cfg: StreamConfig,
        created: GoTime,
        store: Box<dyn Store>,
        dir: Option<PathBuf>,
    ) -> Stream {
        Stream {
            account,
            flows: transform::Flows::new(&cfg),
            outbox: Vec::new(),
            name: cfg.name.clone(),
            cfg,
            created,
            store,
            dir,
            subs: Vec::new(),
            dedupe: dedupe::Dedupe::default(),
            last_msg_id: String::new(),
            acks: acks::AckQueue::default(),
            acks_ready: 0,
            dirty: false,
            consumers: Default::default(),
            acked: Vec::new(),
            usage: None,
            counted: 0,
            limits: (-1, -1),
            sourcing: None,
            ingest_mode: ingest::Mode::default(),
            batches: batch::Batches::default(),
            schedules: schedule::Schedules::default(),
        }
    }

    /// The configuration was replaced: recompile what is derived from it.
    pub fn config_changed(&mut self) {
        self.flows = transform::Flows::new(&self.cfg);
    }

    /// The duplicate window in nanoseconds.
    pub fn duplicate_window(&self) -> i64 {
        self.cfg.duplicate_window
    }

    /// Submit buffered writes and count the PubAcks whose writes are durable now
    /// (into [`Stream::acks_ready`]; [`AckQueue::release`](acks::AckQueue::release)
    /// sends them).
    pub fn durable_acks(&mut self, now: std::time::Instant) {
        // Writes the store holds back, and interval mode's sync, are started when due.
        if self.dirty || self.store.write_due().is_some_and(|t| t <= now) {
            self.dirty = false;
            if let Err(e) = self.store.submit() {
                tracing::error!("JetStream stream '{}' write failed: {e}", self.name);
            }
        }
        if self.acks.is_empty() && !self.syncing() {
            self.acks_ready = 0;
            return;
        }
        let durable = match self.store.poll_completions() {
            Ok(d) => d,
            Err(e) => {
                tracing::error!("JetStream stream '{}' sync failed: {e}", self.name);
                self.store.durable_seq()
            }
        };
        self.acks_ready = self.acks.ready(durable);
    }

    /// Bring the usage counters up to the store's bytes.
    pub fn sync_usage(&mut self) {
        let Some((acc, all)) = &self.usage else { return };
        let now = i64::try_from(self.store.fast_state().bytes).unwrap_or(i64::MAX);
        let delta = now - self.counted;
        if delta != 0 {
            let memory = self.cfg.storage == StorageType::Memory;
            acc.of(memory).fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
            all.of(memory).fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
            self.counted = now;
        }
    }

    /// Would `size` more bytes exceed the account's limit (`Some(false)`) or the server's
    /// (`Some(true)`)?
    pub fn over_limits(&self, size: u64) -> Option<bool> {
        let (acc, all) = self.usage.as_ref()?;
        let memory = self.cfg.storage == StorageType::Memory;
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let used = |u: &crate::jetstream::Usage| u.of(memory).load(std::sync::atomic::Ordering::Relaxed);
        if self.limits.0 >= 0 && used(acc).saturating_add(size) > self.limits.0 {
            return Some(false);
        }
        if self.limits.1 >= 0 && used(all).saturating_add(size) > self.limits.1 {
            return Some(true);
        }
        None
    }

    /// Acknowledgements still wait for the disk.
    pub fn waiting(&self) -> bool {
        !self.acks.is_empty() || self.dirty || self.syncing()
    }

    /// Stored messages wait for their sync (consumers see them once it completes).
    pub fn syncing(&self) -> bool {
        self.store.durable_seq() < self.store.fast_state().last_seq
    }
}
