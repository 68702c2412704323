//! Fuzz target `js_batch_headers`: the parsers behind message counters, batches and
//! schedules, on arbitrary text: `Nats-Incr` integers (`BigInt`), `Nats-Schedule`
//! patterns (`@at`, `@every`, predefined, six-field cron) and fast batch reply subjects.
//!
//! Checked beyond "never panics":
//! - an integer that parses prints back to a form that parses to the same value, and
//!   `(a + b) - b == a`;
//! - a repeating schedule fires after its reference time and not before now;
//! - a parsed fast batch reply has a sequence of at least 1 and a flow of at least 1;
//! - a header lookup (`proto::headers::get`, what JetStream reads every header with)
//!   finds what a position-by-position search finds: the first line start where the key
//!   is followed by `:`.
//!
//! Input layout: [0] selector, then the text (lossy UTF-8), split at the first `|` into
//! two operands where two are needed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::jetstream::stream::batch_fast::parse_reply;
use rnats::jetstream::stream::counter::BigInt;
use rnats::jetstream::stream::schedule_pattern;

const NOW: i64 = 1_767_225_600_000_000_000; // 2026-01-01T00:00:00Z

fuzz_target!(|input: &[u8]| {
    let Some((&sel, rest)) = input.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let (a, b) = text.split_once('|').unwrap_or((&text, "0"));
    match sel % 4 {
        0 => {
            if let Some(x) = BigInt::parse(a) {
                let again = BigInt::parse(&x.to_string()).expect("printed integers parse");
                assert_eq!(again, x);
                if let Some(y) = BigInt::parse(b) {
                    assert_eq!(x.add(&y).sub(&y), x);
                }
            }
        }
        1 => {
            let ts = NOW - i64::from(sel) * 7_000_000_000;
            if let Some(n) = schedule_pattern::next(a, None, ts, NOW) {
                if n.repeat {
                    assert!(n.at > ts, "{a:?} fires at {} before {ts}", n.at);
                    assert!(n.at >= NOW, "{a:?} fires at {} before now", n.at);
                }
            }
        }
        3 => {
            // The key is the first operand, the header block the second (raw bytes).
            let hdr = b.as_bytes();
            let naive = (2..=hdr.len()).find(|&p| {
                hdr.get(p - 2..p) == Some(b"\r\n")
                    && !a.is_empty()
                    && hdr.get(p..).is_some_and(|r| r.starts_with(a.as_bytes()))
                    && hdr.get(p + a.len()) == Some(&b':')
            });
            let found = rnats::proto::headers::get(hdr, a);
            assert_eq!(found.is_some(), naive.is_some(), "{a:?} in {hdr:?}");
            if let (Some(v), Some(p)) = (found, naive) {
                let after = hdr.get(p + a.len() + 1..).unwrap_or_default();
                let skip = after.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
                let rest = after.get(skip..).unwrap_or_default();
                let end = rest.iter().position(|&c| c == b'\r').unwrap_or(rest.len());
                assert_eq!(v, &rest[..end]);
            }
        }
        _ => {
            if let Some(Some(r)) = parse_reply(a.as_bytes()) {
                assert!(r.seq >= 1 && r.flow >= 1);
                assert!(!(r.eob && r.seq == 1));
            }
        }
    }
});
