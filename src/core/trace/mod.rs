//! Message tracing (FEATURES.md §20), the parts that need no shard: which header blocks
//! ask for a trace and how (nats-server's rules, byte for byte), the JSON of a trace event
//! ([`event`]) and the optional compression of it ([`compress`]).
//!
//! A message asks for a trace with a `Nats-Trace-Dest: <subject>` header (optionally
//! `Nats-Trace-Only: true`: trace, do not deliver), or with a sampled W3C `traceparent`
//! header when its account has `msg_trace { dest, sampling }`. The shard side (what is
//! recorded while the message is routed, and how the shards' parts become one event) is in
//! `core::shard::trace`.
//!
//! Input here is whatever a client put in its header block: nothing indexes by a claimed
//! length, nothing panics.

pub mod compress;
pub mod event;
pub mod shadow;

use std::collections::BTreeMap;

/// The header naming the subject trace events go to.
pub const TRACE_DEST: &str = "Nats-Trace-Dest";
/// The value of [`TRACE_DEST`] that turns tracing off (not a valid subject on purpose).
pub const TRACE_DISABLED: &str = "trace disabled";
/// `true`, `on` or `1`: trace the message without delivering it.
pub const TRACE_ONLY: &str = "Nats-Trace-Only";
/// Set by servers on messages they pass to other servers (routes, gateways, leafnodes).
pub const TRACE_HOP: &str = "Nats-Trace-Hop";
/// The W3C trace context header (matched in any case).
pub const TRACEPARENT: &str = "traceparent";
/// The header asking for a compressed trace event.
pub const ACCEPT_ENCODING: &str = "Accept-Encoding";
/// The header of a compressed trace event.
pub const CONTENT_ENCODING: &str = "Content-Encoding";

/// The status line a traced message's header block must start with.
const HDR_LINE: &[u8] = b"NATS/1.0\r\n";

/// The cheap test of the publish path, for messages with headers: could this block ask
/// for a trace (or name a trace destination that permissions must allow)? False means
/// neither header is there; true means [`scan`] and [`slice_header`] decide.
///
/// Both take a header name only at the start of a line (after a CRLF), so only line
/// starts are looked at. (`memmem::find` built a searcher per call: 30 % of an HPUB's
/// cost; a `memchr3` over `N`, `t` and `T` was still 20 %.)
pub fn may_trace(hdr: &[u8]) -> bool {
    crate::proto::headers::line_starts(hdr).any(|at| {
        let rest = hdr.get(at..).unwrap_or_default();
        rest.starts_with(TRACE_DEST.as_bytes())
            || rest
                .get(..TRACEPARENT.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(TRACEPARENT.as_bytes()))
    })
}

/// The headers of a message that asks for a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Every header with a non-empty name and value, names as written, values in order.
    pub headers: BTreeMap<String, Vec<String>>,
    /// Only a sampled `traceparent` asked (no `Nats-Trace-Dest`): the account's
    /// `msg_trace` destination and sampling decide.
    pub external: bool,
}

impl Found {
    /// The first value of header `key`, or `""`.
    pub fn first(&self, key: &str) -> &str {
        self.headers.get(key).and_then(|v| v.first()).map_or("", String::as_str)
    }

    /// `Nats-Trace-Only` says trace without delivering.
    pub fn trace_only(&self) -> bool {
        matches!(
            self.first(TRACE_ONLY).to_ascii_lowercase().as_str(),
            "1" | "true" | "on"
        )
    }
}

