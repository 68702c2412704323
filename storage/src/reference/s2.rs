//! A bounded reader of the s2 stream format (klauspost/compress/s2's framing, a superset
//! of snappy's): the reference frames compressed blocks and snapshots with it.
//!
//! Chunks are `type(1) len(3, little endian)`: `0xff` stream identifier (`S2sTwO` or
//! snappy's `sNaPpY`), `0x00` compressed data (masked CRC-32C of the uncompressed data,
//! then an s2 block), `0x01` uncompressed data (CRC, then the bytes), `0x80..=0xfe`
//! skippable (padding, index). Every chunk's claimed sizes are checked before anything
//! is allocated: a data chunk holds at most [`MAX_CHUNK`] bytes uncompressed (4 MiB, the
//! format's limit), so a hostile stream cannot make this reader allocate more than that
//! at once. Decoding the blocks is `minlz`'s (byte compatible with Go's s2).

use std::io::{self, Read};

/// Largest uncompressed size of one data chunk (the s2 stream format's maximum block).
pub const MAX_CHUNK: usize = 4 << 20;
/// Largest chunk on the wire (a 4 MiB block's worst-case encoding plus its CRC).
const MAX_WIRE: usize = MAX_CHUNK + MAX_CHUNK / 6 + 64;

fn bad(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("s2: {why}"))
}

/// The snappy framing's masked CRC-32C.
pub fn masked_crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data).rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Streaming decoder over any reader.
pub struct S2Reader<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    seen_id: bool,
}

impl<R: Read> S2Reader<R> {
    pub fn new(inner: R) -> S2Reader<R> {
        S2Reader {
            inner,
            buf: Vec::new(),
            pos: 0,
            seen_id: false,
        }
    }

    /// Read exactly `n` bytes (bounded by the caller) or fail.
    fn read_n(&mut self, n: usize) -> io::Result<Vec<u8>> {
        let mut v = Vec::new();
        (&mut self.inner).take(n as u64).read_to_end(&mut v)?;
        if v.len() != n {
            return Err(bad("truncated chunk"));
        }
        Ok(v)
    }

    /// Load the next data chunk into `buf`; false at the clean end of the stream.
    fn next_chunk(&mut self) -> io::Result<bool> {
        loop {
            let mut hdr = [0u8; 4];
            let mut got = 0;
            while got < 4 {
                let n = self.inner.read(hdr.get_mut(got..).unwrap_or_default())?;
                if n == 0 {
                    break;
                }
                got += n;
            }
            if got == 0 {
                return Ok(false);
            }
            if got < 4 {
                return Err(bad("truncated chunk header"));
            }
            let [kind, a, b, c] = hdr;
            let len = u32::from_le_bytes([a, b, c, 0]) as usize;
            if !self.seen_id && kind != 0xff {
                return Err(bad("missing stream identifier"));
            }
            match kind {
                0xff => {
                    let id = self.read_n(len.min(16))?;
                    if len != 6 || (id != b"S2sTwO" && id != b"sNaPpY") {
                        return Err(bad("invalid stream identifier"));
                    }
                    self.seen_id = true;
                }
                0x00 | 0x01 => {
                    if !(4..=MAX_WIRE).contains(&len) {
                        return Err(bad("bad data chunk length"));
                    }
                    let data = self.read_n(len)?;
                    let (crc, body) = data.split_at(4);
                    let want = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
                    let plain = if kind == 0x00 {
                        let (dlen, _) = super::block::uvarint(body).ok_or_else(|| bad("bad block length"))?;
                        if dlen > MAX_CHUNK as u64 {
                            return Err(bad("block too large"));
                        }
                        minlz::decode(body).map_err(|e| bad(&format!("corrupt block: {e}")))?
                    } else {
                        if body.len() > MAX_CHUNK {
                            return Err(bad("block too large"));
                        }
                        body.to_vec()
                    };
                    if masked_crc(&plain) != want {
                        return Err(bad("CRC mismatch"));
                    }
                    self.buf = plain;
                    self.pos = 0;
                    if !self.buf.is_empty() {
                        return Ok(true);
                    }
                }
                0x02..=0x7f => return Err(bad("unknown reserved chunk")),
                _ => {
                    // Skippable: read and drop without holding it all.
                    let n = io::copy(&mut (&mut self.inner).take(len as u64), &mut io::sink())?;
                    if n != len as u64 {
                        return Err(bad("truncated chunk"));
                    }
                }
            }
        }
    }
}

impl<R: Read> Read for S2Reader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if self.pos >= self.buf.len() && !self.next_chunk()? {
            return Ok(0);
        }
        let avail = self.buf.get(self.pos..).unwrap_or_default();
        let n = avail.len().min(out.len());
        out.get_mut(..n)
            .unwrap_or_default()
            .copy_from_slice(avail.get(..n).unwrap_or_default());
        self.pos += n;
        Ok(n)
    }
}

/// Decode a whole s2 stream held in memory, refusing more than `limit` bytes of output.
pub fn decode_all(data: &[u8], limit: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    S2Reader::new(data)
        .take((limit as u64).saturating_add(1))
        .read_to_end(&mut out)?;
    if out.len() > limit {
        return Err(bad("output too large"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn encode(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut w = minlz::Writer::new(&mut out);
            w.write_all(data).unwrap();
            w.flush().unwrap();
        }
        out
    }

    #[test]
    fn round_trip_and_damage() {
        let data: Vec<u8> = (0..300_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let enc = encode(&data);
        assert_eq!(decode_all(&enc, usize::MAX).unwrap(), data);
        assert!(decode_all(&enc, 1000).is_err());
        assert_eq!(decode_all(&[], 10).unwrap(), Vec::<u8>::new());
        for cut in [1, 3, 9, 11, 12, enc.len() / 2, enc.len() - 1] {
            assert!(decode_all(&enc[..cut], usize::MAX).is_err(), "cut at {cut}");
        }
        for at in [0, 4, 10, 14, 20, enc.len() / 3] {
            let mut f = enc.clone();
            f[at] ^= 0x10;
            assert!(decode_all(&f, usize::MAX).is_err(), "flip at {at}");
        }
        // A chunk claiming a huge block is refused before allocation.
        let mut huge = enc[..10].to_vec();
        huge.extend_from_slice(&[0x00, 0x10, 0x00, 0x00, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f]);
        huge.resize(10 + 4 + 16, 0);
        assert!(decode_all(&huge, usize::MAX).is_err());
    }
}
