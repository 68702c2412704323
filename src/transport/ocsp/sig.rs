//! Signature checks of OCSP responses and of the responder certificates in them: the
//! signature algorithm named by an `AlgorithmIdentifier`, checked with ring against a
//! `SubjectPublicKeyInfo`. The algorithms are those Go's `x509` verifies (RSA PKCS #1 v1.5
//! and PSS, ECDSA on P-256 and P-384, Ed25519); the failure texts are Go's.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use crate::transport::tls::der::{self, Reader};
use ring::signature::{self, UnparsedPublicKey, VerificationAlgorithm};

/// A signature that does not verify (Go's text for it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SigError(pub String);

// Signature algorithms (OID contents).
const RSA_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05];
const RSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b];
const RSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c];
const RSA_SHA512: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d];
const RSA_PSS: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a];
const ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const ECDSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
const ED25519: &[u8] = &[0x2b, 0x65, 0x70];
// Key types and curves.
const KEY_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const KEY_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const CURVE_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const CURVE_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
// Hashes named in RSA-PSS parameters.
const SHA256: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01];
const SHA384: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02];
const SHA512: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03];

#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Rsa,
    P256,
    P384,
    Ed25519,
    Other,
}

impl KeyKind {
    fn go_type(self) -> &'static str {
        match self {
            KeyKind::Rsa => "*rsa.PublicKey",
            KeyKind::P256 | KeyKind::P384 => "*ecdsa.PublicKey",
            KeyKind::Ed25519 => "ed25519.PublicKey",
            KeyKind::Other => "<nil>",
        }
    }
}

/// The key type and the key bits of a `SubjectPublicKeyInfo`.
fn public_key(spki: &[u8]) -> Result<(KeyKind, &[u8]), SigError> {
    let bad = || SigError("x509: cannot parse public key".into());
    let seq = Reader::new(spki).expect(der::SEQUENCE).map_err(|_| bad())?;
    let mut r = seq.reader();
    let alg = r.expect(der::SEQUENCE).map_err(|_| bad())?;
    let bits = r.expect(der::BIT_STRING).map_err(|_| bad())?;
    let key = bits.content.get(1..).ok_or_else(bad)?;
    let mut a = alg.reader();
    let oid = a.expect(der::OID).map_err(|_| bad())?;
    let kind = match oid.content {
        KEY_RSA => KeyKind::Rsa,
        ED25519 => KeyKind::Ed25519,
        KEY_EC => match a.optional(der::OID).ok().flatten().map(|t| t.content) {
            Some(CURVE_P256) => KeyKind::P256,
            Some(CURVE_P384) => KeyKind::P384,
            _ => KeyKind::Other,
        },
        _ => KeyKind::Other,
    };
    Ok((kind, key))
}

