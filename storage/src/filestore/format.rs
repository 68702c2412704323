//! The on-disk format of rnats's file store: the block header and the framed records, as
//! pure encode/decode functions (no I/O) so the decoder can be fuzzed on its own.
//!
//! Block header (64 bytes, little endian):
//!
//! | off | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `RNATSBLK` |
//! | 8 | 2 | format version (1) |
//! | 10 | 2 | flags: bit 0 HighwayHash-64 record checksums (else CRC-32C), bit 1 s2 bodies, bit 2 sealed (encrypted) bodies, bit 3 rewritten by compaction |
//! | 12 | 4 | reserved (0) |
//! | 16 | 8 | ordinal: the block's place in the log (also its file name) |
//! | 24 | 8 | file id: unique for every block file ever written in this store |
//! | 32 | 8 | `prev_len`: the final length of block `ordinal - 1` when this block was started (0: none) |
//! | 40 | 8 | `sealed_len`: the exact length of a block rewritten whole (compaction), else 0 |
//! | 48 | 8 | creation time, Unix nanoseconds |
//! | 56 | 4 | CRC-32C of bytes 0..56 |
//! | 60 | 4 | reserved (0) |
//! | 64 | 64 | a copy of the header (a damaged first copy does not lose the block) |
//!
//! Record (starts 8-byte aligned; zero padding to the next multiple of 8 follows it):
//!
//! | off | size | field |
//! |---|---|---|
//! | 0 | 4 | `len`: the record's length without padding (header, subject, body, checksum) |
//! | 4 | 1 | kind: 1 message, 2 tombstone, 3 sequence range, 4 erased message (keeps only its sequence and time), 5 commit (its sequence field: the block's durable end, see below) |
//! | 5 | 1 | flags: bit 0 body s2-compressed, bit 1 body sealed by the block cipher, bit 2 subject and headers length sealed with the body (see below) |
//! | 6 | 2 | subject length |
//! | 8 | 8 | sequence (tombstone: the removed sequence; range: the first sequence) |
//! | 16 | 8 | timestamp, Unix nanoseconds (range: the stream's last timestamp) |
//! | 24 | 8 | TTL in seconds (range: the last sequence) |
//! | 32 | 4 | headers length (of the plain body) |
//! | 36 | 4 | stored body length |
//! | 40 | 4 | plain body length (headers + payload) |
//! | 44 | 4 | reserved (0) |
//! | 48 | .. | subject, then the stored body (headers then payload; compressed, then sealed) |
//! | len-c | c | checksum of bytes `0..len-c`, keyed by the file id: CRC-32C (c = 4) or HighwayHash-64 (c = 8) |
//!
//! With encryption at rest a message record's subject is sealed with its body: the subject
//! length and headers length fields are 0, and the stored body is the cipher's sealing of
//! `subject length (u16) ‖ headers length (u32) ‖ subject ‖ body` (flags: bits 1 and 2),
//! so nothing of a message but its sequence, time, TTL and sizes is readable without the
//! key. (Records of the first format version seal only the body: bit 1 alone.)
//!
//! A commit record says that every byte of its block before the offset in its sequence
//! field was on disk (fdatasync completed) before the commit record was written; recovery
//! uses the greatest one of the last block to tell corruption from a torn tail.
//!
//! A record is valid when its length is consistent with its fields, its kind is known and
//! its checksum matches; nothing else read from disk is trusted (lengths are checked
//! against what is there before anything is allocated).

use highway::{HighwayHash, HighwayHasher, Key};

pub const MAGIC: &[u8; 8] = b"RNATSBLK";
pub const VERSION: u16 = 1;
/// One header copy; the block holds two, and its records start at [`DATA_START`].
pub const HEADER_LEN: usize = 64;
pub const DATA_START: usize = 2 * HEADER_LEN;
pub const REC_HEADER: usize = 48;
/// Largest record accepted (a 64 MiB message plus headers and subject).
pub const MAX_RECORD: usize = 80 * 1024 * 1024;

pub const BF_HIGHWAY: u16 = 1;
pub const BF_S2: u16 = 2;
pub const BF_SEALED: u16 = 4;
pub const BF_COMPACTED: u16 = 8;

pub const RF_S2: u8 = 1;
pub const RF_SEALED: u8 = 2;
pub const RF_SUBJECT_SEALED: u8 = 4;

