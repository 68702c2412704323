//! Outbound buffer: appending MSG frames to a connection's `OutBuf` the way delivery
//! writes them (`OutBuf::frame` with the size estimate, then
//! `MSG <subject> <sid> <size>\r\n<payload>\r\n`, the size text copied from the
//! publisher's as delivery does), with the socket taking everything
//! every 64 frames. Per element: one frame written (and its share of the `consume`).

use criterion::{black_box, Criterion, Throughput};
use rnats::core::outbuf::OutBuf;
use std::time::Instant;

const FRAMES: usize = 1024;
const FLUSH_EVERY: usize = 64;

fn write_msg(out: &mut OutBuf, subject: &[u8], sid: &[u8], size: &[u8], data: &[u8], now: Instant) {
    let mut w = out.frame(32 + subject.len() + sid.len() + data.len(), now);
    w.extend_from_slice(b"MSG ");
    w.extend_from_slice(subject);
    w.push(b' ');
    w.extend_from_slice(sid);
    w.push(b' ');
    w.extend_from_slice(size);
    w.extend_from_slice(b"\r\n");
    w.extend_from_slice(data);
    w.extend_from_slice(b"\r\n");
}

/// What a driver does when the socket takes everything: write each pending piece.
fn flush(out: &mut OutBuf, now: Instant) {
    while !out.is_empty() {
        let n = black_box(out.pending()).len();
        out.consume(n, now);
    }
}

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("outbuf");
    g.throughput(Throughput::Elements(FRAMES as u64));
    for (name, size) in [("msg_16B", 16), ("msg_1KiB", 1024)] {
        let data = vec![b'x'; size];
        let size_text = size.to_string();
        let mut out = OutBuf::default();
        let now = Instant::now();
        g.bench_function(name, |b| {
            b.iter(|| {
                for i in 0..FRAMES {
                    write_msg(&mut out, b"foo.bar", b"1", size_text.as_bytes(), black_box(&data), now);
                    if i % FLUSH_EVERY == FLUSH_EVERY - 1 {
                        flush(&mut out, now);
                    }
                }
            })
        });
    }
    g.finish();
}
