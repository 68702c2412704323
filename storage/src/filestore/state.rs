//! The state file `state.rns`, for a fast restart: written at a clean stop, after
//! everything is synced, it holds the block list and the engine's live entries, so the next
//! open rebuilds the indexes without reading the blocks. It lives only between a clean stop
//! and the next open: open deletes it (durably) before anything is written, so it can never
//! be stale after a crash; it is also checked against the blocks on disk (ordinals, file
//! ids, file sizes) and by its own CRC-32C. Missing, stale or damaged, it is ignored and
//! the store is rebuilt from the blocks (the default path; damage is only logged, since the
//! blocks are the truth). When the state is used, corruption inside blocks is found when a
//! record is read (its checksum), not at open.
//!
//! Layout: `RNATSSTA`, u16 version, then LEB128 varints (signed values zigzag): the blocks
//! (ordinal, file id, file size, logical length, live count, live bytes), first seq,
//! first ts, last seq, last ts, the subjects (length, bytes), the entries in sequence order
//! (seq delta, ts, subject index, accounted size, ttl: 0 none, -1 never, else seconds,
//! block, offset, record length); then the CRC-32C of everything before it.
//!
//! With encryption at rest the file holds subjects, so it is sealed whole: `RNATSSTE`, a
//! random u64 id, then the block cipher's sealing of the layout above at (id, `u64::MAX`)
//! (block records are sealed at offsets below 2^32, under their blocks' random file ids).

use super::format::{BlockHeader, DATA_START};
use super::recover::block_header;
use super::{Block, FileStore, Loc};
use crate::engine::Engine;
use crate::error::Result;
use std::collections::HashMap;
use std::io::Write;

const MAGIC: &[u8; 8] = b"RNATSSTA";
const SEALED_MAGIC: &[u8; 8] = b"RNATSSTE";
const SEALED_AT: u64 = u64::MAX;
const VERSION: u16 = 1;
pub const NAME: &str = "state.rns";

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_i(out: &mut Vec<u8>, v: i64) {
    put(out, ((v << 1) ^ (v >> 63)) as u64);
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn u(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.at)?;
            self.at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn i(&mut self) -> Option<i64> {
        let v = self.u()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }
    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
}

/// A decoded state file.
struct Loaded {
    blocks: Vec<(u64, u64, u64, u64, u64, u64)>,
    scalars: (u64, i64, u64, i64),
    subjects: Vec<String>,
    entries: Vec<(u64, i64, usize, u64, i64, Loc)>,
}

fn decode(b: &[u8]) -> Option<Loaded> {
    let body_len = b.len().checked_sub(4)?;
    let crc = u32::from_le_bytes(b.get(body_len..)?.try_into().ok()?);
    let body = b.get(..body_len)?;
    if crc32c::crc32c(body) != crc || body.get(..8)? != MAGIC || body.get(8..10)? != VERSION.to_le_bytes() {
        return None;
    }
    let mut r = Reader { b: body, at: 10 };
    let nb = r.u()? as usize;
    // Every count is bounded by the bytes left (each item takes at least one byte).
    if nb > body.len() {
        return None;
    }
    let mut blocks = Vec::with_capacity(nb);
    for _ in 0..nb {
        blocks.push((r.u()?, r.u()?, r.u()?, r.u()?, r.u()?, r.u()?));
    }
    let scalars = (r.u()?, r.i()?, r.u()?, r.i()?);
    let ns = r.u()? as usize;
    if ns > body.len() {
        return None;
    }
    let mut subjects = Vec::with_capacity(ns);
    for _ in 0..ns {
        let n = r.u()? as usize;
        subjects.push(String::from_utf8(r.bytes(n)?.to_vec()).ok()?);
    }
    let ne = r.u()? as usize;
    if ne > body.len() {
        return None;
    }
    let mut entries = Vec::with_capacity(ne);
    let mut seq = 0u64;
    for _ in 0..ne {
        seq = seq.checked_add(r.u()?)?;
        let ts = r.i()?;
        let subj = r.u()? as usize;
        let size = r.u()?;
        let ttl = r.i()?;
        let loc = Loc {
            blk: u32::try_from(r.u()?).ok()?,
            off: u32::try_from(r.u()?).ok()?,
            len: u32::try_from(r.u()?).ok()?,
        };
        if subj >= subjects.len() {
            return None;
        }
        entries.push((seq, ts, subj, size, ttl, loc));
    }
    (r.at == body.len()).then_some(Loaded {
        blocks,
        scalars,
        subjects,
        entries,
    })
}

