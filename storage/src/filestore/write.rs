//! The write path: records appended to the tail block's buffer, block rotation, batches
//! handed to the I/O layer (group commit), their completion, removals written as
//! tombstones and ranges, erasure in place, and deletion of dead blocks.

use super::format::{self, BlockHeader, Kind, Record, BF_COMPACTED, BF_HIGHWAY, BF_S2, BF_SEALED, DATA_START};
use super::{Block, Compression, FileStore, InFlight, Loc, SyncMode};
use crate::engine::{Entry, Sink, Why};
use crate::error::{Result, StoreError};
use crate::io::{Batch, Done, Op};
use std::time::Instant;

/// Receives the engine's removals: block accounting, and the tombstones to write.
pub(super) struct FsSink<'a> {
    pub blocks: &'a mut std::collections::VecDeque<Block>,
    pub tombs: &'a mut Vec<(u64, Option<(Loc, i64)>)>,
}

impl Sink<Loc> for FsSink<'_> {
    fn removed(&mut self, seq: u64, e: Entry<Loc>, why: Why) {
        let ord = u64::from(e.loc.blk);
        if let Ok(i) = self.blocks.binary_search_by(|b| b.ordinal.cmp(&ord)) {
            if let Some(b) = self.blocks.get_mut(i) {
                b.live = b.live.saturating_sub(1);
                b.live_bytes = b.live_bytes.saturating_sub(u64::from(e.loc.len));
            }
        }
        match why {
            Why::User | Why::Limit | Why::Expired => self.tombs.push((seq, None)),
            Why::Erase => self.tombs.push((seq, Some((e.loc, e.ts)))),
            Why::Bulk | Why::Replay => {}
        }
    }
}

fn floor(n: u64, a: u64) -> u64 {
    n - n % a
}

fn ceil(n: u64, a: u64) -> u64 {
    n.div_ceil(a) * a
}

// Preformatting. A write past the end of a file allocates space and grows the file, so
// its fdatasync commits the file system's journal as well as flushing the data, and on
// io_uring the write itself is handed to a kernel worker. Measured on this project's ext4
// VMs (4 KiB O_DIRECT writes, each followed by fdatasync): 263 us p50 / 685 us p99
// appending, 137 / 223 us overwriting a zero-filled file. So when a batch writes past the
// tail block's preformatted end, its write carries zeros on to a new end, `step` further:
// the preformatted length so far, at least 64 KiB and at most 1 MiB (small streams stay
// small on disk), never past the block size. One batch in that many bytes pays for the
// growth; the others overwrite zeros. Recovery needs no new rule: zeros where a record
// should start are already the end of the last block's log, and a sealed block's length
// is the next block's `prev_len`, not its file's.
//
// Only a store whose batches are small on average (below `PREFORMAT_MIN` of records,
// averaged over the last eight or so) preformats: the zeros are as many bytes as the
// records, and large batches share their journal commit among many records while the
// zeros would double their bytes (1 KiB publishes, ~200 KiB batches: 1.13x
// publishes/s without zeros on this VM, whose disk then ran out of bandwidth first; 16 B
// publishes, ~20 KiB batches: 1.13x with them).
const PREFORMAT_MIN: u64 = 64 * 1024;
const PREFORMAT_MAX: u64 = 1024 * 1024;

/// The end a write reaching `end` (past the preformatted `zeroed`) extends the file to.
fn preformat_end(zeroed: u64, end: u64, cap: u64) -> u64 {
    let step = zeroed.clamp(PREFORMAT_MIN, PREFORMAT_MAX);
    ceil(end + step, PREFORMAT_MIN).min(cap).max(end)
}

impl FileStore {
    fn block_flags(&self) -> u16 {
        let mut f = 0;
        if self.cfg.checksum == format::Checksum::Highway {
            f |= BF_HIGHWAY;
        }
        if self.cfg.compression == Compression::S2 {
            f |= BF_S2;
        }
        if self.cfg.cipher.is_some() {
            f |= BF_SEALED;
        }
        f
    }

