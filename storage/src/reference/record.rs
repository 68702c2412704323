//! The reference's message record:
//! `total_len(4) seq(8) ts(8) subj_len(2) subj [hdr_len(4) hdr] msg hash(8)`, little endian,
//! bit 31 of `total_len` set when headers are present, bit 63 of `seq` for an erased or
//! skipped sequence, bit 62 for a delete tombstone. The hash is HighwayHash-64 keyed by the
//! block (see [`super::block_seed`]) over `seq ts subj hdr msg`.

use super::hash64;

pub const HBIT: u32 = 1 << 31;
pub const EBIT: u64 = 1 << 63;
pub const TBIT: u64 = 1 << 62;
pub const MSG_HDR: usize = 22;
pub const HASH_LEN: usize = 8;
/// Record length of a record with no subject, headers or payload.
pub const EMPTY_RECORD: usize = MSG_HDR + HASH_LEN;
/// Lengths above this are corrupt (the reference's `rlBadThresh`).
pub const RL_BAD_THRESH: u32 = 32 * 1024 * 1024;

/// One decoded reference record.
#[derive(Debug, PartialEq, Eq)]
pub enum RefRecord<'a> {
    Msg {
        seq: u64,
        ts: i64,
        subject: &'a [u8],
        headers: &'a [u8],
        payload: &'a [u8],
    },
    /// A sequence taken without a message, or a message erased in place.
    Erased { seq: u64, ts: i64 },
    /// A delete of `seq` (which lives in an earlier block).
    Tombstone { seq: u64, ts: i64 },
}

/// Why a record could not be decoded.
#[derive(Debug, PartialEq, Eq)]
pub enum RefDecodeError {
    /// The record runs past the end of the data.
    Truncated,
    /// Lengths that cannot be.
    Malformed,
    /// The checksum does not match.
    Checksum,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let mut a = [0u8; 4];
    a.copy_from_slice(b.get(at..at + 4)?);
    Some(u32::from_le_bytes(a))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let mut a = [0u8; 8];
    a.copy_from_slice(b.get(at..at + 8)?);
    Some(u64::from_le_bytes(a))
}

/// Append one record to `out`. `seq` may carry [`EBIT`] or [`TBIT`].
pub fn encode(out: &mut Vec<u8>, seed: &[u8], seq: u64, ts: i64, subject: &[u8], headers: &[u8], payload: &[u8]) {
    let has_hdr = !headers.is_empty();
    let rl = MSG_HDR + subject.len() + if has_hdr { 4 + headers.len() } else { 0 } + payload.len() + HASH_LEN;
    let mut l = rl as u32;
    if has_hdr {
        l |= HBIT;
    }
    let start = out.len();
    out.extend_from_slice(&l.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&ts.to_le_bytes());
    out.extend_from_slice(&(subject.len() as u16).to_le_bytes());
    out.extend_from_slice(subject);
    if has_hdr {
        out.extend_from_slice(&(headers.len() as u32).to_le_bytes());
        out.extend_from_slice(headers);
    }
    out.extend_from_slice(payload);
    let mut seqts = [0u8; 16];
    if let Some(h) = out.get(start + 4..start + 20) {
        seqts.copy_from_slice(h);
    }
    let sum = hash64(seed, &[&seqts, subject, headers, payload]);
    out.extend_from_slice(&sum);
}

/// Decode the record at the start of `buf`; returns it and its length.
pub fn decode<'a>(buf: &'a [u8], seed: &[u8]) -> Result<(RefRecord<'a>, usize), RefDecodeError> {
    if buf.len() < MSG_HDR {
        return Err(RefDecodeError::Truncated);
    }
    let raw = u32_at(buf, 0).ok_or(RefDecodeError::Truncated)?;
    let has_hdr = raw & HBIT != 0;
    let rl = (raw & !HBIT) as usize;
    let slen = buf.get(20..22).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize);
    if rl < EMPTY_RECORD || rl as u32 > RL_BAD_THRESH {
        return Err(RefDecodeError::Malformed);
    }
    if rl > buf.len() {
        return Err(RefDecodeError::Truncated);
    }
    let dlen = rl - MSG_HDR;
    let shlen = slen + if has_hdr { 4 } else { 0 };
    if shlen > dlen - HASH_LEN {
        return Err(RefDecodeError::Malformed);
    }
    let data = buf.get(MSG_HDR..rl).ok_or(RefDecodeError::Truncated)?;
    let subject = data.get(..slen).ok_or(RefDecodeError::Malformed)?;
    let (headers, payload) = if has_hdr {
        let hl = u32_at(data, slen).ok_or(RefDecodeError::Malformed)? as usize;
        let body = data.get(slen + 4..dlen - HASH_LEN).ok_or(RefDecodeError::Malformed)?;
        if hl > body.len() {
            return Err(RefDecodeError::Malformed);
        }
        body.split_at(hl)
    } else {
        (
            &[][..],
            data.get(slen..dlen - HASH_LEN).ok_or(RefDecodeError::Malformed)?,
        )
    };
    let seqts = buf.get(4..20).ok_or(RefDecodeError::Truncated)?;
    let want = data.get(dlen - HASH_LEN..dlen).ok_or(RefDecodeError::Truncated)?;
    if hash64(seed, &[seqts, subject, headers, payload]) != want {
        return Err(RefDecodeError::Checksum);
    }
    let seq = u64_at(buf, 4).ok_or(RefDecodeError::Truncated)?;
    let ts = u64_at(buf, 12).ok_or(RefDecodeError::Truncated)? as i64;
    let rec = if seq & TBIT != 0 {
        RefRecord::Tombstone {
            seq: seq & !TBIT & !EBIT,
            ts,
        }
    } else if seq & EBIT != 0 || seq == 0 {
        RefRecord::Erased { seq: seq & !EBIT, ts }
    } else {
        RefRecord::Msg {
            seq,
            ts,
            subject,
            headers,
            payload,
        }
    };
    Ok((rec, rl))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let seed = b"S-1";
        let mut b = Vec::new();
        encode(&mut b, seed, 7, 99, b"foo.bar", b"NATS/1.0\r\nA: b\r\n\r\n", b"hello");
        encode(&mut b, seed, 8, 100, b"foo", b"", b"x");
        encode(&mut b, seed, 3 | TBIT, 101, b"", b"", b"");
        let (r, n) = decode(&b, seed).unwrap();
        assert!(matches!(
            r,
            RefRecord::Msg {
                seq: 7,
                ts: 99,
                subject: b"foo.bar",
                payload: b"hello",
                ..
            }
        ));
        let (r2, n2) = decode(&b[n..], seed).unwrap();
        assert!(matches!(
            r2,
            RefRecord::Msg {
                seq: 8,
                headers: b"",
                ..
            }
        ));
        assert_eq!(
            decode(&b[n + n2..], seed).unwrap().0,
            RefRecord::Tombstone { seq: 3, ts: 101 }
        );
        assert_eq!(decode(&b[..n - 1], seed).unwrap_err(), RefDecodeError::Truncated);
        let mut bad = b.clone();
        bad[30] ^= 1;
        assert_eq!(decode(&bad, seed).unwrap_err(), RefDecodeError::Checksum);
        assert_eq!(decode(&b, b"other").unwrap_err(), RefDecodeError::Checksum);
        assert_eq!(decode(&[0u8; 40], seed).unwrap_err(), RefDecodeError::Malformed);
    }
}
