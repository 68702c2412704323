//! Trace headers, shadow subjects, the event JSON and compression, checked against the
//! reference's rules (values taken from nats-server 2.14's behaviour).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::compress::{crc32c, snappy_frames, Encoding};
use super::event::{self, Egress, IngressStep, Step};
use super::shadow::shadow_subject;
use super::*;
use crate::core::accounts::links::Rewrite;
use std::io::Read;

const SAMPLED: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn block(lines: &[&str]) -> Vec<u8> {
    let mut b = b"NATS/1.0\r\n".to_vec();
    for l in lines {
        b.extend_from_slice(l.as_bytes());
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(b"\r\n");
    b
}

#[test]
fn the_cheap_test_sees_both_headers_in_any_case() {
    assert!(may_trace(&block(&["Nats-Trace-Dest: x"])));
    assert!(may_trace(&block(&["TRACEPARENT: x"])));
    assert!(may_trace(&block(&["a: b", "TraceParent: x"])));
    assert!(!may_trace(&block(&["Nats-Msg-Id: 1", "nats-trace-dest: x"])));
    assert!(!may_trace(b"NATS/1.0\r\n\r\n"));
    assert!(!may_trace(b""));
    assert!(!may_trace(b"tracepar"));
    // The header at every offset, and last in a block cut short.
    for pad in 0..24 {
        let filler = format!("X: {}", "a".repeat(pad));
        for (name, yes) in [
            ("Nats-Trace-Dest: x", true),
            ("traceParent: x", true),
            ("Nats-Trace-Des: x", false),
        ] {
            let b = block(&[&filler, name]);
            assert_eq!(may_trace(&b), yes, "{name} after {pad} bytes");
            let cut = &b[..b.len() - 4];
            assert_eq!(may_trace(cut), yes, "{name} after {pad} bytes, at the end");
        }
        // Not at a line start: no.
        assert!(!may_trace(&block(&[&format!("{filler}Nats-Trace-Dest: x")])));
    }
}

#[test]
fn scanning_headers_as_the_reference() {
    // (header block, traced?, external?, headers kept)
    type Case<'a> = (Vec<u8>, bool, bool, Vec<(&'a str, Vec<&'a str>)>);
    let cases: Vec<Case> = vec![
        (
            block(&["Nats-Trace-Dest: trc"]),
            true,
            false,
            vec![("Nats-Trace-Dest", vec!["trc"])],
        ),
        (
            block(&["Nats-Trace-Dest: trc", "X: 1", "X: 2 ", "Nats-Trace-Dest:\tother\t"]),
            true,
            false,
            vec![("Nats-Trace-Dest", vec!["trc", "other"]), ("X", vec!["1", "2"])],
        ),
        // A status line, the disabled value, a lowercase name: no trace.
        (
            b"NATS/1.0 503\r\nNats-Trace-Dest: trc\r\n\r\n".to_vec(),
            false,
            false,
            vec![],
        ),
        (block(&["Nats-Trace-Dest: trace disabled"]), false, false, vec![]),
        (
            block(&["Nats-Trace-Dest: trc", "Nats-Trace-Dest: trace disabled"]),
            true,
            false,
            vec![],
        ),
        (block(&["nats-trace-dest: trc"]), false, false, vec![]),
        // Empty values are skipped.
        (block(&["Nats-Trace-Dest:"]), false, false, vec![]),
        (
            block(&["Nats-Trace-Dest:", &format!("traceparent: {SAMPLED}")]),
            true,
            true,
            vec![("traceparent", vec![SAMPLED])],
        ),
        (
            block(&[&format!("TraceParent: {SAMPLED}")]),
            true,
            true,
            vec![("TraceParent", vec![SAMPLED])],
        ),
        (block(&["traceparent: 00-a-b-00"]), false, false, vec![]),
        (
            block(&[&format!("traceparent: {SAMPLED}"), "Nats-Trace-Dest: trc"]),
            true,
            false,
            vec![("Nats-Trace-Dest", vec!["trc"]), ("traceparent", vec![SAMPLED])],
        ),
        // A line without a colon makes the next name start with it (as the reference).
        (block(&["X", "Nats-Trace-Dest: trc"]), false, false, vec![]),
        (b"NATS/1.0\r\nNats-Trace-Dest: trc".to_vec(), false, false, vec![]),
        (b"NATS/1.0\r\n".to_vec(), false, false, vec![]),
    ];
    for (i, (hdr, traced, external, kept)) in cases.into_iter().enumerate() {
        let found = scan(&hdr);
        assert_eq!(found.is_some(), traced, "case {i}: {:?}", String::from_utf8_lossy(&hdr));
        let Some(f) = found else { continue };
        assert_eq!(f.external, external, "case {i}");
        if !kept.is_empty() {
            let want: BTreeMap<String, Vec<String>> = kept
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
                .collect();
            assert_eq!(f.headers, want, "case {i}");
        }
    }
    // The disabled value only counts on the first destination header.
    let f = scan(&block(&["Nats-Trace-Dest: trc", "Nats-Trace-Dest: trace disabled"])).unwrap();
    assert_eq!(f.first(TRACE_DEST), "trc");
}

#[test]
fn traceparent_flags_read_as_go_parses_them() {
    for (v, sampled) in [
        (SAMPLED, true),
        ("00-a-b-00", false),
        ("00-a-b-03", true),
        ("00-a-b-7f", true),
        ("00-a-b-7e", false),
        ("00-a-b-ff", false), // beyond an int8
        ("00-a-b-81", false),
        ("00-a-b-+1", true),
        ("00-a-b-+2", false),
        ("00-a-b-1", false),
        ("00-a-b-001", false),
        ("00-a-b-0x", false),
        ("00-a-b-01-c", false),
        ("00-a-01", false),
        ("", false),
    ] {
        assert_eq!(sampled_traceparent(v.as_bytes()), sampled, "{v}");
    }
}

#[test]
fn slicing_a_header_as_the_reference() {
    let h = b"NATS/1.0\r\nA: 1\r\nNats-Trace-Dest:  trc \r\nB:\tx\r\nC:\r\n\r\n";
    assert_eq!(
        slice_header(h, "Nats-Trace-Dest"),
        Some(&b"trc "[..]),
        "leading spaces only"
    );
    assert_eq!(slice_header(h, "B"), Some(&b"\tx"[..]), "tabs are kept");
    assert_eq!(slice_header(h, "C"), Some(&b""[..]));
    assert_eq!(slice_header(h, "D"), None);
    assert_eq!(slice_header(h, "a"), None);
    assert_eq!(slice_header(b"NATS/1.0\r\nXB: 1\r\nB: 2\r\n", "B"), Some(&b"2"[..]));
    assert_eq!(slice_header(b"NATS/1.0\r\nBC: 1\r\n", "B"), None);
    // The reference gives up when the first match is within two bytes of where it looks.
    assert_eq!(slice_header(b"NATS/1.0\r\nA: 2\r\n", "A"), None);
    assert_eq!(slice_header(b"A: 1\r\n", "A"), None, "not at a line start");
    assert_eq!(slice_header(b"", "A"), None);
    assert_eq!(slice_header(b"\r\nA", "A"), None);
    assert_eq!(slice_header(b"\r\nA:", "A"), Some(&b""[..]));
}

#[test]
fn trace_only_values() {
    for (v, only) in [
        ("true", true),
        ("TRUE", true),
        ("on", true),
        ("1", true),
        ("yes", false),
        ("0", false),
    ] {
        let f = scan(&block(&["Nats-Trace-Dest: t", &format!("Nats-Trace-Only: {v}")])).unwrap();
        assert_eq!(f.trace_only(), only, "{v}");
    }
}

#[test]
fn sampling_keeps_draws_up_to_the_percentage() {
    assert!((0..1000).all(|d| keep_sample(100, d)));
    assert!((0..1000).all(|d| keep_sample(0, d)));
    let kept = (0..100).filter(|&d| keep_sample(1, d)).count();
    assert_eq!(kept, 2, "0 and 1 of 0..99, as rand.Int31n(100) <= 1");
    let kept = (0..100).filter(|&d| keep_sample(50, d)).count();
    assert_eq!(kept, 51);
}

#[test]
fn publish_subjects() {
    for (s, ok) in [
        ("a.b", true),
        ("a.*", false),
        ("a.>", false),
        ("a..b", false),
        ("a b", false),
        ("", false),
        ("a*", true),
    ] {
        assert_eq!(is_valid_publish_subject(s.as_bytes()), ok, "{s:?}");
    }
}

#[test]
fn shadow_subjects_of_stream_imports() {
    let prefix = Rewrite::Prefix(b"a.".to_vec().into());
    let cases: &[(&str, &Rewrite, &str, Option<&str>)] = &[
        // nats-server's shadow subscriptions, checked against it (tests/trace.rs).
        ("feed.>", &prefix, "a.feed.>", Some("feed.>")),
        ("feed.>", &prefix, "a.feed.x", Some("feed.x")),
        ("feed.>", &prefix, "a.*.x", Some("feed.x")),
        ("feed.>", &prefix, ">", Some("feed.>")),
        ("feed.>", &prefix, "b.feed.x", None),
        ("feed.>", &Rewrite::Same, "feed.x", Some("feed.x")),
        ("feed.>", &Rewrite::Same, ">", Some("feed.>")),
        ("feed.>", &Rewrite::Same, "feed.>", Some("feed.>")),
        ("x.y", &Rewrite::Literal(b"z".to_vec().into()), "z", Some("x.y")),
        ("x.y", &Rewrite::Literal(b"z".to_vec().into()), ">", Some("x.y")),
        ("x.y", &Rewrite::Same, "x.*", Some("x.y")),
    ];
    for (from, rw, sub, want) in cases {
        let got = shadow_subject(from.as_bytes(), rw, sub.as_bytes()).map(|v| String::from_utf8(v).unwrap());
        assert_eq!(got.as_deref(), *want, "{from} {sub}");
    }
    let t = crate::core::transform::SubjectTransform::new_strict("in.*.*", "out.$2.$1").unwrap();
    let rw = Rewrite::Transform(Box::new(t));
    let got = shadow_subject(b"in.*.*", &rw, b"out.b.a").unwrap();
    assert_eq!(got, b"in.a.b");
    assert_eq!(shadow_subject(b"in.*.*", &rw, b"out.*.*").unwrap(), b"in.*.*");
}

#[test]
fn event_json_has_the_reference_shape() {
    let server = event::Server::new("n", "127.0.0.1", "ID", "2.14.0", 7);
    let header: BTreeMap<String, Vec<String>> = [("Nats-Trace-Dest".to_string(), vec!["trc".to_string()])].into();
    let ingress = IngressStep {
        ts: "t".into(),
        cid: 5,
        acc: "B".into(),
        subj: "foo".into(),
        ..Default::default()
    };
    let mut steps = Vec::new();
    event::append_encoded(&mut steps, &event::encode(&Step::Mapping { to: "bar" }));
    event::append_encoded(
        &mut steps,
        &event::encode(&Step::Egress(Egress::client(6, "", "f.>", "", "", ""))),
    );
    event::append_encoded(
        &mut steps,
        &event::encode(&Step::Egress(Egress::client(7, "n7", "f", "q", "A", "why"))),
    );
    let json = event::assemble(&server, Some(&header), 36, &ingress, &steps);
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&v), ["server", "request", "events"]);
    assert_eq!(
        keys(&v["server"]),
        [
            "name",
            "host",
            "id",
            "ver",
            "feature_flags",
            "jetstream",
            "flags",
            "seq",
            "time"
        ]
    );
    assert_eq!(
        v["request"],
        serde_json::json!({"header": {"Nats-Trace-Dest": ["trc"]}, "msgsize": 36})
    );
    let evs = v["events"].as_array().unwrap();
    assert_eq!(keys(&evs[0]), ["type", "ts", "kind", "cid", "acc", "subj"]);
    assert_eq!(keys(&evs[1]), ["type", "ts", "to"]);
    assert_eq!(keys(&evs[2]), ["type", "ts", "kind", "cid", "sub"]);
    assert_eq!(
        keys(&evs[3]),
        ["type", "ts", "kind", "cid", "name", "acc", "sub", "queue", "error"]
    );
    assert!(
        String::from_utf8_lossy(&json).contains(r#""sub":"f.\u003e""#),
        "Go escaping"
    );
    // A refused message: no header map, no size when unknown.
    let json = event::assemble(&server, None, 0, &ingress, b"");
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["request"], serde_json::json!({}));
    assert_eq!(v["events"].as_array().unwrap().len(), 1);
}

