//! Message counters (`allow_msg_counter`, ADR-49): a publish carries `Nats-Incr: N` and
//! no body; the stream stores `{"val":"<total>"}` for the subject, the running total of
//! every increment (an arbitrary-precision signed integer, as nats-server keeps it in a
//! `big.Int`), and the PubAck carries `"val"`. A message sourced from another counter
//! stream (`Nats-Stream-Source`) adds the difference to the last value seen from that
//! origin, tracked in the `Nats-Counter-Sources` header.

use crate::jetstream::api::errors_table as e;
use crate::jetstream::api::ApiError;
use crate::proto::headers;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// `Nats-Incr`.
pub const INCR: &str = "Nats-Incr";
/// `Nats-Counter-Sources`: `{"<stream>":{"<subject>":"<value>"}}`.
pub const SOURCES: &str = "Nats-Counter-Sources";
const STREAM_SOURCE: &str = "Nats-Stream-Source";

/// Limbs of this base, least significant first.
const BASE: u64 = 1_000_000_000;

/// A signed integer of any size (sign and magnitude; zero is never negative).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BigInt {
    negative: bool,
    limbs: Vec<u32>,
}

impl BigInt {
    /// Parse as Go's `big.Int.SetString(s, 10)`: an optional sign, then one or more
    /// decimal digits, nothing else.
    pub fn parse(s: &str) -> Option<BigInt> {
        let (negative, digits) = match s.as_bytes().first() {
            Some(b'-') => (true, s.get(1..)?),
            Some(b'+') => (false, s.get(1..)?),
            _ => (false, s),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut limbs = Vec::with_capacity(digits.len() / 9 + 1);
        let mut end = digits.len();
        while end > 0 {
            let start = end.saturating_sub(9);
            limbs.push(digits.get(start..end)?.parse::<u32>().ok()?);
            end = start;
        }
        let mut v = BigInt { negative, limbs };
        v.trim();
        Some(v)
    }

    fn trim(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
        if self.limbs.is_empty() {
            self.negative = false;
        }
    }

    fn cmp_magnitude(a: &[u32], b: &[u32]) -> Ordering {
        a.len().cmp(&b.len()).then_with(|| a.iter().rev().cmp(b.iter().rev()))
    }

    fn add_magnitude(a: &[u32], b: &[u32]) -> Vec<u32> {
        let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
        let mut carry = 0u64;
        for i in 0..a.len().max(b.len()) {
            let s = u64::from(a.get(i).copied().unwrap_or(0)) + u64::from(b.get(i).copied().unwrap_or(0)) + carry;
            out.push((s % BASE) as u32);
            carry = s / BASE;
        }
        if carry > 0 {
            out.push(carry as u32);
        }
        out
    }

    /// `a - b` for `|a| >= |b|`.
    fn sub_magnitude(a: &[u32], b: &[u32]) -> Vec<u32> {
        let mut out = Vec::with_capacity(a.len());
        let mut borrow = 0i64;
        for (i, &x) in a.iter().enumerate() {
            let mut d = i64::from(x) - i64::from(b.get(i).copied().unwrap_or(0)) - borrow;
            borrow = 0;
            if d < 0 {
                d += BASE as i64;
                borrow = 1;
            }
            out.push(d as u32);
        }
        out
    }

    /// `self + other`.
    pub fn add(&self, other: &BigInt) -> BigInt {
        let mut v = if self.negative == other.negative {
            BigInt {
                negative: self.negative,
                limbs: Self::add_magnitude(&self.limbs, &other.limbs),
            }
        } else {
            match Self::cmp_magnitude(&self.limbs, &other.limbs) {
                Ordering::Less => BigInt {
                    negative: other.negative,
                    limbs: Self::sub_magnitude(&other.limbs, &self.limbs),
                },
                _ => BigInt {
                    negative: self.negative,
                    limbs: Self::sub_magnitude(&self.limbs, &other.limbs),
                },
            }
        };
        v.trim();
        v
    }

    /// `self - other`.
    pub fn sub(&self, other: &BigInt) -> BigInt {
        let mut neg = other.clone();
        neg.negative = !neg.negative;
        neg.trim();
        self.add(&neg)
    }
}

impl std::fmt::Display for BigInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some((top, rest)) = self.limbs.split_last() else {
            return f.write_str("0");
        };
        if self.negative {
            f.write_str("-")?;
        }
        write!(f, "{top}")?;
        for l in rest.iter().rev() {
            write!(f, "{l:09}")?;
        }
        Ok(())
    }
}

