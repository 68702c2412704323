//! Distinguished names as nats-server compares them for `verify_and_map`: a certificate
//! subject read from its DER in encoded order, a user name parsed as an RFC 4514 string,
//! exact comparison (same RDNs in the same order) and comparison in any order; and the
//! subject printed the way Go's `pkix.Name.ToRDNSequence().String()` prints it (which
//! user names in configurations are written against).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::x509::Attribute;

/// One `type=value` pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ava {
    pub typ: String,
    pub value: String,
}

impl Ava {
    /// Types compare without regard to case, values exactly.
    fn same(&self, other: &Ava) -> bool {
        self.typ.eq_ignore_ascii_case(&other.typ) && self.value == other.value
    }
}

/// A relative distinguished name: one or more attributes (order not significant).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rdn(pub Vec<Ava>);

impl Rdn {
    fn same(&self, other: &Rdn) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().all(|a| other.0.iter().any(|b| a.same(b)))
            && other.0.iter().all(|a| self.0.iter().any(|b| a.same(b)))
    }
}

/// A distinguished name, most specific RDN first (the string order: `CN=x,O=y`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dn(pub Vec<Rdn>);

/// Why a string is not a distinguished name (go-ldap's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnError {
    #[error("got corrupted escaped character")]
    CorruptedEscape,
    #[error("failed to decode escaped character")]
    BadEscape,
    #[error("unsupported BER encoding")]
    Ber,
    #[error("incomplete type, value pair")]
    Incomplete,
    #[error("DN ended with incomplete type, value pair")]
    EndedIncomplete,
    #[error("invalid type name: {0}")]
    TypeName(String),
    #[error("invalid type value")]
    TypeValue,
}

/// The attribute types a certificate subject may use for DN matching (go-ldap's table).
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.5" => "SERIALNUMBER",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.17" => "POSTALCODE",
        "0.9.2342.19200300.100.1.25" => "DC",
        _ => return None,
    })
}

impl Dn {
    /// A certificate subject (RDNs in encoded order) as a DN: most specific first, the
    /// attributes of a multi-valued RDN reversed too, as go-ldap builds it. Fails on an
    /// attribute type outside the short-name table or a value that is not a string.
    pub fn from_subject(rdns: &[Vec<Attribute>]) -> Result<Dn, DnError> {
        let mut out = Vec::new();
        for rdn in rdns.iter().rev() {
            if rdn.is_empty() {
                continue;
            }
            let mut avas = Vec::new();
            for a in rdn.iter().rev() {
                let typ = short_name(&a.oid).ok_or_else(|| DnError::TypeName(a.oid.clone()))?;
                let value = a.value.clone().ok_or(DnError::TypeValue)?;
                avas.push(Ava {
                    typ: typ.to_string(),
                    value,
                });
            }
            out.push(Rdn(avas));
        }
        Ok(Dn(out))
    }

