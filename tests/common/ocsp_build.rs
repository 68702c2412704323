//! A small OCSP response builder for tests (the unit tests of `transport::ocsp` include
//! this file too): DER written by hand so tests can also make responses that are wrong
//! on purpose (expired, future-dated, signed by the wrong key, truncated), signed with
//! ring's ECDSA P-256 from a PKCS #8 key (rcgen's `KeyPair::serialize_der`).

#![allow(dead_code)]

use std::time::{SystemTime, UNIX_EPOCH};

/// One certificate's status in a response.
#[derive(Clone, Debug)]
pub struct Single {
    /// The serial number's content octets.
    pub serial: Vec<u8>,
    /// 0 good, 1 revoked, 2 unknown.
    pub status: u8,
    pub this_update: SystemTime,
    pub next_update: Option<SystemTime>,
}

/// Who signs, and what identifies the issuer in the `CertID`.
pub struct Signer<'a> {
    /// The issuer's subject `Name` DER and public key bits (for the `CertID` hashes).
    pub issuer_subject: &'a [u8],
    pub issuer_key: &'a [u8],
    /// The signing key (PKCS #8, ECDSA P-256).
    pub key_pkcs8: &'a [u8],
    /// A responder certificate to include (`certs`), if any.
    pub cert: Option<&'a [u8]>,
}

pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else if n < 0x100 {
        out.extend([0x81, n as u8]);
    } else {
        out.extend([0x82, (n >> 8) as u8, n as u8]);
    }
    out.extend_from_slice(content);
    out
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// `YYYYMMDDHHMMSSZ` (GeneralizedTime).
pub fn generalized_time(t: SystemTime) -> Vec<u8> {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let text = format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    );
    tlv(0x18, text.as_bytes())
}

fn sha1(b: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, b)
        .as_ref()
        .to_vec()
}

/// The DER of a successful basic OCSP response with `singles`, signed by `signer`.
pub fn build(signer: &Signer<'_>, singles: &[Single]) -> Vec<u8> {
    let mut responses = Vec::new();
    for s in singles {
        let cert_id = tlv(
            0x30,
            &cat(&[
                tlv(
                    0x30,
                    &cat(&[tlv(0x06, &[0x2b, 0x0e, 0x03, 0x02, 0x1a]), tlv(0x05, &[])]),
                ),
                tlv(0x04, &sha1(signer.issuer_subject)),
                tlv(0x04, &sha1(signer.issuer_key)),
                tlv(0x02, &s.serial),
            ]),
        );
        let status = match s.status {
            0 => tlv(0x80, &[]),
            1 => tlv(0xa1, &generalized_time(s.this_update)),
            _ => tlv(0x82, &[]),
        };
        let mut single = cat(&[cert_id, status, generalized_time(s.this_update)]);
        if let Some(n) = s.next_update {
            single.extend(tlv(0xa0, &generalized_time(n)));
        }
        responses.extend(tlv(0x30, &single));
    }
    let key_hash = tlv(0x04, &sha1(signer.issuer_key));
    let tbs = tlv(
        0x30,
        &cat(&[
            tlv(0xa2, &key_hash),
            generalized_time(SystemTime::now()),
            tlv(0x30, &responses),
        ]),
    );
    let rng = ring::rand::SystemRandom::new();
    let key = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
        signer.key_pkcs8,
        &rng,
    )
    .expect("ECDSA P-256 PKCS #8 key");
    let sig = key.sign(&rng, &tbs).expect("signing");
    let mut bits = vec![0u8];
    bits.extend_from_slice(sig.as_ref());
    let alg = tlv(0x30, &tlv(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]));
    let mut basic = cat(&[tbs, alg, tlv(0x03, &bits)]);
    if let Some(c) = signer.cert {
        basic.extend(tlv(0xa0, &tlv(0x30, c)));
    }
    let basic = tlv(0x30, &basic);
    let bytes = tlv(
        0x30,
        &cat(&[
            tlv(0x06, &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x01]),
            tlv(0x04, &basic),
        ]),
    );
    tlv(0x30, &cat(&[tlv(0x0a, &[0]), tlv(0xa0, &bytes)]))
}

/// An unsuccessful response (`status`: 1 malformed, 2 internal error, 3 try later, 5
/// signature required, 6 unauthorized).
pub fn error_response(status: u8) -> Vec<u8> {
    tlv(0x30, &tlv(0x0a, &[status]))
}
