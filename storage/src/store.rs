//! The store interface used by streams (modelled on nats-server's `StreamStore`), with its
//! durability contract.
//!
//! A store is owned by one thread (the stream's owning shard) and is driven from there.
//! Writes return as soon as the record is in the store's write buffer: the sequence is
//! assigned and reads see the message at once. A write is *durable* when
//! [`Store::durable_seq`] reaches its sequence; the owner learns this by calling
//! [`Store::poll_completions`] (cheap, never blocks) when the store's completion fd is
//! readable or once per loop turn, and sends the publisher's acknowledgement then. With
//! the reference's lazy `sync_interval` configured explicitly, writes count as durable
//! when written (acknowledged before the sync), as in nats-server.

use crate::error::Result;
use crate::subject::Filter;
use crate::types::{DeleteRange, SimpleState, StorageKind, StoreConfig, StoredMsg, StreamState};
use std::collections::BTreeMap;
use std::io::Write;

/// What a snapshot carries besides the messages (the stream's files that the store keeps
/// opaque: `meta.inf` is the JSON stream config the JetStream layer writes).
#[derive(Clone, Debug, Default)]
pub struct SnapshotMeta {
    /// The `meta.inf` contents (plain JSON, as in the reference's snapshots).
    pub meta_inf: Vec<u8>,
    /// Extra files, by relative path (`obs/<consumer>/meta.inf`, `obs/<consumer>/o.dat`...).
    pub extra: Vec<(String, Vec<u8>)>,
}

/// The message store of one stream.
pub trait Store {
    fn kind(&self) -> StorageKind;

    /// Size this store accounts for a message (the reference's formula for its kind).
    fn msg_size(&self, subject: &str, headers: &[u8], payload: &[u8]) -> u64;

    /// Store a message at the next sequence with the store clock's time; `ttl` in seconds
    /// (0: none, negative: never expires, not even by max age). Returns (seq, timestamp).
    fn store_msg(&mut self, subject: &str, headers: &[u8], payload: &[u8], ttl: i64) -> Result<(u64, i64)>;

    /// [`Store::store_msg`] stamped `ts` (Unix nanoseconds) instead of the store clock's
    /// time: for a caller that has just read the same clock (one read per message).
    fn store_msg_at(&mut self, subject: &str, headers: &[u8], payload: &[u8], ts: i64, ttl: i64) -> Result<(u64, i64)>;

    /// Store a message with the given sequence (0: next) and timestamp (replication);
    /// discard-new limits are checked only with `discard_new_check`.
    #[allow(clippy::too_many_arguments)]
    fn store_raw_msg(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        seq: u64,
        ts: i64,
        ttl: i64,
        discard_new_check: bool,
    ) -> Result<()>;

    /// Take sequence `seq` (0: next) without a message.
    fn skip_msg(&mut self, seq: u64) -> Result<u64>;
    /// Take `num` sequences from `seq` without messages.
    fn skip_msgs(&mut self, seq: u64, num: u64) -> Result<()>;

    fn load_msg(&mut self, seq: u64) -> Result<StoredMsg>;
    /// The first message at or after `start` matching `filter`
    /// ([`crate::StoreError::Eof`] past the end).
    fn load_next_msg(&mut self, filter: &Filter, start: u64) -> Result<StoredMsg>;
    /// The last message at or before `start` matching `filter`.
    fn load_prev_msg(&mut self, filter: &Filter, start: u64) -> Result<StoredMsg>;
    /// The last message on `subject` (wildcards allowed; `""` or `">"`: the last message).
    fn load_last_msg(&mut self, subject: &str) -> Result<StoredMsg>;
    fn subject_for_seq(&mut self, seq: u64) -> Result<String>;