    /// Start block `ordinal` (the log's new tail) after a block of length `prev_len`.
    pub(super) fn new_block(&mut self, ordinal: u64, prev_len: u64, compacted: bool) -> Result<()> {
        let (file, _) = self.io.open(&Block::name(ordinal), true)?;
        if ordinal <= self.flushed_through {
            // Ordinals only grow; should one not, every block is looked at again.
            self.flushed_through = 0;
        }
        let mut flags = self.block_flags();
        if compacted {
            flags |= BF_COMPACTED;
        }
        let hdr = BlockHeader {
            flags,
            ordinal,
            file_id: rand::random::<u64>(),
            prev_len,
            sealed_len: 0,
            created: self.clock.now_nanos(),
        };
        let h = hdr.encode();
        let mut buf = Vec::with_capacity(DATA_START + 4096);
        buf.extend_from_slice(&h);
        buf.extend_from_slice(&h);
        self.blocks.push_back(Block {
            ordinal,
            file: Some(file),
            hdr,
            len: DATA_START as u64,
            live: 0,
            live_bytes: 0,
            buf: buf.into(),
            base: 0,
            flushed: 0,
            synced: DATA_START as u64,
            marked: DATA_START as u64,
            zeroed: 0,
        });
        self.dir_dirty = true;
        Ok(())
    }

    /// Append a record to the tail block (rotating first when it is full). Returns its
    /// location.
    fn append(&mut self, rec: &Record<'_>) -> Result<Loc> {
        let need = format::pad8(format::record_len(rec.subject.len(), rec.body.len(), self.cfg.checksum)) as u64;
        let rotate = self
            .blocks
            .back()
            .is_none_or(|b| b.len > DATA_START as u64 && b.len + need > self.cfg.block_size);
        if rotate {
            let (ord, len) = self.blocks.back().map_or((1, 0), |b| (b.ordinal + 1, b.len));
            self.new_block(ord, len, false)?;
        }
        let cs = self.cfg.checksum;
        let b = self.blocks.back_mut().ok_or(StoreError::Closed)?;
        if b.len + need > u64::from(u32::MAX) {
            return Err(StoreError::MsgTooLarge);
        }
        let off = b.len;
        format::encode_record(b.buf.appender(need as usize), rec, cs, b.hdr.file_id);
        b.len += need;
        Ok(Loc {
            blk: b.ordinal as u32,
            off: off as u32,
            len: need as u32,
        })
    }

    /// Append a message record and account it to its block.
    pub(super) fn append_msg(
        &mut self,
        seq: u64,
        ts: i64,
        subject: &str,
        hdr: &[u8],
        payload: &[u8],
        ttl: i64,
    ) -> Result<Loc> {
        if subject.len() > usize::from(u16::MAX) {
            return Err(StoreError::MsgTooLarge);
        }
        let mut body = Vec::with_capacity(hdr.len() + payload.len());
        body.extend_from_slice(hdr);
        body.extend_from_slice(payload);
        let plain_len = body.len() as u32;
        let mut flags = 0u8;
        if self.cfg.compression == Compression::S2 && body.len() > 64 {
            let c = minlz::encode(&body);
            if c.len() < body.len() {
                body = c;
                flags |= format::RF_S2;
            }
        }
        let mut subject = subject.as_bytes();
        let mut hdr_len = hdr.len() as u32;
        if self.cfg.cipher.is_some() {
            // The record lands at the tail's end, or at the start of a new block. The
            // subject and the headers' length are sealed with the body.
            let (file_id, off) = self.next_record_place(0, 6 + subject.len() + body.len())?;
            body = super::cipher::seal_content(self.cipher.as_ref(), file_id, off, subject, hdr_len, &body)?;
            flags |= format::RF_SEALED | format::RF_SUBJECT_SEALED;
            subject = &[];
            hdr_len = 0;
        }
        let rec = Record {
            kind: Kind::Msg,
            flags,
            seq,
            ts,
            ttl,
            hdr_len,
            plain_len,
            subject,
            body: &body,
        };
        let loc = self.append(&rec)?;
        if let Some(b) = self.blocks.back_mut() {
            b.live += 1;
            b.live_bytes += u64::from(loc.len);
        }
        Ok(loc)
    }

