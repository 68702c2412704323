//! Block compaction: a sealed block (neither the oldest, which is deleted once dead, nor
//! the tail) whose live bytes fell below half of its length is rewritten without its dead
//! messages. The new file gets a fresh file id (so sealed bodies are re-sealed under a new
//! nonce domain), its exact length in `sealed_len`, and replaces the old one by an atomic
//! rename after it was synced; tombstones and ranges are kept, since they may concern
//! messages in older blocks, and each run of dropped (or erased) messages leaves one
//! header-only erased record with the run's last sequence, so a replay still sees those
//! sequences taken.
//! The rewrite uses plain std I/O and blocks the caller (a maintenance step for idle time).

use super::format::{self, BlockHeader, Kind, Record, BF_COMPACTED, DATA_START, RF_SEALED};
use super::recover::scan_block;
use super::{Block, FileStore};
use crate::error::{Result, StoreError};
use std::io::Write;

impl FileStore {
    /// Rewrite every sealed block that is mostly dead; returns how many were rewritten.
    pub fn compact_blocks(&mut self) -> Result<usize> {
        self.writable()?;
        self.sync_all(true)?;
        let n = self.blocks.len();
        let mut done = 0;
        for i in 1..n.saturating_sub(1) {
            let Some(b) = self.blocks.get(i) else { continue };
            if b.live_bytes.saturating_mul(2) >= b.len {
                continue;
            }
            self.rewrite_block(i)?;
            done += 1;
        }
        self.stats.compactions += done as u64;
        Ok(done)
    }

    fn rewrite_block(&mut self, i: usize) -> Result<()> {
        let (ord, old_hdr, old_len) = match self.blocks.get(i) {
            Some(b) => (b.ordinal, b.hdr, b.len),
            None => return Ok(()),
        };
        let file = self.file_of(i)?;
        let bytes = self.io.read_at(file, 0, old_len as usize)?;
        let cs = old_hdr.checksum();
        let new_id = rand::random::<u64>();
        let mut out = Vec::with_capacity(old_len as usize / 2 + DATA_START);
        out.resize(DATA_START, 0);
        let mut moved: Vec<(u64, u32, u32)> = Vec::new();
        let mut failure: Option<StoreError> = None;
        let index = &self.eng.index;
        let cipher = self.cipher.clone();
        // A run of dropped messages leaves one erased marker (its last sequence and time)
        // where it ended, so replay still sees those sequences taken.
        let mut dropped: Option<(u64, i64)> = None;
        let flush = |out: &mut Vec<u8>, dropped: &mut Option<(u64, i64)>| {
            if let Some((seq, ts)) = dropped.take() {
                let rec = Record {
                    kind: Kind::Erased,
                    flags: 0,
                    seq,
                    ts,
                    ttl: 0,
                    hdr_len: 0,
                    plain_len: 0,
                    subject: &[],
                    body: &[],
                };
                format::encode_record(out, &rec, cs, new_id);
            }
        };
        scan_block(&bytes, &old_hdr, Some(old_len), |off, _, r| {
            if failure.is_some() {
                return;
            }
            let live = r.kind == Kind::Msg
                && index
                    .get(r.seq)
                    .is_some_and(|e| u64::from(e.loc.blk) == ord && u64::from(e.loc.off) == off);
            if r.kind == Kind::Msg && !live || r.kind == Kind::Erased {
                dropped = Some((r.seq, r.ts));
                return;
            }
            flush(&mut out, &mut dropped);
            match r.kind {
                Kind::Msg => {
                    let mut body = r.body.to_vec();
                    let new_off = out.len() as u64;
                    if r.flags & RF_SEALED != 0 {
                        if let Err(e) = cipher.open(old_hdr.file_id, off, &mut body) {
                            failure = Some(e);
                            return;
                        }
                        if let Err(e) = cipher.seal(new_id, new_off, &mut body) {
                            failure = Some(e);
                            return;
                        }
                    }
                    let rec = Record {
                        body: &body,
                        ..r.clone()
                    };
                    format::encode_record(&mut out, &rec, cs, new_id);
                    moved.push((r.seq, new_off as u32, (out.len() as u64 - new_off) as u32));
                }
                Kind::Tomb | Kind::Range | Kind::Erased | Kind::Commit => {
                    format::encode_record(&mut out, r, cs, new_id)
                }
            }
        });
        flush(&mut out, &mut dropped);
        if let Some(e) = failure {
            return Err(e);
        }
        let hdr = BlockHeader {
            flags: old_hdr.flags | BF_COMPACTED,
            file_id: new_id,
            sealed_len: out.len() as u64,
            ..old_hdr
        };
        let h = hdr.encode();
        if let Some(dst) = out.get_mut(..DATA_START) {
            dst[..format::HEADER_LEN].copy_from_slice(&h);
            dst[format::HEADER_LEN..].copy_from_slice(&h);
        }
        let name = Block::name(ord);
        let tmp = format!("{name}.tmp");
        {
            let mut f = std::fs::File::create(self.cfg.dir.join(&tmp))?;
            f.write_all(&out)?;
            f.sync_all()?;
        }
        if let Some(f) = self.blocks.get_mut(i).and_then(|b| b.file.take()) {
            self.io.close(f);
        }
        self.open_files.retain(|o| *o != ord);
        self.io.rename(&tmp, &name)?;
        crate::io::raw::sync_dir(&self.cfg.dir)?;
        for (seq, off, len) in moved {
            if let Some(e) = self.eng.index.get_mut(seq) {
                e.loc.off = off;
                e.loc.len = len;
            }
        }
        if let Some(b) = self.blocks.get_mut(i) {
            let align = self.io.alignment() as u64;
            b.hdr = hdr;
            b.len = out.len() as u64;
            b.flushed = b.len;
            b.base = b.len.div_ceil(align) * align;
            b.buf = Vec::new();
        }
        Ok(())
    }
}
