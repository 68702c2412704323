//! rnats's file store: the shared engine (sequences, subjects, limits, TTLs, queries) over
//! an append-only log of blocks in one directory, written through the [`crate::io`] layer.
//!
//! # Files
//! `<dir>/<ordinal>.blk` (ten digits): the blocks, in log order. Each starts with a 64-byte
//! header written twice, then framed records ([`format`] has the byte layout): messages,
//! tombstones (a removed sequence), sequence ranges (the first and last sequence after a
//! purge, compact, truncate or skip) and erased messages (a secure remove overwrites the
//! message record in place with an `erased` record of the same length). A block is
//! appended to until it passes `block_size`; then the next one starts. A fresh block is
//! also started on every open, so a block that may hold a torn tail is never written again.
//! The tail block's file runs ahead of its records in zeros (preformatting, module
//! `write`): it grows in steps of 64 KiB to 1 MiB, never past the block size, so most
//! batches overwrite allocated space and their fdatasync commits no file metadata.
//!
//! Replaying every record in log order rebuilds the stream (the per-sequence and
//! per-subject indexes are the engine's, in memory). Each block's record checksums are
//! keyed by its random file id, so a record copied from another block does not validate.
//!
//! # Durability
//! Writes go to the tail block's buffer (module `tail`); [`crate::Store::submit`] (or
//! [`crate::Store::poll_completions`]) hands what is buffered to the I/O layer as one batch:
//! the writes (copied once, into the layer's aligned [`crate::io::WriteBuf`]s, which a
//! direct backend writes from as they are), then one fdatasync per file written. A write counts as durable
//! ([`crate::Store::durable_seq`]) when the fdatasync of its batch has completed; everything
//! stored while a batch is in flight goes into the next batch and shares its fdatasync
//! (group commit). Up to two batches are in flight: once the writes of the one in flight
//! have ended (only its fdatasync runs), a plain append to the tail starts the next, so the
//! device writes while it flushes; completions are taken in start order. [`SyncMode::Always`] hands every store call's writes to the I/O layer at
//! once (a batch of its writes and their fdatasync, or the next batch if one is in flight)
//! and acknowledges each write when that fdatasync has completed, as group commit does;
//! [`SyncMode::Interval`] is the reference's lazy `sync_interval`: a write counts as durable
//! at once and fdatasync runs every interval; small appends are gathered for up to 8 ms
//! (or 16 KiB) before they are written, as the reference's flush loop does (module `hold`;
//! [`crate::Store::write_due`] tells the owner when to submit again).
//!
//! The owning thread never waits for an fdatasync on its own: store calls buffer and start
//! batches, completions are reaped by [`crate::Store::poll_completions`] (or the next store
//! call). Past [`FileStore`]'s backpressure threshold (twice the block size, at least
//! 4 MiB not yet handed to the I/O layer) a store call starts a batch if none is in flight;
//! only past four times that does it wait for the batch in flight (the disk far slower than
//! the writers for a while; counted in [`FileStoreStats::stalls`]). What waits by design:
//! [`crate::Store::sync`], [`crate::Store::stop`], and [`FileStore::compact_blocks`]. A block that is left for the next one is
//! synced before anything of the next block is written, so after a crash only the last
//! block can end in a torn write. After a failed write or fdatasync the store refuses every
//! later write with [`crate::StoreError::WritesRefused`] (what failed may or may not be on
//! disk; pretending otherwise would lose acknowledged writes).
//!
//! # Recovery and corruption
//! On open every block is read and its records replayed. Each block's valid length is
//! known from the next block's header (`prev_len`, the block's length when the next one
//! started, after it was synced) or, for a block rewritten by compaction, its own
//! `sealed_len`; only the last block's end is found by scanning. Within the last block,
//! commit records give its *durable end*: every synced batch that writes to the tail
//! carries one stating how far the tail was on disk before that batch (it rides with the
//! batch's records: no write or fdatasync of its own), and a clean stop ends the log with
//! one covering everything (one more fdatasync, at stop only). The rules:
//!
//! - **End of log.** In the last block, past its durable end: zero bytes where a record
//!   should start, a record cut short by the end of the file, a record whose bytes run out
//!   in zeros, or one holding a sector's worth (512 bytes) of zeros (a torn write: a crash
//!   may keep any subset of the sectors or pages of the writes in flight). This is not a
//!   corruption; nothing after it was ever acknowledged, and records after it (pieces of
//!   the same torn batch) are not used. Without any commit record in the block (its first
//!   batch) it is the end of the log only when no valid record follows it.
//! - **Corruption.** Anything else that fails its checks (a bad checksum, inconsistent
//!   fields, zeros or the end of the file before a block's known length or before the last
//!   block's durable end, a block missing from the sequence of ordinals, a block header
//!   whose both copies are bad), and anywhere a complete record whose length field alone is
//!   damaged (its length derived from its other fields makes its checksum match: no torn
//!   write does that), is a corruption: it is never served, it is logged (`tracing` at warn level) and counted in
//!   [`crate::Store::corruptions`]. The store **skips and resyncs**: it searches forward,
//!   8 bytes at a time, for the next record that validates, and goes on from there, so
//!   every readable record after the damage is kept. The damaged bytes are left in place
//!   (they are reported again on the next open); a block is never truncated.
//! - A record that goes bad after it was loaded (bit rot under a running store) is caught
//!   by its checksum when read: the read fails with [`crate::StoreError::Corrupt`] and is
//!   counted.
//!
//! What stays ambiguous: past the durable end (the last batch before a crash), a record
//! that holds 512 zero bytes of its own and then takes a bit flip reads as torn; a cut or
//! zeroed tail that also removed the commit records is indistinguishable from a torn one.
//!
//! # Reads
//! A load finds the record in the tail's buffer or reads it from its block through the
//! I/O layer: with io_uring, an O_DIRECT read on the store's ring, waited for at once
//! (loads are synchronous in the [`crate::Store`] API; the wait is the device's, as a
//! `pread` would be), through a cache of 64 KiB chunks (up to 16 MiB a store, 128 MiB in
//! all) for reads near the previous one (consumers reading in order, KV gets cycling over
//! their keys); with the threaded backend, a buffered `pread`. Every
//! record read is checked (checksum, sequence, subject) before it is served. Numbers in
//! `io::uring`'s docs.
//!
//! # Fast restart
//! A clean stop writes `state.rns` (module `state`): the block list and every live entry,
//! so the next open skips reading the blocks. Open deletes it before writing anything;
//! after a crash it is absent and the blocks are scanned as above.
//!
//! # Space
//! A block whose messages are all gone is deleted once it is the oldest: the current
//! sequence range is written to the tail, the block is taken off the list, and its file is
//! deleted when a synced batch holding that range has completed (so a crash before then
//! leaves the block, and the stream's range is never lost; the owner does not wait). A
//! sealed block whose live records fill less than half of it is rewritten without its dead
//! messages and without the tombstones that can no longer delete anything, automatically,
//! one bounded step per [`crate::Store::submit`] / [`crate::Store::poll_completions`] (the
//! owner's loop turns), its writes riding in the store's batches;
//! [`FileStore::compact_blocks`] runs it to the end at once. Module `compact` has the
//! steps, the crash-safety argument and the rule for dropping tombstones (a dead block
//! waiting for its deletion still counts as an older block that may hold their messages).
//!
//! # Compression and encryption
//! With [`Compression::S2`] the blocks' message bodies are s2-compressed, each on its own
//! (so any message is read without decompressing its neighbours; the block header's flag
//! says its bodies may be). A [`BlockCipher`] seals each message's subject, headers length
//! and (compressed) body as one, after compression; a scan opens every message to rebuild
//! the subject index. The state file, which lists subjects, is sealed whole. Readable
//! without the key: sequences, timestamps, TTLs, sizes, and tombstones' and ranges'
//! numbers. A record that passes its checksum and does not open (a wrong key or cipher, or
//! none configured) makes [`FileStore::open`] fail with
//! [`crate::StoreError::Encryption`]: going on would drop its messages and then delete
//! their blocks as dead. A store that ran without a key keeps its plaintext records (they
//! stay readable) when a key is configured; new records are sealed.