    /// Where the next record of these sizes goes: (file id, offset), rotating if needed.
    /// Sealing changes the body's length by the cipher's overhead, which must not move
    /// the record to another block, so a block is started here when the record (plus a
    /// generous allowance for that overhead) would not fit.
    fn next_record_place(&mut self, subj: usize, body: usize) -> Result<(u64, u64)> {
        let need = format::pad8(format::record_len(subj, body + 64, self.cfg.checksum)) as u64;
        let rotate = self
            .blocks
            .back()
            .is_none_or(|b| b.len > DATA_START as u64 && b.len + need > self.cfg.block_size);
        if rotate {
            let (ord, len) = self.blocks.back().map_or((1, 0), |b| (b.ordinal + 1, b.len));
            self.new_block(ord, len, false)?;
        }
        let b = self.blocks.back().ok_or(StoreError::Closed)?;
        Ok((b.hdr.file_id, b.len))
    }

    /// Append a commit record to the tail block stating its durable end (the length the
    /// completed fdatasyncs covered), if that moved since the last one. It goes into the
    /// tail as it is (never into a new block: its offset is the tail's). Returns whether
    /// one was appended.
    pub(super) fn mark_durable_end(&mut self) -> bool {
        let cs = self.cfg.checksum;
        let now = self.clock.now_nanos();
        let Some(b) = self.blocks.back_mut() else { return false };
        if b.synced <= b.marked {
            return false;
        }
        let rec = Record {
            kind: Kind::Commit,
            flags: 0,
            seq: b.synced,
            ts: now,
            ttl: 0,
            hdr_len: 0,
            plain_len: 0,
            subject: &[],
            body: &[],
        };
        let before = b.buf.len();
        format::encode_record(b.buf.appender(format::record_len(0, 0, cs)), &rec, cs, b.hdr.file_id);
        b.len += (b.buf.len() - before) as u64;
        b.marked = b.synced;
        true
    }

    /// The stream's sequence range (first, last, and the last timestamp).
    fn append_range(&mut self) -> Result<()> {
        let (first, last, ts) = (self.eng.first_seq, self.eng.last_seq, self.eng.last_ts);
        self.append_marker(Kind::Range, first, ts, last as i64)
    }

    fn append_marker(&mut self, kind: Kind, seq: u64, ts: i64, extra: i64) -> Result<()> {
        let rec = Record {
            kind,
            flags: 0,
            seq,
            ts,
            ttl: extra,
            hdr_len: 0,
            plain_len: 0,
            subject: &[],
            body: &[],
        };
        self.append(&rec).map(|_| ())
    }

    /// Write what the engine removed: tombstones (and erasures), then, after a bulk
    /// removal, the sequence range; then drop dead blocks at the front. Tombstones are
    /// stamped `at` when the caller has a time (a store call's removals happen as its
    /// message is stored: they carry its time and cost no clock read; replay does not
    /// use a tombstone's time), else now.
    pub(super) fn write_removals(&mut self, bulk: bool, at: Option<i64>) -> Result<()> {
        let tombs = std::mem::take(&mut self.tombs);
        if !tombs.is_empty() {
            // One time for the call's tombstones (they are written together).
            let now = at.unwrap_or_else(|| self.clock.now_nanos());
            for (seq, erase) in tombs {
                self.append_marker(Kind::Tomb, seq, now, 0)?;
                if let Some((loc, ts)) = erase {
                    self.erase_in_place(loc, seq, ts)?;
                }
            }
        }
        if bulk {
            self.append_range()?;
        }
        self.drop_dead_blocks()
    }

