//! Compressed trace events: a traced message's `Accept-Encoding` asks for its event in
//! gzip or snappy (any value naming `snappy` or `s2`, or `gzip`); another value gets the
//! event as is, marked `Content-Encoding: identity` (nats-server's rules).
//!
//! Snappy is the framing format (`sNaPpY` stream) that nats-server writes (S2 in snappy
//! compatible mode); rnats writes it with uncompressed chunks, which every framing reader
//! accepts: events are small, and the bytes need not match, only what they decode to.

use std::io::Write;

/// How a trace event is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Encoding {
    /// As is, no `Content-Encoding` header.
    #[default]
    Plain,
    Gzip,
    Snappy,
    /// Asked for something else: as is, with `Content-Encoding: identity`.
    Identity,
}

impl Encoding {
    /// The encoding an `Accept-Encoding` value asks for.
    pub fn from_accept(v: &str) -> Encoding {
        if v.is_empty() {
            return Encoding::Plain;
        }
        let v = v.to_ascii_lowercase();
        if v.contains("snappy") || v.contains("s2") {
            Encoding::Snappy
        } else if v.contains("gzip") {
            Encoding::Gzip
        } else {
            Encoding::Identity
        }
    }

    /// The `Content-Encoding` value, if the event carries one.
    pub fn header_value(self) -> Option<&'static str> {
        match self {
            Encoding::Plain => None,
            Encoding::Gzip => Some("gzip"),
            Encoding::Snappy => Some("snappy"),
            Encoding::Identity => Some("identity"),
        }
    }

    /// The event's bytes in this encoding.
    pub fn encode(self, data: Vec<u8>) -> Vec<u8> {
        match self {
            Encoding::Plain | Encoding::Identity => data,
            Encoding::Gzip => gzip(&data),
            Encoding::Snappy => snappy_frames(&data),
        }
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

/// The largest chunk of the framing format.
const MAX_CHUNK: usize = 65_536;

/// A snappy framing stream of uncompressed chunks.
pub fn snappy_frames(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 10 + 8 * (data.len() / MAX_CHUNK + 1));
    out.extend_from_slice(b"\xff\x06\x00\x00sNaPpY");
    for chunk in data.chunks(MAX_CHUNK) {
        let len = (chunk.len() + 4) as u32;
        out.push(0x01);
        out.extend_from_slice(&len.to_le_bytes()[..3]);
        out.extend_from_slice(&masked_crc(chunk).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// CRC-32C of `data`, masked as the framing format stores it.
fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c(data);
    (crc.rotate_right(15)).wrapping_add(0xa282_ead8)
}

const CRC32C_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0x82F6_3B78 } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32C (Castagnoli).
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        let idx = ((crc ^ u32::from(b)) & 0xff) as usize;
        crc = CRC32C_TABLE.get(idx).copied().unwrap_or(0) ^ (crc >> 8);
    }
    !crc
}