mod api;
pub mod cipher;
mod compact;
pub mod format;
mod hold;
mod recover;
mod state;
mod tail;
mod write;

pub use cipher::{BlockCipher, NoCipher};
pub use format::Checksum;
pub use recover::{block_header, scan_block, Scan};

use crate::clock::{system_clock, SharedClock};
use crate::engine::Engine;
use crate::error::{Result, StoreError};
use crate::io::{FileNo, Io, IoChoice};
use crate::types::{file_msg_size, StoreConfig};
use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sealed block files kept open for reads at most.
const MAX_OPEN: usize = 32;

/// Batches a store keeps in flight at most: the next batch's writes go to the device
/// while the fdatasyncs of the batches before it run (see [`FileStore::may_pipeline`]).
/// Four rather than two: a KV put load (acks awaited, 1,000 in flight per publisher) went
/// from ~750k to ~820k puts/s on this VM's disk, plain publishes within noise.
const MAX_IN_FLIGHT: usize = 4;

/// When writes become durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncMode {
    /// Group commit: durable after the fdatasync of the batch that wrote it (the default).
    #[default]
    GroupCommit,
    /// The reference's `sync_always`: every store call writes and syncs before returning.
    Always,
    /// The reference's `sync_interval` set explicitly: durable when stored (acknowledged
    /// before the sync), fdatasync every interval.
    Interval(Duration),
}