    /// Parse an RFC 4514 string (`CN=a,OU=b+O=c`), with go-ldap's rules: `\` escapes a
    /// special character or two hex digits, unescaped leading and trailing spaces of a
    /// part are dropped, `#` values are refused.
    pub fn parse(s: &str) -> Result<Dn, DnError> {
        let bytes = s.as_bytes();
        let mut dn = Vec::new();
        let mut rdn: Vec<Ava> = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut typ: Option<String> = None;
        let mut trailing = 0usize;
        let mut i = 0usize;
        let take = |buf: &mut Vec<u8>, trailing: &mut usize| -> String {
            let keep = buf.len().saturating_sub(*trailing);
            let out = String::from_utf8_lossy(buf.get(..keep).unwrap_or_default()).into_owned();
            buf.clear();
            *trailing = 0;
            out
        };
        while let Some(&c) = bytes.get(i) {
            match c {
                b'\\' => {
                    trailing = 0;
                    let Some(&next) = bytes.get(i + 1) else {
                        // A lone trailing backslash escapes nothing.
                        return Err(DnError::CorruptedEscape);
                    };
                    if b" \"#+,;<=>\\".contains(&next) {
                        buf.push(next);
                        i += 2;
                        continue;
                    }
                    let hex = bytes.get(i + 1..i + 3).ok_or(DnError::CorruptedEscape)?;
                    let text = std::str::from_utf8(hex).map_err(|_| DnError::BadEscape)?;
                    let v = u8::from_str_radix(text, 16).map_err(|_| DnError::BadEscape)?;
                    buf.push(v);
                    i += 3;
                    continue;
                }
                b'=' => {
                    typ = Some(take(&mut buf, &mut trailing));
                    if bytes.get(i + 1) == Some(&b'#') {
                        return Err(DnError::Ber);
                    }
                }
                b',' | b'+' => {
                    let t = typ.take().filter(|t| !t.is_empty()).ok_or(DnError::Incomplete)?;
                    let value = take(&mut buf, &mut trailing);
                    rdn.push(Ava { typ: t, value });
                    if c == b',' {
                        dn.push(Rdn(std::mem::take(&mut rdn)));
                    }
                }
                b' ' if buf.is_empty() => {}
                _ => {
                    if c == b' ' {
                        trailing += 1;
                    } else {
                        trailing = 0;
                    }
                    buf.push(c);
                }
            }
            i += 1;
        }
        if !buf.is_empty() {
            let t = typ.take().filter(|t| !t.is_empty()).ok_or(DnError::EndedIncomplete)?;
            let value = take(&mut buf, &mut trailing);
            rdn.push(Ava { typ: t, value });
            dn.push(Rdn(rdn));
        }
        Ok(Dn(dn))
    }

    /// Same RDNs in the same order (RFC 4517 distinguishedNameMatch).
    pub fn equal(&self, other: &Dn) -> bool {
        self.0.len() == other.0.len() && self.0.iter().zip(&other.0).all(|(a, b)| a.same(b))
    }

    /// Same RDNs in any order.
    pub fn rdns_match(&self, other: &Dn) -> bool {
        if self.0.len() != other.0.len() {
            return false;
        }
        let mut used = vec![false; other.0.len()];
        for r in &self.0 {
            let found = other
                .0
                .iter()
                .enumerate()
                .find(|(j, o)| !used.get(*j).copied().unwrap_or(true) && r.same(o))
                .map(|(j, _)| j);
            match found.and_then(|j| used.get_mut(j)) {
                Some(u) => *u = true,
                None => return false,
            }
        }
        true
    }
}

/// Go's `pkix.Name` fields, in the order `ToRDNSequence` emits them, with their short
/// names.
const GO_NAME_ORDER: &[(&str, &str)] = &[
    ("2.5.4.6", "C"),
    ("2.5.4.8", "ST"),
    ("2.5.4.7", "L"),
    ("2.5.4.9", "STREET"),
    ("2.5.4.17", "POSTALCODE"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
];

/// Escape a value as Go's `RDNSequence.String` does.
fn go_escape(v: &str, out: &mut String) {
    let n = v.chars().count();
    for (k, c) in v.chars().enumerate() {
        let escape = match c {
            ',' | '+' | '"' | '\\' | '<' | '>' | ';' => true,
            ' ' => k == 0 || k + 1 == n,
            '#' => k == 0,
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
    }
}

/// The subject as Go prints `cert.Subject.ToRDNSequence().String()`: only the standard
/// attributes (country, province, locality, street, postal code, organization,
/// organizational unit, then the last common name and serial number), values of one type
/// in one multi-valued RDN, most specific first.
pub fn go_subject_string(rdns: &[Vec<Attribute>]) -> String {
    let values = |oid: &str| -> Vec<&str> {
        rdns.iter()
            .flatten()
            .filter(|a| a.oid == oid)
            .filter_map(|a| a.value.as_deref())
            .collect()
    };
    let mut seq: Vec<(&str, Vec<&str>)> = Vec::new();
    for (oid, name) in GO_NAME_ORDER {
        let v = values(oid);
        if !v.is_empty() {
            seq.push((name, v));
        }
    }
    for (oid, name) in [("2.5.4.3", "CN"), ("2.5.4.5", "SERIALNUMBER")] {
        if let Some(last) = values(oid).last().filter(|s| !s.is_empty()) {
            seq.push((name, vec![last]));
        }
    }
    let mut out = String::new();
    for (i, (name, vals)) in seq.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, v) in vals.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            out.push_str(name);
            out.push('=');
            go_escape(v, &mut out);
        }
    }
    out
}