    /// Overwrite the message record at `loc` with an erased record of the same length,
    /// which keeps only its sequence and time (replay still sees the sequence taken).
    fn erase_in_place(&mut self, loc: Loc, seq: u64, ts: i64) -> Result<()> {
        let Some(i) = self.block_pos(u64::from(loc.blk)) else {
            return Ok(());
        };
        let file_id = match self.blocks.get(i) {
            Some(b) => b.hdr.file_id,
            None => return Ok(()),
        };
        let file = self.file_of(i)?;
        let cs = self.cfg.checksum;
        // An erased record with an empty subject and a zero body: same padded length.
        let blen = (loc.len as usize).saturating_sub(format::REC_HEADER + cs.size());
        let zeros = vec![0u8; blen];
        let rec = Record::erased(seq, ts, &zeros);
        let mut out = Vec::with_capacity(loc.len as usize);
        format::encode_record(&mut out, &rec, cs, file_id);
        if out.len() != loc.len as usize {
            return Err(StoreError::Corrupt("erase: record length mismatch".into()));
        }
        let off = u64::from(loc.off);
        let align = self.io.alignment() as u64;
        let end = off + out.len() as u64;
        let Some(b) = self.blocks.get_mut(i) else { return Ok(()) };
        if end > b.base {
            let s = off.max(b.base);
            let from = (s - off) as usize;
            let at = (s - b.base) as usize;
            if let (Some(dst), Some(src)) = (b.buf.get_mut(at..at + out.len() - from), out.get(from..)) {
                dst.copy_from_slice(src);
            }
            b.flushed = b.flushed.min(s);
            self.flushed_through = self.flushed_through.min(b.ordinal.saturating_sub(1));
        }
        if off < b.base {
            let e = end.min(b.base);
            let (a0, a1) = (floor(off, align), ceil(e, align));
            let mut data = self.io.read_at(file, a0, (a1 - a0) as usize)?;
            data.resize((a1 - a0) as usize, 0);
            let n = (e - off) as usize;
            let at = (off - a0) as usize;
            if let (Some(dst), Some(src)) = (data.get_mut(at..at + n), out.get(..n)) {
                dst.copy_from_slice(src);
            }
            self.patches.push(Op::Write {
                file,
                off: a0,
                data: data.into(),
            });
            self.unsynced.insert(file);
        }
        Ok(())
    }

    /// Take the oldest blocks off once none of their messages is live (never the tail).
    /// The current sequence range is written to the tail first, and the files are deleted
    /// only once a synced batch holding it has completed (in [`FileStore::complete`]), so
    /// the stream's first and last sequence survive the deletion; nothing here waits.
    fn drop_dead_blocks(&mut self) -> Result<()> {
        let dead = |b: Option<&Block>| b.is_some_and(|b| b.live == 0);
        if self.blocks.len() < 2 || !dead(self.blocks.front()) {
            return Ok(());
        }
        self.append_range()?;
        while self.blocks.len() > 1 && dead(self.blocks.front()) {
            let Some(b) = self.blocks.pop_front() else { break };
            self.open_files.retain(|o| *o != b.ordinal);
            self.doomed.push(super::Doomed {
                ordinal: b.ordinal,
                file: b.file,
                after: self.stats.batches,
            });
        }
        Ok(())
    }