/// The increment of a publish: `Ok(None)` without (or with an empty) `Nats-Incr`,
/// an error when it is not an integer.
pub fn increment(hdr: Option<&[u8]>) -> Result<Option<BigInt>, ApiError> {
    let Some(v) = hdr.and_then(|h| headers::get(h, INCR)).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    std::str::from_utf8(v)
        .ok()
        .and_then(BigInt::parse)
        .map(Some)
        .ok_or_else(|| e::JS_MESSAGE_INCR_INVALID_ERR.err())
}

/// The checks nats-server makes of a non-sourced increment: counters on, no body, and
/// none of the headers that make no sense with one.
pub fn check_increment(hdr: &[u8], payload: &[u8], allowed: bool) -> Result<(), ApiError> {
    if !allowed {
        return Err(e::JS_MESSAGE_INCR_DISABLED_ERR.err());
    }
    if !payload.is_empty() {
        return Err(e::JS_MESSAGE_INCR_PAYLOAD_ERR.err());
    }
    let present = |k: &str| headers::get(hdr, k).is_some_and(|v| !v.is_empty());
    let number = |k: &str| {
        headers::get(hdr, k)
            .and_then(|v| std::str::from_utf8(v).ok())
            .is_some_and(|v| v.trim().parse::<u64>().is_ok())
    };
    if present("Nats-Rollup")
        || present("Nats-Expected-Stream")
        || present("Nats-Expected-Last-Msg-Id")
        || present("Nats-Expected-Last-Subject-Sequence-Subject")
        || number("Nats-Expected-Last-Sequence")
        || number("Nats-Expected-Last-Subject-Sequence")
    {
        return Err(e::JS_MESSAGE_INCR_INVALID_ERR.err());
    }
    Ok(())
}

#[derive(serde::Deserialize)]
struct CounterValue {
    #[serde(default)]
    val: String,
}

type Sources = BTreeMap<String, BTreeMap<String, String>>;

fn broken() -> ApiError {
    e::JS_MESSAGE_COUNTER_BROKEN_ERR.err()
}

fn value_of(body: &[u8]) -> Result<BigInt, ApiError> {
    let v: CounterValue = serde_json::from_slice(body).map_err(|_| broken())?;
    Ok(BigInt::parse(&v.val).unwrap_or_default())
}

/// The body stored for a total.
pub fn body(total: &BigInt) -> Vec<u8> {
    format!("{{\"val\":\"{total}\"}}").into_bytes()
}

/// The total in a stored counter body (for the PubAck's `val`).
pub fn total_in(body: &[u8]) -> String {
    serde_json::from_slice::<CounterValue>(body)
        .map(|v| v.val)
        .unwrap_or_default()
}

/// Set `key` to `value` the way nats-server's `setHeader` does: an existing value is
/// replaced where it stands (one space after the colon kept), else the line is appended.
fn set_header(hdr: &[u8], key: &str, value: &str) -> Vec<u8> {
    let needle = format!("\r\n{key}:");
    let Some(at) = memchr::memmem::find(hdr, needle.as_bytes()) else {
        return headers::with(Some(hdr), key, value);
    };
    let mut start = at + needle.len();
    if hdr.get(start) == Some(&b' ') {
        start += 1;
    }
    let Some(len) = hdr.get(start..).and_then(|r| memchr::memchr(b'\r', r)) else {
        return hdr.to_vec();
    };
    let mut out = Vec::with_capacity(hdr.len() + value.len());
    out.extend_from_slice(hdr.get(..start).unwrap_or_default());
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(hdr.get(start + len..).unwrap_or_default());
    out
}

