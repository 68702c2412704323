//! Fuzz target `parser`: the client protocol parser (`rnats::proto::parser::Parser`).
//!
//! Checks, beyond "never panics":
//! (a) split invariance: the events and the final error are the same whether the input
//!     arrives in one read, in the fuzzer-chosen reads, or (flag) one byte per read. A
//!     `PedanticViolation` followed by its `Msg` counts as that `Msg` flagged pedantic.
//!     Exemption: input holding a lone `\r` (not directly before `\n`). nats-server keeps
//!     such a byte in an unsplit control line but drops it from a split one, and rnats
//!     copies that on purpose, so the arguments may legitimately differ.
//! (b) bounded buffering: between events, `Parser::buffered()` stays within one control
//!     line plus one payload (plus `SLACK`), so a client cannot make the server hold more.
//!
//! Regression inputs in `fuzz/regressions/parser/` keep two fixed finds: a pedantic
//! violation must be reported at the control line even when the payload's trailer is bad
//! (`PUB foo.* 1\r\nxYZ`), and a split frame's stash must not grow past the frame.
//!
//! Input layout (all optional; missing bytes read as 0):
//!   [0] flags: 1 headers, 2 pedantic, 4 awaiting_auth, 8 also compare byte-at-a-time
//!   [1] max_control_line, index into `MCL`     [2] max_payload, index into `MP`
//!   [3] number `k` of read sizes (0..=15)      [4..4+k] read sizes (`b` below 128: `b`
//!   bytes, else `(b - 128) * 32`); the rest is the stream, cut into reads of those sizes,
//!   the remainder being the last read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::proto::parser::{Event, Limits, ParseError, Parser};

const MCL: [usize; 8] = [1, 4, 8, 16, 32, 64, 256, 4096];
const MP: [i64; 8] = [-1, 0, 1, 4, 16, 64, 1024, 1 << 20];
/// Allowance over `max_control_line + max_payload` (the payload's CRLF, rounding).
const SLACK: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Connect(Vec<u8>),
    Info(Vec<u8>),
    Msg {
        subject: Vec<u8>,
        reply: Option<Vec<u8>>,
        hdr: Option<usize>,
        data: Vec<u8>,
        size_text: Vec<u8>,
        hdr_text: Option<Vec<u8>>,
        pedantic: bool,
    },
    Sub(Vec<u8>, Option<Vec<u8>>, Vec<u8>),
    Unsub(Vec<u8>, i64),
    Ping,
    Pong,
    Err(Vec<u8>),
    /// A `PedanticViolation` whose message never completed (the stream ended or failed).
    PedanticOnly,
    Fail(ParseError),
}

/// Feed `reads` in order; collect normalised events. Panics if buffering exceeds `bound`.
fn run(reads: &[&[u8]], lim: &Limits, bound: Option<usize>) -> Vec<Ev> {
    let mut p = Parser::default();
    let mut out = Vec::new();
    let mut pending_pedantic = false;
    let check = |p: &Parser| {
        if let Some(b) = bound {
            assert!(p.buffered() <= b, "parser holds {} bytes, bound {b}", p.buffered());
        }
    };
    for read in reads {
        let mut pos = 0;
        loop {
            let before = pos;
            let ev = match p.next(read, &mut pos, lim) {
                Ok(None) => {
                    assert_eq!(pos, read.len(), "a read must be used up");
                    check(&p);
                    break;
                }
                Ok(Some(e)) => e,
                Err(e) => {
                    if pending_pedantic {
                        out.push(Ev::PedanticOnly);
                    }
                    out.push(Ev::Fail(e));
                    return out;
                }
            };
            assert!(
                pos >= before && pos <= read.len(),
                "position moved backwards or past the end"
            );
            let ev = match ev {
                Event::PedanticViolation => {
                    assert!(!pending_pedantic, "two pedantic reports for one message");
                    pending_pedantic = true;
                    None
                }
                Event::Msg {
                    subject,
                    reply,
                    header_len,
                    data,
                    size_text,
                    hdr_text,
                } => {
                    if let Some(h) = header_len {
                        assert!(h <= data.len(), "header longer than the message");
                    }
                    let pedantic = pending_pedantic;
                    pending_pedantic = false;
                    Some(Ev::Msg {
                        subject: subject.to_vec(),
                        reply: reply.map(<[u8]>::to_vec),
                        hdr: header_len,
                        data: data.to_vec(),
                        size_text: size_text.to_vec(),
                        hdr_text: hdr_text.map(<[u8]>::to_vec),
                        pedantic,
                    })
                }
                Event::Connect(a) => Some(Ev::Connect(a.to_vec())),
                Event::Info(a) => Some(Ev::Info(a.to_vec())),
                Event::Sub { subject, queue, sid } => {
                    Some(Ev::Sub(subject.to_vec(), queue.map(<[u8]>::to_vec), sid.to_vec()))
                }
                Event::Unsub { sid, max } => Some(Ev::Unsub(sid.to_vec(), max)),
                Event::Ping => Some(Ev::Ping),
                Event::Pong => Some(Ev::Pong),
                Event::Err(a) => Some(Ev::Err(a.to_vec())),
            };
            if let Some(ev) = ev {
                out.push(ev);
            }
            p.release();
            check(&p);
        }
    }
    if pending_pedantic {
        out.push(Ev::PedanticOnly);
    }
    out
}

fn byte(data: &[u8], i: usize) -> u8 {
    data.get(i).copied().unwrap_or(0)
}

fuzz_target!(|input: &[u8]| {
    let flags = byte(input, 0);
    let lim = Limits {
        max_control_line: MCL[usize::from(byte(input, 1) & 7)],
        max_payload: MP[usize::from(byte(input, 2) & 7)],
        headers: flags & 1 != 0,
        pedantic: flags & 2 != 0,
        awaiting_auth: flags & 4 != 0,
    };
    let k = usize::from(byte(input, 3) & 15);
    let sizes: Vec<usize> = (0..k)
        .map(|i| match byte(input, 4 + i) {
            b @ 0..128 => usize::from(b),
            b => usize::from(b - 128) * 32,
        })
        .collect();
    let stream = input.get(4 + k..).unwrap_or_default();

    let mut reads: Vec<&[u8]> = Vec::new();
    let mut rest = stream;
    for n in sizes {
        let (a, b) = rest.split_at(n.min(rest.len()));
        reads.push(a);
        rest = b;
    }
    reads.push(rest);

    let held = |mp: u64| lim.max_control_line + mp as usize + SLACK;
    let bound = u64::try_from(lim.max_payload).ok().map(held);
    let whole = run(&[stream], &lim, bound);
    let split = run(&reads, &lim, bound);
    let bytewise = (flags & 8 != 0).then(|| {
        let one: Vec<&[u8]> = stream.chunks(1).collect();
        run(&one, &lim, bound)
    });

    let lone_cr = stream
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'\r' && stream.get(i + 1) != Some(&b'\n'));
    if !lone_cr {
        assert_eq!(
            whole,
            split,
            "reads {:?}",
            reads.iter().map(|r| r.len()).collect::<Vec<_>>()
        );
        if let Some(b) = bytewise {
            assert_eq!(whole, b, "byte-at-a-time differs");
        }
    }
});
