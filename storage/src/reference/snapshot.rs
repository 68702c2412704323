//! Stream snapshots in the reference's format: an s2 stream (klauspost/compress framing)
//! of a tar archive holding `meta.inf`, `meta.sum`, `msgs/<n>.blk` (plaintext reference
//! blocks) and, optionally, `msgs/index.db` and consumer files under `obs/`.
//!
//! Written here ([`write`]): the live messages in reference blocks of about 8 MiB, then
//! (when the stream's last sequence is past its last message) a skip record for it so the
//! last sequence survives, as the reference's own skip records do. Interior deletes are
//! gaps, which the reference reads as deletes. No `index.db` is written: the reference
//! rebuilds its state from the blocks when it is missing, and so does [`restore`].
//!
//! Read here ([`restore`]): any such archive, replayed into a [`Store`] as it streams in.

use super::import::{ImportStats, Importer};
use super::indexdb;
use super::record::{self, EBIT};
use super::s2::S2Reader;
use super::{block_seed, meta_sum};
use crate::error::{Result, StoreError};
use crate::store::{SnapshotMeta, Store};
use crate::types::{StoredMsg, StreamState};
use std::io::{Read, Write};

const SNAP_BLOCK: usize = 8 * 1024 * 1024;

fn tar_file<W: Write>(t: &mut tar::Builder<W>, path: &str, data: &[u8], mtime: u64) -> Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o600);
    h.set_mtime(mtime);
    let _ = h.set_username("nats");
    let _ = h.set_groupname("nats");
    h.set_entry_type(tar::EntryType::Regular);
    t.append_data(&mut h, path, data)?;
    Ok(())
}

/// Write a snapshot of stream `name` holding `msgs` (ascending) to `out`.
pub fn write(
    name: &str,
    meta: &SnapshotMeta,
    state: &StreamState,
    msgs: impl Iterator<Item = StoredMsg>,
    out: &mut dyn Write,
) -> Result<()> {
    let mtime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut enc = minlz::Writer::new(out);
    {
        let mut t = tar::Builder::new(&mut enc);
        tar_file(&mut t, "meta.inf", &meta.meta_inf, mtime)?;
        tar_file(&mut t, "meta.sum", meta_sum(name, &meta.meta_inf).as_bytes(), mtime)?;
        let mut index = 1u32;
        let mut blk = Vec::new();
        let mut last_written = 0u64;
        for m in msgs {
            let seed = block_seed(name, index);
            record::encode(
                &mut blk,
                &seed,
                m.seq,
                m.ts,
                m.subject.as_bytes(),
                &m.headers,
                &m.payload,
            );
            last_written = m.seq;
            if blk.len() >= SNAP_BLOCK {
                tar_file(&mut t, &format!("msgs/{index}.blk"), &blk, mtime)?;
                blk.clear();
                index += 1;
            }
        }
        if state.last_seq > last_written && state.last_seq > 0 {
            let seed = block_seed(name, index);
            record::encode(&mut blk, &seed, state.last_seq | EBIT, state.last_ts, b"", b"", b"");
        }
        if !blk.is_empty() || index == 1 {
            tar_file(&mut t, &format!("msgs/{index}.blk"), &blk, mtime)?;
        }
        for (path, data) in &meta.extra {
            tar_file(&mut t, path, data, mtime)?;
        }
        t.finish()?;
    }
    enc.flush()?;
    Ok(())
}

/// Write a snapshot of any store (its messages walked in order through
/// [`Store::load_next_msg`]), for stores that have no cheaper way.
pub fn write_from_store(store: &mut dyn Store, meta: &SnapshotMeta, out: &mut dyn Write) -> Result<()> {
    let name = store.config().name.clone();
    let state = store.fast_state();
    let all = crate::subject::Filter::all();
    let mut next = state.first_seq.max(1);
    let mut failed = None;
    let msgs = std::iter::from_fn(|| {
        if failed.is_some() {
            return None;
        }
        match store.load_next_msg(&all, next) {
            Ok(m) => {
                next = m.seq + 1;
                Some(m)
            }
            Err(StoreError::Eof | StoreError::MsgNotFound) => None,
            Err(e) => {
                failed = Some(e);
                None
            }
        }
    });
    write(&name, meta, &state, msgs, out)?;
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Largest `meta.inf`, `meta.sum`, `index.db` or extra file accepted in a snapshot.
const MAX_FILE: u64 = 64 * 1024 * 1024;
/// Largest total of the extra (consumer) files held while restoring.
const MAX_EXTRA_TOTAL: usize = 256 * 1024 * 1024;

/// What a restore brought back besides the messages.
#[derive(Debug, Default)]
pub struct Restored {
    /// The snapshot's `meta.inf` (the stream config JSON the JetStream layer reads).
    pub meta_inf: Vec<u8>,
    /// Every other file (consumers under `obs/`), by path.
    pub extra: Vec<(String, Vec<u8>)>,
    pub stats: ImportStats,
}

fn bad(why: impl std::fmt::Display) -> StoreError {
    StoreError::BadSnapshot(why.to_string())
}

fn read_entry(r: &mut dyn Read, limit: u64, path: &str) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    r.take(limit + 1)
        .read_to_end(&mut data)
        .map_err(|e| bad(format!("{path}: {e}")))?;
    if data.len() as u64 > limit {
        return Err(bad(format!("{path} is too large")));
    }
    Ok(data)
}