/// Message body compression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    #[default]
    None,
    S2,
}

/// How a file store is opened.
#[derive(Clone)]
pub struct FileStoreConfig {
    pub dir: PathBuf,
    /// A block is left for a new one once it is this long (bytes).
    pub block_size: u64,
    pub sync: SyncMode,
    pub checksum: Checksum,
    pub compression: Compression,
    pub io: IoChoice,
    pub cipher: Option<Arc<dyn BlockCipher>>,
    /// Rewrite mostly dead blocks by itself, a bounded step per `submit` /
    /// `poll_completions` (module `compact`); off: only [`FileStore::compact_blocks`].
    pub auto_compact: bool,
    /// Group commit: bytes written to the tail after which the store starts a batch on
    /// its own when none is in flight, so that its fdatasync overlaps the writes still to
    /// come (0: batches start only at `submit` / `poll_completions` or under backpressure).
    pub early_batch: u64,
    /// Signalled when a batch completes (the owning shard's event loop sleeps on it).
    pub wake: Option<crate::io::Wake>,
    /// Extend the tail block with zeros ahead of its records, so that appends overwrite
    /// allocated space and their fdatasync has no file metadata to commit.
    pub preformat: bool,
}

impl FileStoreConfig {
    pub fn new(dir: impl Into<PathBuf>) -> FileStoreConfig {
        FileStoreConfig {
            dir: dir.into(),
            block_size: 8 * 1024 * 1024,
            sync: SyncMode::GroupCommit,
            checksum: Checksum::Crc32c,
            compression: Compression::None,
            io: IoChoice::Auto,
            cipher: None,
            auto_compact: true,
            early_batch: 16 * 1024,
            wake: None,
            preformat: true,
        }
    }
}

/// Where a message's record is: block ordinal, offset and record length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub blk: u32,
    pub off: u32,
    pub len: u32,
}

/// One block file, with its write state while it is being written.
pub(crate) struct Block {
    pub ordinal: u64,
    /// The open file, if it is open (sealed blocks are opened on demand, a few at a time).
    pub file: Option<FileNo>,
    pub hdr: format::BlockHeader,
    /// Logical length: headers and records (padded), what the next block's `prev_len` says.
    pub len: u64,
    /// Live messages and the bytes of their records.
    pub live: u64,
    pub live_bytes: u64,
    /// Bytes `[base, len)` held in memory (the tail that is not yet all on disk).
    pub buf: tail::TailBuf,
    pub base: u64,
    /// Bytes handed to the I/O layer.
    pub flushed: u64,
    /// Length known on disk (an fdatasync of it completed).
    pub synced: u64,
    /// The durable end the block's last commit record states.
    pub marked: u64,
    /// How far the file exists on disk (written, or preformatted with zeros); appends
    /// below this overwrite allocated blocks (module `write`, "Preformatting").
    pub zeroed: u64,
}

impl Block {
    pub fn name(ordinal: u64) -> String {
        format!("{ordinal:010}.blk")
    }
}