    fn remove_msg(&mut self, seq: u64) -> Result<bool>;
    /// Remove and overwrite the message's bytes.
    fn erase_msg(&mut self, seq: u64) -> Result<bool>;
    fn purge(&mut self) -> Result<u64>;
    /// Purge by subject filter, below `seq` (when > 1), keeping the last `keep`.
    fn purge_ex(&mut self, subject: &str, seq: u64, keep: u64) -> Result<u64>;
    /// Remove every message below `seq`.
    fn compact(&mut self, seq: u64) -> Result<u64>;
    /// Remove every message above `seq`.
    fn truncate(&mut self, seq: u64) -> Result<()>;

    fn seq_from_time(&mut self, ts: i64) -> u64;
    fn filtered_state(&mut self, start: u64, subject: &str) -> SimpleState;
    fn subjects_state(&mut self, filter: &str) -> BTreeMap<String, SimpleState>;
    fn subjects_totals(&mut self, filter: &str) -> BTreeMap<String, u64>;
    fn num_pending(&mut self, start: u64, filter: &Filter, last_per_subject: bool) -> u64;
    fn all_last_seqs(&mut self) -> Vec<u64>;
    fn multi_last_seqs(&mut self, filter: &Filter, max_seq: u64, max_allowed: usize) -> Result<Vec<u64>>;

    /// State with the deleted list.
    fn state(&mut self) -> StreamState;
    /// State without the deleted list.
    fn fast_state(&self) -> StreamState;
    fn deleted_ranges(&self) -> Vec<DeleteRange>;

    fn update_config(&mut self, cfg: StoreConfig) -> Result<()>;
    fn config(&self) -> &StoreConfig;

    /// When [`Store::expire`] next has work (Unix nanoseconds), if ever.
    fn next_expiry(&self) -> Option<i64>;
    /// Remove what max age and message TTLs expire now (the store's clock).
    fn expire(&mut self) -> Result<u64>;
    /// What [`Store::expire`] would remove now, in sequence order, without removing it:
    /// the caller removes each message (or replaces it with a subject delete marker). A
    /// sequence due by its TTL is returned once.
    fn take_due(&mut self) -> Result<Vec<u64>>;

    /// Highest sequence whose write is durable.
    fn durable_seq(&self) -> u64;
    /// Reap finished I/O (never blocks); returns [`Store::durable_seq`].
    fn poll_completions(&mut self) -> Result<u64>;
    /// Does finished I/O signal the owner's wake-up (`FileStoreConfig::wake`)? Otherwise
    /// the owner polls [`Store::poll_completions`] on a timer while writes are in flight.
    fn signals_completions(&self) -> bool {
        false
    }
    /// When the store has work that waits for a time rather than for a call (interval
    /// mode: small appends it gathers, and its periodic sync), the time to call
    /// [`Store::submit`] again even if nothing else happens.
    fn write_due(&self) -> Option<std::time::Instant> {
        None
    }
    /// Start writing what is buffered (the loop calls this once per turn).
    fn submit(&mut self) -> Result<()>;
    /// Write and sync everything buffered, waiting for it.
    fn sync(&mut self) -> Result<()>;

    /// Write a snapshot of the stream in nats-server's format (an s2-framed tar of
    /// `meta.inf`, `meta.sum`, `msgs/<n>.blk` and the extra files).
    fn snapshot(&mut self, meta: &SnapshotMeta, out: &mut dyn Write) -> Result<()>;

    /// Corrupt records detected (never served) since the store was opened.
    fn corruptions(&self) -> u64;

    /// Give back memory kept for reuse that went unused since the last call (the owner
    /// calls it every [`crate::io::TRIM_EVERY`] or so).
    fn trim(&mut self) {}

    /// Flush, sync and close; later calls fail with [`crate::StoreError::Closed`].
    fn stop(&mut self) -> Result<()>;

    /// Close a store whose files are about to be deleted: what is in flight ends, nothing
    /// more is written or synced (no state file, no commit record). Later calls fail as
    /// after [`Store::stop`].
    fn discard(&mut self) -> Result<()> {
        self.stop()
    }
}
