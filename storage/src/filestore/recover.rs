//! Opening a store: list the blocks, check their headers and order, scan each block's
//! records (the rules of the module docs: end of log, corruption, skip and resync) and
//! replay them into the engine, then start a fresh tail block.

use super::cipher::{self, BlockCipher};
use super::format::{self, Bad, BlockHeader, Kind, Record, DATA_START, RF_SEALED, RF_SUBJECT_SEALED};
use super::write::FsSink;
use super::{Block, FileStore, Loc};
use crate::engine::{Drop as NoSink, Engine, Why};
use crate::error::{Result, StoreError};
use crate::types::file_msg_size;

/// The blocks found on open, with their headers when readable.
type Found = Vec<(u64, Option<BlockHeader>)>;

/// What scanning one block found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// Where the block's valid records end (the length the next block starts after).
    pub end: u64,
    /// Descriptions of the corruptions found (each one counted once).
    pub corruptions: Vec<String>,
}

/// Read one header copy after the other.
pub fn block_header(bytes: &[u8]) -> Option<BlockHeader> {
    BlockHeader::decode(bytes).or_else(|| BlockHeader::decode(bytes.get(format::HEADER_LEN..)?))
}

fn is_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

/// Scan the records of a block. `limit`: the block's known valid length (every block but
/// the last); `None`: the last block, whose end is found by scanning. Calls `f` with each
/// valid record, its offset and padded length, in order.
///
/// In the last block, the greatest durable end its commit records state (found by a first
/// pass) divides it: before it, every failing record is a corruption; past it, a record
/// that runs out in zeros or the end of the file is the torn end of the log (nothing past
/// it was acknowledged), unless it is a complete record with a damaged length field.
pub fn scan_block(
    bytes: &[u8],
    hdr: &BlockHeader,
    limit: Option<u64>,
    mut f: impl FnMut(u64, u32, &Record<'_>),
) -> Scan {
    let cs = hdr.checksum();
    let mut out = Scan {
        end: DATA_START as u64,
        corruptions: Vec::new(),
    };
    let file_len = bytes.len() as u64;
    let end = limit.map_or(file_len, |l| l.min(file_len)) as usize;
    if let Some(l) = limit {
        if l > file_len {
            out.corruptions
                .push(format!("block {} is {file_len} bytes, {l} expected", hdr.ordinal));
        }
    }
    let data = bytes.get(..end).unwrap_or(bytes);
    let durable = if limit.is_none() {
        durable_end(data, cs, hdr.file_id)
    } else {
        None
    };
    let mut off = DATA_START;
    while off < end {
        let rest = data.get(off..).unwrap_or(&[]);
        match format::decode_record(rest, cs, hdr.file_id) {
            Ok((r, n)) => {
                f(off as u64, n as u32, &r);
                off += n;
                out.end = off as u64;
                continue;
            }
            Err(bad) => {
                let next = resync(data, off + 8, cs, hdr.file_id);
                if limit.is_none() && torn(rest, bad) && !format::length_field_damaged(rest, cs, hdr.file_id) {
                    let past_durable = match durable {
                        Some(d) => off as u64 >= d,
                        None => next.is_none(),
                    };
                    if past_durable {
                        break;
                    }
                }
                let what = match bad {
                    Bad::Zero if is_zero(rest) => "zeros before the block's end",
                    Bad::Short => "record cut short",
                    _ if durable.is_some_and(|d| off as u64 >= d) || next.is_none() => {
                        "bad record at the end of the log"
                    }
                    _ => "bad record",
                };
                out.corruptions
                    .push(format!("block {} offset {off}: {what}", hdr.ordinal));
                match next {
                    Some(n) => off = n,
                    None => break,
                }
            }
        }
    }
    out
}

/// The greatest durable end the valid commit records of `data` state (each no greater than
/// its own offset), skipping over damage.
fn durable_end(data: &[u8], cs: format::Checksum, file_id: u64) -> Option<u64> {
    let mut off = DATA_START;
    let mut best = None;
    while off < data.len() {
        let rest = data.get(off..).unwrap_or(&[]);
        match format::decode_record(rest, cs, file_id) {
            Ok((r, n)) => {
                if r.kind == Kind::Commit && r.seq <= off as u64 {
                    best = best.max(Some(r.seq));
                }
                off += n;
            }
            Err(_) => match resync(data, off + 8, cs, file_id) {
                Some(n) => off = n,
                None => break,
            },
        }
    }
    best
}

/// Is the invalid record at the start of `rest` (the rest of the last block) a torn write:
/// nothing there, cut by the end of the file, running out in zeros, or holding a sector's
/// worth of zeros (a sector of the write that never reached the disk: a crash may keep any
/// subset of the sectors of a write in flight)?
fn torn(rest: &[u8], bad: Bad) -> bool {
    if bad == Bad::Short || bad == Bad::Zero {
        return true;
    }
    // The zero run at the end of the file starts inside the record's claimed extent.
    let claimed = format::u32_at(rest, 0).map_or(0, |l| l as usize);
    let zeros_from = rest.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    if zeros_from < claimed.min(rest.len()) || claimed > rest.len() {
        return true;
    }
    // A sector's worth of zeros that starts inside the record's extent.
    let mut run = 0usize;
    for (i, &b) in rest.iter().take(claimed.saturating_add(SECTOR)).enumerate() {
        run = if b == 0 { run + 1 } else { 0 };
        if run >= SECTOR && i + 1 - run < claimed {
            return true;
        }
    }
    false
}

/// The smallest unit a disk writes whole.
const SECTOR: usize = 512;

/// The next offset (8-aligned, from `from`) where a valid record starts.
fn resync(data: &[u8], from: usize, cs: format::Checksum, file_id: u64) -> Option<usize> {
    let mut at = from;
    while at + format::REC_HEADER <= data.len() {
        let rest = data.get(at..)?;
        if format::decode_record(rest, cs, file_id).is_ok() {
            return Some(at);
        }
        at += 8;
    }
    None
}

/// Apply a sequence range (first, last) to the engine.
fn apply_range(eng: &mut Engine<Loc>, first: u64, last: u64, ts: i64) {
    if last < eng.last_seq {
        let _ = eng.truncate(last, ts, &mut NoSink);
    } else if last > eng.last_seq {
        let _ = eng.skip(0, last - eng.last_seq, ts);
    }
    if first > eng.first_seq {
        eng.compact(first, &mut NoSink);
    }
    if first == 0 && last == 0 {
        // truncate(0): back to the very start.
        eng.first_seq = 0;
        eng.last_seq = 0;
    }
    eng.last_ts = ts;
}

/// How replay reaches a block's sealed records.
struct Keys<'a> {
    cipher: &'a dyn BlockCipher,
    keyed: bool,
    file_id: u64,
}