/// Look for the trace headers in a header block, as nats-server does: the block must
/// start with `NATS/1.0\r\n` (no status); each `name: value` line with both parts
/// non-empty is kept (value trimmed of spaces and tabs); a `traceparent` (any case) counts
/// when its flags say sampled, `Nats-Trace-Dest` (exact case) when present, and a
/// `Nats-Trace-Dest: trace disabled` turns tracing off whatever else is there.
pub fn scan(hdr: &[u8]) -> Option<Found> {
    let mut rest = hdr.strip_prefix(HDR_LINE)?;
    let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
    let (mut dest, mut parent) = (false, false);
    while let Some(colon) = memchr::memchr(b':', rest) {
        let key = rest.get(..colon).unwrap_or_default();
        let after = rest.get(colon + 1..).unwrap_or_default();
        let skip = after.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
        let value_start = after.get(skip..).unwrap_or_default();
        let Some(nl) = memchr::memmem::find(value_start, b"\r\n") else {
            break;
        };
        let mut value = value_start.get(..nl).unwrap_or_default();
        while let [head @ .., b' ' | b'\t'] = value {
            value = head;
        }
        if !key.is_empty() && !value.is_empty() {
            if !parent && key.eq_ignore_ascii_case(TRACEPARENT.as_bytes()) {
                parent = sampled_traceparent(value);
            } else if !dest && key == TRACE_DEST.as_bytes() {
                if value == TRACE_DISABLED.as_bytes() {
                    return None;
                }
                dest = true;
            }
            pairs.push((key, value));
        }
        rest = value_start.get(nl + 2..).unwrap_or_default();
    }
    if !dest && !parent {
        return None;
    }
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in pairs {
        headers
            .entry(String::from_utf8_lossy(k).into_owned())
            .or_default()
            .push(String::from_utf8_lossy(v).into_owned());
    }
    Some(Found {
        headers,
        external: !dest && parent,
    })
}

/// A `traceparent` value (`version-traceid-parentid-flags`) whose flags have the sampled
/// bit. The flags are read as Go's `strconv.ParseInt(flags, 16, 8)` reads them: two
/// characters, an optional `+`, at most 0x7f.
pub fn sampled_traceparent(value: &[u8]) -> bool {
    let mut parts = value.split(|&b| b == b'-');
    let flags = match (parts.next(), parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(_), Some(_), Some(_), Some(f), None) => f,
        _ => return false,
    };
    let v = match flags {
        [b'+', d] => hex(*d),
        [a, b] => hex(*a).zip(hex(*b)).map(|(a, b)| a * 16 + b),
        _ => None,
    };
    v.is_some_and(|v| v <= 0x7f && v & 1 == 1)
}

fn hex(b: u8) -> Option<u32> {
    char::from(b).to_digit(16)
}

/// nats-server's `sliceHeader`: the value of `key` (exact case) in `hdr`, found at a line
/// start and followed by `:`, leading spaces skipped, up to the line's end. `None` when
/// the key is not there; an empty value is `Some(b"")`.
pub fn slice_header<'a>(hdr: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let k = key.as_bytes();
    if hdr.is_empty() || k.is_empty() {
        return None;
    }
    let mut offset = 0;
    let start = loop {
        let rel = memchr::memmem::find(hdr.get(offset..)?, k)?;
        // As the reference: a key too close to the start of what is searched ends it.
        if rel < 2 {
            return None;
        }
        let at = offset + rel;
        if at + 1 >= hdr.len() || hdr.get(at - 2..at) != Some(b"\r\n") {
            offset = at + k.len();
            continue;
        }
        if at + k.len() >= hdr.len() {
            return None;
        }
        if hdr.get(at + k.len()) != Some(&b':') {
            offset = at + k.len();
            continue;
        }
        break at + k.len() + 1;
    };
    let rest = hdr.get(start..)?;
    let skip = rest.iter().take_while(|&&b| b == b' ').count();
    let value = rest.get(skip..)?;
    let end = value.windows(2).position(|w| w == b"\r\n").unwrap_or(value.len());
    value.get(..end)
}

/// nats-server's `IsValidPublishSubject`: a valid subject without wildcard tokens.
pub fn is_valid_publish_subject(s: &[u8]) -> bool {
    crate::core::subject::is_valid_subject(s) && !crate::core::subject::has_wildcard(s)
}

/// Keep a `percent` share of sampled requests, as nats-server draws it (a value 0..99
/// at most `percent`, so the share is slightly more than asked; 100 or more, or 0 and
/// less, is everything).
pub fn keep_sample(percent: u8, draw: u64) -> bool {
    if percent == 0 || percent >= 100 {
        return true;
    }
    draw % 100 <= u64::from(percent)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
