//! Replaying the reference's blocks into any [`Store`]: the file store converts a
//! reference `store_dir` this way, and both stores restore snapshots this way.
//!
//! Deletions come from three places, as in the reference: `index.db` (per-block first
//! sequence and delete maps; used only when it is current), delete tombstones in later
//! blocks, and gaps. Records that fail their checksum are never imported: each is reported
//! and the scan resumes at the next record that checks (nothing readable after a damaged
//! record is dropped).

use super::block_seed;
use super::indexdb::{BlockState, IndexDb};
use super::record::{self, RefRecord};
use crate::engine::header_value;
use crate::error::Result;
use crate::store::Store;

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportStats {
    pub msgs: u64,
    pub tombstones: u64,
    /// Damaged records skipped (each also reported).
    pub corrupt: u64,
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
    parse_go_duration(s).map_or(0, |ns| (ns + 999_999_999) / 1_000_000_000)
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

/// What `index.db` says about one block, when it is current.
#[derive(Clone, Copy, Debug)]
pub enum BlockView<'a> {
    /// No (current) index: every message record counts.
    All,
    /// The block's entry: messages below its first sequence or in its delete map are gone.
    Indexed(&'a BlockState),
    /// A current index that does not list the block: it holds no live messages (only
    /// tombstones and skips still apply).
    Emptied,
}

impl BlockView<'_> {
    fn deleted(&self, seq: u64) -> bool {
        match self {
            BlockView::All => false,
            BlockView::Indexed(b) => seq < b.first_seq || b.deleted.binary_search(&seq).is_ok(),
            BlockView::Emptied => true,
        }
    }
}

/// Replay one plaintext, decompressed reference block (`index`) of stream `name`.
pub fn import_block(
    name: &str,
    index: u32,
    buf: &[u8],
    view: BlockView<'_>,
    store: &mut dyn Store,
    stats: &mut ImportStats,
    report: &mut dyn FnMut(String),
) -> Result<()> {
    let seed = block_seed(name, index);
    let mut at = 0usize;
    while at < buf.len() {
        let rest = buf.get(at..).unwrap_or_default();
        match record::decode(rest, &seed) {
            Ok((rec, n)) => {
                apply(rec, view, store, stats)?;
                at += n;
            }
            Err(_) if rest.iter().all(|&b| b == 0) => {
                // A zero-filled tail (preallocated or torn): the end of the block.
                break;
            }
            Err(e) => {
                stats.corrupt += 1;
                let prev = store.fast_state().last_seq;
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
                            "stream {name}: block {index}.blk: damaged record at offset {at} ({e:?}); {} bytes after it unreadable",
                            buf.len() - at
                        ));
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

fn apply(rec: RefRecord<'_>, view: BlockView<'_>, store: &mut dyn Store, stats: &mut ImportStats) -> Result<()> {
    let last = store.fast_state().last_seq;
    match rec {
        RefRecord::Msg {
            seq,
            ts,
            subject,
            headers,
            payload,
        } => {
            if seq <= last || view.deleted(seq) {
                return Ok(());
            }
            if seq > last + 1 {
                store.skip_msgs(last + 1, seq - last - 1)?;
            }
            let subject = String::from_utf8_lossy(subject);
            let ttl = ttl_from_headers(headers);
            store.store_raw_msg(&subject, headers, payload, seq, ts, ttl, false)?;
            stats.msgs += 1;
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
    Ok(())
}

/// After the last block: apply the stream-level first and last sequence of `index.db`.
pub fn finish(idx: Option<&IndexDb>, store: &mut dyn Store) -> Result<()> {
    let Some(i) = idx else { return Ok(()) };
    let st = store.fast_state();
    if i.last_seq > st.last_seq {
        store.skip_msgs(st.last_seq + 1, i.last_seq - st.last_seq)?;
    }
    if i.first_seq > store.fast_state().first_seq && i.first_seq > 1 {
        store.compact(i.first_seq)?;
    }
    Ok(())
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
        assert_eq!(ttl_from_headers(&h("1500ms")), 2);
        assert_eq!(ttl_from_headers(&h("bogus")), 0);
        assert_eq!(ttl_from_headers(b""), 0);
    }
}
