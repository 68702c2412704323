//! OCSP messages (RFC 6960) as the server uses them: the request it sends for one
//! certificate (SHA-1 `CertID`, no nonce, as Go's `ocsp.CreateRequest` builds it), and a
//! response decoded with RustCrypto's `x509-ocsp`, its signature checked against the
//! issuer or against the responder certificate it carries (which the issuer must have
//! signed), as Go's `ocsp.ParseResponse` does. Failures carry Go's texts.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::sig;
use crate::transport::tls::der::{self, Reader};
use crate::transport::tls::x509::Certificate;
use der_crate::{Decode, Encode};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use x509_ocsp::{BasicOcspResponse, OcspResponse, OcspResponseStatus};

use ::der as der_crate;

/// A certificate's status as a responder asserts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CertStatus {
    Good,
    Revoked,
    Unknown,
}

impl CertStatus {
    /// nats-server's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            CertStatus::Good => "good",
            CertStatus::Revoked => "revoked",
            CertStatus::Unknown => "unknown",
        }
    }
}

/// A decoded, signature-checked response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The DER as received (what is stapled and cached).
    pub raw: Vec<u8>,
    pub status: CertStatus,
    pub serial: Vec<u8>,
    pub produced_at: SystemTime,
    pub this_update: SystemTime,
    pub next_update: Option<SystemTime>,
    /// The responder certificate the response carried (a delegate of the issuer, or the
    /// issuer itself).
    pub signer: Option<Certificate>,
}

/// Why a response cannot be used (Go's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

fn status_text(s: OcspResponseStatus) -> &'static str {
    match s {
        OcspResponseStatus::Successful => "success",
        OcspResponseStatus::MalformedRequest => "malformed",
        OcspResponseStatus::InternalError => "internal error",
        OcspResponseStatus::TryLater => "try later",
        OcspResponseStatus::SigRequired => "signature required",
        OcspResponseStatus::Unauthorized => "unauthorized",
    }
}

fn asn1_error(e: der_crate::Error) -> ParseError {
    ParseError(format!("asn1: structure error: {e}"))
}

fn system_time(t: &x509_ocsp::OcspGeneralizedTime) -> SystemTime {
    UNIX_EPOCH + t.0.to_unix_duration()
}

/// The `TBSResponseData` as it was encoded inside a `BasicOCSPResponse` (what the
/// signature covers).
fn raw_tbs(basic: &[u8]) -> Option<&[u8]> {
    let seq = Reader::new(basic).expect(der::SEQUENCE).ok()?;
    Some(seq.reader().expect(der::SEQUENCE).ok()?.raw)
}

impl Response {
    /// Decode `raw` and check its signature against `issuer` (Go's
    /// `ocsp.ParseResponse(raw, issuer)`): the single response it must hold is the one
    /// returned.
    pub fn parse(raw: &[u8], issuer: &Certificate) -> Result<Response, ParseError> {
        let outer = OcspResponse::from_der(raw).map_err(|e| match e.kind() {
            der_crate::ErrorKind::TrailingData { .. } => ParseError("trailing data in OCSP response".into()),
            _ => asn1_error(e),
        })?;
        if outer.response_status != OcspResponseStatus::Successful {
            return Err(ParseError(format!(
                "ocsp: error from server: {}",
                status_text(outer.response_status)
            )));
        }
        let bytes = outer
            .response_bytes
            .ok_or_else(|| ParseError("bad OCSP response type".into()))?;
        if bytes.response_type != const_oid_basic() {
            return Err(ParseError("bad OCSP response type".into()));
        }
        let basic_der = bytes.response.as_bytes();
        let basic = BasicOcspResponse::from_der(basic_der).map_err(asn1_error)?;
        let responses = &basic.tbs_response_data.responses;
        let single = match responses.as_slice() {
            [one] => one,
            _ => return Err(ParseError("OCSP response contains bad number of responses".into())),
        };
        let tbs = raw_tbs(basic_der).ok_or_else(|| ParseError("asn1: structure error: tbsResponseData".into()))?;
        let alg = basic.signature_algorithm.to_der().map_err(asn1_error)?;
        let signature = basic
            .signature
            .as_bytes()
            .ok_or_else(|| ParseError("asn1: structure error: signature".into()))?;
        let signer = match basic.certs.as_deref().and_then(|c| c.first()) {
            Some(c) => {
                let der_bytes = c.to_der().map_err(asn1_error)?;
                let cert =
                    Certificate::parse(&der_bytes).map_err(|_| ParseError("x509: malformed certificate".into()))?;
                sig::verify(&cert.spki, &alg, tbs, signature)
                    .map_err(|e| ParseError(format!("bad signature on embedded certificate: {e}")))?;
                sig::verify(&issuer.spki, &cert.sig_alg, &cert.tbs, &cert.signature)
                    .map_err(|e| ParseError(format!("bad OCSP signature: {e}")))?;
                Some(cert)
            }
            None => {
                sig::verify(&issuer.spki, &alg, tbs, signature)
                    .map_err(|e| ParseError(format!("bad OCSP signature: {e}")))?;
                None
            }
        };
        let status = match single.cert_status {
            x509_ocsp::CertStatus::Good(_) => CertStatus::Good,
            x509_ocsp::CertStatus::Revoked(_) => CertStatus::Revoked,
            x509_ocsp::CertStatus::Unknown(_) => CertStatus::Unknown,
        };
        Ok(Response {
            raw: raw.to_vec(),
            status,
            serial: single.cert_id.serial_number.as_bytes().to_vec(),
            produced_at: system_time(&basic.tbs_response_data.produced_at),
            this_update: system_time(&single.this_update),
            next_update: single.next_update.as_ref().map(system_time),
            signer,
        })
    }

