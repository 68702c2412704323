#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use std::time::{Duration, SystemTime};

#[path = "../../../tests/common/ocsp_build.rs"]
mod build;

struct Pki {
    ca: Certificate,
    ca_key: rcgen::KeyPair,
    leaf: Certificate,
    other_key: rcgen::KeyPair,
    delegate: Certificate,
    delegate_key: rcgen::KeyPair,
}

fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(Vec::new()).unwrap();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name.push(rcgen::DnType::CommonName, "CA");
    let ca_cert = p.self_signed(&ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["leaf".into()])
        .unwrap()
        .signed_by(&leaf_key, &ca_cert, &ca_key)
        .unwrap();
    let delegate_key = rcgen::KeyPair::generate().unwrap();
    let mut dp = rcgen::CertificateParams::new(Vec::new()).unwrap();
    dp.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::OcspSigning];
    let delegate = dp.signed_by(&delegate_key, &ca_cert, &ca_key).unwrap();
    Pki {
        ca: Certificate::parse(ca_cert.der()).unwrap(),
        ca_key,
        leaf: Certificate::parse(leaf.der()).unwrap(),
        other_key: rcgen::KeyPair::generate().unwrap(),
        delegate: Certificate::parse(delegate.der()).unwrap(),
        delegate_key,
    }
}

fn single(p: &Pki, status: u8, this: SystemTime, next: Option<SystemTime>) -> build::Single {
    build::Single {
        serial: p.leaf.serial.clone(),
        status,
        this_update: this,
        next_update: next,
    }
}

fn signed_by(p: &Pki, key: &rcgen::KeyPair, cert: Option<&[u8]>, singles: &[build::Single]) -> Vec<u8> {
    let pkcs8 = key.serialize_der();
    build::build(
        &build::Signer {
            issuer_subject: &p.ca.raw_subject,
            issuer_key: &p.ca.public_key,
            key_pkcs8: &pkcs8,
            cert,
        },
        singles,
    )
}

#[test]
fn good_revoked_unknown_signed_by_the_issuer() {
    let p = pki();
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    for (code, want) in [
        (0, CertStatus::Good),
        (1, CertStatus::Revoked),
        (2, CertStatus::Unknown),
    ] {
        let raw = signed_by(&p, &p.ca_key, None, &[single(&p, code, now - hour, Some(now + hour))]);
        let r = Response::parse(&raw, &p.ca).unwrap();
        assert_eq!(r.status, want);
        assert!(r.is_for(&p.leaf.serial));
        assert!(r.signer.is_none());
        assert!(r.valid_delegation(&p.ca));
        r.valid_at(now).unwrap();
        assert_eq!(r.raw, raw);
    }
}

#[test]
fn delegated_responder_is_checked_against_the_issuer() {
    let p = pki();
    let now = SystemTime::now();
    let s = [single(&p, 0, now, None)];
    let raw = signed_by(&p, &p.delegate_key, Some(&p.delegate.raw), &s);
    let r = Response::parse(&raw, &p.ca).unwrap();
    assert!(r.signer.as_ref().is_some_and(|c| c.ocsp_signing()));
    assert!(r.valid_delegation(&p.ca));
    // Signed by a key other than the embedded certificate's.
    let raw = signed_by(&p, &p.other_key, Some(&p.delegate.raw), &s);
    assert_eq!(
        Response::parse(&raw, &p.ca).unwrap_err().0,
        "bad signature on embedded certificate: x509: ECDSA verification failure"
    );
    // Signed by a stranger without a certificate.
    let raw = signed_by(&p, &p.other_key, None, &s);
    assert_eq!(
        Response::parse(&raw, &p.ca).unwrap_err().0,
        "bad OCSP signature: x509: ECDSA verification failure"
    );
    // A responder certificate the issuer did not sign (the leaf, self-presented).
    let raw = signed_by(&p, &p.delegate_key, Some(&p.leaf.raw), &s);
    assert!(Response::parse(&raw, &p.ca).is_err());
}