/// Why a record that validated cannot be replayed.
enum Unusable {
    /// Its content does not make sense.
    Bad(String),
    /// It is sealed and the configured key (or its absence) does not open it.
    Key(String),
}

/// Replay one record.
fn replay(
    eng: &mut Engine<Loc>,
    keys: &Keys<'_>,
    ordinal: u64,
    off: u64,
    len: u32,
    r: &Record<'_>,
) -> std::result::Result<(), Unusable> {
    match r.kind {
        Kind::Msg => {
            let opened;
            let (subject, hdr_len) = if r.flags & RF_SUBJECT_SEALED != 0 {
                if !keys.keyed {
                    return Err(Unusable::Key(format!(
                        "seq {}: sealed, and no encryption key is configured",
                        r.seq
                    )));
                }
                opened = cipher::open_content(keys.cipher, keys.file_id, off, r.body)
                    .map_err(|e| Unusable::Key(format!("seq {}: {e}", r.seq)))?;
                (opened.subject.as_slice(), opened.hdr_len)
            } else {
                if r.flags & RF_SEALED != 0 && !keys.keyed {
                    return Err(Unusable::Key(format!(
                        "seq {}: sealed, and no encryption key is configured",
                        r.seq
                    )));
                }
                (r.subject, r.hdr_len)
            };
            let subject =
                std::str::from_utf8(subject).map_err(|_| Unusable::Bad(format!("seq {}: subject not UTF-8", r.seq)))?;
            if hdr_len > r.plain_len {
                return Err(Unusable::Bad(format!("seq {}: headers longer than the body", r.seq)));
            }
            let size = file_msg_size(subject.len(), hdr_len as usize, (r.plain_len - hdr_len) as usize);
            let loc = Loc {
                blk: ordinal as u32,
                off: off as u32,
                len,
            };
            eng.insert_quiet(r.seq, r.ts, subject, size, r.ttl, loc);
        }
        Kind::Tomb => {
            eng.remove(r.seq, Why::Replay, &mut NoSink);
        }
        Kind::Range => apply_range(eng, r.seq, r.ttl as u64, r.ts),
        // An erased message still took its sequence.
        Kind::Erased => {
            if r.seq > eng.last_seq {
                let _ = eng.skip(0, r.seq - eng.last_seq, r.ts);
            }
        }
        Kind::Commit => {}
    }
    Ok(())
}

