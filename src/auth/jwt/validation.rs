//! Validation results in jwt v2's shape: a list of issues, each blocking or not, time checks
//! flagged apart (the server decides with `is_blocking(include_time_checks)`), plus the
//! value checks the claim validators share: subjects, permission subjects, clock times
//! (`15:04:05`), CIDRs, time zone names.

use std::fmt;
use std::net::IpAddr;

use super::error::JwtError;
use super::json::go_quote;

/// One validation finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationIssue {
    pub description: String,
    /// The claim must not be used.
    pub blocking: bool,
    /// An expiry / not-before finding (blocking only where the caller says so).
    pub time_check: bool,
}

impl fmt::Display for ValidationIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

/// All findings of one validation, in the order jwt v2 reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidationResults {
    pub issues: Vec<ValidationIssue>,
}

impl ValidationResults {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a blocking error.
    pub fn add_error(&mut self, description: impl Into<String>) {
        self.issues.push(ValidationIssue {
            description: description.into(),
            blocking: true,
            time_check: false,
        });
    }

    /// Adds a time-check finding.
    pub fn add_time_check(&mut self, description: impl Into<String>) {
        self.issues.push(ValidationIssue {
            description: description.into(),
            blocking: false,
            time_check: true,
        });
    }

    /// Adds a non-blocking warning.
    pub fn add_warning(&mut self, description: impl Into<String>) {
        self.issues.push(ValidationIssue {
            description: description.into(),
            blocking: false,
            time_check: false,
        });
    }

    /// Any blocking error, or (with `include_time_checks`) any time-check finding.
    pub fn is_blocking(&self, include_time_checks: bool) -> bool {
        self.issues
            .iter()
            .any(|i| i.blocking || (include_time_checks && i.time_check))
    }

    pub fn is_empty(&self) -> bool {
        self.issues.is_empty()
    }

    /// The descriptions of the blocking errors.
    pub fn errors(&self) -> Vec<&str> {
        self.issues
            .iter()
            .filter(|i| i.blocking)
            .map(|i| i.description.as_str())
            .collect()
    }

    /// The descriptions of the non-blocking findings (warnings and time checks).
    pub fn warnings(&self) -> Vec<&str> {
        self.issues
            .iter()
            .filter(|i| !i.blocking)
            .map(|i| i.description.as_str())
            .collect()
    }

    /// `Ok` unless blocking (time checks included); the error carries the first blocking
    /// issue (`claim is expired` / `claim is not yet valid` map to their own variants).
    pub fn into_result(self) -> Result<(), JwtError> {
        match self.issues.into_iter().find(|i| i.blocking || i.time_check) {
            None => Ok(()),
            Some(i) if i.time_check && i.description == EXPIRED => Err(JwtError::Expired),
            Some(i) if i.time_check && i.description == NOT_YET_VALID => Err(JwtError::NotYetValid),
            Some(i) => Err(JwtError::Invalid(i.description)),
        }
    }
}

pub(crate) const EXPIRED: &str = "claim is expired";
pub(crate) const NOT_YET_VALID: &str = "claim is not yet valid";

/// jwt v2's subject check (non-empty, no spaces, no leading/trailing/double dots).
pub(crate) fn validate_subject(s: &str, vr: &mut ValidationResults) {
    if s.is_empty() {
        vr.add_error("subject cannot be empty");
        return;
    }
    if s.contains(' ') {
        vr.add_error(format!("subject {} cannot have spaces", go_quote(s)));
    }
    if s.starts_with('.') || s.ends_with('.') {
        vr.add_error(format!("subject {} cannot start or end with a `.`", go_quote(s)));
    }
    if s.contains("..") {
        vr.add_error(format!("subject {} cannot contain consecutive `.`", go_quote(s)));
    }
}

/// jwt v2's `Subject.HasWildCards`.
pub fn has_wildcards(s: &str) -> bool {
    s.ends_with(".>") || s.contains(".*.") || s.ends_with(".*") || s.starts_with("*.") || s == "*" || s == ">"
}

/// jwt v2's `Subject.IsContainedIn`: `s` is covered by the (wildcard) subject `other`.
pub fn is_contained_in(s: &str, other: &str) -> bool {
    let theirs: Vec<&str> = other.split('.').collect();
    let mine: Vec<&str> = s.split('.').collect();
    let last_is_fwc = theirs.last() == Some(&">");
    if (mine.len() > theirs.len() && !last_is_fwc) || mine.len() < theirs.len() {
        return false;
    }
    for (i, tok) in theirs.iter().enumerate() {
        if i + 1 == theirs.len() && *tok == ">" {
            return true;
        }
        if mine.get(i) != Some(tok) && *tok != "*" {
            return false;
        }
    }
    true
}

