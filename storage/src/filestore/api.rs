//! The [`Store`] interface of the file store: writes append records and let the engine
//! decide; reads find a message's record (in the tail's buffer or on disk), check its
//! checksum and open its body.

use super::format::{self, Kind, RF_S2, RF_SEALED, RF_SUBJECT_SEALED};
use super::write::FsSink;
use super::{cipher, FileStore, Loc, SyncMode};
use crate::error::{Result, StoreError};
use crate::store::{SnapshotMeta, Store};
use crate::subject::Filter;
use crate::types::{StorageKind, StoreConfig, StoredMsg};
use bytes::Bytes;
use std::borrow::Cow;
use std::io::Write;
use std::time::Instant;

impl FileStore {
    fn record_bytes(&mut self, loc: Loc) -> Result<(Bytes, format::Checksum, u64)> {
        let i = self
            .block_pos(u64::from(loc.blk))
            .ok_or_else(|| StoreError::Corrupt(format!("block {} is gone", loc.blk)))?;
        let b = self.blocks.get(i).ok_or(StoreError::MsgNotFound)?;
        let (cs, file_id) = (b.hdr.checksum(), b.hdr.file_id);
        let off = u64::from(loc.off);
        let len = loc.len as usize;
        if off >= b.base {
            let at = (off - b.base) as usize;
            if let Some(src) = b.buf.get(at..at + len) {
                return Ok((Bytes::copy_from_slice(src), cs, file_id));
            }
        }
        let file = self.file_of(i)?;
        Ok((self.io.read_shared(file, off, len)?, cs, file_id))
    }

    /// Load the live message `seq`, verifying its record.
    pub(super) fn load(&mut self, seq: u64) -> Result<StoredMsg> {
        let (loc, ts, subject) = match self.eng.index.get(seq) {
            Some(e) => (e.loc, e.ts, self.eng.subject_of(e).to_string()),
            None if seq > self.eng.last_seq => return Err(StoreError::Eof),
            None => return Err(StoreError::MsgNotFound),
        };
        match self.decode_msg(seq, loc, ts, subject) {
            Ok(m) => Ok(m),
            Err(why) => {
                let what = format!("block {} offset {} (seq {seq}): {why}", loc.blk, loc.off);
                self.corrupt(&what);
                Err(StoreError::Corrupt(what))
            }
        }
    }

    fn decode_msg(&mut self, seq: u64, loc: Loc, ts: i64, subject: String) -> std::result::Result<StoredMsg, String> {
        let (bytes, cs, file_id) = self.record_bytes(loc).map_err(|e| e.to_string())?;
        let (r, _) = format::decode_record(&bytes, cs, file_id).map_err(|b| format!("{b:?} record"))?;
        if r.kind != Kind::Msg || r.seq != seq {
            return Err("record does not match the index".into());
        }
        let keyed = self.cfg.cipher.is_some();
        if r.flags & (RF_SEALED | RF_SUBJECT_SEALED) != 0 && !keyed {
            return Err("sealed record and no encryption key configured".into());
        }
        let off = u64::from(loc.off);
        // A plain record's body is a window of `bytes` (often of the read cache's chunk):
        // the message is served without a copy. Sealed ones are opened into their own.
        let (stored_subject, hdr_len, mut body): (Cow<'_, [u8]>, u32, Bytes) = if r.flags & RF_SUBJECT_SEALED != 0 {
            let o = cipher::open_content(self.cipher.as_ref(), file_id, off, r.body)
                .map_err(|e| format!("cannot open sealed record: {e}"))?;
            (o.subject.into(), o.hdr_len, o.body.into())
        } else if r.flags & RF_SEALED != 0 {
            let mut body = r.body.to_vec();
            self.cipher
                .open(file_id, off, &mut body)
                .map_err(|e| format!("cannot open sealed body: {e}"))?;
            (r.subject.into(), r.hdr_len, body.into())
        } else {
            (r.subject.into(), r.hdr_len, bytes.slice_ref(r.body))
        };
        if *stored_subject != *subject.as_bytes() {
            return Err("record does not match the index".into());
        }
        if r.flags & RF_S2 != 0 {
            body = format::s2_decode(&body, r.plain_len as usize)
                .ok_or("bad s2 body")?
                .into();
        }
        if body.len() != r.plain_len as usize || hdr_len > r.plain_len {
            return Err("body length mismatch".into());
        }
        let h = hdr_len as usize;
        Ok(StoredMsg {
            seq,
            ts,
            subject,
            headers: body.slice(..h),
            payload: body.slice(h..),
        })
    }