/// What an increment stores.
#[derive(Debug)]
pub struct Applied {
    /// The header block to store (changed for a sourced message).
    pub hdr: Option<Vec<u8>>,
    pub body: Vec<u8>,
}

/// Apply `incr` on top of `last` (the subject's last stored message, header and body).
/// `subject` is the stream subject; `hdr` the publish's header block.
pub fn apply(
    last: Option<(&[u8], &[u8])>,
    subject: &str,
    hdr: &[u8],
    payload: &[u8],
    incr: &BigInt,
) -> Result<Applied, ApiError> {
    let mut total = BigInt::default();
    let mut sources = Sources::new();
    if let Some((lhdr, lbody)) = last {
        total = value_of(lbody)?;
        if let Some(ncs) = headers::get(lhdr, SOURCES).filter(|v| !v.is_empty()) {
            sources = serde_json::from_slice(ncs).map_err(|_| broken())?;
        }
    }
    let mut incr = incr.clone();
    let mut new_hdr = None;
    if let Some(src) = headers::get(hdr, STREAM_SOURCE).filter(|v| !v.is_empty()) {
        // Sourced: the origin's total replaces the last one seen from it.
        let src = String::from_utf8_lossy(src);
        let fields: Vec<&str> = src.split(' ').collect();
        let origin = fields.first().copied().unwrap_or_default().to_string();
        let orig_subject = fields.get(4).copied().unwrap_or(subject).to_string();
        let sourced = value_of(payload)?;
        let per = sources.entry(origin).or_default();
        let previous = per
            .insert(orig_subject, sourced.to_string())
            .and_then(|p| BigInt::parse(&p))
            .unwrap_or_default();
        incr = sourced.sub(&previous);
        new_hdr = Some(set_header(hdr, INCR, &incr.to_string()));
    }
    total = total.add(&incr);
    if !sources.is_empty() {
        let json = serde_json::to_string(&sources).map_err(|_| broken())?;
        new_hdr = Some(set_header(new_hdr.as_deref().unwrap_or(hdr), SOURCES, &json));
    }
    Ok(Applied {
        hdr: new_hdr,
        body: body(&total),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> BigInt {
        BigInt::parse(s).unwrap()
    }

    #[test]
    fn parse_like_go_big_int() {
        for (s, want) in [
            ("5", Some("5")),
            ("+5", Some("5")),
            ("-7", Some("-7")),
            ("-0", Some("0")),
            ("000123", Some("123")),
            ("123456789012345678901234567890", Some("123456789012345678901234567890")),
            ("", None),
            ("-", None),
            ("+", None),
            ("1_0", None),
            ("0x10", None),
            (" 5", None),
            ("5 ", None),
            ("1.5", None),
            ("١", None),
        ] {
            assert_eq!(BigInt::parse(s).map(|v| v.to_string()).as_deref(), want, "{s:?}");
        }
    }

    #[test]
    fn arithmetic() {
        for (a, b, sum) in [
            ("5", "123456789012345678901234567890", "123456789012345678901234567895"),
            ("123456789012345678901234567895", "-7", "123456789012345678901234567888"),
            ("1", "-1", "0"),
            ("-1", "1", "0"),
            ("-5", "3", "-2"),
            ("3", "-5", "-2"),
            ("-5", "-5", "-10"),
            ("999999999", "1", "1000000000"),
            ("1000000000", "-1", "999999999"),
            ("-1000000000000000000", "1", "-999999999999999999"),
            ("0", "0", "0"),
        ] {
            assert_eq!(n(a).add(&n(b)).to_string(), sum, "{a} + {b}");
            assert_eq!(n(sum).sub(&n(b)).to_string(), n(a).to_string(), "{sum} - {b}");
        }
    }

    #[test]
    fn increments_from_headers() {
        let h = |v: &str| format!("NATS/1.0\r\nNats-Incr: {v}\r\n\r\n").into_bytes();
        assert_eq!(increment(None).unwrap(), None);
        assert_eq!(increment(Some(&h(""))).unwrap(), None);
        assert_eq!(increment(Some(&h("12"))).unwrap(), Some(n("12")));
        assert_eq!(increment(Some(&h("x"))).unwrap_err().err_code, 10171);
    }

    #[test]
    fn increment_checks() {
        let base = "NATS/1.0\r\nNats-Incr: 1\r\n";
        let with = |extra: &str| format!("{base}{extra}\r\n").into_bytes();
        assert!(check_increment(&with(""), b"", true).is_ok());
        assert_eq!(check_increment(&with(""), b"", false).unwrap_err().err_code, 10168);
        assert_eq!(check_increment(&with(""), b"x", true).unwrap_err().err_code, 10170);
        for bad in [
            "Nats-Rollup: sub\r\n",
            "Nats-Expected-Stream: S\r\n",
            "Nats-Expected-Last-Msg-Id: a\r\n",
            "Nats-Expected-Last-Sequence: 0\r\n",
            "Nats-Expected-Last-Subject-Sequence: 3\r\n",
            "Nats-Expected-Last-Subject-Sequence-Subject: a\r\n",
        ] {
            assert_eq!(
                check_increment(&with(bad), b"", true).unwrap_err().err_code,
                10171,
                "{bad}"
            );
        }
        // Not a number: treated as absent, as nats-server does.
        assert!(check_increment(&with("Nats-Expected-Last-Sequence: x\r\n"), b"", true).is_ok());
    }

    #[test]
    fn apply_totals() {
        let hdr = b"NATS/1.0\r\nNats-Incr: 2\r\n\r\n";
        let first = apply(None, "c", hdr, b"", &n("2")).unwrap();
        assert_eq!(first.body, br#"{"val":"2"}"#);
        assert!(first.hdr.is_none());
        let next = apply(Some((hdr, &first.body)), "c", hdr, b"", &n("-5")).unwrap();
        assert_eq!(next.body, br#"{"val":"-3"}"#);
        assert_eq!(total_in(&next.body), "-3");
        assert_eq!(
            apply(Some((hdr, b"not json")), "c", hdr, b"", &n("1"))
                .unwrap_err()
                .err_code,
            10172
        );
        // An empty object counts from zero.
        assert_eq!(
            apply(Some((hdr, b"{}")), "c", hdr, b"", &n("1")).unwrap().body,
            br#"{"val":"1"}"#
        );
    }

    #[test]
    fn headers_set_in_place() {
        let h = b"NATS/1.0\r\nNats-Incr: 1\r\nB: 2\r\n\r\n";
        assert_eq!(
            set_header(h, INCR, "-10"),
            b"NATS/1.0\r\nNats-Incr: -10\r\nB: 2\r\n\r\n"
        );
        assert_eq!(
            set_header(h, "C", "3"),
            b"NATS/1.0\r\nNats-Incr: 1\r\nB: 2\r\nC: 3\r\n\r\n"
        );
        assert_eq!(
            set_header(b"NATS/1.0\r\nB:2\r\n\r\n", "B", "x"),
            b"NATS/1.0\r\nB:x\r\n\r\n"
        );
    }

    #[test]
    fn apply_sourced() {
        let hdr = b"NATS/1.0\r\nNats-Incr: 1\r\nNats-Stream-Source: ORIG 3 > > orig.x\r\n\r\n";
        let a = apply(None, "agg.x", hdr, br#"{"val":"10"}"#, &n("1")).unwrap();
        assert_eq!(a.body, br#"{"val":"10"}"#);
        let h = a.hdr.unwrap();
        assert_eq!(headers::get(&h, SOURCES), Some(&br#"{"ORIG":{"orig.x":"10"}}"#[..]));
        assert_eq!(headers::get(&h, INCR), Some(&b"10"[..]));
        // The origin moved to 15: 5 more.
        let b = apply(Some((&h, &a.body)), "agg.x", hdr, br#"{"val":"15"}"#, &n("1")).unwrap();
        assert_eq!(b.body, br#"{"val":"15"}"#);
        assert_eq!(headers::get(&b.hdr.unwrap(), INCR), Some(&b"5"[..]));
    }
}
