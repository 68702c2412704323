//! The token codec: `header.payload.signature`, each chunk base64url without padding, the
//! header `{"typ":"JWT","alg":"ed25519-nkey"}`, ed25519 signatures by nkeys.
//!
//! Decoding accepts what jwt v2 accepts: `\r` and `\n` anywhere inside a chunk are skipped
//! (Go's base64 decoder does that, which is how a bare JWT file with a trailing newline
//! still decodes), `=` padding is refused, non-zero trailing bits are accepted; `typ` is
//! compared case-insensitively with `JWT`, `alg` must be `ed25519-nkey` or the v1
//! `ed25519` (case-insensitive). Which bytes the signature covers is decided by the
//! claims' version, not by the header: v1 claims sign the payload chunk, v2 claims sign
//! `header.payload`.

use nkeys::KeyPair;
use serde::{Deserialize, Serialize};

use super::error::JwtError;
use super::json::go_marshal;
use super::keys::{key_kind, KeyKind};

/// The largest token accepted, in bytes (jwt v2's `MaxTokenSize`, 1 MiB). Longer input is
/// refused before it is split or decoded.
pub const MAX_TOKEN_SIZE: usize = 1024 * 1024;

/// Header `typ` of every NATS JWT.
pub const TOKEN_TYPE_JWT: &str = "JWT";
/// Header `alg` of v1 tokens (read, never written).
pub const ALGORITHM_V1: &str = "ed25519";
/// Header `alg` of v2 tokens.
pub const ALGORITHM_V2: &str = "ed25519-nkey";

const B64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B32STD: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// The JOSE header of a token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Header {
    #[serde(rename = "typ")]
    pub typ: String,
    #[serde(rename = "alg")]
    pub alg: String,
}

impl Header {
    /// The v2 header every token this module encodes carries.
    pub fn v2() -> Header {
        Header {
            typ: TOKEN_TYPE_JWT.to_string(),
            alg: ALGORITHM_V2.to_string(),
        }
    }

    /// jwt v2's header check.
    pub fn check(&self) -> Result<(), JwtError> {
        if self.typ.to_uppercase() != TOKEN_TYPE_JWT {
            return Err(JwtError::UnsupportedType(self.typ.clone()));
        }
        let alg = self.alg.to_lowercase();
        if alg != ALGORITHM_V1 && alg != ALGORITHM_V2 {
            return Err(JwtError::UnexpectedAlgorithm(self.alg.clone()));
        }
        Ok(())
    }
}

/// A token cut into its three chunks (not yet decoded).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chunks<'a> {
    pub header: &'a str,
    pub payload: &'a str,
    pub signature: &'a str,
    /// `header.payload`: what a v2 signature covers.
    pub signed: &'a str,
}

/// Size check and split on `.`, exactly three chunks.
pub(crate) fn split(token: &str) -> Result<Chunks<'_>, JwtError> {
    if token.len() > MAX_TOKEN_SIZE {
        return Err(JwtError::TooLarge {
            size: token.len(),
            max: MAX_TOKEN_SIZE,
        });
    }
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Chunks);
    };
    let signed = token.get(..header.len() + 1 + payload.len()).ok_or(JwtError::Chunks)?;
    Ok(Chunks {
        header,
        payload,
        signature,
        signed,
    })
}

/// Decodes and checks the header chunk.
pub(crate) fn parse_header(chunk: &str) -> Result<Header, JwtError> {
    let bytes = b64_decode(chunk)?;
    let header: Option<Header> = serde_json::from_slice(&bytes)?;
    let header = header.unwrap_or_default();
    header.check()?;
    Ok(header)
}

/// Verifies an ed25519 `signature` of `data` by the public nkey `issuer`. Only the key
/// kinds Go's nkeys reads as public keys count (operator, account, user, server, cluster,
/// curve); anything else fails like a bad signature.
pub(crate) fn verify(issuer: &str, data: &[u8], signature: &[u8]) -> bool {
    let readable = matches!(
        key_kind(issuer),
        Some(
            KeyKind::Operator | KeyKind::Account | KeyKind::User | KeyKind::Server | KeyKind::Cluster | KeyKind::Curve
        )
    );
    readable && KeyPair::from_public_key(issuer).is_ok_and(|kp| kp.verify(data, signature).is_ok())
}

/// Serializes `header` and `claims`, signs `header.payload` with `signer` and returns the
/// token.
pub(crate) fn sign_token<T: Serialize>(header: &Header, claims: &T, signer: &KeyPair) -> Result<String, JwtError> {
    let mut token = b64_encode(&go_marshal(header)?);
    token.push('.');
    token.push_str(&b64_encode(&go_marshal(claims)?));
    let sig = signer.sign(token.as_bytes())?;
    token.push('.');
    token.push_str(&b64_encode(&sig));
    Ok(token)
}

/// base64url without padding.
pub fn b64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk.first().copied(), chunk.get(1).copied(), chunk.get(2).copied()];
        let n =
            (u32::from(b[0].unwrap_or(0)) << 16) | (u32::from(b[1].unwrap_or(0)) << 8) | u32::from(b[2].unwrap_or(0));
        let chars = 1 + chunk.len();
        for i in 0..chars {
            let idx = ((n >> (18 - 6 * i)) & 0x3f) as usize;
            out.push(char::from(B64URL.get(idx).copied().unwrap_or(b'A')));
        }
    }
    out
}

