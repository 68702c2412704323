//! Stream snapshots in the reference's format: an s2 stream (klauspost/compress framing)
//! of a tar archive holding `meta.inf`, `meta.sum`, `msgs/<n>.blk` (plaintext reference
//! blocks) and, optionally, `msgs/index.db` and consumer files under `obs/`.
//!
//! Written here: the live messages in reference blocks of at most 8 MiB, then (when the
//! stream's last sequence is past its last message) a skip record for it so the last
//! sequence survives, as the reference's own skip records do. No `index.db` is written; the
//! reference rebuilds its state from the blocks, and so does rnats.

use super::record::{self, EBIT};
use super::{block_seed, meta_sum};
use crate::error::{Result, StoreError};
use crate::store::SnapshotMeta;
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

/// The files of a snapshot.
#[derive(Debug, Default)]
pub struct SnapshotFiles {
    pub meta_inf: Vec<u8>,
    pub meta_sum: Option<Vec<u8>>,
    /// `msgs/<n>.blk` by block index, ascending.
    pub blocks: Vec<(u32, Vec<u8>)>,
    pub index_db: Option<Vec<u8>>,
    /// Every other file (consumers), by path.
    pub extra: Vec<(String, Vec<u8>)>,
}

/// Read a snapshot stream (bounded only by what it really holds; claimed sizes are not
/// trusted for allocation).
pub fn read(input: &mut dyn Read) -> Result<SnapshotFiles> {
    let dec = minlz::Reader::new(input);
    let mut ar = tar::Archive::new(dec);
    let mut files = SnapshotFiles::default();
    let entries = ar.entries().map_err(|e| StoreError::BadSnapshot(e.to_string()))?;
    for ent in entries {
        let mut ent = ent.map_err(|e| StoreError::BadSnapshot(e.to_string()))?;
        if !ent.header().entry_type().is_file() {
            continue;
        }
        let path = ent
            .path()
            .map_err(|e| StoreError::BadSnapshot(e.to_string()))?
            .to_string_lossy()
            .into_owned();
        let mut data = Vec::new();
        ent.read_to_end(&mut data)
            .map_err(|e| StoreError::BadSnapshot(e.to_string()))?;
        let path = path.trim_start_matches("./").to_string();
        if path.contains("..") {
            return Err(StoreError::BadSnapshot(format!("unsafe path {path}")));
        }
        if path == "meta.inf" {
            files.meta_inf = data;
        } else if path == "meta.sum" {
            files.meta_sum = Some(data);
        } else if path == "msgs/index.db" {
            files.index_db = Some(data);
        } else if let Some(n) = path
            .strip_prefix("msgs/")
            .and_then(|p| p.strip_suffix(".blk"))
            .and_then(|n| n.parse::<u32>().ok())
        {
            files.blocks.push((n, data));
        } else if path != "errors.txt" {
            files.extra.push((path, data));
        } else {
            let why = String::from_utf8_lossy(&data).into_owned();
            return Err(StoreError::BadSnapshot(format!("snapshot reports an error: {why}")));
        }
    }
    files.blocks.sort_by_key(|(n, _)| *n);
    Ok(files)
}