    /// The response is about the certificate with serial number `serial` (content octets).
    pub fn is_for(&self, serial: &[u8]) -> bool {
        fn trim(b: &[u8]) -> &[u8] {
            let skip = b.iter().take_while(|x| **x == 0).count();
            b.get(skip..).unwrap_or_default()
        }
        trim(&self.serial) == trim(serial)
    }

    /// nats-server's check of a staple's validity window: `NextUpdate` not past and
    /// `ThisUpdate` not in the future.
    pub fn valid_at(&self, now: SystemTime) -> Result<(), String> {
        if let Some(n) = self.next_update {
            if n < now {
                return Err(format!(
                    "invalid ocsp NextUpdate, is past time: {}",
                    crate::proto::gotime::rfc3339_nano(n)
                ));
            }
        }
        if self.this_update > now {
            return Err(format!(
                "invalid ocsp ThisUpdate, is future time: {}",
                crate::proto::gotime::rfc3339_nano(self.this_update)
            ));
        }
        Ok(())
    }

    /// nats-server's `OCSPResponseCurrent` for peer checks: not expired (or, without
    /// `NextUpdate`, not older than `ttl_unset` past `ThisUpdate`) and not future-dated,
    /// both with `skew` of slack. The debug line says why not.
    pub fn current(&self, now: SystemTime, skew: Duration, ttl_unset: Duration) -> Result<(), String> {
        let fmt = crate::proto::gotime::rfc3339_nano;
        let skew_text = crate::server::options::go_duration(skew);
        let earliest = now.checked_sub(skew).unwrap_or(UNIX_EPOCH);
        match self.next_update {
            Some(n) if n < earliest => {
                return Err(format!(
                    "OCSP response NextUpdate [{}] is before now [{}] with clockskew [{skew_text}]",
                    fmt(n),
                    fmt(now)
                ))
            }
            Some(_) => {}
            None => {
                let expiry = self.this_update + ttl_unset;
                if expiry < earliest {
                    return Err(format!(
                        "OCSP response cache expiry [{}] is before now [{}] with clockskew [{skew_text}]",
                        fmt(expiry),
                        fmt(now)
                    ));
                }
            }
        }
        if self.this_update > now + skew {
            return Err(format!(
                "OCSP response ThisUpdate [{}] is before now [{}] with clockskew [{skew_text}]",
                fmt(self.this_update),
                fmt(now)
            ));
        }
        Ok(())
    }

    /// nats-server's `ValidDelegationCheck`: signed by the issuer itself, or by a
    /// responder certificate the issuer marked for OCSP signing.
    pub fn valid_delegation(&self, issuer: &Certificate) -> bool {
        match &self.signer {
            None => true,
            Some(s) if s.raw == issuer.raw => true,
            Some(s) => s.ocsp_signing(),
        }
    }
}

fn const_oid_basic() -> der_crate::asn1::ObjectIdentifier {
    der_crate::asn1::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.48.1.1")
}

/// SHA-1 `AlgorithmIdentifier` with NULL parameters.
const SHA1_ALG: &[u8] = &[0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00];

/// The DER `OCSPRequest` for `leaf`, issued by `issuer`.
pub fn request(leaf: &Certificate, issuer: &Certificate) -> Vec<u8> {
    let sha1 = |b: &[u8]| ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, b);
    let mut cert_id = SHA1_ALG.to_vec();
    cert_id.extend(der::encode(der::OCTET_STRING, sha1(&issuer.raw_subject).as_ref()));
    cert_id.extend(der::encode(der::OCTET_STRING, sha1(&issuer.public_key).as_ref()));
    cert_id.extend(der::encode(der::INTEGER, &leaf.serial));
    let request = der::encode(der::SEQUENCE, &der::encode(der::SEQUENCE, &cert_id));
    let list = der::encode(der::SEQUENCE, &request);
    let tbs = der::encode(der::SEQUENCE, &list);
    der::encode(der::SEQUENCE, &tbs)
}

#[cfg(test)]
#[path = "response_tests.rs"]
mod tests;
