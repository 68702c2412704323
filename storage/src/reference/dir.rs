//! A stream directory written by nats-server 2.14
//! (`<store_dir>/jetstream/<account>/streams/<stream>/`), opened read-only and replayed into
//! any [`Store`].
//!
//! Layout: `meta.inf` (the stream config as JSON, sealed with the stream's asset key when
//! encrypted), `meta.sum` (hex HighwayHash-64 of the `meta.inf` bytes, keyed by the stream
//! name), `meta.key` (encrypted stores), `msgs/<n>.blk` message blocks with `msgs/<n>.key`
//! key files when encrypted, `msgs/index.db` (the full state), and `obs/` (consumers).
//!
//! `index.db` is trusted only when it is current, by the reference's rule: the block it
//! names as last exists, no block past it exists, and that block's last record checksum is
//! the one it recorded. A stale or damaged `index.db` is ignored (and reported) and the
//! state comes from the blocks alone, as the reference rebuilds it.

use super::block::plain_block;
use super::import::{ImportStats, Importer};
use super::indexdb::{self, IndexDb};
use super::meta_sum;
use crate::crypto::{EncryptionConfig, SeedKey, StreamKeys};
use crate::error::{Result, StoreError};
use crate::store::Store;
use std::fs;
use std::path::{Path, PathBuf};

/// Largest metadata or key file read (they are small; anything bigger is damage).
const MAX_META: u64 = 16 * 1024 * 1024;
/// Largest block file read.
const MAX_BLOCK_FILE: u64 = super::block::MAX_BLOCK as u64;

fn corrupt(why: impl Into<String>) -> StoreError {
    StoreError::Corrupt(why.into())
}

fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let f = fs::File::open(path)?;
    let mut v = Vec::new();
    f.take(limit + 1).read_to_end(&mut v)?;
    if v.len() as u64 > limit {
        return Err(corrupt(format!("{} is too large", path.display())));
    }
    Ok(v)
}

