//! The parts of an X.509 certificate the server reads itself: the subject (as the
//! sequence of relative distinguished names it was encoded with), the subject
//! alternative names (e-mail, DNS, URI), the public key info (pinned certificates),
//! the issuer and serial number, the OCSP responder URLs and the must-staple feature, the
//! basic constraints and extended key usages, and the signed part with its signature
//! (OCSP checks an issuer's signature itself: `crate::transport::ocsp`). Chain and
//! validity checks of TLS peers are rustls's; this only reads.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::der::{self, DerError, Reader, Tlv};

/// One attribute of a relative distinguished name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// Dotted OID (`2.5.4.3`).
    pub oid: String,
    /// The value when it is one of the string types; `None` for anything else.
    pub value: Option<String>,
}

/// A parsed certificate (borrowing nothing: it outlives the handshake).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Certificate {
    /// RDNs in encoded order (most significant first), each a set of attributes.
    pub subject: Vec<Vec<Attribute>>,
    /// The subject's DER (a `Name`).
    pub raw_subject: Vec<u8>,
    /// The issuer's DER (a `Name`).
    pub raw_issuer: Vec<u8>,
    /// The serial number's content octets.
    pub serial: Vec<u8>,
    /// The `SubjectPublicKeyInfo` DER.
    pub spki: Vec<u8>,
    /// The public key bits (the BIT STRING's content without the unused-bits octet).
    pub public_key: Vec<u8>,
    pub emails: Vec<String>,
    pub dns_names: Vec<String>,
    pub uris: Vec<String>,
    /// OCSP responder URLs from the authority information access extension.
    pub ocsp_urls: Vec<String>,
    /// The TLS feature extension asks for a stapled OCSP response ("must staple").
    pub must_staple: bool,
    /// The whole certificate (DER).
    pub raw: Vec<u8>,
    /// The signed part (`TBSCertificate` DER), its signature algorithm (the
    /// `AlgorithmIdentifier` DER) and the signature bits.
    pub tbs: Vec<u8>,
    pub sig_alg: Vec<u8>,
    pub signature: Vec<u8>,
    /// Basic constraints say this is a CA.
    pub is_ca: bool,
    /// Extended key usages (OID contents); empty when the extension is absent.
    pub ext_key_usage: Vec<Vec<u8>>,
}

/// Extended key usage `id-kp-serverAuth`, `id-kp-OCSPSigning` and `anyExtendedKeyUsage`.
pub const EKU_SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
pub const EKU_OCSP_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x09];
pub const EKU_ANY: &[u8] = &[0x55, 0x1d, 0x25, 0x00];

const OID_SAN: &[u8] = &[0x55, 0x1d, 0x11];
const OID_AIA: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x01];
const OID_AD_OCSP: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01];
const OID_TLS_FEATURE: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x18];
const OID_BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
const OID_EXT_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25];

/// The string value of an attribute, for the ASN.1 string types Go's decoder turns into
/// strings.
fn string_value(t: &Tlv<'_>) -> Option<String> {
    match t.tag {
        // UTF8String, PrintableString, IA5String, T61String, NumericString
        0x0c | 0x13 | 0x16 | 0x14 | 0x12 => std::str::from_utf8(t.content).ok().map(str::to_string),
        // BMPString: UTF-16BE.
        0x1e => {
            let units: Option<Vec<u16>> = t
                .content
                .chunks(2)
                .map(|c| match c {
                    [a, b] => Some(u16::from_be_bytes([*a, *b])),
                    _ => None,
                })
                .collect();
            String::from_utf16(&units?).ok()
        }
        _ => None,
    }
}

/// A `Name`'s RDN sequence.
pub fn parse_name(raw: &[u8]) -> Result<Vec<Vec<Attribute>>, DerError> {
    let name = Reader::new(raw).expect(der::SEQUENCE)?;
    let mut rdns = Vec::new();
    let mut r = name.reader();
    while !r.is_empty() {
        let set = r.expect(der::SET)?;
        let mut attrs = Vec::new();
        let mut s = set.reader();
        while !s.is_empty() {
            let atv = s.expect(der::SEQUENCE)?;
            let mut a = atv.reader();
            let oid = a.expect(der::OID)?;
            let value = a.next_tlv()?;
            attrs.push(Attribute {
                oid: der::oid_string(oid.content)?,
                value: string_value(&value),
            });
        }
        rdns.push(attrs);
    }
    Ok(rdns)
}

