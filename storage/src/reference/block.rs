//! A reference message block file (`msgs/<n>.blk`) as it lies on disk, turned into its
//! plain records: first decrypted (when the stream is encrypted: the whole file XORed with
//! the block's stream cipher, keyed by `<n>.key`), then, when it starts with the
//! compression header `'c' 'm' 'p' <algorithm> <uvarint original size>`, the s2 stream
//! that follows is decompressed, and the last 8 bytes of the file (the last record's
//! checksum, kept uncompressed) are appended.
//!
//! Decompression is bounded by what the data really yields, never by the claimed original
//! size, and stops at [`MAX_BLOCK`].

use crate::crypto::SeedKey;
use crate::error::{Result, StoreError};

/// The compression header's magic.
pub const CMP_MAGIC: &[u8; 3] = b"cmp";
/// Algorithm byte of s2 (`S2Compression`).
pub const ALG_S2: u8 = 1;
/// Largest decompressed block accepted (the reference's blocks are at most 8 MiB, plus a
/// record that did not fit; records are at most 32 MiB).
pub const MAX_BLOCK: usize = 64 * 1024 * 1024;
/// Bytes of the trailing checksum kept outside the compressed stream.
const CHECKSUM: usize = 8;

fn corrupt(index: u32, why: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("reference block {index}.blk: {why}"))
}

/// Go's `binary.Uvarint`: the value and its length, `None` when incomplete or overflowing.
pub fn uvarint(b: &[u8]) -> Option<(u64, usize)> {
    let mut x = 0u64;
    let mut s = 0u32;
    for (i, &c) in b.iter().enumerate().take(10) {
        if c < 0x80 {
            if i == 9 && c > 1 {
                return None;
            }
            return Some((x | (u64::from(c) << s), i + 1));
        }
        x |= u64::from(c & 0x7f) << s;
        s += 7;
    }
    None
}

/// The compression header at the start of `buf`: (algorithm, claimed size, header length),
/// or `None` when there is none (a plain block).
pub fn cmp_header(buf: &[u8]) -> Option<(u8, u64, usize)> {
    if buf.len() < 5 || buf.get(..3) != Some(&CMP_MAGIC[..]) {
        return None;
    }
    let alg = *buf.get(3)?;
    let (size, n) = uvarint(buf.get(4..)?)?;
    Some((alg, size, 4 + n))
}

/// Decompress a block body if it carries the compression header.
pub fn decompress(index: u32, buf: Vec<u8>) -> Result<Vec<u8>> {
    if buf.len() >= 5 && buf.get(..3) == Some(&CMP_MAGIC[..]) {
        let Some((alg, _claimed, hl)) = cmp_header(&buf) else {
            return Err(corrupt(index, "compression metadata incomplete"));
        };
        let rest = buf.get(hl..).unwrap_or_default();
        match alg {
            0 => return Ok(rest.to_vec()),
            ALG_S2 => {}
            a => return Err(corrupt(index, format!("unknown compression algorithm {a}"))),
        }
        if rest.len() < CHECKSUM {
            return Err(corrupt(index, "compressed buffer is too short"));
        }
        let (body, sum) = rest.split_at(rest.len() - CHECKSUM);
        let mut out =
            super::s2::decode_all(body, MAX_BLOCK).map_err(|e| corrupt(index, format!("decompression: {e}")))?;
        out.extend_from_slice(sum);
        return Ok(out);
    }
    Ok(buf)
}

/// Compress a plain block as the reference does (`cmp` header, s2 stream of all but the
/// last 8 bytes, then those 8 bytes).
pub fn compress(plain: &[u8]) -> Result<Vec<u8>> {
    use std::io::Write;
    if plain.len() < CHECKSUM {
        return Err(StoreError::Corrupt("uncompressed buffer is too short".to_string()));
    }
    let (body, sum) = plain.split_at(plain.len() - CHECKSUM);
    let mut out = vec![b'c', b'm', b'p', ALG_S2];
    let mut v = plain.len() as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    {
        let mut w = minlz::Writer::new(&mut out);
        w.write_all(body)?;
        w.flush()?;
    }
    out.extend_from_slice(sum);
    Ok(out)
}

/// The plain records of block `index` from its file bytes (`key`: the block's opened
/// `<n>.key` when the stream is encrypted).
pub fn plain_block(index: u32, mut raw: Vec<u8>, key: Option<&SeedKey>) -> Result<Vec<u8>> {
    if let Some(k) = key {
        k.xor_block(&mut raw)?;
    }
    decompress(index, raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_round_trip_and_damage() {
        let mut plain = Vec::new();
        for i in 0..200u32 {
            plain.extend_from_slice(format!("record {i} with some repeated text ").as_bytes());
        }
        let c = compress(&plain).unwrap();
        assert!(c.len() < plain.len());
        assert_eq!(
            cmp_header(&c).map(|(a, s, _)| (a, s)),
            Some((ALG_S2, plain.len() as u64))
        );
        assert_eq!(decompress(1, c.clone()).unwrap(), plain);
        // Plain blocks pass through.
        assert_eq!(decompress(1, plain.clone()).unwrap(), plain);
        // Damage: errors, never a panic.
        for cut in [6, 20, c.len() - 9] {
            assert!(decompress(1, c[..cut].to_vec()).is_err(), "cut at {cut}");
        }
        let mut flipped = c.clone();
        flipped[12] ^= 0x40;
        let _ = decompress(1, flipped);
        let mut alg = c.clone();
        alg[3] = 9;
        assert!(decompress(1, alg).is_err());
    }

    #[test]
    fn uvarints() {
        assert_eq!(uvarint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(uvarint(&[0x80]), None);
        assert_eq!(uvarint(&[0xff; 11]), None);
    }
}