#[test]
fn accept_encoding_picks_the_reference_encoding() {
    for (v, e) in [
        ("", Encoding::Plain),
        ("gzip", Encoding::Gzip),
        ("deflate, GZIP", Encoding::Gzip),
        ("snappy", Encoding::Snappy),
        ("S2", Encoding::Snappy),
        ("gzip, s2", Encoding::Snappy),
        ("br", Encoding::Identity),
    ] {
        assert_eq!(Encoding::from_accept(v), e, "{v}");
    }
    assert_eq!(Encoding::Identity.header_value(), Some("identity"));
    assert_eq!(Encoding::Plain.header_value(), None);
    assert_eq!(Encoding::Identity.encode(b"x".to_vec()), b"x");
}

#[test]
fn gzip_events_decode() {
    let data = br#"{"events":[]}"#.repeat(50);
    let z = Encoding::Gzip.encode(data.clone());
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&z[..]).read_to_end(&mut out).unwrap();
    assert_eq!(out, data);
}

#[test]
fn crc32c_check_value() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(crc32c(b""), 0);
}

#[test]
fn snappy_frames_are_a_valid_framing_stream() {
    let data: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
    let f = snappy_frames(&data);
    assert_eq!(&f[..10], b"\xff\x06\x00\x00sNaPpY");
    let mut rest = &f[10..];
    let mut out = Vec::new();
    let mut chunks = 0;
    while !rest.is_empty() {
        assert_eq!(rest[0], 0x01, "uncompressed chunk");
        let len = usize::from(rest[1]) | usize::from(rest[2]) << 8 | usize::from(rest[3]) << 16;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let body = &rest[8..4 + len];
        assert!(body.len() <= 65_536);
        let c = crc32c(body);
        assert_eq!(crc, c.rotate_right(15).wrapping_add(0xa282_ead8), "masked CRC-32C");
        out.extend_from_slice(body);
        rest = &rest[4 + len..];
        chunks += 1;
    }
    assert_eq!(chunks, 3);
    assert_eq!(out, data);
}