fn read_opt(path: &Path, limit: u64) -> Result<Option<Vec<u8>>> {
    match read_bounded(path, limit) {
        Ok(v) => Ok(Some(v)),
        Err(StoreError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// One stream directory of the reference.
#[derive(Debug)]
pub struct StreamDir {
    pub path: PathBuf,
    pub account: String,
    /// The stream's name (its directory name: the key of its checksums and keys).
    pub name: String,
    /// The plaintext `meta.inf` (the reference's `FileStreamInfo` JSON).
    pub meta_inf: Vec<u8>,
    /// Block indexes present, ascending.
    pub blocks: Vec<u32>,
    keys: Option<StreamKeys>,
    meta_seed: Option<SeedKey>,
}

/// Every stream under a reference `store_dir`: (account, stream, directory).
pub fn list_streams(store_dir: &Path) -> Result<Vec<(String, String, PathBuf)>> {
    let js = store_dir.join("jetstream");
    let root = if js.is_dir() { js } else { store_dir.to_path_buf() };
    let mut out = Vec::new();
    for acc in fs::read_dir(&root)? {
        let acc = acc?;
        let sdir = acc.path().join("streams");
        if !sdir.is_dir() {
            continue;
        }
        let account = acc.file_name().to_string_lossy().into_owned();
        for st in fs::read_dir(&sdir)? {
            let st = st?;
            let name = st.file_name().to_string_lossy().into_owned();
            // Streams being deleted are renamed with a leading '.'.
            if name.starts_with('.') || !st.path().is_dir() {
                continue;
            }
            out.push((account.clone(), name, st.path()));
        }
    }
    out.sort();
    Ok(out)
}

impl StreamDir {
    /// Open the stream directory `path` of `account` (`enc`: the server's encryption
    /// settings, needed when the directory has a `meta.key`).
    pub fn open(path: &Path, account: &str, enc: Option<&EncryptionConfig>) -> Result<StreamDir> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| StoreError::Config(format!("{} is not a stream directory", path.display())))?;
        let raw = read_bounded(&path.join("meta.inf"), MAX_META)?;
        let sum = read_bounded(&path.join("meta.sum"), 64)?;
        let want = meta_sum(&name, &raw);
        if sum != want.as_bytes() {
            return Err(corrupt(format!(
                "stream metafile {}: checksums do not match {:?} vs {want:?}",
                path.join("meta.inf").display(),
                String::from_utf8_lossy(&sum)
            )));
        }
        let (meta_inf, keys, meta_seed) = match read_opt(&path.join("meta.key"), MAX_META)? {
            None => (raw, None, None),
            Some(key_file) => {
                let Some(cfg) = enc else {
                    return Err(StoreError::Encryption(
                        "encrypted store encountered with no main key".to_string(),
                    ));
                };
                let keys = StreamKeys::new(cfg, account, &name);
                let (plain, seed) = keys.open_meta(&key_file, &raw)?;
                (plain, Some(keys), Some(seed))
            }
        };
        let mut blocks = Vec::new();
        match fs::read_dir(path.join("msgs")) {
            Ok(rd) => {
                for e in rd {
                    let e = e?;
                    let f = e.file_name();
                    let f = f.to_string_lossy();
                    if let Some(n) = f.strip_suffix(".blk").and_then(|n| n.parse::<u32>().ok()) {
                        blocks.push(n);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        blocks.sort_unstable();
        Ok(StreamDir {
            path: path.to_path_buf(),
            account: account.to_string(),
            name,
            meta_inf,
            blocks,
            keys,
            meta_seed,
        })
    }

    /// Is the stream encrypted at rest?
    pub fn encrypted(&self) -> bool {
        self.keys.is_some()
    }

    /// The plain records of block `index` (decrypted and decompressed).
    pub fn read_block(&self, index: u32) -> Result<Vec<u8>> {
        let msgs = self.path.join("msgs");
        let raw = read_bounded(&msgs.join(format!("{index}.blk")), MAX_BLOCK_FILE)?;
        let key = match &self.keys {
            None => None,
            Some(keys) => {
                let kf = read_bounded(&msgs.join(format!("{index}.key")), MAX_META)?;
                Some(keys.open_key_file(&keys.block_context(index), &kf)?)
            }
        };
        plain_block(index, raw, key.as_ref())
    }

    /// The decoded `msgs/index.db`, if present and intact (not yet checked for currency).
    pub fn index_db(&self) -> Result<Option<IndexDb>> {
        let Some(file) = read_opt(&self.path.join("msgs").join("index.db"), MAX_BLOCK_FILE)? else {
            return Ok(None);
        };
        let body = indexdb::verify(&self.name, &file)?;
        let plain = match &self.meta_seed {
            Some(seed) => seed.aead().open(&body)?,
            None => body,
        };
        indexdb::decode(&plain).map(Some)
    }

    /// Replay every message into `store` (which should be empty and have no limits that
    /// the stream did not have). `report` receives a line per problem found (damaged
    /// records or blocks, a stale or damaged `index.db`). One block is in memory at a time.
    pub fn import_into(&self, store: &mut dyn Store, report: &mut dyn FnMut(String)) -> Result<ImportStats> {
        let mut imp = Importer::new(&self.name, store);
        for &b in &self.blocks {
            match self.read_block(b) {
                Ok(p) => imp.block(b, &p, report)?,
                Err(e @ (StoreError::Corrupt(_) | StoreError::Encryption(_))) => {
                    imp.unreadable_block();
                    report(format!("stream {}: block {b} unreadable: {e}", self.name));
                }
                Err(e) => return Err(e),
            }
        }
        let idx = match self.index_db() {
            Ok(i) => i,
            Err(e) => {
                report(format!("stream {}: index.db ignored: {e}", self.name));
                None
            }
        };
        imp.finish(idx, report)
    }
}