/// Counters a store reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileStoreStats {
    pub blocks: usize,
    pub batches: u64,
    pub syncs: u64,
    pub bytes_written: u64,
    pub corruptions: u64,
    pub compactions: u64,
    /// Times a store call waited for the disk: buffered writes past the hard limit
    /// ([`FileStore`]'s backpressure), the last resort under sustained overload.
    pub stalls: u64,
    /// Time from the start of a batch to its completion, summed over batches, and the
    /// longest (what a write acknowledged by group commit waits for, at most twice).
    pub batch_nanos: u64,
    pub batch_nanos_max: u64,
    /// Batches started while another was in flight (their writes overlapped its sync).
    pub pipelined: u64,
}

/// A batch in flight.
struct InFlight {
    token: u64,
    started: std::time::Instant,
    /// The batch's number (batches are numbered from 1 as they start).
    no: u64,
    synced: bool,
    /// Per block ordinal, the length that is on disk once the batch completes.
    lens: Vec<(u64, u64)>,
}

/// The file store. Owned by the stream's shard; not shared between threads.
pub struct FileStore {
    cfg: FileStoreConfig,
    eng: Engine<Loc>,
    clock: SharedClock,
    io: Box<dyn Io>,
    cipher: Arc<dyn BlockCipher>,
    blocks: std::collections::VecDeque<Block>,
    /// Writes to sealed blocks (erasures) for the next batch.
    patches: Vec<crate::io::Op>,
    unsynced: BTreeSet<FileNo>,
    dir_dirty: bool,
    /// Batches in flight, oldest first (at most [`MAX_IN_FLIGHT`]).
    in_flight: VecDeque<InFlight>,
    durable: u64,
    last_sync: Instant,
    failed: Option<String>,
    closed: bool,
    corruptions: u64,
    /// Completions signal `cfg.wake`.
    signals: bool,
    stats: FileStoreStats,
    /// Bytes of records a batch writes to the tail, averaged over the last few batches
    /// (decides preformatting, in `write`).
    batch_avg: u64,
    /// Whether the last open loaded the state file instead of scanning the blocks.
    from_state: bool,
    /// Ordinals of sealed blocks opened for reads, oldest first.
    open_files: std::collections::VecDeque<u64>,
    /// Removals the engine made, waiting to be written (seq, erase location).
    tombs: Vec<(u64, Option<(Loc, i64)>)>,
    /// Automatic compaction (module `compact`).
    auto: compact::Auto,
    /// Dead blocks taken off the front, deleted once a synced batch started after they
    /// were taken off (it carries the sequence range that replaces them) has completed.
    doomed: Vec<Doomed>,
    /// Every block before the tail with an ordinal up to this one was all handed to the
    /// I/O layer when last looked at (only an erasure lowers a block's `flushed`, and it
    /// lowers this too): a batch looks at the blocks after it, not at all of a long
    /// stream's thousands of blocks.
    flushed_through: u64,
    /// Appends held back in interval mode (module `hold`).
    hold: hold::Hold,
}

/// A dead block waiting for its deletion.
pub(crate) struct Doomed {
    pub ordinal: u64,
    /// Its open file, kept open while batches in flight may still use it.
    pub file: Option<FileNo>,
    /// Deleted after a synced batch numbered above this completed.
    pub after: u64,
}

impl FileStore {
    /// Open (or create) the store in `fcfg.dir` for the stream `cfg`, recovering what is
    /// there.
    pub fn open(fcfg: FileStoreConfig, cfg: StoreConfig) -> Result<FileStore> {
        FileStore::open_with_clock(fcfg, cfg, system_clock())
    }

