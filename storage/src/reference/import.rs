//! Replaying the reference's blocks into any [`Store`]: the file store converts a
//! reference `store_dir` this way, and both stores restore snapshots this way.
//!
//! Deletions come from four places, as in the reference: delete tombstones (in the last
//! block, naming messages of earlier blocks), erased and skip records, gaps in the
//! sequences, and `index.db` (per-block first sequence and delete maps: what limits
//! removed without a tombstone), used only when it is current (see
//! [`Importer::finish`]). Blocks are replayed one at a time, so memory does not grow with
//! the stream's size beyond the target store.
//!
//! Damage: records that fail their checksum are never imported. Each is counted and
//! reported, and the scan resumes at the next offset where a record checks (with a sane
//! sequence), so nothing still readable after a damaged record is lost; a zero-filled tail
//! ends the block quietly (the reference's preallocation and torn writes leave those).

use super::block_seed;
use super::indexdb::IndexDb;
use super::record::{self, RefRecord};
use crate::engine::header_value;
use crate::error::Result;
use crate::store::Store;

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportStats {
    pub msgs: u64,
    pub tombstones: u64,
    /// Damaged records skipped (each also reported), and unreadable blocks.
    pub corrupt: u64,
    /// A current `index.db` was applied.
    pub index_applied: bool,
    /// Messages whose subject is not UTF-8 (stored with U+FFFD in place of the bad bytes,
    /// since the store API holds subjects as strings; each reported).
    pub lossy_subjects: u64,
}

/// The TTL (seconds; -1 never) of a message from its `Nats-TTL` header, 0 if none or bad.
pub fn ttl_from_headers(headers: &[u8]) -> i64 {
    let Some(v) = header_value(headers, b"Nats-TTL") else {
        return 0;
    };
    let Ok(s) = std::str::from_utf8(v) else { return 0 };
    if s.eq_ignore_ascii_case("never") {
        return -1;
    }
    if let Ok(n) = s.parse::<i64>() {
        return n.max(0);
    }
    // As the reference: a duration under a second is invalid; whole seconds, truncated.
    parse_go_duration(s).map_or(0, |ns| if ns < 1_000_000_000 { 0 } else { ns / 1_000_000_000 })
}

/// Go's `time.ParseDuration` for what TTL headers use: `1h30m`, `10s`, `250ms`.
fn parse_go_duration(s: &str) -> Option<i64> {
    let mut total: f64 = 0.0;
    let mut rest = s;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest.get(..num_end)?.parse().ok()?;
        rest = rest.get(num_end..)?;
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match rest.get(..unit_end)? {
            "h" => 3.6e12,
            "m" => 6e10,
            "s" => 1e9,
            "ms" => 1e6,
            "us" | "µs" => 1e3,
            "ns" => 1.0,
            _ => return None,
        };
        total += n * mult;
        rest = rest.get(unit_end..)?;
    }
    Some(total as i64)
}