/// What a record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Msg = 1,
    Tomb = 2,
    Range = 3,
    Erased = 4,
    /// The block's durable end (in `seq`): everything before it was synced earlier.
    Commit = 5,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Msg),
            2 => Some(Kind::Tomb),
            3 => Some(Kind::Range),
            4 => Some(Kind::Erased),
            5 => Some(Kind::Commit),
            _ => None,
        }
    }
}

/// Record checksum algorithm (per block).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Checksum {
    #[default]
    Crc32c,
    Highway,
}

impl Checksum {
    pub fn size(self) -> usize {
        match self {
            Checksum::Crc32c => 4,
            Checksum::Highway => 8,
        }
    }

    fn compute(self, file_id: u64, data: &[u8]) -> u64 {
        match self {
            Checksum::Crc32c => u64::from(crc32c::crc32c_append(crc32c::crc32c(&file_id.to_le_bytes()), data)),
            Checksum::Highway => {
                let mut h = HighwayHasher::new(Key([file_id, 0x726e_6174_735f_626c, 0x6f63_6b5f_6869_6768, 1]));
                h.append(data);
                h.finalize64()
            }
        }
    }
}

/// A block header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    pub flags: u16,
    pub ordinal: u64,
    pub file_id: u64,
    pub prev_len: u64,
    pub sealed_len: u64,
    pub created: i64,
}

impl BlockHeader {
    pub fn checksum(&self) -> Checksum {
        if self.flags & BF_HIGHWAY != 0 {
            Checksum::Highway
        } else {
            Checksum::Crc32c
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        put(&mut b, 0, MAGIC);
        put(&mut b, 8, &VERSION.to_le_bytes());
        put(&mut b, 10, &self.flags.to_le_bytes());
        put(&mut b, 16, &self.ordinal.to_le_bytes());
        put(&mut b, 24, &self.file_id.to_le_bytes());
        put(&mut b, 32, &self.prev_len.to_le_bytes());
        put(&mut b, 40, &self.sealed_len.to_le_bytes());
        put(&mut b, 48, &self.created.to_le_bytes());
        let crc = crc32c::crc32c(b.get(..56).unwrap_or(&[]));
        put(&mut b, 56, &crc.to_le_bytes());
        b
    }

    /// Parse a header; `None` when it is not a valid rnats block header.
    pub fn decode(b: &[u8]) -> Option<BlockHeader> {
        let h = b.get(..HEADER_LEN)?;
        if h.get(..8)? != MAGIC || u16_at(h, 8)? != VERSION {
            return None;
        }
        if crc32c::crc32c(h.get(..56)?) != u32_at(h, 56)? || u32_at(h, 12)? != 0 || u32_at(h, 60)? != 0 {
            return None;
        }
        Some(BlockHeader {
            flags: u16_at(h, 10)?,
            ordinal: u64_at(h, 16)?,
            file_id: u64_at(h, 24)?,
            prev_len: u64_at(h, 32)?,
            sealed_len: u64_at(h, 40)?,
            created: u64_at(h, 48)? as i64,
        })
    }
}

/// A record, decoded (body still as stored: possibly compressed or sealed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub kind: Kind,
    pub flags: u8,
    pub seq: u64,
    pub ts: i64,
    /// TTL seconds (messages) or the last sequence (ranges).
    pub ttl: i64,
    pub hdr_len: u32,
    /// Length of the plain body (headers + payload) before compression and sealing.
    pub plain_len: u32,
    pub subject: &'a [u8],
    pub body: &'a [u8],
}

impl<'a> Record<'a> {
    /// The record left where message `seq` (stored at `ts`) was erased: no subject, and
    /// `body` (zeros, or nothing) in place of its content.
    pub fn erased(seq: u64, ts: i64, body: &'a [u8]) -> Record<'a> {
        Record {
            kind: Kind::Erased,
            flags: 0,
            seq,
            ts,
            ttl: 0,
            hdr_len: 0,
            plain_len: 0,
            subject: &[],
            body,
        }
    }
}

/// Bytes a record of these sizes takes, without padding.
pub fn record_len(subject: usize, body: usize, cs: Checksum) -> usize {
    REC_HEADER + subject + body + cs.size()
}

/// `n` rounded up to a multiple of 8.
pub fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Append a record (with its padding) to `out`.
pub fn encode_record(out: &mut Vec<u8>, r: &Record<'_>, cs: Checksum, file_id: u64) {
    let len = record_len(r.subject.len(), r.body.len(), cs);
    let start = out.len();
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.push(r.kind as u8);
    out.push(r.flags);
    out.extend_from_slice(&(r.subject.len() as u16).to_le_bytes());
    out.extend_from_slice(&r.seq.to_le_bytes());
    out.extend_from_slice(&r.ts.to_le_bytes());
    out.extend_from_slice(&r.ttl.to_le_bytes());
    out.extend_from_slice(&r.hdr_len.to_le_bytes());
    out.extend_from_slice(&(r.body.len() as u32).to_le_bytes());
    out.extend_from_slice(&r.plain_len.to_le_bytes());
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(r.subject);
    out.extend_from_slice(r.body);
    let sum = cs.compute(file_id, out.get(start..).unwrap_or(&[]));
    match cs {
        Checksum::Crc32c => out.extend_from_slice(&(sum as u32).to_le_bytes()),
        Checksum::Highway => out.extend_from_slice(&sum.to_le_bytes()),
    }
    out.resize(start + pad8(len), 0);
}

/// Why bytes are not a valid record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// Fewer bytes than the record claims (or than a record header).
    Short,
    /// The length field is zero: no record was written here.
    Zero,
    /// Inconsistent fields or a checksum mismatch.
    Invalid,
}