/// The hash an RSA-PSS `AlgorithmIdentifier`'s parameters name (SHA-1 when absent).
fn pss_hash(params: &mut Reader<'_>) -> Option<&'static [u8]> {
    let seq = params.optional(der::SEQUENCE).ok()??;
    let mut p = seq.reader();
    // [0] hashAlgorithm
    let h = p.optional(0xa0).ok()??;
    let alg = h.reader().expect(der::SEQUENCE).ok()?;
    let oid = alg.reader().expect(der::OID).ok()?;
    [SHA256, SHA384, SHA512].into_iter().find(|s| *s == oid.content)
}

/// Check `sig` over `msg` with the key of `spki`, for the algorithm `alg` (an
/// `AlgorithmIdentifier`'s DER).
pub fn verify(spki: &[u8], alg: &[u8], msg: &[u8], sig: &[u8]) -> Result<(), SigError> {
    let unimplemented = || SigError("x509: cannot verify signature: algorithm unimplemented".into());
    let seq = Reader::new(alg).expect(der::SEQUENCE).map_err(|_| unimplemented())?;
    let mut a = seq.reader();
    let oid = a.expect(der::OID).map_err(|_| unimplemented())?;
    let (kind, key) = public_key(spki)?;
    let mismatch = |want: &str| {
        SigError(format!(
            "x509: signature algorithm specifies an {want} public key, but have public key of type {}",
            kind.go_type()
        ))
    };
    let (algorithm, failure): (&'static dyn VerificationAlgorithm, &str) = match oid.content {
        RSA_SHA1 | RSA_SHA256 | RSA_SHA384 | RSA_SHA512 | RSA_PSS => {
            if kind != KeyKind::Rsa {
                return Err(mismatch("RSA"));
            }
            let alg: &'static dyn VerificationAlgorithm = match oid.content {
                RSA_SHA1 => &signature::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY,
                RSA_SHA256 => &signature::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY,
                RSA_SHA384 => &signature::RSA_PKCS1_2048_8192_SHA384,
                RSA_SHA512 => &signature::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY,
                _ => match pss_hash(&mut a) {
                    Some(SHA256) => &signature::RSA_PSS_2048_8192_SHA256,
                    Some(SHA384) => &signature::RSA_PSS_2048_8192_SHA384,
                    Some(SHA512) => &signature::RSA_PSS_2048_8192_SHA512,
                    _ => return Err(unimplemented()),
                },
            };
            (alg, "crypto/rsa: verification error")
        }
        ECDSA_SHA256 | ECDSA_SHA384 => {
            let sha384 = oid.content == ECDSA_SHA384;
            let alg: &'static dyn VerificationAlgorithm = match (kind, sha384) {
                (KeyKind::P256, false) => &signature::ECDSA_P256_SHA256_ASN1,
                (KeyKind::P256, true) => &signature::ECDSA_P256_SHA384_ASN1,
                (KeyKind::P384, false) => &signature::ECDSA_P384_SHA256_ASN1,
                (KeyKind::P384, true) => &signature::ECDSA_P384_SHA384_ASN1,
                _ => return Err(mismatch("ECDSA")),
            };
            (alg, "x509: ECDSA verification failure")
        }
        ED25519 => {
            if kind != KeyKind::Ed25519 {
                return Err(mismatch("Ed25519"));
            }
            (&signature::ED25519, "x509: Ed25519 verification failure")
        }
        _ => return Err(unimplemented()),
    };
    UnparsedPublicKey::new(algorithm, key)
        .verify(msg, sig)
        .map_err(|_| SigError(failure.into()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::transport::tls::x509::Certificate;

    #[test]
    fn checks_a_certificate_signature_and_rejects_a_wrong_key() {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["x".into()])
            .unwrap()
            .signed_by(&leaf_key, &ca, &ca_key)
            .unwrap();
        let ca = Certificate::parse(ca.der()).unwrap();
        assert!(ca.is_ca);
        let leaf = Certificate::parse(leaf.der()).unwrap();
        assert!(!leaf.is_ca);
        verify(&ca.spki, &leaf.sig_alg, &leaf.tbs, &leaf.signature).unwrap();
        // The leaf's own key did not sign it.
        assert_eq!(
            verify(&leaf.spki, &leaf.sig_alg, &leaf.tbs, &leaf.signature)
                .unwrap_err()
                .0,
            "x509: ECDSA verification failure"
        );
        let mut tampered = leaf.tbs.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(verify(&ca.spki, &leaf.sig_alg, &tampered, &leaf.signature).is_err());
        // Garbage in every position is an error, never a panic.
        assert!(verify(b"", &leaf.sig_alg, &leaf.tbs, &leaf.signature).is_err());
        assert!(verify(&ca.spki, b"\x30\x00", &leaf.tbs, &leaf.signature).is_err());
        assert!(verify(&ca.spki, &leaf.sig_alg, &leaf.tbs, b"").is_err());
    }

    #[test]
    fn key_and_algorithm_must_agree() {
        let ed = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["x".into()])
            .unwrap()
            .self_signed(&ed)
            .unwrap();
        let c = Certificate::parse(cert.der()).unwrap();
        verify(&c.spki, &c.sig_alg, &c.tbs, &c.signature).unwrap();
        let ecdsa_alg = der::encode(der::SEQUENCE, &der::encode(der::OID, ECDSA_SHA256));
        assert_eq!(
            verify(&c.spki, &ecdsa_alg, &c.tbs, &c.signature).unwrap_err().0,
            "x509: signature algorithm specifies an ECDSA public key, but have public key of type ed25519.PublicKey"
        );
    }
}