    pub fn open_with_clock(fcfg: FileStoreConfig, cfg: StoreConfig, clock: SharedClock) -> Result<FileStore> {
        if fcfg.block_size < 4096 {
            return Err(StoreError::Config("block_size below 4096".into()));
        }
        std::fs::create_dir_all(&fcfg.dir)?;
        let mut io = crate::io::open_backend(&fcfg.dir, &fcfg.io)?;
        let signals = fcfg.wake.as_ref().is_some_and(|w| io.wake_on_completion(w));
        if fcfg.wake.is_some() && !signals {
            tracing::debug!(dir = %fcfg.dir.display(), "storage: completions are not signalled; the owner polls");
        }
        let cipher: Arc<dyn BlockCipher> = fcfg.cipher.clone().unwrap_or_else(|| Arc::new(NoCipher));
        let mut fs = FileStore {
            eng: Engine::new(cfg, file_msg_size),
            cfg: fcfg,
            clock,
            io,
            cipher,
            blocks: Default::default(),
            patches: Vec::new(),
            unsynced: BTreeSet::new(),
            dir_dirty: false,
            in_flight: VecDeque::new(),
            durable: 0,
            last_sync: Instant::now(),
            failed: None,
            closed: false,
            corruptions: 0,
            signals,
            stats: FileStoreStats::default(),
            batch_avg: 0,
            tombs: Vec::new(),
            doomed: Vec::new(),
            flushed_through: 0,
            hold: hold::Hold::default(),
            open_files: Default::default(),
            from_state: false,
            auto: Default::default(),
        };
        fs.recover()?;
        let tail = fs.blocks.back().map_or(0, |b| b.ordinal);
        fs.auto.opened(tail.saturating_sub(1));
        Ok(fs)
    }

    /// Which I/O backend the store runs on (`uring+direct`, `threaded`).
    pub fn io_backend(&self) -> &'static str {
        self.io.name()
    }

    pub fn stats(&self) -> FileStoreStats {
        FileStoreStats {
            blocks: self.blocks.len(),
            corruptions: self.corruptions,
            ..self.stats
        }
    }

    /// Whether this open restored the indexes from the state file (a clean stop before)
    /// rather than by scanning every block.
    pub fn opened_from_state(&self) -> bool {
        self.from_state
    }

    /// The error that made the store refuse writes, if one did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    fn writable(&self) -> Result<()> {
        if self.closed {
            return Err(StoreError::Closed);
        }
        if let Some(f) = &self.failed {
            return Err(StoreError::WritesRefused(f.clone()));
        }
        Ok(())
    }

    fn readable(&self) -> Result<()> {
        if self.closed {
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    fn block_pos(&self, ordinal: u64) -> Option<usize> {
        self.blocks.binary_search_by(|b| b.ordinal.cmp(&ordinal)).ok()
    }

    /// The open file of block `i`, opening it (and closing the least recently opened
    /// idle one past [`MAX_OPEN`]).
    fn file_of(&mut self, i: usize) -> Result<FileNo> {
        let b = self.blocks.get(i).ok_or(StoreError::MsgNotFound)?;
        if let Some(f) = b.file {
            return Ok(f);
        }
        let ord = b.ordinal;
        while self.open_files.len() >= MAX_OPEN {
            let Some(old) = self.open_files.pop_front() else { break };
            let tail = self.blocks.back().map(|t| t.ordinal);
            if let Some(j) = self.block_pos(old) {
                let busy = Some(old) == tail
                    || self
                        .blocks
                        .get(j)
                        .is_some_and(|b| b.flushed < b.len || b.file.is_some_and(|f| self.unsynced.contains(&f)))
                    || self.in_flight.iter().any(|inf| inf.lens.iter().any(|(o, _)| *o == old));
                if busy {
                    self.open_files.push_back(old);
                    break;
                }
                if let Some(f) = self.blocks.get_mut(j).and_then(|b| b.file.take()) {
                    self.io.close(f);
                }
            }
        }
        let (f, _) = self.io.open(&Block::name(ord), false)?;
        if let Some(b) = self.blocks.get_mut(i) {
            b.file = Some(f);
        }
        self.open_files.push_back(ord);
        Ok(f)
    }

    fn corrupt(&mut self, what: &str) {
        self.corruptions += 1;
        tracing::warn!(dir = %self.cfg.dir.display(), "storage: corruption detected (nothing corrupt is served): {what}");
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        if !self.closed && self.failed.is_none() {
            let _ = self.sync_all(true);
        }
        let st = &self.stats;
        tracing::debug!(
            dir = %self.cfg.dir.display(),
            io = self.io.name(),
            batches = st.batches,
            syncs = st.syncs,
            bytes_written = st.bytes_written,
            batch_avg_us = st.batch_nanos / st.batches.max(1) / 1000,
            batch_max_us = st.batch_nanos_max / 1000,
            stalls = st.stalls,
            pipelined = st.pipelined,
            "storage: store closed"
        );
    }
}
