//! Block compaction, automatic and in bounded steps.
//!
//! # When
//! A sealed block (any block but the tail) whose live message bytes fell below half of its
//! length is rewritten without what is dead: removed and erased messages, and tombstones
//! that no longer delete anything. The owner drives it without knowing: every
//! [`crate::Store::submit`] and [`crate::Store::poll_completions`] (the calls the owning
//! shard's loop already makes) runs at most one step, and a step reads at most
//! [`STEP`] bytes (64 KiB) of the old block and hands at most about as many to the I/O layer, as
//! writes of the store's next batch (so they share its fdatasync and never block the
//! caller). [`FileStore::compact_blocks`] runs every step to the end at once (idle time,
//! tests). One block is rewritten at a time, lowest ordinal first.
//!
//! # How
//! 1. **Build**: the old block is read chunk by chunk; each record is kept or dropped
//!    (below) and the kept ones are re-encoded into `<ordinal>.blk.tmp` under a fresh file
//!    id (sealed bodies are re-sealed for it). Full 4 KiB pages go out as writes of the
//!    store's batches.
//! 2. **Seal**: the last page and then the first (the header, which holds the new file's
//!    exact length in `sealed_len`), then an fdatasync of the new file.
//! 3. **Swap**: once that batch completed, and once every earlier change of the directory
//!    (block deletions, earlier swaps) is synced, the new file is renamed over the old one
//!    and the index moved to the new offsets; the directory fsync goes in the next batch.
//!    The job ends when that batch completed.
//!
//! A crash anywhere leaves either the old block (and a `.tmp` file, deleted on open) or
//! the new one under the block's name; both replay to the same stream.
//!
//! # What is dropped
//! - A message record the index does not point to (removed, expired, purged, erased) and
//!   an erased record. Each run of dropped records leaves one header-only erased record
//!   with the run's last sequence, so a replay still sees those sequences taken.
//! - A tombstone for sequence `s` when no record of `s` can come back: no older block
//!   (nor this block before it) may hold a message record of `s`. Each block's span of
//!   message sequences (dead ones included) is known for the blocks written by this
//!   process and for blocks rewritten by it; for a block that was on disk at open it is
//!   learnt, when a younger block is about to be rewritten, by reading it once (a survey,
//!   in the same bounded steps, no writes); a block that cannot be read (damage) keeps
//!   every later tombstone. A dead block taken off the front whose file is not deleted yet
//!   (module `write`: that waits for a synced batch holding the sequence range that
//!   replaces it) still counts as an older block: until then a crash may lose that range
//!   and bring the block's records back; once it is durable the range deletes them at
//!   every replay, file or not. A block that kept tombstones only for such a block is worth
//!   a rewrite again once it is deleted. Since a swap happens only after every earlier
//!   directory change is durable, a tombstone can only be dropped on disk after the
//!   message records it deleted are gone from disk, or deleted by a durable range.
//! - Sequence ranges are always kept.
//!
//! A block whose live bytes are still below half after its rewrite (say, tombstones that
//! must stay) is not rewritten again until it loses more, or until a rewrite of an older
//! block dropped messages (which may free its tombstones). The oldest block, once all
//! dead, is deleted as before (module `write`); a dead block in the middle shrinks to its
//! header and markers (ordinals stay contiguous, which recovery checks). Commit records
//! (the durable end of a block as it was the tail) are not copied: a rewritten block's
//! length is its own `sealed_len`.
//!
//! # Measured
//! `examples/compaction_bench.rs` (this 2-core VM, shared): 1M messages of 100 B (152.6
//! MiB of blocks), 90% removed at random with a loop turn every 1024 removes. Without
//! compaction the directory grows to 200.7 MiB (the tombstones: 56 B each). With automatic
//! compaction it is 21.3 MiB once the loop has turned ~1 900 more times (1.1 s), 31
//! rewrites having dropped 899 593 dead messages and 879 300 tombstones (rewriting without
//! dropping tombstones, as before, would leave ~68 MiB); an explicit `compact_blocks`
//! reaches 20.8 MiB but blocks its caller 0.69 s. A remove costs 1.07 µs without and
//! 1.20 µs with automatic compaction (loop turns included; within this machine's noise);
//! the longest loop turn was 7.6 ms with other builds competing for the two cores (a step
//! is one 64 KiB read plus decoding and re-encoding ~400 records).
//!
//! A block that fails to decode (damage) is left as it is; an erasure of a message of the
//! block being rewritten restarts the rewrite later (the copy must not keep the erased
//! bytes).