/// Bad input never panics: random and mutated header blocks through every parser.
#[test]
fn arbitrary_header_blocks_never_panic() {
    let seeds: Vec<Vec<u8>> = vec![
        block(&[
            "Nats-Trace-Dest: trc",
            &format!("traceparent: {SAMPLED}"),
            "Accept-Encoding: gzip",
        ]),
        block(&["Nats-Trace-Dest:", "Nats-Trace-Only: true"]),
        b"NATS/1.0\r\n:\r\n:::\r\n\r\n\r".to_vec(),
    ];
    let mut x: u64 = 0x1234_5678_9abc_def0;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let alphabet = b"NATS/1.0\r\n:- \ttraceparentNats-Trace-Dest01f+";
    for round in 0..20_000 {
        let mut h = seeds[round % seeds.len()].clone();
        for _ in 0..(next() % 8) {
            let at = (next() as usize) % (h.len() + 1);
            match next() % 3 {
                0 if at < h.len() => {
                    h.remove(at);
                }
                1 => h.insert(at, alphabet[(next() as usize) % alphabet.len()]),
                _ if at < h.len() => h[at] = next() as u8,
                _ => {}
            }
        }
        if round % 7 == 0 {
            h.truncate((next() as usize) % (h.len() + 1));
        }
        // The cheap test never says no where the full ones would find a header.
        let may = may_trace(&h);
        if let Some(f) = scan(&h) {
            assert!(may, "scan found a trace header in {h:?}");
            let _ = (f.trace_only(), f.first(TRACE_DEST), f.external);
        }
        assert!(may || slice_header(&h, TRACE_DEST).is_none(), "{h:?}");
        let _ = slice_header(&h, "");
        let _ = sampled_traceparent(&h);
        let _ = shadow_subject(&h, &Rewrite::Prefix(b"a.".to_vec().into()), &h);
    }
}