impl Certificate {
    /// Read a DER certificate.
    pub fn parse(der_bytes: &[u8]) -> Result<Certificate, DerError> {
        let cert = Reader::new(der_bytes).expect(der::SEQUENCE)?;
        let mut outer = cert.reader();
        let tbs = outer.expect(der::SEQUENCE)?;
        let sig_alg = outer.expect(der::SEQUENCE)?;
        let sig_bits = outer.expect(der::BIT_STRING)?;
        let mut r = tbs.reader();
        // [0] EXPLICIT version
        r.optional(0xa0)?;
        let serial = r.expect(der::INTEGER)?;
        r.expect(der::SEQUENCE)?; // signature algorithm
        let issuer = r.expect(der::SEQUENCE)?;
        r.expect(der::SEQUENCE)?; // validity
        let subject = r.expect(der::SEQUENCE)?;
        let spki = r.expect(der::SEQUENCE)?;
        let mut out = Certificate {
            subject: parse_name(subject.raw)?,
            raw_subject: subject.raw.to_vec(),
            raw_issuer: issuer.raw.to_vec(),
            serial: serial.content.to_vec(),
            spki: spki.raw.to_vec(),
            raw: cert.raw.to_vec(),
            tbs: tbs.raw.to_vec(),
            sig_alg: sig_alg.raw.to_vec(),
            signature: sig_bits.content.get(1..).unwrap_or_default().to_vec(),
            ..Default::default()
        };
        let mut k = spki.reader();
        k.expect(der::SEQUENCE)?;
        let bits = k.expect(der::BIT_STRING)?;
        out.public_key = bits.content.get(1..).unwrap_or_default().to_vec();
        while !r.is_empty() {
            let t = r.next_tlv()?;
            if t.tag != 0xa3 {
                continue; // issuer/subject unique ids
            }
            let exts = t.reader().expect(der::SEQUENCE)?;
            let mut e = exts.reader();
            while !e.is_empty() {
                let ext = e.expect(der::SEQUENCE)?;
                let mut x = ext.reader();
                let oid = x.expect(der::OID)?;
                x.optional(der::BOOLEAN)?;
                let value = x.expect(der::OCTET_STRING)?;
                match oid.content {
                    OID_SAN => out.read_san(value.content)?,
                    OID_AIA => out.read_aia(value.content)?,
                    OID_TLS_FEATURE => out.read_tls_feature(value.content)?,
                    OID_BASIC_CONSTRAINTS => {
                        let seq = Reader::new(value.content).expect(der::SEQUENCE)?;
                        let ca = seq.reader().optional(der::BOOLEAN)?;
                        out.is_ca = ca.is_some_and(|b| b.content.first().is_some_and(|v| *v != 0));
                    }
                    OID_EXT_KEY_USAGE => {
                        let seq = Reader::new(value.content).expect(der::SEQUENCE)?;
                        let mut k = seq.reader();
                        while !k.is_empty() {
                            out.ext_key_usage.push(k.expect(der::OID)?.content.to_vec());
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(out)
    }

    /// Go's `x509.Verify` default: a leaf without extended key usages, or with server
    /// authentication (or any usage) among them.
    pub fn allows_server_auth(&self) -> bool {
        self.ext_key_usage.is_empty() || self.ext_key_usage.iter().any(|k| k == EKU_SERVER_AUTH || k == EKU_ANY)
    }

    /// Delegated to sign OCSP responses (`id-kp-OCSPSigning`).
    pub fn ocsp_signing(&self) -> bool {
        self.ext_key_usage.iter().any(|k| k == EKU_OCSP_SIGNING)
    }

    fn read_san(&mut self, value: &[u8]) -> Result<(), DerError> {
        let names = Reader::new(value).expect(der::SEQUENCE)?;
        let mut r = names.reader();
        while !r.is_empty() {
            let n = r.next_tlv()?;
            let text = || std::str::from_utf8(n.content).map(str::to_string).map_err(|_| DerError);
            match n.tag {
                0x81 => self.emails.push(text()?),
                0x82 => self.dns_names.push(text()?),
                0x86 => self.uris.push(text()?),
                _ => {}
            }
        }
        Ok(())
    }

    fn read_aia(&mut self, value: &[u8]) -> Result<(), DerError> {
        let seq = Reader::new(value).expect(der::SEQUENCE)?;
        let mut r = seq.reader();
        while !r.is_empty() {
            let ad = r.expect(der::SEQUENCE)?;
            let mut a = ad.reader();
            let method = a.expect(der::OID)?;
            let loc = a.next_tlv()?;
            if method.content == OID_AD_OCSP && loc.tag == 0x86 {
                if let Ok(u) = std::str::from_utf8(loc.content) {
                    self.ocsp_urls.push(u.to_string());
                }
            }
        }
        Ok(())
    }

    fn read_tls_feature(&mut self, value: &[u8]) -> Result<(), DerError> {
        let seq = Reader::new(value).expect(der::SEQUENCE)?;
        let mut r = seq.reader();
        while !r.is_empty() {
            let f = r.expect(der::INTEGER)?;
            // status_request (5)
            if f.content == [5] {
                self.must_staple = true;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_rcgen_wrote() {
        let mut params = rcgen::CertificateParams::new(vec!["example.com".to_string()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::CountryName, "US");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Synadia");
        params.distinguished_name.push(rcgen::DnType::CommonName, "example.com");
        params
            .subject_alt_names
            .push(rcgen::SanType::Rfc822Name("a@b.c".try_into().unwrap()));
        params
            .subject_alt_names
            .push(rcgen::SanType::URI("nats://x".try_into().unwrap()));
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let c = Certificate::parse(cert.der()).unwrap();
        assert_eq!(c.dns_names, vec!["example.com"]);
        assert_eq!(c.emails, vec!["a@b.c"]);
        assert_eq!(c.uris, vec!["nats://x"]);
        let names: Vec<(&str, Option<&str>)> = c
            .subject
            .iter()
            .flatten()
            .map(|a| (a.oid.as_str(), a.value.as_deref()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("2.5.4.6", Some("US")),
                ("2.5.4.10", Some("Synadia")),
                ("2.5.4.3", Some("example.com"))
            ]
        );
        assert!(!c.spki.is_empty());
        assert!(!c.must_staple);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [&b""[..], b"\x30", b"\x30\x03\x30\x01", b"\x30\x82\xff\xff"] {
            assert!(Certificate::parse(bad).is_err());
        }
    }
}