/// Decode the record at the start of `b`; returns it and its padded length.
pub fn decode_record(b: &[u8], cs: Checksum, file_id: u64) -> Result<(Record<'_>, usize), Bad> {
    let len = u32_at(b, 0).ok_or(Bad::Short)? as usize;
    if len == 0 {
        return Err(Bad::Zero);
    }
    if !(REC_HEADER + cs.size()..=MAX_RECORD).contains(&len) {
        return Err(Bad::Invalid);
    }
    let kind = b.get(4).copied().and_then(Kind::from_u8).ok_or(Bad::Invalid)?;
    let rec = b.get(..len).ok_or(Bad::Short)?;
    let flags = *rec.get(5).ok_or(Bad::Short)?;
    let subj_len = usize::from(u16_at(rec, 6).ok_or(Bad::Short)?);
    let hdr_len = u32_at(rec, 32).ok_or(Bad::Short)?;
    let body_len = u32_at(rec, 36).ok_or(Bad::Short)? as usize;
    if record_len(subj_len, body_len, cs) != len {
        return Err(Bad::Invalid);
    }
    let body_end = len - cs.size();
    let stored = match cs {
        Checksum::Crc32c => u64::from(u32_at(rec, body_end).ok_or(Bad::Short)?),
        Checksum::Highway => u64_at(rec, body_end).ok_or(Bad::Short)?,
    };
    if cs.compute(file_id, rec.get(..body_end).ok_or(Bad::Short)?) != stored {
        return Err(Bad::Invalid);
    }
    let subject = rec.get(REC_HEADER..REC_HEADER + subj_len).ok_or(Bad::Invalid)?;
    let body = rec.get(REC_HEADER + subj_len..body_end).ok_or(Bad::Invalid)?;
    let r = Record {
        kind,
        flags,
        seq: u64_at(rec, 8).ok_or(Bad::Short)?,
        ts: u64_at(rec, 16).ok_or(Bad::Short)? as i64,
        ttl: u64_at(rec, 24).ok_or(Bad::Short)? as i64,
        hdr_len,
        plain_len: u32_at(rec, 40).ok_or(Bad::Short)?,
        subject,
        body,
    };
    Ok((r, pad8(len)))
}

/// Is the invalid record at the start of `b` a complete record whose length field alone
/// was damaged? Its extent is derived from its other fields, and its checksum must match
/// with the derived length put back: a torn write cannot produce that (the whole record
/// reached the disk), so it is a corruption, not the end of the log.
pub fn length_field_damaged(b: &[u8], cs: Checksum, file_id: u64) -> bool {
    let Some(claimed) = u32_at(b, 0) else { return false };
    let (Some(subj), Some(body)) = (u16_at(b, 6), u32_at(b, 36)) else {
        return false;
    };
    let len = record_len(usize::from(subj), body as usize, cs);
    if len as u64 == u64::from(claimed) || len > MAX_RECORD || b.get(4).copied().and_then(Kind::from_u8).is_none() {
        return false;
    }
    let Some(rec) = b.get(..len) else { return false };
    let body_end = len - cs.size();
    let stored = match cs {
        Checksum::Crc32c => u32_at(rec, body_end).map(u64::from),
        Checksum::Highway => u64_at(rec, body_end),
    };
    let mut fixed = rec.get(..body_end).unwrap_or(&[]).to_vec();
    if let Some(f) = fixed.get_mut(..4) {
        f.copy_from_slice(&(len as u32).to_le_bytes());
    }
    stored == Some(cs.compute(file_id, &fixed))
}

