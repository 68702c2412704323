//! Protocol parse: `Parser::next` run to exhaustion over one buffer of many frames, as a
//! connection's read would be handed to it. Per element: one frame (one `Msg` event).
//! Variants: PUB with a 16-byte payload, PUB with 1 KiB, and HPUB (header + payload).

use criterion::{black_box, Criterion, Throughput};
use rnats::proto::parser::{Event, Limits, Parser};

/// A connection after CONNECT with headers, default limits.
pub const LIMITS: Limits = Limits {
    max_control_line: 4096,
    max_payload: 1024 * 1024,
    headers: true,
    awaiting_auth: false,
    pedantic: false,
};

/// `n` copies of `frame`.
pub fn frames(frame: &[u8], n: usize) -> Vec<u8> {
    frame.repeat(n)
}

pub fn pub_frame(subject: &str, payload: usize) -> Vec<u8> {
    let mut f = format!("PUB {subject} {payload}\r\n").into_bytes();
    f.extend(std::iter::repeat_n(b'x', payload));
    f.extend_from_slice(b"\r\n");
    f
}

fn hpub_frame() -> Vec<u8> {
    let hdr = b"NATS/1.0\r\nNats-Msg-Id: 7f3c2a\r\n\r\n";
    let payload = [b'x'; 16];
    let mut f = format!("HPUB foo.bar {} {}\r\n", hdr.len(), hdr.len() + payload.len()).into_bytes();
    f.extend_from_slice(hdr);
    f.extend_from_slice(&payload);
    f.extend_from_slice(b"\r\n");
    f
}

/// Parse all of `buf`; returns the number of messages (checked by the caller once).
fn parse_all(p: &mut Parser, buf: &[u8]) -> usize {
    let mut pos = 0;
    let mut msgs = 0;
    while let Some(ev) = p.next(buf, &mut pos, &LIMITS).expect("valid frames") {
        if let Event::Msg { data, .. } = ev {
            black_box(data);
            msgs += 1;
        }
        p.release();
    }
    msgs
}

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    for (name, frame, n) in [
        ("pub_16B", pub_frame("foo.bar", 16), 1000),
        ("pub_1KiB", pub_frame("foo.bar", 1024), 100),
        ("hpub_16B", hpub_frame(), 1000),
    ] {
        let buf = frames(&frame, n);
        let mut p = Parser::default();
        assert_eq!(parse_all(&mut p, &buf), n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(name, |b| b.iter(|| parse_all(&mut p, black_box(&buf))));
    }
    g.finish();
}