/// Where the next plausible record starts after a damaged one at `from`: a record whose
/// checksum holds and whose sequence moves forward by a sane amount (tombstones name
/// earlier sequences, so any tombstone that checks will do).
fn resync(buf: &[u8], from: usize, seed: &[u8], prev_seq: u64) -> Option<usize> {
    let mut at = from + 1;
    while at + record::EMPTY_RECORD <= buf.len() {
        let rest = buf.get(at..)?;
        let mut s = [0u8; 8];
        s.copy_from_slice(rest.get(4..12)?);
        let raw = u64::from_le_bytes(s);
        let seq = raw & !(record::EBIT | record::TBIT);
        let plausible = raw & record::TBIT != 0 || (seq > prev_seq && seq - prev_seq < (1 << 40));
        if plausible && record::decode(rest, seed).is_ok() {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// What the import saw of one block (to check `index.db` against, and to apply it).
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    index: u32,
    /// Sequence range of the message records imported from it (0, 0: none).
    first: u64,
    last: u64,
    /// Highest sequence of any message, erased or skip record in it.
    top: u64,
    /// The block's last 8 bytes (its last record's checksum).
    tail: [u8; 8],
}

/// Replays blocks one at a time, in ascending block order, into a store, then applies
/// `index.db` when it is current. The store should have no limits the stream did not
/// have (messages that `index.db` says are gone are stored, then removed).
pub struct Importer<'a> {
    name: String,
    store: &'a mut dyn Store,
    stats: ImportStats,
    seen: Vec<Seen>,
}

impl<'a> Importer<'a> {
    /// An import of stream `name` (the key of its block checksums) into `store`.
    pub fn new(name: &str, store: &'a mut dyn Store) -> Importer<'a> {
        Importer {
            name: name.to_string(),
            store,
            stats: ImportStats::default(),
            seen: Vec::new(),
        }
    }

    /// Count a block that could not be read at all (already reported by the caller).
    pub fn unreadable_block(&mut self) {
        self.stats.corrupt += 1;
    }

    /// Replay one plaintext, decompressed block.
    pub fn block(&mut self, index: u32, buf: &[u8], report: &mut dyn FnMut(String)) -> Result<()> {
        let mut seen = Seen {
            index,
            ..Seen::default()
        };
        if buf.len() >= 8 {
            seen.tail.copy_from_slice(buf.get(buf.len() - 8..).unwrap_or(&[0; 8]));
        }
        let seed = block_seed(&self.name, index);
        let name = &self.name;
        let mut at = 0usize;
        while at < buf.len() {
            let rest = buf.get(at..).unwrap_or_default();
            match record::decode(rest, &seed) {
                Ok((rec, n)) => {
                    if let RefRecord::Msg { seq, .. } | RefRecord::Erased { seq, .. } = rec {
                        seen.top = seen.top.max(seq);
                    }
                    if let RefRecord::Msg { seq, subject, .. } = rec {
                        if std::str::from_utf8(subject).is_err() {
                            self.stats.lossy_subjects += 1;
                            report(format!(
                                "stream {name}: block {index}.blk: message {seq} has a subject that is not UTF-8; stored with replacement characters"
                            ));
                        }
                    }
                    if let Some(seq) = apply(rec, &mut *self.store, &mut self.stats)? {
                        if seen.first == 0 {
                            seen.first = seq;
                        }
                        seen.last = seq;
                    }
                    at += n;
                }
                Err(_) if rest.iter().all(|&b| b == 0) => {
                    // A zero-filled tail (preallocated or torn): the end of the block.
                    break;
                }
                Err(e) => {
                    self.stats.corrupt += 1;
                    let prev = self.store.fast_state().last_seq;
                    match resync(buf, at, &seed, prev) {
                        Some(next) => {
                            report(format!(
                                "stream {name}: block {index}.blk: damaged record at offset {at} ({e:?}); {} bytes skipped",
                                next - at
                            ));
                            at = next;
                        }
                        None => {
                            report(format!(
                                "stream {name}: block {index}.blk: damaged record at offset {at} ({e:?}); the {} bytes after it are unreadable",
                                buf.len() - at
                            ));
                            break;
                        }
                    }
                }
            }
        }
        self.seen.push(seen);
        Ok(())
    }

    /// Is `idx` the state of exactly these blocks (the reference's rule: the block it names
    /// as last was seen, none after it, its last checksum matches, and every block it lists
    /// was seen)?
    fn is_current(&self, idx: &IndexDb) -> bool {
        if self.seen.iter().any(|s| s.index > idx.last_block) {
            return false;
        }
        let Some(last) = self.seen.iter().find(|s| s.index == idx.last_block) else {
            return idx.blocks.is_empty() && self.seen.is_empty();
        };
        last.tail == idx.last_checksum && idx.blocks.iter().all(|b| self.seen.iter().any(|s| s.index == b.index))
    }

    /// Finish: apply `index.db` (when current; a stale one is reported and ignored).
    pub fn finish(mut self, idx: Option<IndexDb>, report: &mut dyn FnMut(String)) -> Result<ImportStats> {
        let Some(idx) = idx else { return Ok(self.stats) };
        if !self.is_current(&idx) {
            report(format!(
                "stream {}: index.db is outdated; state rebuilt from the blocks",
                self.name
            ));
            return Ok(self.stats);
        }
        for s in &self.seen {
            let Some(b) = idx.blocks.iter().find(|b| b.index == s.index) else {
                continue;
            };
            if s.top < b.last_seq && b.deleted.binary_search(&b.last_seq).is_err() {
                self.stats.corrupt += 1;
                report(format!(
                    "stream {}: block {}.blk ends at sequence {} but index.db has it up to {}: its tail is lost",
                    self.name, s.index, s.top, b.last_seq
                ));
            }
        }
        for s in self.seen.iter().filter(|s| s.first > 0) {
            match idx.blocks.iter().find(|b| b.index == s.index) {
                // Not listed: the block held no live messages.
                None => remove_range(&mut *self.store, s.first, s.last)?,
                Some(b) => {
                    if b.first_seq > s.first {
                        remove_range(&mut *self.store, s.first, b.first_seq.saturating_sub(1).min(s.last))?;
                    }
                    for &d in &b.deleted {
                        self.store.remove_msg(d)?;
                    }
                }
            }
        }
        let st = self.store.fast_state();
        if idx.last_seq > st.last_seq {
            self.store.skip_msgs(st.last_seq + 1, idx.last_seq - st.last_seq)?;
        }
        self.stats.index_applied = true;
        Ok(self.stats)
    }
}

fn remove_range(store: &mut dyn Store, first: u64, last: u64) -> Result<()> {
    for seq in first..=last {
        store.remove_msg(seq)?;
    }
    Ok(())
}

/// Apply one record; returns the sequence of a message record that was stored.
fn apply(rec: RefRecord<'_>, store: &mut dyn Store, stats: &mut ImportStats) -> Result<Option<u64>> {
    let last = store.fast_state().last_seq;
    match rec {
        RefRecord::Msg {
            seq,
            ts,
            subject,
            headers,
            payload,
        } => {
            if seq <= last {
                return Ok(None);
            }
            if seq > last + 1 {
                store.skip_msgs(last + 1, seq - last - 1)?;
            }
            let subject = String::from_utf8_lossy(subject);
            let ttl = ttl_from_headers(headers);
            store.store_raw_msg(&subject, headers, payload, seq, ts, ttl, false)?;
            stats.msgs += 1;
            return Ok(Some(seq));
        }
        RefRecord::Erased { seq, .. } => {
            if seq > last {
                store.skip_msgs(last + 1, seq - last)?;
            }
        }
        RefRecord::Tombstone { seq, .. } => {
            stats.tombstones += 1;
            if seq > last {
                // A tombstone also remembers the last sequence of a removed block.
                store.skip_msgs(last + 1, seq - last)?;
            } else {
                store.remove_msg(seq)?;
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_header_forms() {
        let h = |v: &str| format!("NATS/1.0\r\nNats-TTL: {v}\r\n\r\n").into_bytes();
        assert_eq!(ttl_from_headers(&h("10")), 10);
        assert_eq!(ttl_from_headers(&h("never")), -1);
        assert_eq!(ttl_from_headers(&h("1m30s")), 90);
        assert_eq!(ttl_from_headers(&h("1500ms")), 1);
        assert_eq!(ttl_from_headers(&h("500ms")), 0);
        assert_eq!(ttl_from_headers(&h("NEVER")), -1);
        assert_eq!(ttl_from_headers(&h("bogus")), 0);
        assert_eq!(ttl_from_headers(b""), 0);
    }
}