/// Decompress an s2 body, refusing one that claims more than `max` bytes.
pub fn s2_decode(body: &[u8], max: usize) -> Option<Vec<u8>> {
    let (n, _) = minlz::decode_len(body).ok()?;
    if n > max {
        return None;
    }
    let mut out = vec![0u8; n];
    let got = minlz::decode_into(&mut out, body).ok()?;
    out.truncate(got);
    Some(out)
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(dst) = b.get_mut(at..at + v.len()) {
        dst.copy_from_slice(v);
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg<'a>(subject: &'a [u8], body: &'a [u8]) -> Record<'a> {
        Record {
            kind: Kind::Msg,
            flags: 0,
            seq: 42,
            ts: 1_700_000_000_000_000_000,
            ttl: 0,
            hdr_len: 0,
            plain_len: body.len() as u32,
            subject,
            body,
        }
    }

    #[test]
    fn header_round_trip_and_damage() {
        let h = BlockHeader {
            flags: BF_HIGHWAY | BF_S2,
            ordinal: 7,
            file_id: 99,
            prev_len: 1234,
            sealed_len: 0,
            created: 5,
        };
        let b = h.encode();
        assert_eq!(BlockHeader::decode(&b), Some(h));
        for i in 0..HEADER_LEN {
            let mut d = b;
            d[i] ^= 0x10;
            assert_eq!(BlockHeader::decode(&d), None, "flip at {i}");
        }
        assert_eq!(BlockHeader::decode(&b[..63]), None);
    }

    #[test]
    fn records_round_trip_and_every_flip_is_caught() {
        for cs in [Checksum::Crc32c, Checksum::Highway] {
            let mut out = Vec::new();
            encode_record(&mut out, &msg(b"orders.eu", b"hello world"), cs, 3);
            assert_eq!(out.len() % 8, 0);
            let (r, n) = decode_record(&out, cs, 3).expect("valid");
            assert_eq!(n, out.len());
            assert_eq!((r.subject, r.body, r.seq), (&b"orders.eu"[..], &b"hello world"[..], 42));
            assert_eq!(decode_record(&out, cs, 4).err(), Some(Bad::Invalid), "other file id");
            let len = record_len(9, 11, cs);
            for bit in 0..len * 8 {
                let mut d = out.clone();
                d[bit / 8] ^= 1 << (bit % 8);
                assert!(decode_record(&d, cs, 3).is_err(), "bit {bit} not detected ({cs:?})");
            }
            for cut in 0..len {
                assert!(decode_record(&out[..cut], cs, 3).is_err());
            }
        }
    }

    #[test]
    fn a_damaged_length_field_is_told_from_a_torn_record() {
        for cs in [Checksum::Crc32c, Checksum::Highway] {
            let mut out = Vec::new();
            encode_record(&mut out, &msg(b"orders.eu", b"hello world"), cs, 3);
            out.extend_from_slice(&[0u8; 64]);
            assert!(!length_field_damaged(&out, cs, 3), "an intact record");
            for bit in 0..32 {
                let mut d = out.clone();
                d[bit / 8] ^= 1 << (bit % 8);
                assert!(decode_record(&d, cs, 3).is_err());
                assert!(length_field_damaged(&d, cs, 3), "length bit {bit} ({cs:?})");
                assert!(!length_field_damaged(&d, cs, 4), "other file id");
            }
            // Torn: the record's last bytes never arrived (zeros), with or without a
            // damaged length: not a complete record.
            let len = record_len(9, 11, cs);
            for cut in REC_HEADER..len {
                let mut d = out.clone();
                d[cut..].iter_mut().for_each(|b| *b = 0);
                d[0] ^= 0x40;
                assert!(!length_field_damaged(&d, cs, 3), "cut at {cut}");
            }
        }
    }

    #[test]
    fn huge_claims_are_refused_without_allocating() {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        b[4] = 1;
        assert_eq!(decode_record(&b, Checksum::Crc32c, 0).err(), Some(Bad::Invalid));
        assert_eq!(decode_record(&[0; 16], Checksum::Crc32c, 0).err(), Some(Bad::Zero));
        let big = minlz::encode(&vec![7u8; 1 << 20]);
        assert!(s2_decode(&big, 1000).is_none());
        assert_eq!(s2_decode(&big, 1 << 20).map(|v| v.len()), Some(1 << 20));
    }
}
