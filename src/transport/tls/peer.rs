//! What a TLS client proved about itself, as authentication sees it: the verified
//! certificate chain and what `verify_and_map` maps to a user — the subject (as a DN and
//! as Go prints it), the e-mail, DNS and URI subject alternative names.
//!
//! [`TlsPeer::map_user`] is nats-server's `checkClientTLSCertSubject`: candidates are
//! tried in the reference's order (every e-mail SAN, then every DNS SAN, then every URI
//! SAN, then the subject DN exactly, then in any RDN order, then the printed subject with
//! its domain components, then the printed subject alone); the first user that exists
//! and accepts the connection wins.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::dn::{self, Dn};
use super::x509::Certificate;
use rustls_pki_types::CertificateDer;

/// A client's certificate as authentication sees it.
#[derive(Debug, Clone, Default)]
pub struct TlsPeer {
    /// The chain the client presented, leaf first (DER).
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf, parsed (`None` if it could not be read).
    pub leaf: Option<Certificate>,
    /// The subject as a DN (`None` when it uses attribute types go-ldap does not know).
    pub subject_dn: Option<Dn>,
    /// Go's `cert.Subject.ToRDNSequence().String()`.
    pub subject: String,
    /// `DC=...` components of the subject in encoded order (empty if none).
    pub domain_components: String,
    /// Negotiated protocol version (`1.3`) and cipher suite name, for logs and monitoring.
    pub version: &'static str,
    pub cipher: String,
    /// The handshake came before the INFO (`handshake_first`).
    pub first: bool,
}