/// Restore a snapshot (the reference's or one written by [`write`]) into `store`, which
/// should be empty, named as the stream (its name keys the block checksums) and without
/// limits the stream did not have. Blocks are replayed as they stream in (one in memory at
/// a time); `index.db`, which the reference writes after the blocks, is applied at the end
/// when it is current. Damaged records are reported through `report` and skipped; a
/// damaged archive or compression stream ends the restore with [`StoreError::BadSnapshot`].
pub fn restore(input: &mut dyn Read, store: &mut dyn Store, report: &mut dyn FnMut(String)) -> Result<Restored> {
    let name = store.config().name.clone();
    let mut ar = tar::Archive::new(S2Reader::new(input));
    let mut out = Restored::default();
    let mut meta_sum_file = None;
    let mut index_db = None;
    let mut extra_total = 0usize;
    let mut last_block = None::<u32>;
    let mut imp = Importer::new(&name, store);
    let entries = ar.entries().map_err(bad)?;
    for ent in entries {
        let mut ent = ent.map_err(bad)?;
        let kind = ent.header().entry_type();
        if !kind.is_file() {
            if kind.is_dir() {
                continue;
            }
            return Err(bad("unexpected content"));
        }
        let path = ent.path().map_err(bad)?.to_string_lossy().into_owned();
        let path = path.trim_start_matches("./").to_string();
        if path.split('/').any(|c| c == ".." || c.is_empty()) || path.starts_with('/') {
            return Err(bad(format!("unsafe path {path:?}")));
        }
        if path == "errors.txt" {
            let why = read_entry(&mut ent, 64 * 1024, &path)?;
            return Err(bad(format!(
                "snapshot reports an error: {}",
                String::from_utf8_lossy(&why)
            )));
        }
        if let Some(n) = path
            .strip_prefix("msgs/")
            .and_then(|p| p.strip_suffix(".blk"))
            .and_then(|n| n.parse::<u32>().ok())
        {
            if last_block.is_some_and(|l| n <= l) {
                return Err(bad(format!("block {n} out of order")));
            }
            last_block = Some(n);
            let data = read_entry(&mut ent, super::block::MAX_BLOCK as u64, &path)?;
            // Snapshots hold plain blocks; be lenient with a compressed one.
            match super::block::decompress(n, data) {
                Ok(plain) => imp.block(n, &plain, report)?,
                Err(e) => {
                    imp.unreadable_block();
                    report(format!("snapshot of {name}: {e}"));
                }
            }
            continue;
        }
        let data = read_entry(&mut ent, MAX_FILE, &path)?;
        match path.as_str() {
            "meta.inf" => out.meta_inf = data,
            "meta.sum" => meta_sum_file = Some(data),
            "msgs/index.db" => index_db = Some(data),
            _ => {
                extra_total += data.len();
                if extra_total > MAX_EXTRA_TOTAL {
                    return Err(bad("too much consumer data"));
                }
                out.extra.push((path, data));
            }
        }
    }
    if let Some(sum) = meta_sum_file {
        if sum != meta_sum(&name, &out.meta_inf).as_bytes() {
            return Err(bad(format!("meta.sum does not match meta.inf for stream {name}")));
        }
    }
    let idx = match index_db.map(|f| indexdb::verify(&name, &f).and_then(|b| indexdb::decode(&b))) {
        None => None,
        Some(Ok(i)) => Some(i),
        Some(Err(e)) => {
            report(format!("snapshot of {name}: index.db ignored: {e}"));
            None
        }
    };
    out.stats = imp.finish(idx, report)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemStore, StoreConfig};

    fn sample() -> MemStore {
        let mut s = MemStore::new(StoreConfig::new("S"));
        for i in 0..50u32 {
            let h = if i % 3 == 0 {
                b"NATS/1.0\r\nA: 1\r\n\r\n".to_vec()
            } else {
                Vec::new()
            };
            s.store_raw_msg(
                &format!("s.{}", i % 4),
                &h,
                format!("m{i}").as_bytes(),
                0,
                1_000 + i64::from(i),
                0,
                false,
            )
            .unwrap();
        }
        s.remove_msg(7).unwrap();
        s.remove_msg(50).unwrap();
        s
    }

    fn snap(s: &mut MemStore) -> Vec<u8> {
        let meta = SnapshotMeta {
            meta_inf: br#"{"name":"S"}"#.to_vec(),
            extra: vec![("obs/C/meta.inf".to_string(), b"{}".to_vec())],
        };
        let mut out = Vec::new();
        s.snapshot(&meta, &mut out).unwrap();
        out
    }

    #[test]
    fn memstore_round_trip() {
        let mut a = sample();
        let bytes = snap(&mut a);
        let mut b = MemStore::new(StoreConfig::new("S"));
        let mut reports = Vec::new();
        let r = restore(&mut &bytes[..], &mut b, &mut |l| reports.push(l)).unwrap();
        assert!(reports.is_empty(), "{reports:?}");
        assert_eq!(r.meta_inf, br#"{"name":"S"}"#);
        assert_eq!(r.extra, vec![("obs/C/meta.inf".to_string(), b"{}".to_vec())]);
        assert_eq!(r.stats.msgs, 48);
        // The last timestamp of a skipped last sequence is the restoring store's clock
        // (`Store::skip_msgs` takes no time); everything else is the same.
        let (mut sa, mut sb) = (a.state(), b.state());
        sa.last_ts = 0;
        sb.last_ts = 0;
        assert_eq!(sa, sb);
        assert_eq!(a.messages().collect::<Vec<_>>(), b.messages().collect::<Vec<_>>());
        // Another stream name: every record fails its checksum, and meta.sum says so first.
        let mut c = MemStore::new(StoreConfig::new("T"));
        assert!(matches!(
            restore(&mut &bytes[..], &mut c, &mut |_| {}),
            Err(StoreError::BadSnapshot(_))
        ));
    }

    #[test]
    fn any_store_through_its_api() {
        let mut a = sample();
        let meta = SnapshotMeta::default();
        let mut via_api = Vec::new();
        write_from_store(&mut a, &meta, &mut via_api).unwrap();
        let mut b = MemStore::new(StoreConfig::new("S"));
        restore(&mut &via_api[..], &mut b, &mut |_| {}).unwrap();
        assert_eq!(a.messages().collect::<Vec<_>>(), b.messages().collect::<Vec<_>>());
        assert_eq!(a.fast_state().last_seq, b.fast_state().last_seq);
    }

    #[test]
    fn empty_stream_keeps_last_seq() {
        let mut a = MemStore::new(StoreConfig::new("S"));
        a.store_msg("x", b"", b"1", 0).unwrap();
        a.store_msg("x", b"", b"2", 0).unwrap();
        a.purge().unwrap();
        let bytes = snap(&mut a);
        let mut b = MemStore::new(StoreConfig::new("S"));
        restore(&mut &bytes[..], &mut b, &mut |_| {}).unwrap();
        let st = b.fast_state();
        assert_eq!((st.msgs, st.last_seq, st.first_seq), (0, 2, 3));
    }

    #[test]
    fn damaged_snapshots_fail_cleanly() {
        let mut a = sample();
        let bytes = snap(&mut a);
        for cut in [0, 5, 30, bytes.len() / 2, bytes.len() - 1] {
            let mut b = MemStore::new(StoreConfig::new("S"));
            let r = restore(&mut &bytes[..cut], &mut b, &mut |_| {});
            if cut == 0 {
                // An empty stream is an empty (if useless) archive.
                assert!(r.is_ok());
            } else {
                assert!(r.is_err(), "cut at {cut}");
            }
        }
        for at in (0..bytes.len()).step_by(7) {
            let mut f = bytes.clone();
            f[at] ^= 0x04;
            let mut b = MemStore::new(StoreConfig::new("S"));
            // Either refused or restored without any corrupt record served.
            if restore(&mut &f[..], &mut b, &mut |_| {}).is_ok() {
                for m in b.messages() {
                    assert!(a.messages().any(|x| x == m), "flip at {at} served {m:?}");
                }
            }
        }
    }
}