    /// Delete the dead blocks whose replacing range is durable now that the synced batch
    /// `no` completed (nothing is in flight: its files are no longer used).
    fn delete_doomed(&mut self, no: u64) {
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.doomed).into_iter().partition(|d| d.after < no);
        self.doomed = keep;
        if !due.is_empty() {
            self.auto.doomed_deleted();
        }
        for d in due {
            if let Some(f) = d.file {
                self.unsynced.remove(&f);
                self.patches
                    .retain(|op| !matches!(op, Op::Write { file, .. } | Op::Sync { file } if *file == f));
            }
            if let Err(e) = self.io.remove(&Block::name(d.ordinal)) {
                // Left in place it is replayed at the next open and found dead again.
                tracing::warn!(dir = %self.cfg.dir.display(), block = d.ordinal, error = %e, "storage: cannot delete a dead block");
            }
            self.dir_dirty = true;
        }
    }

    /// Start the next batch, unless interval mode holds plain appends back for a while
    /// (module `hold`): then [`crate::Store::write_due`] says when to call again. Writes
    /// due while a batch is in flight (interval mode runs one at a time) are looked at
    /// again shortly (its completion may come without a call from the owner).
    pub(super) fn start_or_hold(&mut self) -> Result<()> {
        if !matches!(self.cfg.sync, SyncMode::Interval(_)) {
            return self.start_batch(false);
        }
        let now = Instant::now();
        if let Some(pending) = self.held_appends() {
            if self.hold.keep(now, pending) {
                return Ok(());
            }
        }
        self.hold.clear();
        self.start_batch(false)?;
        // Blocks before `maybe_unflushed` are all handed over: a long stream's thousands
        // of blocks are not walked on every submit.
        let unflushed = self.blocks.range(self.maybe_unflushed()..).any(|b| b.flushed < b.len);
        let left = unflushed || self.interval_sync_at().is_some_and(|t| t <= now);
        if self.failed.is_none() && left {
            self.hold.retry(now + super::hold::RETRY);
        }
        Ok(())
    }

    /// Interval mode syncs on time even when nothing more is written (the reference's
    /// sync timer): when what was written since the last sync, new directory entries or
    /// dead blocks waiting for a synced batch are due for one.
    pub(super) fn interval_sync_at(&self) -> Option<Instant> {
        match self.cfg.sync {
            SyncMode::Interval(d)
                if self.failed.is_none()
                    && !self.closed
                    && (!self.unsynced.is_empty() || self.dir_dirty || !self.doomed.is_empty()) =>
            {
                Some(self.last_sync + d)
            }
            _ => None,
        }
    }

    /// Bytes waiting for a batch when they are only appends to the tail block (no
    /// erasures, no block to retire, no compaction step); `None` otherwise. A directory to sync or dead blocks to delete wait for a synced batch,
    /// which in interval mode comes with the interval, so they do not stop a hold.
    fn held_appends(&mut self) -> Option<u64> {
        if self.failed.is_some()
            || !self.patches.is_empty()
            || self.auto.wants_turn(self.cfg.auto_compact, self.stats.batches)
            || !self.older_blocks_flushed()
        {
            return None;
        }
        let tail = self.blocks.back()?;
        tail.file?;
        Some(tail.len.saturating_sub(tail.flushed))
    }

    /// Build and start the next batch, if there is something to write and nothing is in
    /// flight. With `force_sync` the batch syncs even in interval mode.
    pub(super) fn start_batch(&mut self, force_sync: bool) -> Result<()> {
        if self.failed.is_some() || (!self.in_flight.is_empty() && !self.may_pipeline()) {
            return Ok(());
        }
        let sync = match self.cfg.sync {
            SyncMode::GroupCommit | SyncMode::Always => true,
            SyncMode::Interval(d) => force_sync || self.last_sync.elapsed() >= d,
        };
        // A synced batch that writes to the tail also says how far the tail was durable
        // before it (no write or sync of its own: it rides with the batch's records).
        if sync && self.blocks.back().is_some_and(|b| b.flushed < b.len) {
            self.mark_durable_end();
        }
        let align = self.io.alignment() as u64;
        let mut ops = std::mem::take(&mut self.patches);
        let mut lens = Vec::new();
        let n = self.blocks.len();
        let preformat = self.cfg.preformat;
        let block_cap = ceil(self.cfg.block_size, 4096);
        let from = self.maybe_unflushed();
        for (i, b) in self.blocks.iter_mut().enumerate().skip(from) {
            if b.flushed >= b.len {
                continue;
            }
            let Some(file) = b.file else { continue };
            let start = floor(b.flushed, align).max(b.base);
            let mut end = ceil(b.len, align);
            if i + 1 == n {
                self.batch_avg = (self.batch_avg * 7 + (end - start)) / 8;
                if preformat && end > b.zeroed && self.batch_avg < PREFORMAT_MIN {
                    end = preformat_end(b.zeroed, end, block_cap);
                }
            }
            b.zeroed = b.zeroed.max(end);
            let from = (start - b.base) as usize;
            // Straight into the I/O layer's aligned memory (a direct backend writes it
            // from there).
            let mut data = self.io.write_buf();
            data.extend_from_slice(b.buf.live().get(from..).unwrap_or(&[]));
            data.resize((end - start) as usize);
            self.stats.bytes_written += data.len() as u64;
            ops.push(Op::Write { file, off: start, data });
            b.flushed = b.len;
            lens.push((b.ordinal, b.len));
            self.unsynced.insert(file);
            // A block left for the next one is on disk before the next one is written.
            if i + 1 < n {
                ops.push(Op::Sync { file });
                self.unsynced.remove(&file);
                self.stats.syncs += 1;
            }
        }
        self.older_blocks_flushed();
        if sync && (!self.unsynced.is_empty() || self.dir_dirty) {
            for f in std::mem::take(&mut self.unsynced) {
                ops.push(Op::Sync { file: f });
                self.stats.syncs += 1;
            }
            if self.dir_dirty {
                ops.push(Op::SyncDir);
                self.dir_dirty = false;
            }
        }
        if ops.is_empty() {
            if sync {
                self.durable = self.eng.last_seq;
            }
            return Ok(());
        }
        let token = self.eng.last_seq;
        self.stats.batches += 1;
        let no = self.stats.batches;
        if let Err(e) = self.io.start(Batch { token, ops }) {
            return Err(self.fail(&e));
        }
        if sync {
            self.last_sync = Instant::now();
        }
        self.in_flight.push_back(InFlight {
            token,
            started: Instant::now(),
            no,
            synced: sync,
            lens,
        });
        if self.in_flight.len() > 1 {
            self.stats.pipelined += 1;
        }
        Ok(())
    }

    /// May a second batch start while one is in flight? Only a plain append: every batch
    /// syncs (group commit or `sync_always`), nothing but the tail block has bytes to
    /// write or sync (no patches, no new directory entries, no block to retire, no
    /// compaction waiting for a quiet moment), and the writes of the batch in flight have
    /// ended, so the new writes overlap its fdatasync. The I/O layer also holds a batch
    /// until the writes before it end (both may rewrite the tail's last page), and
    /// reports completions in order.
    pub(super) fn may_pipeline(&mut self) -> bool {
        if self.in_flight.len() >= super::MAX_IN_FLIGHT
            || matches!(self.cfg.sync, SyncMode::Interval(_))
            || !self.patches.is_empty()
            || self.dir_dirty
            || !self.doomed.is_empty()
            || self.auto.wants_turn(self.cfg.auto_compact, self.stats.batches)
        {
            return false;
        }
        let Some(tail) = self.blocks.back() else { return false };
        let Some(tail_file) = tail.file else { return false };
        if tail.flushed >= tail.len {
            return false;
        }
        if !self.older_blocks_flushed() {
            return false;
        }
        if self.unsynced.iter().any(|f| *f != tail_file) {
            return false;
        }
        self.io.writes_idle()
    }

    /// Whether every block before the tail was all handed to the I/O layer (and if so,
    /// remember it in `flushed_through`).
    fn older_blocks_flushed(&mut self) -> bool {
        let Some(before_tail) = self.blocks.len().checked_sub(2) else {
            return true;
        };
        let from = self.maybe_unflushed();
        if self.blocks.range(from..=before_tail).any(|b| b.flushed < b.len) {
            return false;
        }
        if let Some(b) = self.blocks.get(before_tail) {
            self.flushed_through = b.ordinal;
        }
        true
    }

    /// The index of the first block that may hold bytes not yet handed to the I/O layer
    /// (see `flushed_through`; the tail always may).
    pub(super) fn maybe_unflushed(&self) -> usize {
        let mut i = self.blocks.len();
        while i > 1 && self.blocks.get(i - 2).is_some_and(|b| b.ordinal > self.flushed_through) {
            i -= 1;
        }
        i.saturating_sub(1)
    }

    fn fail(&mut self, e: &std::io::Error) -> StoreError {
        let msg = e.to_string();
        tracing::error!(dir = %self.cfg.dir.display(), error = %msg, "storage: write or sync failed; the store refuses writes");
        self.failed = Some(msg.clone());
        StoreError::WritesRefused(msg)
    }

    fn complete(&mut self, d: Done) -> Result<()> {
        let Some(inf) = self.in_flight.pop_front() else {
            return Ok(());
        };
        if let Err(e) = d.result {
            return Err(self.fail(&e));
        }
        let took = u64::try_from(inf.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.stats.batch_nanos = self.stats.batch_nanos.saturating_add(took);
        self.stats.batch_nanos_max = self.stats.batch_nanos_max.max(took);
        if inf.synced {
            self.durable = self.durable.max(inf.token);
            // With a later batch in flight its completion deletes them.
            if !self.doomed.is_empty() && self.in_flight.is_empty() {
                self.delete_doomed(inf.no);
            }
        }
        let align = self.io.alignment() as u64;
        let last = self.blocks.back().map(|b| b.ordinal);
        for (ord, len) in inf.lens {
            let Some(i) = self.block_pos(ord) else { continue };
            let Some(b) = self.blocks.get_mut(i) else { continue };
            if inf.synced {
                b.synced = b.synced.max(len);
            }
            let keep_from = if Some(ord) == last && b.flushed == b.len {
                floor(len, align)
            } else if b.flushed == b.len {
                ceil(b.len, align)
            } else {
                b.base
            };
            if keep_from > b.base {
                let cut = ((keep_from - b.base) as usize).min(b.buf.len());
                b.buf.advance(cut);
                b.base = keep_from;
                if Some(ord) != last {
                    b.buf = Default::default();
                }
            }
            // A sealed block that is all on disk needs no open file until it is read
            // (unless a later batch in flight writes to it: its completion closes it).
            let later = self.in_flight.iter().any(|l| l.lens.iter().any(|(o, _)| *o == ord));
            if Some(ord) != last && !later && b.flushed == b.len && b.file.is_some_and(|f| !self.unsynced.contains(&f))
            {
                if let Some(f) = b.file.take() {
                    self.io.close(f);
                }
                self.open_files.retain(|o| *o != ord);
            }
        }
        Ok(())
    }

    /// Reap finished batches without blocking.
    pub(super) fn reap(&mut self) -> Result<()> {
        while let Some(d) = self.io.poll() {
            self.complete(d)?;
        }
        Ok(())
    }

    /// Wait until no batch is in flight.
    pub(super) fn wait_in_flight(&mut self) -> Result<()> {
        loop {
            self.reap()?;
            if self.in_flight.is_empty() {
                return Ok(());
            }
            if let Some(d) = self.io.wait() {
                self.complete(d)?;
            }
        }
    }

    /// Write and sync everything, waiting for it.
    pub(super) fn sync_all(&mut self, force: bool) -> Result<()> {
        loop {
            self.wait_in_flight()?;
            let first_unflushed = self.blocks.iter().position(|b| b.flushed < b.len);
            if first_unflushed.is_some_and(|i| i < self.maybe_unflushed()) {
                // Never expected: the next batch would skip that block, and this loop
                // would not end. Every block is looked at again instead.
                debug_assert!(false, "a block before flushed_through is not flushed");
                self.flushed_through = 0;
            }
            let mut dirty =
                !self.patches.is_empty() || first_unflushed.is_some() || !self.unsynced.is_empty() || self.dir_dirty;
            if !dirty && !self.doomed.is_empty() {
                // Dead blocks wait for a synced batch (their range went out unsynced, in
                // interval mode): sync the tail for them.
                if let Some(f) = self.blocks.back().and_then(|b| b.file) {
                    self.unsynced.insert(f);
                    dirty = true;
                }
            }
            if !dirty {
                if let Some(f) = &self.failed {
                    return Err(StoreError::WritesRefused(f.clone()));
                }
                self.durable = self.eng.last_seq;
                return Ok(());
            }
            self.start_batch(force)?;
            if self.in_flight.is_empty() {
                if let Some(f) = &self.failed {
                    return Err(StoreError::WritesRefused(f.clone()));
                }
                if !force {
                    return Ok(());
                }
            }
        }
    }

    /// Bound what is buffered without waiting: past [`FileStore::max_buffered`] bytes not
    /// yet handed to the I/O layer, start a batch if none is in flight (else the next one
    /// starts when it completes: at the next store call, submit or poll). Only past the
    /// hard limit (four times that, the disk far slower than the writers for a while) does
    /// a store call wait for the batch in flight, counted in [`super::FileStoreStats::stalls`].
    pub(super) fn backpressure(&mut self) -> Result<()> {
        let buffered: u64 = self
            .blocks
            .iter()
            .rev()
            .take_while(|b| b.flushed < b.len)
            .map(|b| b.len - b.flushed)
            .sum();
        if buffered <= self.max_buffered() {
            return Ok(());
        }
        self.reap()?;
        if !self.in_flight.is_empty() && buffered > 4 * self.max_buffered() {
            self.stats.stalls += 1;
            if let Some(d) = self.io.wait() {
                self.complete(d)?;
            }
        }
        self.start_batch(false)
    }

    /// Bytes a store buffers before it starts a batch on its own.
    pub(super) fn max_buffered(&self) -> u64 {
        (2 * self.cfg.block_size).max(4 << 20)
    }

    /// After a write call. In `sync_always` mode: hand the write to the I/O layer at once
    /// (a batch of writes and their fdatasync) without waiting for it; it is acknowledged
    /// ([`crate::Store::durable_seq`]) when that fdatasync completes. A write made while a
    /// batch is in flight goes into the next one, started as soon as that completes (or,
    /// for a plain append, once its writes have ended: [`FileStore::may_pipeline`]). In
    /// group-commit mode: the same once `early_batch` bytes wait.
    pub(super) fn after_write(&mut self) -> Result<()> {
        match self.cfg.sync {
            SyncMode::Always => {
                self.reap()?;
                self.start_batch(false)?;
            }
            // With the disk idle and a good part of a batch written, start it now rather
            // than at the caller's next submit: its fdatasync then overlaps the writes
            // still coming in the same turn, and their acknowledgements go out sooner.
            SyncMode::GroupCommit
                if self.cfg.early_batch > 0
                    && self
                        .blocks
                        .back()
                        .is_some_and(|b| b.len - b.flushed >= self.cfg.early_batch) =>
            {
                self.reap()?;
                self.start_batch(false)?;
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FileStore, FileStoreConfig};
    use crate::{Store, StoreConfig};

    #[test]
    fn batches_skip_the_blocks_known_flushed_and_an_erasure_brings_its_block_back() {
        let dir = std::env::temp_dir().join(format!("rnats-flushed-through-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut f = FileStoreConfig::new(&dir);
        f.block_size = 4096;
        let mut s = FileStore::open(f.clone(), StoreConfig::new("T")).expect("open");
        for i in 0..200u8 {
            s.store_msg("a", b"", &[i; 100], 0).expect("store");
            s.sync().expect("sync");
        }
        let n = s.blocks.len();
        assert!(n > 4, "{n} blocks");
        // Only the tail is looked at once the blocks before it are on their way.
        assert_eq!(s.maybe_unflushed(), n - 1);
        assert_eq!(s.flushed_through, s.blocks[n - 2].ordinal);
        // Erasing in the block before the tail (its bytes still in memory) must have it
        // written again, so the next batch looks at it.
        let seq = s
            .eng
            .index
            .iter()
            .find(|(_, e)| u64::from(e.loc.blk) == s.blocks[n - 2].ordinal)
            .map(|(seq, _)| seq);
        let seq = seq.expect("a message in the block before the tail");
        let erased_in_memory = s.blocks[n - 2].base < s.blocks[n - 2].len;
        assert!(s.erase_msg(seq).expect("erase"));
        if erased_in_memory {
            assert!(s.maybe_unflushed() <= n - 2);
        }
        s.sync().expect("sync");
        assert_eq!(s.maybe_unflushed(), n - 1);
        s.stop().expect("stop");
        drop(s);
        let mut s = FileStore::open(f, StoreConfig::new("T")).expect("reopen");
        assert!(s.load_msg(seq).is_err(), "the erased message is gone");
        assert_eq!(s.state().msgs, 199);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_discarded_store_writes_no_state_and_refuses_more() {
        let dir = std::env::temp_dir().join(format!("rnats-discard-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut s = FileStore::open(FileStoreConfig::new(&dir), StoreConfig::new("T")).expect("open");
        for i in 0..1000u32 {
            s.store_msg("a", b"", &i.to_le_bytes(), 0).expect("store");
        }
        s.discard().expect("discard");
        assert!(s.in_flight.is_empty(), "what was in flight ended");
        assert!(s.store_msg("a", b"", b"x", 0).is_err(), "closed");
        drop(s);
        assert!(
            !dir.join(super::super::state::NAME).exists(),
            "no state file for a store being deleted"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