#[test]
fn times_windows() {
    let p = pki();
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let skew = Duration::from_secs(30);
    let raw = signed_by(&p, &p.ca_key, None, &[single(&p, 0, now - 2 * hour, Some(now - hour))]);
    let r = Response::parse(&raw, &p.ca).unwrap();
    assert!(r
        .valid_at(now)
        .unwrap_err()
        .starts_with("invalid ocsp NextUpdate, is past time: "));
    assert!(r
        .current(now, skew, hour)
        .unwrap_err()
        .starts_with("OCSP response NextUpdate ["));
    let raw = signed_by(&p, &p.ca_key, None, &[single(&p, 0, now + hour, None)]);
    let r = Response::parse(&raw, &p.ca).unwrap();
    assert!(r
        .valid_at(now)
        .unwrap_err()
        .starts_with("invalid ocsp ThisUpdate, is future time: "));
    assert!(r
        .current(now, skew, hour)
        .unwrap_err()
        .starts_with("OCSP response ThisUpdate ["));
    // No NextUpdate: the TTL from ThisUpdate applies.
    let raw = signed_by(&p, &p.ca_key, None, &[single(&p, 0, now - 2 * hour, None)]);
    let r = Response::parse(&raw, &p.ca).unwrap();
    r.valid_at(now).unwrap();
    assert!(r
        .current(now, skew, hour)
        .unwrap_err()
        .starts_with("OCSP response cache expiry ["));
    r.current(now, skew, 3 * hour).unwrap();
}

#[test]
fn unsuccessful_and_malformed_responses() {
    let p = pki();
    assert_eq!(
        Response::parse(&build::error_response(6), &p.ca).unwrap_err().0,
        "ocsp: error from server: unauthorized"
    );
    assert_eq!(
        Response::parse(&build::error_response(3), &p.ca).unwrap_err().0,
        "ocsp: error from server: try later"
    );
    let now = SystemTime::now();
    let two = [single(&p, 0, now, None), single(&p, 0, now, None)];
    let raw = signed_by(&p, &p.ca_key, None, &two);
    assert_eq!(
        Response::parse(&raw, &p.ca).unwrap_err().0,
        "OCSP response contains bad number of responses"
    );
    let good = signed_by(&p, &p.ca_key, None, &[single(&p, 0, now, None)]);
    let mut trailing = good.clone();
    trailing.push(0);
    assert_eq!(
        Response::parse(&trailing, &p.ca).unwrap_err().0,
        "trailing data in OCSP response"
    );
    // Every truncation and every single-byte corruption is an error or a (still signed)
    // response, never a panic.
    for n in 0..good.len() {
        assert!(Response::parse(&good[..n], &p.ca).is_err());
    }
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0xff;
        let _ = Response::parse(&bad, &p.ca);
    }
    assert!(Response::parse(b"not der at all", &p.ca).is_err());
}

#[test]
fn request_matches_go_for_the_same_certificate() {
    let p = pki();
    let req = request(&p.leaf, &p.ca);
    // OCSPRequest { TBSRequest { requestList { Request { CertID } } } }, SHA-1 with NULL.
    assert_eq!(&req[..2], &[0x30, req.len() as u8 - 2]);
    let mut r = Reader::new(&req);
    let outer = r.expect(der::SEQUENCE).unwrap();
    let tbs = outer.reader().expect(der::SEQUENCE).unwrap();
    let list = tbs.reader().expect(der::SEQUENCE).unwrap();
    let one = list.reader().expect(der::SEQUENCE).unwrap();
    let id = one.reader().expect(der::SEQUENCE).unwrap();
    let mut f = id.reader();
    assert_eq!(f.expect(der::SEQUENCE).unwrap().raw, SHA1_ALG);
    assert_eq!(f.expect(der::OCTET_STRING).unwrap().content.len(), 20);
    assert_eq!(f.expect(der::OCTET_STRING).unwrap().content.len(), 20);
    assert_eq!(f.expect(der::INTEGER).unwrap().content, &p.leaf.serial[..]);
    assert!(f.is_empty());
}