/// The domain components of a subject in encoded order: `DC=a,DC=b`.
pub fn domain_components(rdns: &[Vec<Attribute>]) -> String {
    let dcs: Vec<String> = rdns
        .iter()
        .flatten()
        .filter(|a| a.oid == "0.9.2342.19200300.100.1.25")
        .filter_map(|a| a.value.as_deref().map(|v| format!("DC={v}")))
        .collect();
    dcs.join(",")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn attr(oid: &str, v: &str) -> Attribute {
        Attribute {
            oid: oid.into(),
            value: Some(v.into()),
        }
    }

    type Rdns<'a> = Vec<Vec<(&'a str, &'a str)>>;

    #[test]
    fn parse_cases() {
        let cases: &[(&str, Result<Rdns<'_>, DnError>)] = &[
            ("CN=a,O=b", Ok(vec![vec![("CN", "a")], vec![("O", "b")]])),
            (" CN = a , O=b ", Ok(vec![vec![("CN", "a")], vec![("O", "b")]])),
            (
                "CN=a+OU=x,O=b",
                Ok(vec![vec![("CN", "a"), ("OU", "x")], vec![("O", "b")]]),
            ),
            ("CN=a\\,b", Ok(vec![vec![("CN", "a,b")]])),
            ("CN=a\\41", Ok(vec![vec![("CN", "aA")]])),
            ("CN=a\\", Err(DnError::CorruptedEscape)),
            ("CN=a\\zz", Err(DnError::BadEscape)),
            ("CN=#0403", Err(DnError::Ber)),
            ("a,b", Err(DnError::Incomplete)),
            ("CN=a,b", Err(DnError::EndedIncomplete)),
            ("", Ok(vec![])),
        ];
        for (s, want) in cases {
            let got = Dn::parse(s).map(|d| {
                d.0.iter()
                    .map(|r| r.0.iter().map(|a| (a.typ.clone(), a.value.clone())).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            });
            let want = want.clone().map(|w| {
                w.iter()
                    .map(|r| {
                        r.iter()
                            .map(|(t, v)| (t.to_string(), v.to_string()))
                            .collect::<Vec<_>>()
                    })
                    .collect::<Vec<_>>()
            });
            assert_eq!(got, want, "{s:?}");
        }
    }

    #[test]
    fn matching_in_order_and_any_order() {
        let subject = vec![
            vec![attr("0.9.2342.19200300.100.1.25", "org")],
            vec![attr("2.5.4.10", "Synadia")],
            vec![attr("2.5.4.3", "app")],
        ];
        let cert = Dn::from_subject(&subject).unwrap();
        assert!(cert.equal(&Dn::parse("CN=app,O=Synadia,DC=org").unwrap()));
        assert!(cert.equal(&Dn::parse("cn=app,o=Synadia,dc=org").unwrap()));
        assert!(!cert.equal(&Dn::parse("DC=org,O=Synadia,CN=app").unwrap()));
        assert!(cert.rdns_match(&Dn::parse("DC=org,O=Synadia,CN=app").unwrap()));
        assert!(!cert.rdns_match(&Dn::parse("DC=org,O=Synadia,CN=other").unwrap()));
        assert!(!cert.rdns_match(&Dn::parse("O=Synadia,CN=app").unwrap()));
        let email = vec![vec![attr("1.2.840.113549.1.9.1", "a@b")]];
        assert_eq!(
            Dn::from_subject(&email),
            Err(DnError::TypeName("1.2.840.113549.1.9.1".into()))
        );
    }

    #[test]
    fn go_string_order_and_escapes() {
        let subject = vec![
            vec![attr("2.5.4.3", "first")],
            vec![attr("2.5.4.6", "US")],
            vec![attr("2.5.4.11", "a"), attr("2.5.4.11", "b,c")],
            vec![attr("2.5.4.10", " Syn")],
            vec![attr("0.9.2342.19200300.100.1.25", "org")],
            vec![attr("2.5.4.3", "last")],
        ];
        assert_eq!(go_subject_string(&subject), "CN=last,OU=a+OU=b\\,c,O=\\ Syn,C=US");
        assert_eq!(domain_components(&subject), "DC=org");
    }
}
