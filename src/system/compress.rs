//! Compressed `$SYS` responses: a request with an `Accept-Encoding` header gets its
//! answer compressed as nats-server does it (`snappy`/`s2` first, then `gzip`; any other
//! value is answered uncompressed with `Content-Encoding: identity`). Snappy answers use
//! the snappy framing format with uncompressed chunks (valid for every framed-snappy
//! reader; nats-server's s2 writer may also compress chunks).

use std::io::Write;

/// What a response is encoded with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Encoding {
    #[default]
    None,
    Gzip,
    Snappy,
    /// Asked for something unsupported: sent as is, labelled `identity`.
    Identity,
}

impl Encoding {
    /// nats-server's `getAcceptEncoding`: the value of the (exactly spelled)
    /// `Accept-Encoding` header of a request's header block.
    pub fn from_header(hdr: Option<&[u8]>) -> Encoding {
        let Some(value) = hdr.and_then(|h| header_value(h, "Accept-Encoding")) else {
            return Encoding::None;
        };
        let v = value.to_ascii_lowercase();
        if v.is_empty() {
            Encoding::None
        } else if v.contains("snappy") || v.contains("s2") {
            Encoding::Snappy
        } else if v.contains("gzip") {
            Encoding::Gzip
        } else {
            Encoding::Identity
        }
    }

    /// The `Content-Encoding` value, if one is sent.
    fn label(self) -> Option<&'static str> {
        match self {
            Encoding::None => None,
            Encoding::Gzip => Some("gzip"),
            Encoding::Snappy => Some("snappy"),
            Encoding::Identity => Some("identity"),
        }
    }

    /// The header block and body to send for `body`.
    pub fn apply(self, body: Vec<u8>) -> (Option<Vec<u8>>, Vec<u8>) {
        let Some(label) = self.label() else {
            return (None, body);
        };
        let hdr = format!("NATS/1.0\r\nContent-Encoding: {label}\r\n\r\n").into_bytes();
        let out = match self {
            Encoding::Gzip => gzip(&body),
            Encoding::Snappy => snappy_framed(&body),
            Encoding::None | Encoding::Identity => body,
        };
        (Some(hdr), out)
    }
}

/// The value of header `key` (case-sensitive, as nats-server's `getHeader`).
fn header_value<'a>(hdr: &'a [u8], key: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(hdr).ok()?;
    text.split("\r\n").skip(1).find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == key).then(|| v.trim())
    })
}

fn gzip(body: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    if enc.write_all(body).is_err() {
        return Vec::new();
    }
    enc.finish().unwrap_or_default()
}

/// CRC-32C (Castagnoli), bitwise; responses are small and rare.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc: u32 = !0;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0x82F6_3B78 & mask);
        }
    }
    !crc
}

/// The framing format's masked checksum.
fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c(data);
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// The most data one chunk may carry.
const MAX_CHUNK: usize = 65536;

fn snappy_framed(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 10 + 8 * (body.len() / MAX_CHUNK + 1));
    out.extend_from_slice(b"\xff\x06\x00\x00sNaPpY");
    for chunk in body.chunks(MAX_CHUNK) {
        let len = (chunk.len() + 4) as u32;
        out.push(0x01);
        out.extend_from_slice(&len.to_le_bytes()[..3]);
        out.extend_from_slice(&masked_crc(chunk).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn accept_encoding_is_read_like_the_reference() {
        let h = |v: &str| format!("NATS/1.0\r\nAccept-Encoding: {v}\r\n\r\n").into_bytes();
        let cases = [
            ("gzip", Encoding::Gzip),
            ("GZIP, deflate", Encoding::Gzip),
            ("snappy", Encoding::Snappy),
            ("s2", Encoding::Snappy),
            ("gzip, s2", Encoding::Snappy),
            ("br", Encoding::Identity),
        ];
        for (v, want) in cases {
            assert_eq!(Encoding::from_header(Some(&h(v))), want, "{v}");
        }
        assert_eq!(Encoding::from_header(None), Encoding::None);
        // The key is matched exactly.
        assert_eq!(
            Encoding::from_header(Some(b"NATS/1.0\r\naccept-encoding: gzip\r\n\r\n")),
            Encoding::None
        );
    }

    #[test]
    fn gzip_round_trips() {
        let (hdr, body) = Encoding::Gzip.apply(b"{\"a\":1}".to_vec());
        assert_eq!(hdr.as_deref(), Some(&b"NATS/1.0\r\nContent-Encoding: gzip\r\n\r\n"[..]));
        let mut out = String::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_string(&mut out)
            .unwrap_or_default();
        assert_eq!(out, "{\"a\":1}");
    }

    #[test]
    fn snappy_frames_match_the_format() {
        // CRC-32C check value of "123456789".
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let (hdr, body) = Encoding::Snappy.apply(b"hello".to_vec());
        assert!(hdr.is_some_and(|h| h.ends_with(b"snappy\r\n\r\n")));
        assert_eq!(&body[..10], b"\xff\x06\x00\x00sNaPpY");
        assert_eq!(body[10], 0x01);
        assert_eq!(&body[11..14], &[9, 0, 0]);
        assert_eq!(&body[14..18], &masked_crc(b"hello").to_le_bytes());
        assert_eq!(&body[18..], b"hello");
        let big = vec![b'x'; MAX_CHUNK + 10];
        let (_, body) = Encoding::Snappy.apply(big);
        assert_eq!(body.len(), 10 + 2 * 8 + MAX_CHUNK + 10);
    }

    #[test]
    fn identity_is_labelled_but_not_changed() {
        let (hdr, body) = Encoding::Identity.apply(b"x".to_vec());
        assert!(hdr.is_some_and(|h| h.ends_with(b"identity\r\n\r\n")));
        assert_eq!(body, b"x");
        assert_eq!(Encoding::None.apply(b"x".to_vec()), (None, b"x".to_vec()));
    }
}