/// A permission entry: a subject, or `subject queue` where queues are allowed.
pub(crate) fn validate_permission_subject(subj: &str, permit_queue: bool, vr: &mut ValidationResults) {
    let tokens: Vec<&str> = subj.split(' ').collect();
    match tokens.as_slice() {
        [s] => validate_subject(s, vr),
        [s, q] => {
            validate_subject(s, vr);
            validate_subject(q, vr);
            if !permit_queue {
                vr.add_error(format!(
                    r#"Permission Subject "{subj}" is not allowed to contain queue"#
                ));
            }
        }
        _ => vr.add_error(format!(r#"Permission Subject "{subj}" contains too many spaces"#)),
    }
}

/// Parses a clock time the way Go's `time.Parse("15:04:05", s)` does: hour of one or two
/// digits, two-digit minutes and seconds, an optional fraction (`.5`, `,25`). Returns
/// seconds since midnight.
pub fn parse_clock(s: &str) -> Option<u32> {
    let b = s.as_bytes();
    let (hour, mut i) = match (b.first(), b.get(1)) {
        (Some(h1), Some(h2)) if h1.is_ascii_digit() && h2.is_ascii_digit() => {
            (u32::from(h1 - b'0') * 10 + u32::from(h2 - b'0'), 2)
        }
        (Some(h1), _) if h1.is_ascii_digit() => (u32::from(h1 - b'0'), 1),
        _ => return None,
    };
    let two = |i: &mut usize| -> Option<u32> {
        if b.get(*i) != Some(&b':') {
            return None;
        }
        let (d1, d2) = (b.get(*i + 1)?, b.get(*i + 2)?);
        if !d1.is_ascii_digit() || !d2.is_ascii_digit() {
            return None;
        }
        *i += 3;
        Some(u32::from(d1 - b'0') * 10 + u32::from(d2 - b'0'))
    };
    let minute = two(&mut i)?;
    let second = two(&mut i)?;
    if matches!(b.get(i), Some(b'.' | b',')) && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    if i != b.len() || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    Some(hour * 3600 + minute * 60 + second)
}

/// A CIDR as Go's `net.ParseCIDR` reads it: an IPv4 or IPv6 address (no zone), `/`, a
/// decimal prefix length within the address size. Returns the address and the length.
pub fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = s.split_once('/')?;
    let ip: IpAddr = addr.parse().ok()?;
    if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) || len.len() > 8 {
        return None;
    }
    let bits: u32 = len.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    if bits > max {
        return None;
    }
    Some((ip, bits as u8))
}

/// Whether `ip` is inside the network `(net, bits)` from [`parse_cidr`], as Go's
/// `IPNet.Contains` decides it: IPv4 and IPv4-mapped IPv6 addresses compare as IPv4 (a
/// mapped network's prefix length loses its 96 leading bits), other IPv6 as 128 bits.
pub fn cidr_contains(net: (IpAddr, u8), ip: IpAddr) -> bool {
    fn norm(a: IpAddr) -> (u128, bool) {
        match a {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), true),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => (u128::from(u32::from(v4)), true),
                None => (u128::from(v6), false),
            },
        }
    }
    let (net_ip, bits) = net;
    let (n, n4) = norm(net_ip);
    let (a, a4) = norm(ip);
    if n4 != a4 {
        return false;
    }
    let bits = if n4 && net_ip.is_ipv6() {
        u32::from(bits).saturating_sub(96)
    } else {
        u32::from(bits)
    };
    let width = if n4 { 32 } else { 128 };
    let ones = u128::MAX >> (128 - width);
    let host = u128::MAX.checked_shr(128 - width + bits.min(width)).unwrap_or(0);
    let mask = ones & !host;
    n & mask == a & mask
}

/// The shape of a time zone name `time.LoadLocation` could load: `UTC`, `Local`, or an
/// IANA name (`Area/Location`, letters, digits, `_+-/`). Whether the zone exists needs the
/// zone database, which is the caller's business (no I/O here).
pub fn plausible_time_zone(name: &str) -> bool {
    if name == "UTC" || name == "Local" {
        return true;
    }
    !name.is_empty()
        && !name.starts_with('/')
        && !name.contains("..")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_+-/".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_times() {
        let cases = [
            ("00:00:00", Some(0)),
            ("9:05:07", Some(9 * 3600 + 5 * 60 + 7)),
            ("23:59:59", Some(86399)),
            ("12:00:00.250", Some(43200)),
            ("24:00:00", None),
            ("12:60:00", None),
            ("12:5:00", None),
            ("12:00", None),
            ("12:00:00x", None),
            ("", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_clock(s), want, "{s}");
        }
    }

    #[test]
    fn cidrs() {
        assert!(parse_cidr("10.0.0.0/8").is_some());
        assert!(parse_cidr("::1/128").is_some());
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "10.0.0.0/",
            "10.0.0.0/-1",
            "010.0.0.0/8",
            "x/8",
            "::1/129",
        ] {
            assert!(parse_cidr(bad).is_none(), "{bad}");
        }
        let net = parse_cidr("192.168.0.0/16").unwrap_or((IpAddr::from([0, 0, 0, 0]), 0));
        assert!(cidr_contains(net, "192.168.4.5".parse().unwrap_or(net.0)));
        assert!(!cidr_contains(net, "192.169.4.5".parse().unwrap_or(net.0)));
        let all6 = parse_cidr("::/0").unwrap_or(net);
        assert!(cidr_contains(all6, "::1".parse().unwrap_or(net.0)));
    }

    #[test]
    fn containment() {
        let cases = [
            ("foo.bar", "foo.*", true),
            ("foo.bar.baz", "foo.>", true),
            ("foo", "foo.>", false),
            ("foo.bar", "foo.baz", false),
            ("foo.bar.baz", "foo.*", false),
            ("a", "a", true),
        ];
        for (s, other, want) in cases {
            assert_eq!(is_contained_in(s, other), want, "{s} in {other}");
        }
    }

    #[test]
    fn results_blocking_and_result() {
        let mut vr = ValidationResults::new();
        vr.add_warning("w");
        assert!(!vr.is_blocking(true));
        vr.add_time_check(EXPIRED);
        assert!(vr.is_blocking(true) && !vr.is_blocking(false));
        assert_eq!(vr.clone().into_result(), Err(JwtError::Expired));
        vr.add_error("e");
        assert_eq!(vr.errors(), vec!["e"]);
        assert_eq!(vr.warnings(), vec!["w", EXPIRED]);
    }
}