impl FileStore {
    pub(super) fn recover(&mut self) -> Result<()> {
        let mut ords = Vec::new();
        for ent in std::fs::read_dir(&self.cfg.dir)? {
            let ent = ent?;
            let name = ent.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.ends_with(".tmp") {
                let _ = std::fs::remove_file(ent.path());
                continue;
            }
            if let Some(stem) = name.strip_suffix(".blk") {
                if stem.len() == 10 {
                    if let Ok(n) = stem.parse::<u64>() {
                        ords.push(n);
                    }
                }
            }
        }
        ords.sort_unstable();
        let (found, last_untouched) = if self.take_state(&ords)? {
            self.from_state = true;
            let found: Found = self.blocks.iter().map(|b| (b.ordinal, Some(b.hdr))).collect();
            let untouched = self.blocks.back().is_some_and(|b| b.len == DATA_START as u64);
            (found, untouched)
        } else {
            self.scan_all(&ords)?
        };
        self.count_live();
        let index = &self.eng.index;
        self.eng.ttl.retain(|seq| index.get(seq).is_some());
        // The new tail: replace an empty last block, else start the next one.
        let (mut ord, mut prev_len) = self.blocks.back().map_or((1, 0), |b| (b.ordinal + 1, b.len));
        if let Some(b) = self.blocks.back() {
            let is_last = found.last().is_some_and(|f| f.0 == b.ordinal);
            if b.len == DATA_START as u64 && b.live == 0 && b.hdr.sealed_len == 0 && is_last && last_untouched {
                ord = b.ordinal;
                prev_len = b.hdr.prev_len;
                self.blocks.pop_back();
                self.io.remove(&Block::name(ord))?;
            }
        }
        if let Some(last) = found.last() {
            // A last block with unreadable headers keeps its file (and its ordinal).
            if last.0 >= ord && last.1.is_none() {
                ord = last.0 + 1;
            }
        }
        self.new_block(ord, prev_len, false)?;
        self.durable = self.eng.last_seq;
        let mut sink = FsSink {
            blocks: &mut self.blocks,
            tombs: &mut self.tombs,
        };
        self.eng.enforce_all(&mut sink);
        self.write_removals(false, None)?;
        Ok(())
    }