fn encode(fs: &FileStore) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64 + fs.eng.msgs as usize * 16);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    put(&mut out, fs.blocks.len() as u64);
    for b in &fs.blocks {
        let size = std::fs::metadata(fs.cfg.dir.join(Block::name(b.ordinal)))?.len();
        for v in [b.ordinal, b.hdr.file_id, size, b.len, b.live, b.live_bytes] {
            put(&mut out, v);
        }
    }
    let e = &fs.eng;
    put(&mut out, e.first_seq);
    put_i(&mut out, e.first_ts);
    put(&mut out, e.last_seq);
    put_i(&mut out, e.last_ts);
    let expires: HashMap<u64, i64> = e.ttl.entries().map(|t| (t.seq, t.expires)).collect();
    let mut ids: HashMap<u32, usize> = HashMap::new();
    let mut names: Vec<&str> = Vec::new();
    for (_, en) in e.index.iter() {
        ids.entry(en.subj).or_insert_with(|| {
            names.push(e.subject_of(en));
            names.len() - 1
        });
    }
    put(&mut out, names.len() as u64);
    for n in &names {
        put(&mut out, n.len() as u64);
        out.extend_from_slice(n.as_bytes());
    }
    put(&mut out, e.index.len() as u64);
    let mut prev = 0u64;
    for (seq, en) in e.index.iter() {
        put(&mut out, seq - prev);
        prev = seq;
        put_i(&mut out, en.ts);
        put(&mut out, ids.get(&en.subj).copied().unwrap_or(0) as u64);
        put(&mut out, en.size());
        let ttl = match expires.get(&seq) {
            Some(x) => (x - en.ts) / 1_000_000_000,
            None if !en.ages_out() => -1,
            None => 0,
        };
        put_i(&mut out, ttl);
        for v in [u64::from(en.loc.blk), u64::from(en.loc.off), u64::from(en.loc.len)] {
            put(&mut out, v);
        }
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

impl FileStore {
    /// Write the state file (at a clean stop, after everything is synced).
    pub(super) fn write_state(&mut self) -> Result<()> {
        let mut bytes = encode(self)?;
        if self.cfg.cipher.is_some() {
            let id = rand::random::<u64>();
            self.cipher.seal(id, SEALED_AT, &mut bytes)?;
            let mut out = Vec::with_capacity(bytes.len() + 16);
            out.extend_from_slice(SEALED_MAGIC);
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&bytes);
            bytes = out;
        }
        let tmp = self.cfg.dir.join("state.rns.tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, self.cfg.dir.join(NAME))?;
        crate::io::raw::sync_dir(&self.cfg.dir)?;
        Ok(())
    }

    /// Take the state file: load it into the engine when it matches the blocks on disk
    /// (`ords`: the block files found), and delete it in every case. True when used.
    pub(super) fn take_state(&mut self, ords: &[u64]) -> Result<bool> {
        let path = self.cfg.dir.join(NAME);
        let Ok(bytes) = std::fs::read(&path) else {
            return Ok(false);
        };
        std::fs::remove_file(&path)?;
        crate::io::raw::sync_dir(&self.cfg.dir)?;
        let bytes = match bytes.strip_prefix(SEALED_MAGIC.as_slice()) {
            Some(rest) if self.cfg.cipher.is_some() => {
                let id = rest.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
                let mut body = rest.get(8..).unwrap_or(&[]).to_vec();
                match id.map(|id| self.cipher.open(id, SEALED_AT, &mut body)) {
                    Some(Ok(())) => body,
                    _ => {
                        tracing::warn!(dir = %self.cfg.dir.display(), "storage: state file does not open with the configured key; rebuilding from the blocks");
                        return Ok(false);
                    }
                }
            }
            // Sealed and no key, or a plain state file where a key is configured (written
            // before encryption was turned on: usable, it holds no sealed data).
            Some(_) => return Ok(false),
            None => bytes,
        };
        let Some(st) = decode(&bytes) else {
            tracing::warn!(dir = %self.cfg.dir.display(), "storage: state file damaged; rebuilding from the blocks");
            return Ok(false);
        };
        if st.blocks.iter().map(|b| b.0).collect::<Vec<_>>() != ords {
            return Ok(false);
        }
        let mut headers: Vec<BlockHeader> = Vec::with_capacity(st.blocks.len());
        for &(ord, file_id, size, ..) in &st.blocks {
            let (file, len) = self.io.open(&Block::name(ord), false)?;
            let head = self.io.read_at(file, 0, DATA_START)?;
            self.io.close(file);
            match block_header(&head) {
                Some(h) if h.file_id == file_id && h.ordinal == ord && len == size => headers.push(h),
                _ => return Ok(false),
            }
        }
        let mut eng: Engine<Loc> = Engine::new(self.eng.cfg.clone(), crate::types::file_msg_size);
        for &(seq, ts, subj, size, ttl, loc) in &st.entries {
            let Some(name) = st.subjects.get(subj) else {
                return Ok(false);
            };
            if !eng.insert_quiet(seq, ts, name, size, ttl, loc) {
                return Ok(false);
            }
        }
        let (first_seq, first_ts, last_seq, last_ts) = st.scalars;
        eng.first_seq = first_seq;
        eng.first_ts = first_ts;
        eng.last_seq = last_seq;
        eng.last_ts = last_ts;
        self.eng = eng;
        let align = self.io.alignment() as u64;
        for (&(ordinal, _, _, len, live, live_bytes), hdr) in st.blocks.iter().zip(headers) {
            self.blocks.push_back(Block {
                ordinal,
                file: None,
                hdr,
                len,
                live,
                live_bytes,
                buf: Default::default(),
                base: len.div_ceil(align) * align,
                flushed: len,
                synced: len,
                marked: len,
                zeroed: 0,
            });
        }
        Ok(true)
    }
}
