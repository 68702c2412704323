//! JetStream message stores for rnats: a memory store and a durable file store.
//!
//! Module map:
//! - [`store`]: the [`Store`] trait streams use (nats-server's `StreamStore`), and the
//!   durability contract (writes become durable asynchronously; `poll_completions`).
//! - [`types`], [`error`], [`subject`], [`clock`]: what the API takes and returns, typed
//!   errors, subject filters, and the clock stores read time from.
//! - `engine`: the stream semantics shared by both stores (sequences, per-subject index,
//!   limits, TTL wheel, purge/compact/truncate, queries), holding no message bodies.
//! - [`memstore`]: the engine with bodies in memory; the model the file store is checked
//!   against.
//! - [`filestore`]: the durable file store (blocks of framed records, group commit, state
//!   file, automatic compaction in bounded steps, O_DIRECT reads). Its module docs hold the on-disk format and the recovery rule
//!   (torn tail = end of log; a bad record is never served, is reported, and is skipped
//!   with a resync to the next valid record). Under it, [`io`]: io_uring + O_DIRECT, or
//!   buffered std I/O on a helper thread, and a fault-injection layer for tests.
//! - [`reference`]: nats-server 2.14's formats: records, blocks (s2, encrypted),
//!   `index.db`, snapshots, store dirs, and their import into any store.
//! - [`consumer_state`]: a consumer's durable state and its `o.dat` encoding.
//! - [`crypto`]: encryption at rest with the reference's configuration and key derivation.
//!
//! Ownership: a store belongs to the shard that owns its stream. Only that shard calls
//! it; other shards reach it by posting a job to that shard. A store holds no locks.

pub mod clock;
pub mod consumer_state;
pub mod crypto;
pub(crate) mod engine;
pub mod error;
pub mod filestore;
pub mod io;
pub mod memstore;
pub mod reference;
pub mod store;
pub mod subject;
pub mod types;

pub use clock::{Clock, ManualClock, SystemClock};
pub use consumer_state::{ConsumerState, Pending, SeqPair};
pub use error::{Result, StoreError};
pub use filestore::{FileStore, FileStoreConfig, SyncMode};
pub use memstore::MemStore;
pub use store::{SnapshotMeta, Store};
pub use subject::Filter;
pub use types::{DeleteRange, Discard, SimpleState, StorageKind, StoreConfig, StoredMsg, StreamState};
