//! Replaying the reference's blocks into any [`Store`]: the file store converts a
//! reference `store_dir` this way, and both stores restore snapshots this way.
//!
//! Deletions come from three places, as in the reference: `index.db` (per-block first
//! sequence and delete maps; used only when it is current), delete tombstones in later
//! blocks, and gaps. Records that fail their checksum are never imported: each is reported
//! and the scan resumes at the next record that checks (nothing readable after a damaged
//! record is dropped).

use super::block_seed;
use super::indexdb::IndexDb;
use super::record::{self, RefDecodeError, RefRecord};
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

/// Where the next plausible record starts after a damaged one at `from` (a record whose
/// sequence moves forward by a sane amount and whose checksum holds).
fn resync(buf: &[u8], from: usize, seed: &[u8], prev_seq: u64) -> Option<usize> {
    let mut at = from + 1;
    while at + record::EMPTY_RECORD <= buf.len() {
        let rest = buf.get(at..)?;
        let mut s = [0u8; 8];
        s.copy_from_slice(rest.get(4..12)?);
        let seq = u64::from_le_bytes(s) & !(record::EBIT | record::TBIT);
        let plausible = seq > prev_seq && seq - prev_seq < (1 << 40);
        if plausible && record::decode(rest, seed).is_ok() {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// Replay one plaintext, decompressed reference block (`index`) of stream `name`.
pub fn import_block(
    name: &str,
    index: u32,
    buf: &[u8],
    idx: Option<&IndexDb>,
    store: &mut dyn Store,
    stats: &mut ImportStats,
    report: &mut dyn FnMut(String),
) -> Result<()> {
    let seed = block_seed(name, index);
    let bstate = idx.and_then(|i| i.blocks.iter().find(|b| b.index == index));
    let mut at = 0usize;
    let mut prev = 0u64;
    while at < buf.len() {
        let rest = buf.get(at..).unwrap_or(&[]);
        match record::decode(rest, &seed) {
            Ok((rec, n)) => {
                apply(rec, bstate, store, stats)?;
                prev = prev.max(store.fast_state().last_seq);
                at += n;
            }
            Err(RefDecodeError::Truncated) if rest.iter().all(|&b| b == 0) || rest.len() < record::EMPTY_RECORD => {
                break;
            }
            Err(e) => {
                stats.corrupt += 1;
                match resync(buf, at, &seed, prev) {
                    Some(next) => {
                        report(format!(
                            "reference block {index}.blk: damaged record at offset {at} ({e:?}); {} bytes skipped",
                            next - at
                        ));
                        at = next;
                    }
                    None => {
                        report(format!(
                            "reference block {index}.blk: damaged record at offset {at} ({e:?}); nothing readable after it"
                        ));
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

fn apply(
    rec: RefRecord<'_>,
    bstate: Option<&super::indexdb::BlockState>,
    store: &mut dyn Store,
    stats: &mut ImportStats,
) -> Result<()> {
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
                return Ok(());
            }
            let deleted = bstate.is_some_and(|b| seq < b.first_seq || b.deleted.binary_search(&seq).is_ok());
            if deleted {
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
            if store.remove_msg(seq)? {
                stats.tombstones += 1;
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