    /// Read every block and replay its records; returns the blocks found (with their
    /// headers, if readable) and whether the last one holds nothing but its headers.
    fn scan_all(&mut self, ords: &[u64]) -> Result<(Found, bool)> {
        // First the headers (two copies at the front of each block).
        let mut found: Vec<(u64, Option<BlockHeader>, bool)> = Vec::with_capacity(ords.len());
        for &ord in ords {
            let name = Block::name(ord);
            let (file, len) = self.io.open(&name, false)?;
            let head = self.io.read_at(file, 0, DATA_START)?;
            let hdr = block_header(&head).filter(|h| h.ordinal == ord);
            let mut empty = false;
            if hdr.is_none() && len <= 1 << 20 {
                let all = self.io.read_at(file, 0, len as usize)?;
                empty = all.len() < DATA_START || is_zero(&all);
            }
            self.io.close(file);
            found.push((ord, hdr, empty));
        }
        // Blocks at the end whose creation a crash cut short (no header, nothing in them)
        // never held an acknowledged write: remove them.
        while let Some(&(ord, None, true)) = found.last() {
            tracing::info!(block = ord, "storage: removing a block torn at creation");
            self.io.remove(&Block::name(ord))?;
            found.pop();
        }
        let found: Vec<(u64, Option<BlockHeader>)> = found.into_iter().map(|(o, h, _)| (o, h)).collect();
        // Then each block's records, one block in memory at a time.
        let mut prev: Option<u64> = None;
        let mut last_untouched = false;
        for i in 0..found.len() {
            let Some(&(ord, hdr)) = found.get(i) else { break };
            if let Some(p) = prev {
                if ord != p + 1 {
                    self.corrupt(&format!("blocks {} to {} are missing", p + 1, ord - 1));
                }
            }
            prev = Some(ord);
            let Some(hdr) = hdr else {
                self.corrupt(&format!(
                    "block {ord}: both header copies are bad; its records are unreadable"
                ));
                continue;
            };
            let limit = if hdr.sealed_len != 0 {
                Some(hdr.sealed_len)
            } else {
                match found.get(i + 1) {
                    Some((n, Some(h))) if *n == ord + 1 => Some(h.prev_len),
                    _ => None,
                }
            };
            let (file, len) = self.io.open(&Block::name(ord), false)?;
            let bytes = self.io.read_at(file, 0, usize::try_from(len).unwrap_or(usize::MAX))?;
            self.io.close(file);
            last_untouched = is_zero(bytes.get(DATA_START..).unwrap_or(&[]));
            let mut bad_replays = Vec::new();
            let eng = &mut self.eng;
            let keys = Keys {
                cipher: self.cipher.as_ref(),
                keyed: self.cfg.cipher.is_some(),
                file_id: hdr.file_id,
            };
            let mut key_failure = None;
            let scan = scan_block(&bytes, &hdr, limit, |off, len, r| {
                match replay(eng, &keys, ord, off, len, r) {
                    Ok(()) => {}
                    Err(Unusable::Bad(e)) => bad_replays.push(e),
                    Err(Unusable::Key(e)) => {
                        key_failure.get_or_insert(e);
                    }
                }
            });
            // A record that passed its checksum and does not open was sealed under another
            // key: refuse to open (going on would drop its messages, and later delete
            // their blocks as dead).
            if let Some(e) = key_failure {
                return Err(StoreError::Encryption(format!(
                    "block {ord}: cannot open a sealed record ({e}): wrong key or cipher"
                )));
            }
            for c in scan.corruptions.iter().chain(&bad_replays) {
                self.corrupt(c);
            }
            let align = self.io.alignment() as u64;
            self.blocks.push_back(Block {
                ordinal: ord,
                file: None,
                hdr,
                len: scan.end,
                live: 0,
                live_bytes: 0,
                buf: Default::default(),
                base: scan.end.div_ceil(align) * align,
                flushed: scan.end,
                synced: scan.end,
                marked: scan.end,
                zeroed: 0,
            });
        }
        Ok((found, last_untouched))
    }

    /// Count each block's live messages and bytes.
    fn count_live(&mut self) {
        let mut per_block: std::collections::HashMap<u32, (u64, u64)> = std::collections::HashMap::new();
        for (_, e) in self.eng.index.iter() {
            let c = per_block.entry(e.loc.blk).or_default();
            c.0 += 1;
            c.1 += u64::from(e.loc.len);
        }
        for b in self.blocks.iter_mut() {
            if let Some((n, bytes)) = per_block.get(&(b.ordinal as u32)) {
                b.live = *n;
                b.live_bytes = *bytes;
            }
        }
    }
}