use super::format::{self, Bad, BlockHeader, Kind, Record, BF_COMPACTED, DATA_START, RF_SEALED};
use super::{Block, FileStore};
use crate::error::{Result, StoreError};
use crate::io::{FileNo, Op};
use std::collections::HashMap;

/// Bytes of the old block read (and about as many written) per step.
pub const STEP: usize = 64 * 1024;
/// The unit of the new file's writes (a multiple of every backend's alignment).
const PAGE: u64 = 4096;

/// Message sequences a block holds records of (live or dead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Span {
    Unknown,
    Empty,
    Seqs(u64, u64),
}

impl Span {
    fn add(&mut self, seq: u64) {
        *self = match *self {
            Span::Unknown => Span::Unknown,
            Span::Empty => Span::Seqs(seq, seq),
            Span::Seqs(a, b) => Span::Seqs(a.min(seq), b.max(seq)),
        }
    }
    fn may_hold(&self, seq: u64) -> bool {
        match *self {
            Span::Unknown => true,
            Span::Empty => false,
            Span::Seqs(a, b) => a <= seq && seq <= b,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Meta {
    span: Span,
    /// Live bytes right after its last rewrite (`None`: may have something to drop).
    settled: Option<u64>,
    /// Its last rewrite began when the tail was this block: every message record of it
    /// dead by then is gone, so a tombstone in an older block than this does not delete
    /// anything in it.
    swept_below: Option<u64>,
    /// Its last rewrite kept tombstones only because a dead block waiting for its
    /// deletion (this ordinal or an older one) may hold their messages: once no such block
    /// waits any more, it is worth another rewrite.
    waits_on: Option<u64>,
}

enum Phase {
    /// Reading the old block and writing the new one.
    Build,
    /// The sealing batch is in flight.
    Sealing,
    /// Renamed; the directory fsync is in flight.
    DirSync,
}

/// One block rewrite in progress.
struct Job {
    ord: u64,
    old_hdr: BlockHeader,
    old_len: u64,
    new_id: u64,
    tmp: FileNo,
    phase: Phase,
    /// Bytes of the old block read so far, and those not yet decoded (from `carry_at`).
    read_to: u64,
    carry: Vec<u8>,
    carry_at: u64,
    /// The new file's bytes from `out_at` on not yet written (the first page is kept
    /// until the end: it holds the header).
    out: Vec<u8>,
    out_at: u64,
    first_page: Vec<u8>,
    /// Kept messages: (seq, old offset, new offset, length).
    moved: Vec<(u64, u32, u32, u32)>,
    span: Span,
    dropped_run: Option<(u64, i64)>,
    dropped_msgs: u64,
    dropped_tombs: u64,
    new_len: u64,
    /// An erasure touched the old block: give up at the next step.
    abort: bool,
    /// The tail block when the rewrite began.
    tail_at_start: u64,
    /// What the older blocks may hold, for tombstones (those that may hold any).
    older: Vec<Span>,
    /// The same for the dead blocks waiting for their deletion (ordinal, span).
    doomed: Vec<(u64, Span)>,
    /// The youngest of those that kept a tombstone.
    waits_on: Option<u64>,
}

/// A block read only to learn which message sequences it holds (a block on disk at open
/// whose span is unknown, older than a block about to be rewritten).
struct Survey {
    ord: u64,
    hdr: BlockHeader,
    len: u64,
    read_to: u64,
    carry: Vec<u8>,
    span: Span,
}

/// Batches a store under steady load runs pipelined between two looks for a block worth
/// rewriting (each look waits for the batches in flight to end).
const LOOK_EVERY: u64 = 16;

/// Automatic compaction's state in the store.
#[derive(Default)]
pub(super) struct Auto {
    survey: Option<Survey>,
    /// Blocks a survey could not read (damage): their spans stay unknown.
    unsurveyable: std::collections::HashSet<u64, ahash::RandomState>,
    /// By block ordinal; touched for every stored message (a fast hash for integers).
    meta: HashMap<u64, Meta, ahash::RandomState>,
    /// Blocks up to this ordinal were on disk at open (their spans start unknown).
    opened_upto: u64,
    /// Removals happened since candidates were last looked for.
    dirty: bool,
    /// The store's batch count when candidates were last looked for.
    looked_at: u64,
    job: Option<Job>,
    /// Inside [`FileStore::compact_blocks`] (which runs even with `auto_compact` off).
    forced: bool,
    /// Totals, for reports and tests.
    pub tombs_dropped: u64,
    pub msgs_dropped: u64,
}

impl Auto {
    /// Compaction has a step to take (it runs only with no batch in flight, so the store
    /// does not start a second batch meanwhile). Removals alone ask for a turn at most
    /// once per [`LOOK_EVERY`] batches (`batches`: the store's count so far): a stream
    /// that removes as it stores (a KV bucket's history, `max_msgs_per_subject`) would
    /// otherwise never pipeline a batch; an idle store looks at once either way.
    pub(super) fn wants_turn(&self, auto_compact: bool, batches: u64) -> bool {
        self.survey.is_some()
            || self.job.is_some()
            || (self.dirty && (auto_compact || self.forced) && batches >= self.looked_at + LOOK_EVERY)
    }

    pub(super) fn opened(&mut self, upto: u64) {
        self.opened_upto = upto;
        self.dirty = true;
    }

    /// A message record of `seq` went to block `ord`.
    pub(super) fn note_msg(&mut self, ord: u64, seq: u64) {
        let unknown = ord <= self.opened_upto;
        let m = self.meta.entry(ord).or_insert(Meta {
            span: if unknown { Span::Unknown } else { Span::Empty },
            settled: None,
            swept_below: None,
            waits_on: None,
        });
        m.span.add(seq);
    }

    pub(super) fn removed(&mut self) {
        self.dirty = true;
    }

    /// Dead blocks were deleted: a block whose tombstones waited for that may be worth a
    /// rewrite now.
    pub(super) fn doomed_deleted(&mut self) {
        self.dirty = true;
    }

    /// What block `ord` may still hold of the messages a tombstone in block `tomb_blk`
    /// deletes.
    fn span_for_tombs_of(&self, ord: u64, tomb_blk: u64) -> Span {
        let m = self.meta.get(&ord);
        if m.and_then(|m| m.swept_below).is_some_and(|t| tomb_blk < t) {
            return Span::Empty;
        }
        self.span(ord)
    }

    fn span(&self, ord: u64) -> Span {
        match self.meta.get(&ord) {
            Some(m) => m.span,
            None if ord <= self.opened_upto => Span::Unknown,
            None => Span::Empty,
        }
    }

    /// The block being rewritten, while its old copy is still the one in use.
    pub(super) fn building(&self) -> Option<u64> {
        self.job
            .as_ref()
            .filter(|j| matches!(j.phase, Phase::Build | Phase::Sealing))
            .map(|j| j.ord)
    }

    pub(super) fn abort_building(&mut self) {
        if let Some(j) = self.job.as_mut() {
            if matches!(j.phase, Phase::Build | Phase::Sealing) {
                j.abort = true;
            }
        }
    }

    pub(super) fn busy(&self) -> bool {
        self.job.is_some() || self.survey.is_some()
    }
}

fn floor(n: u64) -> u64 {
    n - n % PAGE
}

impl FileStore {
    /// Rewrite every sealed block that is mostly dead, waiting for each; returns how many
    /// were rewritten.
    pub fn compact_blocks(&mut self) -> Result<usize> {
        self.writable()?;
        self.sync_all(true)?;
        self.auto.dirty = true;
        let before = self.stats.compactions;
        self.auto.forced = true;
        let r: Result<()> = (|| loop {
            self.compaction_step()?;
            self.sync_all(true)?;
            if !self.auto.busy() && !self.auto.dirty {
                return Ok(());
            }
        })();
        self.auto.forced = false;
        r?;
        Ok((self.stats.compactions - before) as usize)
    }

    /// Whether a block rewrite is under way.
    pub fn compaction_running(&self) -> bool {
        self.auto.busy()
    }

    /// Tombstones and dead message records dropped by rewrites since open.
    pub fn compaction_dropped(&self) -> (u64, u64) {
        (self.auto.msgs_dropped, self.auto.tombs_dropped)
    }

    /// One bounded step of automatic compaction (called with no batch in flight, before
    /// the next batch starts, so its writes join that batch). Problems of the rewrite
    /// itself (a damaged old block, a read error) abandon it and are logged; only the
    /// store's own batch failures are errors.
    pub(super) fn compaction_step(&mut self) -> Result<()> {
        if !self.in_flight.is_empty() || self.failed.is_some() || self.closed {
            return Ok(());
        }
        if let Some(sv) = self.auto.survey.take() {
            self.survey_step(sv);
            return Ok(());
        }
        if self.auto.job.is_none() {
            if !self.auto.dirty || !self.patches.is_empty() || !(self.cfg.auto_compact || self.auto.forced) {
                return Ok(());
            }
            self.auto.dirty = false;
            self.auto.looked_at = self.stats.batches;
            let Some(i) = self.candidate() else { return Ok(()) };
            // An older block whose message sequences are unknown keeps every tombstone
            // of this one: learn them first (once per block and open).
            let c_ord = self.blocks.get(i).map_or(0, |b| b.ordinal);
            let unknown = self
                .blocks
                .iter()
                .take_while(|b| b.ordinal < c_ord)
                .find(|b| {
                    self.auto.span_for_tombs_of(b.ordinal, c_ord) == Span::Unknown
                        && !self.auto.unsurveyable.contains(&b.ordinal)
                })
                .map(|b| (b.ordinal, b.hdr, b.len));
            if let Some((ord, hdr, len)) = unknown {
                self.auto.survey = Some(Survey {
                    ord,
                    hdr,
                    len,
                    read_to: DATA_START as u64,
                    carry: Vec::new(),
                    span: Span::Empty,
                });
                self.auto.dirty = true;
                return Ok(());
            }
            if let Err(e) = self.begin(i) {
                tracing::warn!(dir = %self.cfg.dir.display(), error = %e, "storage: block compaction not started");
                return Ok(());
            }
        }
        let Some(job) = self.auto.job.take() else { return Ok(()) };
        match self.advance(job) {
            Ok(Some(job)) => {
                self.auto.job = Some(job);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Read the next chunk of a surveyed block; at its end, record its span.
    fn survey_step(&mut self, mut sv: Survey) {
        let Some(i) = self.block_pos(sv.ord) else { return };
        let r = (|| -> std::result::Result<bool, String> {
            if sv.read_to < sv.len {
                let file = self.file_of(i).map_err(|e| e.to_string())?;
                let n = STEP.min((sv.len - sv.read_to) as usize);
                let chunk = self.io.read_at(file, sv.read_to, n).map_err(|e| e.to_string())?;
                if chunk.len() != n {
                    return Err("block shorter than its length".into());
                }
                sv.read_to += n as u64;
                sv.carry.extend_from_slice(&chunk);
            }
            let at_end = sv.read_to >= sv.len;
            let mut pos = 0usize;
            while let Some(rest) = sv.carry.get(pos..).filter(|r| !r.is_empty()) {
                match format::decode_record(rest, sv.hdr.checksum(), sv.hdr.file_id) {
                    Ok((r, n)) => {
                        if r.kind == Kind::Msg {
                            sv.span.add(r.seq);
                        }
                        pos += n;
                    }
                    Err(Bad::Short) if !at_end => break,
                    Err(bad) => return Err(format!("{bad:?} record")),
                }
            }
            sv.carry.drain(..pos.min(sv.carry.len()));
            Ok(at_end && sv.carry.is_empty())
        })();
        match r {
            Ok(true) => {
                let m = self.auto.meta.entry(sv.ord).or_insert(Meta {
                    span: Span::Unknown,
                    settled: None,
                    swept_below: None,
                    waits_on: None,
                });
                m.span = sv.span;
            }
            Ok(false) => self.auto.survey = Some(sv),
            Err(why) => {
                tracing::debug!(block = sv.ord, "storage: block not surveyed for compaction: {why}");
                self.auto.unsurveyable.insert(sv.ord);
            }
        }
    }

    /// The lowest sealed block that is worth rewriting.
    fn candidate(&self) -> Option<usize> {
        let n = self.blocks.len();
        (0..n.saturating_sub(1)).find(|&i| {
            let Some(b) = self.blocks.get(i) else { return false };
            let worth = b.live_bytes.saturating_mul(2) < b.len && b.len > DATA_START as u64;
            let settled = self.auto.meta.get(&b.ordinal).is_some_and(|m| {
                m.settled.is_some_and(|s| b.live_bytes >= s)
                    && m.waits_on.is_none_or(|w| self.doomed.iter().any(|d| d.ordinal <= w))
            });
            worth
                && !settled
                && b.flushed == b.len
                && b.buf.is_empty()
                && !b.file.is_some_and(|f| self.unsynced.contains(&f))
        })
    }

    fn begin(&mut self, i: usize) -> Result<()> {
        let (ord, old_hdr, old_len) = match self.blocks.get(i) {
            Some(b) => (b.ordinal, b.hdr, b.len),
            None => return Ok(()),
        };
        let tmp_name = format!("{}.tmp", Block::name(ord));
        match self.io.remove(&tmp_name) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        let (tmp, _) = self.io.open(&tmp_name, true)?;
        self.auto.job = Some(Job {
            ord,
            old_hdr,
            old_len,
            new_id: rand::random::<u64>(),
            tmp,
            phase: Phase::Build,
            read_to: DATA_START as u64,
            carry: Vec::new(),
            carry_at: DATA_START as u64,
            out: vec![0u8; DATA_START],
            out_at: 0,
            first_page: Vec::new(),
            moved: Vec::new(),
            span: Span::Empty,
            dropped_run: None,
            dropped_msgs: 0,
            dropped_tombs: 0,
            new_len: 0,
            abort: false,
            tail_at_start: self.blocks.back().map_or(0, |b| b.ordinal),
            older: self.older_spans(ord),
            doomed: self.doomed_spans(ord),
            waits_on: None,
        });
        Ok(())
    }

    /// The spans of the blocks older than `ord` that may hold messages a tombstone in
    /// `ord` deletes.
    fn older_spans(&self, ord: u64) -> Vec<Span> {
        self.blocks
            .iter()
            .take_while(|b| b.ordinal < ord)
            .map(|b| self.auto.span_for_tombs_of(b.ordinal, ord))
            .filter(|s| *s != Span::Empty)
            .collect()
    }

    /// The spans of the dead blocks taken off the list whose files are not deleted yet
    /// (module `write`: a dead block at the front is deleted only once a synced batch
    /// holding the sequence range that replaces it has completed). Until then a crash
    /// brings their records back, with nothing but the tombstones to delete them again; once
    /// the range is durable it deletes them at every replay, whether the file went or not.
    fn doomed_spans(&self, ord: u64) -> Vec<(u64, Span)> {
        self.doomed
            .iter()
            .map(|d| (d.ordinal, self.auto.span_for_tombs_of(d.ordinal, ord)))
            .filter(|(_, s)| *s != Span::Empty)
            .collect()
    }

    /// Give up a job: its new file goes (nothing is in flight when this runs).
    fn abandon(&mut self, job: Job, why: &str, settle: bool) {
        if !why.is_empty() {
            tracing::warn!(dir = %self.cfg.dir.display(), block = job.ord, "storage: block compaction abandoned: {why}");
        }
        self.io.close(job.tmp);
        let _ = self.io.remove(&format!("{}.tmp", Block::name(job.ord)));
        if settle {
            let live = self
                .block_pos(job.ord)
                .and_then(|i| self.blocks.get(i))
                .map(|b| b.live_bytes);
            let span = self.auto.span(job.ord);
            let swept_below = self.auto.meta.get(&job.ord).and_then(|m| m.swept_below);
            self.auto.meta.insert(
                job.ord,
                Meta {
                    span,
                    settled: live,
                    swept_below,
                    waits_on: None,
                },
            );
        }
        // Look again for other candidates.
        self.auto.dirty = true;
    }

    fn advance(&mut self, mut job: Job) -> Result<Option<Job>> {
        if job.abort {
            self.abandon(job, "", false);
            return Ok(None);
        }
        let Some(i) = self.block_pos(job.ord) else {
            // Deleted meanwhile (it became the oldest and died).
            if matches!(job.phase, Phase::DirSync) {
                self.stats.compactions += 1;
            } else {
                self.abandon(job, "", false);
            }
            self.auto.dirty = true;
            return Ok(None);
        };
        match job.phase {
            Phase::Build => {
                if let Err(why) = self.build_step(i, &mut job) {
                    self.abandon(job, &why, true);
                    return Ok(None);
                }
                self.start_batch(false)?;
                Ok(Some(job))
            }
            Phase::Sealing => {
                self.swap(i, &mut job)?;
                job.phase = Phase::DirSync;
                self.patches.push(Op::SyncDir);
                self.start_batch(false)?;
                Ok(Some(job))
            }
            Phase::DirSync => {
                self.stats.compactions += 1;
                self.auto.msgs_dropped += job.dropped_msgs;
                self.auto.tombs_dropped += job.dropped_tombs;
                if job.dropped_msgs > 0 {
                    // Tombstones in later blocks may have nothing left to delete.
                    for (o, m) in self.auto.meta.iter_mut() {
                        if *o > job.ord {
                            m.settled = None;
                        }
                    }
                }
                self.auto.dirty = true;
                Ok(None)
            }
        }
    }

    /// Read the next chunk of the old block and re-encode its records; at the end, seal.
    /// `Err`: why the rewrite is abandoned.
    fn build_step(&mut self, i: usize, job: &mut Job) -> std::result::Result<(), String> {
        let cs = job.old_hdr.checksum();
        if job.read_to < job.old_len {
            let file = self.file_of(i).map_err(|e| e.to_string())?;
            let n = STEP.min((job.old_len - job.read_to) as usize);
            let chunk = self.io.read_at(file, job.read_to, n).map_err(|e| e.to_string())?;
            if chunk.len() != n {
                return Err(format!("block is shorter than {} bytes", job.old_len));
            }
            job.read_to += n as u64;
            job.carry.extend_from_slice(&chunk);
        }
        let at_end = job.read_to >= job.old_len;
        let mut pos = 0usize;
        let mut failure = None;
        let mut carry = std::mem::take(&mut job.carry);
        while job.carry_at + (pos as u64) < job.old_len {
            let rest = carry.get(pos..).unwrap_or(&[]);
            let off = job.carry_at + pos as u64;
            match format::decode_record(rest, cs, job.old_hdr.file_id) {
                Ok((r, n)) => {
                    if let Err(e) = self.keep_or_drop(job, off, &r) {
                        failure = Some(e);
                        break;
                    }
                    pos += n;
                }
                Err(Bad::Short) if !at_end => break,
                Err(bad) => {
                    failure = Some(format!("{bad:?} record at offset {off}"));
                    break;
                }
            }
        }
        carry.drain(..pos.min(carry.len()));
        job.carry = carry;
        job.carry_at += pos as u64;
        if let Some(f) = failure {
            return Err(f);
        }
        self.emit(job, false);
        if at_end && job.carry_at >= job.old_len {
            self.flush_run(job);
            self.seal(job);
            job.phase = Phase::Sealing;
        }
        Ok(())
    }

    fn flush_run(&mut self, job: &mut Job) {
        if let Some((seq, ts)) = job.dropped_run.take() {
            let rec = Record::erased(seq, ts, &[]);
            format::encode_record(&mut job.out, &rec, job.old_hdr.checksum(), job.new_id);
        }
    }

    fn keep_or_drop(&mut self, job: &mut Job, off: u64, r: &Record<'_>) -> std::result::Result<(), String> {
        let ord = job.ord;
        match r.kind {
            Kind::Msg => {
                let live = self
                    .eng
                    .index
                    .get(r.seq)
                    .is_some_and(|e| u64::from(e.loc.blk) == ord && u64::from(e.loc.off) == off);
                if !live {
                    job.dropped_run = Some((r.seq, r.ts));
                    job.dropped_msgs += 1;
                    return Ok(());
                }
            }
            Kind::Erased => {
                job.dropped_run = Some((r.seq, r.ts));
                return Ok(());
            }
            Kind::Tomb => {
                // The older blocks cannot change meanwhile but by losing messages or
                // being deleted (only the tail takes messages, one rewrite at a time).
                let older = job.older.iter().any(|s| s.may_hold(r.seq));
                if !older && !job.span.may_hold(r.seq) {
                    // A dead block whose deletion still waits may come back at a crash.
                    match job.doomed.iter().find(|(_, s)| s.may_hold(r.seq)) {
                        Some(&(d, _)) => job.waits_on = job.waits_on.max(Some(d)),
                        None => {
                            job.dropped_tombs += 1;
                            return Ok(());
                        }
                    }
                }
            }
            Kind::Range => {}
            // A commit record states the durable end of the block as it was the tail, in
            // its old offsets; a rewritten block's length is its own `sealed_len`, so
            // recovery never reads one there.
            Kind::Commit => return Ok(()),
        }
        self.flush_run(job);
        let cs = job.old_hdr.checksum();
        let new_off = job.out_at + job.out.len() as u64;
        if r.kind == Kind::Msg {
            let mut body = r.body.to_vec();
            if r.flags & RF_SEALED != 0 {
                self.cipher
                    .open(job.old_hdr.file_id, off, &mut body)
                    .map_err(|e| format!("cannot open sealed body: {e}"))?;
                self.cipher
                    .seal(job.new_id, new_off, &mut body)
                    .map_err(|e| format!("cannot seal body: {e}"))?;
            }
            let rec = Record {
                body: &body,
                ..r.clone()
            };
            let before = job.out.len();
            format::encode_record(&mut job.out, &rec, cs, job.new_id);
            let len = (job.out.len() - before) as u32;
            job.moved.push((r.seq, off as u32, new_off as u32, len));
            job.span.add(r.seq);
        } else {
            format::encode_record(&mut job.out, r, cs, job.new_id);
        }
        if job.out_at + job.out.len() as u64 > u64::from(u32::MAX) {
            return Err("rewritten block too long".into());
        }
        Ok(())
    }

    /// Hand the full pages of the new file to the next batch (all of it with `last`).
    fn emit(&mut self, job: &mut Job, last: bool) {
        // The first page waits for the header.
        if job.out_at == 0 && job.first_page.is_empty() && (job.out.len() as u64 >= PAGE || last) {
            let n = (PAGE as usize).min(job.out.len());
            job.first_page = job.out.drain(..n).collect();
            job.out_at = PAGE;
        }
        if job.out_at == 0 {
            return;
        }
        let end = job.out_at + job.out.len() as u64;
        // The end only as far as the backend needs (exact with buffered I/O).
        let align = self.io.alignment() as u64;
        let upto = if last { end.div_ceil(align) * align } else { floor(end) };
        if upto <= job.out_at || (!last && ((upto - job.out_at) as usize) < STEP) {
            return;
        }
        let n = ((upto - job.out_at) as usize).min(job.out.len());
        let mut data = self.io.write_buf();
        data.extend_from_slice(job.out.get(..n).unwrap_or(&[]));
        job.out.drain(..n);
        data.resize((upto - job.out_at) as usize);
        self.stats.bytes_written += data.len() as u64;
        self.patches.push(Op::Write {
            file: job.tmp,
            off: job.out_at,
            data,
        });
        job.out_at = upto;
    }

    /// The rest of the new file, its header, and its fdatasync.
    fn seal(&mut self, job: &mut Job) {
        job.new_len = job.out_at + job.out.len() as u64;
        self.emit(job, true);
        let hdr = BlockHeader {
            flags: job.old_hdr.flags | BF_COMPACTED,
            file_id: job.new_id,
            sealed_len: job.new_len,
            ..job.old_hdr
        };
        let h = hdr.encode();
        let mut page = if job.first_page.is_empty() {
            std::mem::take(&mut job.out)
        } else {
            std::mem::take(&mut job.first_page)
        };
        let align = self.io.alignment() as u64;
        let page_len = job.new_len.min(PAGE).div_ceil(align) * align;
        page.resize(page_len.clamp(DATA_START as u64, PAGE) as usize, 0);
        if let Some(dst) = page.get_mut(..DATA_START) {
            dst[..format::HEADER_LEN].copy_from_slice(&h);
            dst[format::HEADER_LEN..].copy_from_slice(&h);
        }
        self.stats.bytes_written += page.len() as u64;
        self.patches.push(Op::Write {
            file: job.tmp,
            off: 0,
            data: page.into(),
        });
        self.patches.push(Op::Sync { file: job.tmp });
        self.stats.syncs += 1;
        // Every change of the directory before this point (block deletions) is durable
        // before the swap: the old block's records may be what keeps a tombstone needed.
        self.patches.push(Op::SyncDir);
        self.dir_dirty = false;
        job.out = Vec::new();
        job.carry = Vec::new();
        // Kept for the swap.
        job.first_page = h.to_vec();
    }

    /// Put the new file in place of the old one and move the index to it.
    fn swap(&mut self, i: usize, job: &mut Job) -> Result<()> {
        let name = Block::name(job.ord);
        let tmp = format!("{name}.tmp");
        let hdr = BlockHeader::decode(&job.first_page)
            .ok_or_else(|| StoreError::Corrupt("compaction: bad new header".into()))?;
        self.io.close(job.tmp);
        if let Some(f) = self.blocks.get_mut(i).and_then(|b| b.file.take()) {
            self.io.close(f);
        }
        self.open_files.retain(|o| *o != job.ord);
        self.io.rename(&tmp, &name)?;
        let mut live = 0u64;
        let mut live_bytes = 0u64;
        for &(seq, old_off, new_off, len) in &job.moved {
            if let Some(e) = self.eng.index.get_mut(seq) {
                if u64::from(e.loc.blk) == job.ord && e.loc.off == old_off {
                    e.loc.off = new_off;
                    e.loc.len = len;
                    live += 1;
                    live_bytes += u64::from(len);
                }
            }
        }
        if let Some(b) = self.blocks.get_mut(i) {
            b.hdr = hdr;
            b.len = job.new_len;
            b.flushed = b.len;
            let align = self.io.alignment() as u64;
            b.base = b.len.div_ceil(align) * align;
            b.buf = Default::default();
            b.live = live;
            b.live_bytes = live_bytes;
        }
        self.auto.meta.insert(
            job.ord,
            Meta {
                span: job.span,
                settled: Some(live_bytes),
                swept_below: Some(job.tail_at_start),
                waits_on: job.waits_on,
            },
        );
        Ok(())
    }

    /// Drop a rewrite in progress (the store stops; nothing is in flight).
    pub(super) fn end_compaction(&mut self) {
        if let Some(job) = self.auto.job.take() {
            if matches!(job.phase, Phase::Build | Phase::Sealing) {
                self.abandon(job, "", false);
            }
        }
    }
}