    fn store_at(&mut self, subject: &str, hdr: &[u8], msg: &[u8], seq: u64, ts: i64, ttl: i64) -> Result<()> {
        let loc = self.append_msg(seq, ts, subject, hdr, msg, ttl)?;
        self.auto.note_msg(u64::from(loc.blk), seq);
        let size = self.eng.msg_size(subject, hdr, msg);
        let mut sink = FsSink {
            blocks: &mut self.blocks,
            tombs: &mut self.tombs,
        };
        self.eng.insert(seq, ts, subject, size, ttl, loc, &mut sink);
        if !self.tombs.is_empty() {
            self.auto.removed();
        }
        self.write_removals(false, Some(ts))?;
        self.after_write()?;
        self.backpressure()
    }

    /// Run an engine operation with the store's sink, then write its removals.
    fn with_sink<T>(
        &mut self,
        bulk: bool,
        op: impl FnOnce(&mut crate::engine::Engine<Loc>, &mut FsSink<'_>) -> T,
    ) -> Result<T> {
        self.writable()?;
        let mut sink = FsSink {
            blocks: &mut self.blocks,
            tombs: &mut self.tombs,
        };
        let out = op(&mut self.eng, &mut sink);
        self.auto.removed();
        self.write_removals(bulk, None)?;
        self.after_write()?;
        Ok(out)
    }

    /// Every live message in order, read back from the blocks (corrupt ones skipped and
    /// counted).
    pub fn messages(&mut self) -> Vec<StoredMsg> {
        let seqs: Vec<u64> = self.eng.index.iter().map(|(s, _)| s).collect();
        seqs.into_iter().filter_map(|s| self.load(s).ok()).collect()
    }
}

impl Store for FileStore {
    fn kind(&self) -> StorageKind {
        StorageKind::File
    }

    fn msg_size(&self, subject: &str, headers: &[u8], payload: &[u8]) -> u64 {
        self.eng.msg_size(subject, headers, payload)
    }

    fn store_msg(&mut self, subject: &str, headers: &[u8], payload: &[u8], ttl: i64) -> Result<(u64, i64)> {
        let ts = self.clock.now_nanos();
        self.store_msg_at(subject, headers, payload, ts, ttl)
    }

    fn store_msg_at(&mut self, subject: &str, headers: &[u8], payload: &[u8], ts: i64, ttl: i64) -> Result<(u64, i64)> {
        self.writable()?;
        self.eng.check_store(subject, headers, payload, true)?;
        let seq = self.eng.next_seq(0)?;
        self.store_at(subject, headers, payload, seq, ts, ttl)?;
        Ok((seq, ts))
    }

    fn store_raw_msg(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        seq: u64,
        ts: i64,
        ttl: i64,
        discard_new_check: bool,
    ) -> Result<()> {
        self.writable()?;
        self.eng.check_store(subject, headers, payload, discard_new_check)?;
        let seq = self.eng.next_seq(seq)?;
        self.store_at(subject, headers, payload, seq, ts, ttl)
    }

    fn skip_msg(&mut self, seq: u64) -> Result<u64> {
        let now = self.clock.now_nanos();
        self.with_sink(true, |eng, _| eng.skip(seq, 1, now))?
    }

    fn skip_msgs(&mut self, seq: u64, num: u64) -> Result<()> {
        let now = self.clock.now_nanos();
        self.with_sink(true, |eng, _| eng.skip(seq, num, now).map(|_| ()))?
    }

    fn load_msg(&mut self, seq: u64) -> Result<StoredMsg> {
        self.readable()?;
        self.load(seq)
    }

    fn load_next_msg(&mut self, filter: &Filter, start: u64) -> Result<StoredMsg> {
        self.readable()?;
        match self.eng.next_matching(filter, start) {
            Some(s) => self.load(s),
            None => Err(StoreError::Eof),
        }
    }

    fn load_prev_msg(&mut self, filter: &Filter, start: u64) -> Result<StoredMsg> {
        self.readable()?;
        match self.eng.prev_matching(filter, start) {
            Some(s) => self.load(s),
            None => Err(StoreError::MsgNotFound),
        }
    }

    fn load_last_msg(&mut self, subject: &str) -> Result<StoredMsg> {
        self.readable()?;
        match self.eng.last_matching(subject) {
            Some(s) => self.load(s),
            None => Err(StoreError::MsgNotFound),
        }
    }

    fn subject_for_seq(&mut self, seq: u64) -> Result<String> {
        self.readable()?;
        self.eng
            .index
            .get(seq)
            .map(|e| self.eng.subject_of(e).to_string())
            .ok_or(StoreError::MsgNotFound)
    }

