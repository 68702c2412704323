//! permessage-deflate (RFC 7692) as nats-server negotiates it: no context takeover in
//! either direction, so every message is compressed and inflated on its own. Messages
//! out are raw deflate with a sync flush whose empty-block tail (`00 00 ff ff`) is
//! dropped; messages in get it back before inflating, with the output bounded.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// What the reference appends to a compressed message before inflating it (the sync
/// tail and a final empty stored block).
const TAIL: &[u8] = &[0x00, 0x00, 0xff, 0xff, 0x01, 0x00, 0x00, 0xff, 0xff];

/// Inflating a message failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InflateError {
    #[error("maximum payload exceeded")]
    TooLarge,
    #[error("{0}")]
    Corrupt(String),
}

/// Compress one message into `out` (appended), without the sync tail.
pub fn deflate(c: &mut Compress, input: &[u8], out: &mut Vec<u8>) {
    c.reset();
    let start = out.len();
    out.reserve(input.len() / 2 + 64);
    let mut consumed = 0usize;
    loop {
        let before_in = c.total_in();
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(1024));
        }
        let rest = input.get(consumed..).unwrap_or_default();
        if c.compress_vec(rest, out, FlushCompress::Sync).is_err() {
            break;
        }
        consumed += (c.total_in() - before_in) as usize;
        // Done when all input is in and the flush had room to finish.
        if consumed >= input.len() && out.capacity() - out.len() >= 64 {
            break;
        }
    }
    if out.len() >= start + 4 && out.get(out.len() - 4..) == Some(&[0x00, 0x00, 0xff, 0xff][..]) {
        out.truncate(out.len() - 4);
    }
}

/// A new compressor at the reference's level (best speed).
pub fn compressor() -> Compress {
    Compress::new(Compression::fast(), false)
}

/// A new decompressor for raw deflate.
pub fn decompressor() -> Decompress {
    Decompress::new(false)
}

/// Inflate one message (`input` without its tail) into `out`, at most `limit` bytes.
pub fn inflate(d: &mut Decompress, input: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), InflateError> {
    d.reset(false);
    let start = out.len();
    let mut parts = [input, TAIL].into_iter();
    let mut cur = parts.next().unwrap_or_default();
    loop {
        if out.len() - start > limit {
            return Err(InflateError::TooLarge);
        }
        if out.capacity() == out.len() {
            let grow = (out.len() - start).clamp(4096, 256 * 1024);
            out.reserve(grow);
        }
        let before_in = d.total_in();
        let before_out = out.len();
        let status = d
            .decompress_vec(cur, out, FlushDecompress::None)
            .map_err(|e| InflateError::Corrupt(e.to_string()))?;
        let used = (d.total_in() - before_in) as usize;
        cur = cur.get(used..).unwrap_or_default();
        if status == Status::StreamEnd {
            break;
        }
        if cur.is_empty() {
            match parts.next() {
                Some(p) => cur = p,
                None if out.len() == before_out => break,
                None => {}
            }
        } else if used == 0 && out.len() == before_out && out.capacity() > out.len() {
            return Err(InflateError::Corrupt("invalid deflate data".into()));
        }
    }
    if out.len() - start > limit {
        return Err(InflateError::TooLarge);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_without_context() {
        let mut c = compressor();
        let mut d = decompressor();
        for msg in [&b"PUB foo 5\r\nhello\r\n"[..], &vec![b'x'; 200_000], b""] {
            let mut z = Vec::new();
            deflate(&mut c, msg, &mut z);
            let mut back = Vec::new();
            inflate(&mut d, &z, 1 << 20, &mut back).unwrap();
            assert_eq!(back, msg);
        }
    }

    #[test]
    fn limits_and_garbage() {
        let mut c = compressor();
        let mut d = decompressor();
        let mut z = Vec::new();
        deflate(&mut c, &vec![0u8; 100_000], &mut z);
        let mut out = Vec::new();
        assert_eq!(inflate(&mut d, &z, 1000, &mut out), Err(InflateError::TooLarge));
        assert!(out.len() < 300_000);
        let mut out = Vec::new();
        assert!(matches!(
            inflate(&mut d, &[0xff, 0xff, 0xff], 1000, &mut out),
            Err(InflateError::Corrupt(_))
        ));
    }
}
