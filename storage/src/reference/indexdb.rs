//! The reference's `msgs/index.db` (full stream state, versions 1 to 4) and the AVL
//! sequence-set encoding of its per-block delete maps. Only what an import needs is kept:
//! stream first/last, and per block its first sequence and deleted sequences.

use super::hash64;
use crate::error::{Result, StoreError};

const FULL_STATE_MAGIC: u8 = 11;
const SEQSET_MAGIC: u8 = 22;

/// One block's entry in `index.db`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockState {
    pub index: u32,
    pub first_seq: u64,
    pub last_seq: u64,
    /// Deleted sequences inside the block, ascending.
    pub deleted: Vec<u64>,
}

/// What `index.db` says about a stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexDb {
    pub msgs: u64,
    pub bytes: u64,
    pub first_seq: u64,
    pub first_ts: i64,
    pub last_seq: u64,
    pub last_ts: i64,
    pub blocks: Vec<BlockState>,
    /// Index of the block that was last when the state was written, and its last checksum.
    pub last_block: u32,
    pub last_checksum: [u8; 8],
}

struct Rd<'a> {
    b: &'a [u8],
    at: usize,
}

impl Rd<'_> {
    fn uvarint(&mut self) -> Result<u64> {
        let mut x: u64 = 0;
        let mut s = 0u32;
        loop {
            let c = *self.b.get(self.at).ok_or_else(|| bad("truncated varint"))?;
            self.at += 1;
            if s >= 64 || (s == 63 && c > 1) {
                return Err(bad("varint overflow"));
            }
            if c < 0x80 {
                return Ok(x | (u64::from(c) << s));
            }
            x |= u64::from(c & 0x7f) << s;
            s += 7;
        }
    }
    fn varint(&mut self) -> Result<i64> {
        let u = self.uvarint()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }
}

fn bad(why: &str) -> StoreError {
    StoreError::Corrupt(format!("index.db: {why}"))
}

/// Check the trailing HighwayHash of an `index.db` (keyed by the stream name) and return the
/// bytes it covers (still encrypted if the store is).
pub fn verify(name: &str, file: &[u8]) -> Result<Vec<u8>> {
    if file.len() < 32 {
        return Err(bad("too short"));
    }
    let (body, sum) = file.split_at(file.len() - 8);
    if hash64(name.as_bytes(), &[body]) != sum {
        return Err(bad("checksum mismatch"));
    }
    Ok(body.to_vec())
}

/// Decode the plaintext state (after [`verify`] and decryption).
pub fn decode(buf: &[u8]) -> Result<IndexDb> {
    let (magic, version) = match buf {
        [m, v, ..] => (*m, *v),
        _ => return Err(bad("too short")),
    };
    if magic != FULL_STATE_MAGIC || !(1..=4).contains(&version) {
        return Err(bad("magic or version"));
    }
    let mut r = Rd { b: buf, at: 2 };
    let mut st = IndexDb {
        msgs: r.uvarint()?,
        bytes: r.uvarint()?,
        first_seq: r.uvarint()?,
        ..Default::default()
    };
    let base = r.varint()?;
    st.first_ts = base;
    st.last_seq = r.uvarint()?;
    st.last_ts = r.varint()?;
    let nsubj = r.uvarint()?;
    for _ in 0..nsubj {
        let l = r.uvarint()? as usize;
        if l > 0 {
            if r.at.checked_add(l).is_none_or(|e| e > buf.len()) {
                return Err(bad("subject length"));
            }
            r.at += l;
            let total = r.uvarint()?;
            r.uvarint()?;
            if total > 1 || version >= 4 {
                r.uvarint()?;
            }
        }
    }
    let nblocks = r.uvarint()?;
    for _ in 0..nblocks {
        let index = r.uvarint()? as u32;
        let _bytes = r.uvarint()?;
        let first_seq = r.uvarint()?;
        let _fts = r.varint()?;
        let last_seq = r.uvarint()?;
        let _lts = r.varint()?;
        let ndel = r.uvarint()?;
        if version >= 2 {
            r.uvarint()?;
        }
        if version >= 3 {
            r.uvarint()?;
        }
        let mut deleted = Vec::new();
        if ndel > 0 {
            let rest = buf.get(r.at..).ok_or_else(|| bad("dmap"))?;
            let (set, n) = decode_seqset(rest)?;
            deleted = set;
            r.at += n;
        }
        st.blocks.push(BlockState {
            index,
            first_seq,
            last_seq,
            deleted,
        });
    }
    st.last_block = r.uvarint()? as u32;
    let chk = buf.get(r.at..r.at + 8).ok_or_else(|| bad("no last checksum"))?;
    st.last_checksum.copy_from_slice(chk);
    Ok(st)
}

/// Decode an AVL sequence set (versions 1 and 2) into ascending sequences; returns them
/// and the bytes consumed.
pub fn decode_seqset(buf: &[u8]) -> Result<(Vec<u64>, usize)> {
    let le32 = |at: usize| -> Result<u32> {
        let mut a = [0u8; 4];
        a.copy_from_slice(buf.get(at..at + 4).ok_or_else(|| bad("seqset"))?);
        Ok(u32::from_le_bytes(a))
    };
    let le64 = |at: usize| -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(buf.get(at..at + 8).ok_or_else(|| bad("seqset"))?);
        Ok(u64::from_le_bytes(a))
    };
    let (magic, version) = match buf {
        [m, v, ..] => (*m, *v),
        _ => return Err(bad("seqset too short")),
    };
    if magic != SEQSET_MAGIC {
        return Err(bad("seqset magic"));
    }
    let buckets: usize = match version {
        1 => 64,
        2 => 32,
        _ => return Err(bad("seqset version")),
    };
    let nn = le32(2)? as usize;
    let size = le32(6)? as usize;
    let node_len = (buckets + 1) * 8 + 2;
    let need = nn
        .checked_mul(node_len)
        .and_then(|x| x.checked_add(10))
        .ok_or_else(|| bad("seqset size"))?;
    if buf.len() < need {
        return Err(bad("seqset truncated"));
    }
    let per_node = (buckets * 64) as u64;
    let mut out = Vec::with_capacity(size.min(nn * buckets * 64));
    let mut at = 10;
    for _ in 0..nn {
        let base = le64(at)?;
        at += 8;
        for b in 0..buckets {
            let mut w = le64(at)?;
            at += 8;
            while w != 0 {
                let bit = u64::from(w.trailing_zeros());
                out.push(base + b as u64 * 64 + bit);
                w &= w - 1;
            }
        }
        at += 2;
        let _ = per_node;
    }
    out.sort_unstable();
    out.dedup();
    if out.len() != size {
        return Err(bad("seqset count mismatch"));
    }
    Ok((out, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seqset_v2() {
        // One node at base 0 with sequences 3 and 70.
        let mut b = vec![SEQSET_MAGIC, 2];
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        for i in 0..32 {
            let w: u64 = match i {
                0 => 1 << 3,
                1 => 1 << 6,
                _ => 0,
            };
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&1u16.to_le_bytes());
        let (set, n) = decode_seqset(&b).unwrap();
        assert_eq!(set, vec![3, 70]);
        assert_eq!(n, b.len());
        // A node count that the buffer cannot hold is refused, not allocated.
        let mut huge = b.clone();
        huge[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_seqset(&huge).is_err());
    }
}