fn b64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    }
}

/// base64url without padding, decoded like Go's `base64.RawURLEncoding.DecodeString`:
/// `\r`/`\n` skipped, `=` and other characters refused, a lone trailing character refused.
pub fn b64_decode(s: &str) -> Result<Vec<u8>, JwtError> {
    let src = s.as_bytes();
    let mut out = Vec::with_capacity(src.len() / 4 * 3 + 3);
    let mut acc: u32 = 0;
    let mut held = 0usize;
    for (i, &c) in src.iter().enumerate() {
        if c == b'\r' || c == b'\n' {
            continue;
        }
        let v = b64_value(c).ok_or(JwtError::Base64 { offset: i })?;
        acc = (acc << 6) | u32::from(v);
        held += 1;
        if held == 4 {
            out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]);
            acc = 0;
            held = 0;
        }
    }
    match held {
        0 => {}
        1 => {
            return Err(JwtError::Base64 {
                offset: src.len().saturating_sub(1),
            })
        }
        2 => out.push((acc >> 4) as u8),
        _ => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
    }
    Ok(out)
}

/// RFC 4648 base32 (standard alphabet), with or without `=` padding.
pub(crate) fn b32_encode(data: &[u8], pad: bool) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(5) * 8);
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        for (d, s) in buf.iter_mut().zip(chunk) {
            *d = *s;
        }
        let n = buf.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                let idx = ((n >> (35 - 5 * i)) & 0x1f) as usize;
                out.push(char::from(B32STD.get(idx).copied().unwrap_or(b'A')));
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn base64url_round_trips_every_length() {
        let data: Vec<u8> = (0u8..=255).collect();
        for n in 0..40 {
            let enc = b64_encode(&data[..n]);
            assert!(!enc.contains('='));
            assert_eq!(b64_decode(&enc).unwrap(), &data[..n], "length {n}");
        }
        assert_eq!(b64_encode(b"\xfb\xff"), "-_8");
    }

    #[test]
    fn base64url_decoding_is_gos() {
        assert_eq!(b64_decode("eyJh\r\nIjox\nfQ").unwrap(), br#"{"a":1}"#);
        assert_eq!(b64_decode("YQ==").unwrap_err(), JwtError::Base64 { offset: 2 });
        assert_eq!(b64_decode("Y+").unwrap_err(), JwtError::Base64 { offset: 1 });
        assert_eq!(b64_decode("YWJjZ").unwrap_err(), JwtError::Base64 { offset: 4 });
        // Non-zero trailing bits are accepted, as by Go's non-strict decoder.
        assert_eq!(b64_decode("YR").unwrap(), b"a");
        assert_eq!(b64_decode("").unwrap(), b"");
    }

    #[test]
    fn base32_matches_rfc4648_vectors() {
        let cases: [(&[u8], &str, &str); 4] = [
            (b"f", "MY", "MY======"),
            (b"fo", "MZXQ", "MZXQ===="),
            (b"foob", "MZXW6YQ", "MZXW6YQ="),
            (b"fooba", "MZXW6YTB", "MZXW6YTB"),
        ];
        for (input, raw, padded) in cases {
            assert_eq!(b32_encode(input, false), raw);
            assert_eq!(b32_encode(input, true), padded);
        }
    }

    #[test]
    fn header_rules() {
        let ok = [("JWT", "ed25519-nkey"), ("jwt", "ED25519-NKEY"), ("JWT", "ed25519")];
        for (typ, alg) in ok {
            assert!(
                Header {
                    typ: typ.into(),
                    alg: alg.into()
                }
                .check()
                .is_ok(),
                "{typ} {alg}"
            );
        }
        let h = Header {
            typ: "JWS".into(),
            alg: ALGORITHM_V2.into(),
        };
        assert_eq!(h.check().unwrap_err().to_string(), r#"not supported type "JWS""#);
        let h = Header {
            typ: "JWT".into(),
            alg: "HS256".into(),
        };
        assert_eq!(h.check().unwrap_err().to_string(), r#"unexpected "HS256" algorithm"#);
        let h = Header {
            typ: "JWT".into(),
            alg: "ed25519-x".into(),
        };
        assert!(h.check().is_err());
    }

    #[test]
    fn split_rules() {
        assert_eq!(split("a.b").unwrap_err(), JwtError::Chunks);
        assert_eq!(split("a.b.c.d").unwrap_err(), JwtError::Chunks);
        let c = split("aa.bbb.c").unwrap();
        assert_eq!(
            (c.header, c.payload, c.signature, c.signed),
            ("aa", "bbb", "c", "aa.bbb")
        );
        let big = "a".repeat(MAX_TOKEN_SIZE + 1);
        assert_eq!(
            split(&big).unwrap_err(),
            JwtError::TooLarge {
                size: MAX_TOKEN_SIZE + 1,
                max: MAX_TOKEN_SIZE
            }
        );
    }
}