/// A name `map_user` proposes.
#[derive(Debug, Clone, Copy)]
pub enum Candidate<'a> {
    /// A SAN or printed subject, looked up literally; `dns` for DNS SANs.
    Name { name: &'a str, dns: bool },
    /// The subject DN, to compare with user names parsed as DNs.
    Dn(&'a Dn),
}

impl TlsPeer {
    /// Build from the chain rustls verified.
    pub fn from_chain(chain: &[CertificateDer<'_>], version: &'static str, cipher: String) -> TlsPeer {
        let leaf = chain.first().and_then(|c| Certificate::parse(c).ok());
        let (subject_dn, subject, dcs) = match &leaf {
            Some(l) => (
                Dn::from_subject(&l.subject).ok(),
                dn::go_subject_string(&l.subject),
                dn::domain_components(&l.subject),
            ),
            None => (None, String::new(), String::new()),
        };
        TlsPeer {
            chain: chain.iter().map(|c| c.clone().into_owned()).collect(),
            leaf,
            subject_dn,
            subject,
            domain_components: dcs,
            version,
            cipher,
            first: false,
        }
    }

    /// nats-server's mapping of a certificate to a user. `lookup` answers for one
    /// candidate with the user it names (and that may connect), or `None`.
    pub fn map_user<T>(&self, mut lookup: impl FnMut(Candidate<'_>) -> Option<T>) -> Option<T> {
        let leaf = self.leaf.as_ref()?;
        let has_subject = leaf.subject.iter().any(|r| !r.is_empty());
        if leaf.emails.is_empty() && !has_subject && leaf.uris.is_empty() {
            return None;
        }
        // The reference falls through email → DNS → URI whenever there are e-mails or
        // DNS names; with only URIs it starts there.
        let names = leaf
            .emails
            .iter()
            .map(|n| (n, false))
            .chain(leaf.dns_names.iter().map(|n| (n, true)))
            .chain(leaf.uris.iter().map(|n| (n, false)));
        for (name, dns) in names {
            if let Some(u) = lookup(Candidate::Name { name, dns }) {
                return Some(u);
            }
        }
        if let Some(d) = &self.subject_dn {
            if let Some(u) = lookup(Candidate::Dn(d)) {
                return Some(u);
            }
        }
        if !self.domain_components.is_empty() {
            let with_dcs = format!("{},{}", self.subject, self.domain_components);
            if let Some(u) = lookup(Candidate::Name {
                name: &with_dcs,
                dns: false,
            }) {
                return Some(u);
            }
        }
        lookup(Candidate::Name {
            name: &self.subject,
            dns: false,
        })
    }

    /// The common case of [`TlsPeer::map_user`]: `users` are the configured user names
    /// that may connect. A name candidate must equal a user name; the subject DN must
    /// equal a user name parsed as a DN, first exactly, then in any RDN order.
    pub fn map_to_user<'u>(&self, users: &[&'u str]) -> Option<&'u str> {
        self.map_user(|c| match c {
            Candidate::Name { name, .. } => users.iter().find(|u| **u == name).copied(),
            Candidate::Dn(d) => {
                let parsed: Vec<(&'u str, Dn)> = users
                    .iter()
                    .filter_map(|u| Dn::parse(u).ok().map(|p| (*u, p)))
                    .collect();
                parsed
                    .iter()
                    .find(|(_, p)| p.equal(d))
                    .or_else(|| parsed.iter().find(|(_, p)| p.rdns_match(d)))
                    .map(|(u, _)| *u)
            }
        })
    }

    /// The presented certificates as `/connz?auth=1` shows them: subject as Go prints
    /// it, hex SHA-256 of the public key info and of the certificate.
    pub fn cert_reports(&self) -> Vec<crate::core::report::PeerCertReport> {
        let sha = |b: &[u8]| hex(ring::digest::digest(&ring::digest::SHA256, b).as_ref());
        self.chain
            .iter()
            .map(|der| {
                let parsed = Certificate::parse(der).ok();
                crate::core::report::PeerCertReport {
                    subject: parsed
                        .as_ref()
                        .map(|c| dn::go_subject_string(&c.subject))
                        .unwrap_or_default(),
                    spki_sha256: parsed.as_ref().map(|c| sha(&c.spki)).unwrap_or_default(),
                    cert_sha256: sha(der),
                }
            })
            .collect()
    }

    /// Hex SHA-256 of the leaf's SubjectPublicKeyInfo (the form of `pinned_certs`).
    pub fn spki_sha256(&self) -> Option<String> {
        let spki = &self.leaf.as_ref()?.spki;
        Some(hex(ring::digest::digest(&ring::digest::SHA256, spki).as_ref()))
    }
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn peer(dn: &[(rcgen::DnType, &str)], sans: Vec<rcgen::SanType>) -> TlsPeer {
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in dn {
            params.distinguished_name.push(t.clone(), *v);
        }
        params.subject_alt_names = sans;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TlsPeer::from_chain(&[cert.der().clone()], "1.3", String::new())
    }

    #[test]
    fn maps_in_the_reference_order() {
        use rcgen::{DnType, SanType};
        let p = peer(
            &[(DnType::OrganizationName, "Synadia"), (DnType::CommonName, "app")],
            vec![
                SanType::DnsName("app.example.com".try_into().unwrap()),
                SanType::Rfc822Name("app@example.com".try_into().unwrap()),
            ],
        );
        assert_eq!(p.subject, "CN=app,O=Synadia");
        // E-mail before DNS, DNS before the subject.
        assert_eq!(
            p.map_to_user(&["CN=app,O=Synadia", "app.example.com", "app@example.com"]),
            Some("app@example.com")
        );
        assert_eq!(
            p.map_to_user(&["CN=app,O=Synadia", "app.example.com"]),
            Some("app.example.com")
        );
        assert_eq!(p.map_to_user(&["CN=app,O=Synadia"]), Some("CN=app,O=Synadia"));
        // The DN in the other order, and with other spacing and case of types.
        assert_eq!(p.map_to_user(&["O=Synadia,CN=app"]), Some("O=Synadia,CN=app"));
        assert_eq!(p.map_to_user(&["cn=app, o=Synadia"]), Some("cn=app, o=Synadia"));
        assert_eq!(p.map_to_user(&["CN=other,O=Synadia", "bob"]), None);
    }

    #[test]
    fn domain_components_and_uri() {
        use rcgen::{DnType, SanType};
        let p = peer(
            &[
                (DnType::CustomDnType(vec![0, 9, 2342, 19200300, 100, 1, 25]), "org"),
                (DnType::CommonName, "svc"),
            ],
            vec![SanType::URI("spiffe://example/svc".try_into().unwrap())],
        );
        assert_eq!(p.domain_components, "DC=org");
        assert_eq!(p.map_to_user(&["spiffe://example/svc"]), Some("spiffe://example/svc"));
        assert_eq!(p.map_to_user(&["CN=svc,DC=org"]), Some("CN=svc,DC=org"));
        assert_eq!(p.map_to_user(&["CN=svc"]), Some("CN=svc"));
        assert_eq!(p.spki_sha256().map(|s| s.len()), Some(64));
    }
}