    fn remove_msg(&mut self, seq: u64) -> Result<bool> {
        self.with_sink(false, |eng, sink| eng.remove(seq, crate::engine::Why::User, sink))
    }

    fn erase_msg(&mut self, seq: u64) -> Result<bool> {
        // A copy of the block being rewritten must not keep the erased bytes.
        if let (Some(ord), Some(e)) = (self.auto.building(), self.eng.index.get(seq)) {
            if u64::from(e.loc.blk) == ord {
                self.auto.abort_building();
            }
        }
        self.with_sink(false, |eng, sink| eng.remove(seq, crate::engine::Why::Erase, sink))
    }

    fn purge(&mut self) -> Result<u64> {
        self.with_sink(true, |eng, sink| eng.purge_all(sink))
    }

    fn purge_ex(&mut self, subject: &str, seq: u64, keep: u64) -> Result<u64> {
        self.with_sink(true, |eng, sink| eng.purge_ex(subject, seq, keep, sink))
    }

    fn compact(&mut self, seq: u64) -> Result<u64> {
        self.with_sink(true, |eng, sink| eng.compact(seq, sink))
    }

    fn truncate(&mut self, seq: u64) -> Result<()> {
        let now = self.clock.now_nanos();
        self.with_sink(true, |eng, sink| eng.truncate(seq, now, sink))?
    }

    crate::engine::engine_queries!();

    fn update_config(&mut self, cfg: StoreConfig) -> Result<()> {
        self.with_sink(false, |eng, sink| eng.update_config(cfg, sink))
    }

    fn config(&self) -> &StoreConfig {
        &self.eng.cfg
    }

    fn next_expiry(&self) -> Option<i64> {
        self.eng.next_expiry()
    }

    fn expire(&mut self) -> Result<u64> {
        let now = self.clock.now_nanos();
        self.with_sink(false, |eng, sink| eng.expire(now, sink))
    }

    fn take_due(&mut self) -> Result<Vec<u64>> {
        self.writable()?;
        let now = self.clock.now_nanos();
        Ok(self.eng.due(now))
    }

    fn durable_seq(&self) -> u64 {
        match self.cfg.sync {
            SyncMode::Interval(_) => self.eng.last_seq,
            SyncMode::GroupCommit | SyncMode::Always => self.durable,
        }
    }

    fn poll_completions(&mut self) -> Result<u64> {
        if !self.closed {
            self.reap()?;
            self.compaction_step()?;
            self.start_or_hold()?;
        }
        Ok(self.durable_seq())
    }

    fn signals_completions(&self) -> bool {
        self.signals
    }

    fn submit(&mut self) -> Result<()> {
        self.writable()?;
        self.reap()?;
        self.compaction_step()?;
        self.start_or_hold()
    }

    fn write_due(&self) -> Option<Instant> {
        // A retry stands for everything kept back by a batch in flight, the interval's
        // sync included (it is due at once otherwise, and the owner would spin).
        if self.hold.is_retry() {
            return self.hold.due();
        }
        [self.hold.due(), self.interval_sync_at()].into_iter().flatten().min()
    }

    fn sync(&mut self) -> Result<()> {
        self.writable()?;
        self.sync_all(true)
    }

    fn snapshot(&mut self, meta: &SnapshotMeta, out: &mut dyn Write) -> Result<()> {
        self.readable()?;
        let st = self.eng.fast_state();
        let name = self.eng.cfg.name.clone();
        let msgs = self.messages();
        crate::reference::snapshot::write(&name, meta, &st, msgs.into_iter(), out)
    }

    fn trim(&mut self) {
        self.io.trim();
    }

    fn corruptions(&self) -> u64 {
        self.corruptions
    }

    fn discard(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        // The I/O layer may still use the buffers of batches in flight: they end first.
        let r = self.wait_in_flight();
        self.closed = true;
        r
    }

    fn stop(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let r = if self.failed.is_none() {
            // Everything synced (a rewrite under way given up), then a commit record of
            // the tail's full length (one more fdatasync, at a stop only), so a scan
            // without the state file reports damage anywhere in what was written.
            self.sync_all(true)
                .and_then(|()| {
                    self.end_compaction();
                    if self.mark_durable_end() {
                        self.sync_all(true)
                    } else {
                        Ok(())
                    }
                })
                .and_then(|()| self.write_state())
        } else {
            Ok(())
        };
        self.closed = true;
        r
    }
}
