//! Message tracing compared with the reference nats-server (FEATURES.md §20): the same
//! config file, the same publishes with `Nats-Trace-Dest`, `Nats-Trace-Only` and
//! `traceparent` headers, and what every connection receives compared: the messages
//! delivered (or not) and the trace events, decoded (gzip, snappy) and compared as JSON.
//! rnats runs with 1 shard and with 4 (connections spread over the shards, so deliveries
//! and imports cross shards and one event is made of several shards' parts); both
//! reactors.
//!
//! Normalized on both sides: the server's id, name, sequence and time, step times and
//! connection ids (connections are told apart by their `name`), the order of the steps
//! after `in` and `sm` (the reference lists deliveries in its sublist's order, rnats the
//! other shards' after its own), which member of a queue group took a message, the
//! round-trip time in `Nats-Request-Info`, and `_R_.` reply subjects.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{bin, reference_server, Reactor, Server};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
max_payload: 2048
accounts {
  A {
    users = [ {user: a, password: a} ]
    exports = [
      {stream: "feed.>"}
      {stream: "nofeed.>"}
      {service: "svc.>", allow_trace: true}
      {service: "nosvc.>"}
    ]
    mappings = { "map.src": "map.dst", "map.*.*": "map.$2.$1" }
  }
  B {
    users = [
      {user: b, password: b}
      {user: bp, password: bp, permissions: {
        publish: {deny: ["trc.denied", "den.>"]}
        subscribe: {deny: ["foo.deny"]}
      }}
    ]
    imports = [
      {stream: {account: A, subject: "feed.>"}, prefix: "a", allow_trace: true}
      {stream: {account: A, subject: "nofeed.>"}, prefix: "n"}
      {service: {account: A, subject: "svc.>"}}
      {service: {account: A, subject: "nosvc.>"}}
    ]
    msg_trace: { dest: "acc.trace", sampling: 100 }
  }
  C {
    users = [ {user: c, password: c} ]
    msg_trace: { dest: "c.trace", sampling: "1%" }
  }
}
"#;

/// Subjects trace events go to in these cases.
const TRACE_SUBJECTS: [&str; 4] = ["trc", "acc.trace", "c.trace", "trc.other"];

/// One connection of a case: the user, extra CONNECT fields, what it subscribes to.
struct Conn {
    user: &'static str,
    opts: &'static str,
    subs: &'static str,
}

fn conn(user: &'static str, subs: &'static str) -> Conn {
    Conn { user, opts: "{}", subs }
}

fn conn_with(user: &'static str, opts: &'static str, subs: &'static str) -> Conn {
    Conn { user, opts, subs }
}

struct Case {
    name: &'static str,
    conns: Vec<Conn>,
    /// Connections compared as one (members of a queue group: which one gets a message
    /// is random).
    pool: Vec<usize>,
    /// What connection `n` sends, in order.
    steps: Vec<(usize, Vec<u8>)>,
}

/// A step that answers: connection `n` waits for a message with a reply subject and
/// publishes this header block and payload there.
const REPLY: &[u8] = b"<reply>";

fn reply_with(hdrs: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut v = REPLY.to_vec();
    v.extend_from_slice(&hpub("_", "", hdrs, payload));
    v
}

fn case(name: &'static str, conns: Vec<Conn>, steps: Vec<(usize, Vec<u8>)>) -> Case {
    Case {
        name,
        conns,
        pool: Vec::new(),
        steps,
    }
}

/// An HPUB with these headers.
fn hpub(subject: &str, reply: &str, hdrs: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut h = b"NATS/1.0\r\n".to_vec();
    for (k, v) in hdrs {
        h.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    h.extend_from_slice(b"\r\n");
    hpub_raw(subject, reply, &h, payload)
}

/// An HPUB with this header block as is.
fn hpub_raw(subject: &str, reply: &str, h: &[u8], payload: &[u8]) -> Vec<u8> {
    let r = if reply.is_empty() {
        String::new()
    } else {
        format!(" {reply}")
    };
    let mut out = format!("HPUB {subject}{r} {} {}\r\n", h.len(), h.len() + payload.len()).into_bytes();
    out.extend_from_slice(h);
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
    out
}

const DEST: (&str, &str) = ("Nats-Trace-Dest", "trc");
const ONLY: (&str, &str) = ("Nats-Trace-Only", "true");
const SAMPLED: (&str, &str) = ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");

fn traced(subject: &str) -> Vec<u8> {
    hpub(subject, "", &[DEST], b"hi")
}

fn cases() -> Vec<Case> {
    let mut v = vec![
        case(
            "simple-pub-sub",
            vec![
                conn("b", ""),
                conn("b", "SUB trc 1"),
                conn("b", "SUB foo 1"),
                conn("b", "SUB foo 1\r\nSUB foo.> 2\r\nSUB > 3"),
            ],
            vec![
                (0, traced("foo")),
                (0, traced("foo.bar")),
                (0, hpub("foo", "r.1", &[DEST], b"")),
            ],
        ),
        case(
            "echo-and-no-echo",
            vec![
                conn("b", "SUB foo 1"),
                conn_with("b", r#"{"echo":false}"#, "SUB foo 1"),
                conn("b", "SUB trc 1"),
            ],
            vec![(0, traced("foo")), (1, traced("foo"))],
        ),
        case(
            "trace-only",
            vec![
                conn_with("b", r#"{"no_responders":true}"#, "SUB _INBOX.t 9"),
                conn("b", "SUB trc 1"),
                conn("b", "SUB foo 1\r\nSUB foo q 2"),
                conn("b", "SUB foo 1"),
            ],
            vec![
                (0, hpub("foo", "", &[DEST, ONLY], b"x")),
                (0, hpub("foo", "", &[DEST, ("Nats-Trace-Only", "on")], b"x")),
                (0, hpub("foo", "", &[DEST, ("Nats-Trace-Only", "1")], b"x")),
                (0, hpub("foo", "", &[DEST, ("Nats-Trace-Only", "yes")], b"x")),
                (0, hpub("foo", "_INBOX.t", &[DEST, ONLY], b"x")),
            ],
        ),
        case(
            "no-subscribers",
            vec![
                conn_with("b", r#"{"no_responders":true}"#, "SUB _INBOX.n 9"),
                conn("b", "SUB trc 1"),
            ],
            vec![
                (0, traced("nobody")),
                (0, hpub("nobody", "_INBOX.n", &[DEST, ONLY], b"")),
                (0, hpub("nobody", "_INBOX.n", &[DEST], b"")),
            ],
        ),
        case(
            "subject-mapping",
            vec![
                conn("a", ""),
                conn("a", "SUB trc 1"),
                conn("a", "SUB map.dst 1\r\nSUB map.src 2\r\nSUB map.> 3"),
            ],
            vec![(0, traced("map.src")), (0, traced("map.x.y"))],
        ),
        case(
            "service-import-allow-trace",
            vec![
                conn("a", "SUB svc.x 1\r\nSUB svc.> 2"),
                conn("b", "SUB _INBOX.b 9"),
                conn("b", "SUB trc 1"),
                conn("a", "SUB trc 1"),
            ],
            vec![(1, hpub("svc.x", "_INBOX.b", &[DEST], b"req")), (1, traced("svc.y"))],
        ),
        case(
            "service-responses",
            vec![
                conn("a", "SUB svc.x 1\r\nSUB trc 2"),
                conn("b", "SUB _INBOX.b 9"),
                conn("b", "SUB trc 1"),
            ],
            vec![
                (1, hpub("svc.x", "_INBOX.b", &[], b"req1")),
                (0, reply_with(&[DEST], b"resp1")),
                (1, hpub("svc.x", "_INBOX.b", &[], b"req2")),
                (0, reply_with(&[DEST, ONLY], b"resp2")),
                (1, hpub("svc.x", "_INBOX.b", &[DEST], b"req3")),
                (0, reply_with(&[], b"resp3")),
            ],
        ),
        case(
            "system-service-request",
            vec![conn("b", "SUB _INBOX.u 9"), conn("b", "SUB trc 1")],
            vec![
                (0, hpub("$SYS.REQ.USER.INFO", "_INBOX.u", &[DEST], b"")),
                (0, hpub("$SYS.REQ.USER.INFO", "_INBOX.u", &[DEST, ONLY], b"")),
            ],
        ),
        case(
            "service-import-without-allow-trace",
            vec![
                conn("a", "SUB nosvc.x 1"),
                conn("b", "SUB _INBOX.b 9"),
                conn("b", "SUB trc 1"),
            ],
            vec![(1, hpub("nosvc.x", "_INBOX.b", &[DEST], b"req"))],
        ),
        case(
            "service-import-trace-only",
            vec![
                conn("a", "SUB svc.x 1\r\nSUB nosvc.x 2"),
                conn_with("b", r#"{"no_responders":true}"#, "SUB _INBOX.b 9"),
                conn("b", "SUB trc 1"),
            ],
            vec![
                (1, hpub("svc.x", "_INBOX.b", &[DEST, ONLY], b"req")),
                (1, hpub("nosvc.x", "_INBOX.b", &[DEST, ONLY], b"req")),
            ],
        ),
        case(
            "stream-import-allow-trace",
            vec![
                conn("a", "SUB feed.x 1"),
                conn("a", "SUB trc 1"),
                conn("b", "SUB a.feed.> 1"),
                conn("b", "SUB a.feed.x 1\r\nSUB a.*.x 2"),
                conn("b", "SUB > 1"),
            ],
            vec![(0, traced("feed.x")), (0, traced("feed.y.z"))],
        ),
        case(
            "stream-import-without-allow-trace",
            vec![conn("a", ""), conn("a", "SUB trc 1"), conn("b", "SUB n.nofeed.> 1")],
            vec![(0, traced("nofeed.x")), (0, hpub("nofeed.x", "", &[DEST, ONLY], b""))],
        ),
        case(
            "stream-import-trace-only",
            vec![
                conn("a", "SUB feed.x 1"),
                conn("a", "SUB trc 1"),
                conn("b", "SUB a.feed.x 1"),
            ],
            vec![(0, hpub("feed.x", "", &[DEST, ONLY], b""))],
        ),
        case(
            "permission-denied-egress",
            vec![
                conn("b", ""),
                conn("b", "SUB trc 1"),
                conn("bp", "SUB foo.* 1\r\nSUB foo.deny 2"),
            ],
            vec![(0, traced("foo.deny")), (0, traced("foo.ok"))],
        ),
        case(
            "publish-denied",
            vec![
                conn("bp", ""),
                conn("b", "SUB trc 1\r\nSUB trc.denied 2\r\nSUB foo 3\r\nSUB den.x 4"),
            ],
            vec![
                (0, traced("den.x")),
                (0, hpub("foo", "", &[("Nats-Trace-Dest", "trc.denied")], b"")),
                (0, hpub("foo", "", &[("Nats-Trace-Dest", "_GR_.x.y")], b"")),
                (0, hpub("foo", "", &[("Nats-Trace-Dest", "$NRG.x")], b"")),
                (0, traced("foo")),
            ],
        ),
        case(
            "headerless-subscribers",
            vec![
                conn("b", ""),
                conn_with("b", r#"{"headers":false}"#, "SUB trc 1\r\nSUB foo 2"),
            ],
            vec![(0, traced("foo"))],
        ),
        case(
            "traceparent-sampling",
            vec![
                conn("b", ""),
                conn("b", "SUB acc.trace 1\r\nSUB trc 2"),
                conn("b", "SUB foo 1"),
                conn("a", "SUB foo 1\r\nSUB trc 2"),
            ],
            vec![
                (0, hpub("foo", "", &[SAMPLED], b"1")),
                (
                    0,
                    hpub(
                        "foo",
                        "",
                        &[("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")],
                        b"2",
                    ),
                ),
                (
                    0,
                    hpub(
                        "foo",
                        "",
                        &[("TraceParent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-+1")],
                        b"3",
                    ),
                ),
                (
                    0,
                    hpub(
                        "foo",
                        "",
                        &[("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-ff")],
                        b"4",
                    ),
                ),
                (0, hpub("foo", "", &[SAMPLED, DEST], b"5")),
                (0, hpub("foo", "", &[SAMPLED, ONLY], b"6")),
                (3, hpub("foo", "", &[SAMPLED], b"7")),
            ],
        ),
        case(
            "invalid-or-disabled-destinations",
            vec![conn("b", ""), conn("b", "SUB trc 1\r\nSUB foo 2")],
            vec![
                (0, hpub("foo", "", &[("Nats-Trace-Dest", "trc.*")], b"1")),
                (0, hpub("foo", "", &[("Nats-Trace-Dest", "trc.*"), ONLY], b"2")),
                (0, hpub("foo", "", &[("Nats-Trace-Dest", "trace disabled")], b"3")),
                (0, hpub("foo", "", &[("nats-trace-dest", "trc")], b"4")),
                (0, hpub("foo", "", &[DEST, ("Nats-Trace-Dest", "trc.other")], b"5")),
                (0, hpub("foo", "", &[("Nats-Trace-Hop", "3"), DEST], b"6")),
            ],
        ),
        case(
            "malformed-trace-headers",
            vec![conn("b", ""), conn("b", "SUB trc 1\r\nSUB foo 2")],
            vec![
                (
                    0,
                    hpub_raw("foo", "", b"NATS/1.0 503\r\nNats-Trace-Dest: trc\r\n\r\n", b"1"),
                ),
                (0, hpub_raw("foo", "", b"NATS/1.0\r\nNats-Trace-Dest trc\r\n\r\n", b"2")),
                (0, hpub_raw("foo", "", b"NATS/1.0\r\nNats-Trace-Dest:\r\n\r\n", b"3")),
                (
                    0,
                    hpub_raw("foo", "", b"NATS/1.0\r\nNats-Trace-Dest: trc  \r\n\r\n", b"4"),
                ),
                (
                    0,
                    hpub_raw("foo", "", b"NATS/1.0\r\nNats-Trace-Dest:\ttrc\r\n\r\n", b"5"),
                ),
                (
                    0,
                    hpub_raw("foo", "", b"NATS/1.0\r\nX\r\nNats-Trace-Dest: trc\r\n\r\n", b"6"),
                ),
                (0, hpub_raw("foo", "", b"NATS/1.0\r\nNats-Trace-Dest:trc\r\n\r\n", b"7")),
                (
                    0,
                    hpub_raw("foo", "", b"NATS/1.0\r\nA: Nats-Trace-Dest: trc\r\n\r\n", b"8"),
                ),
                (
                    0,
                    hpub_raw("foo", "", b"NATS/1.0\r\ntraceparent: 00-a-b-01-x\r\n\r\n", b"9"),
                ),
                (0, hpub_raw("foo", "", b"NATS/1.0\r\n\r\n", b"10")),
            ],
        ),
        case(
            "compressed-events",
            vec![conn("b", ""), conn("b", "SUB trc 1"), conn("b", "SUB foo 1")],
            vec![
                (0, hpub("foo", "", &[DEST, ("Accept-Encoding", "gzip")], b"1")),
                (0, hpub("foo", "", &[DEST, ("Accept-Encoding", "snappy")], b"2")),
                (0, hpub("foo", "", &[DEST, ("Accept-Encoding", "S2, gzip")], b"3")),
                (0, hpub("foo", "", &[DEST, ("Accept-Encoding", "br")], b"4")),
            ],
        ),
        case(
            "max-payload",
            vec![conn("b", ""), conn("b", "SUB trc 1"), conn("b", "SUB foo 1")],
            vec![(0, hpub("foo", "", &[DEST, ("Accept-Encoding", "gzip")], &[b'x'; 3000]))],
        ),
    ];
    let mut queues = case(
        "queue-groups",
        vec![
            conn("b", ""),
            conn("b", "SUB trc 1"),
            conn("b", "SUB foo q 1"),
            conn("b", "SUB foo q 1"),
            conn("b", "SUB foo q 1\r\nSUB foo 2"),
            conn("b", "SUB foo other 1"),
        ],
        (0..4)
            .map(|i| (0, hpub("foo", "", &[DEST], format!("{i}").as_bytes())))
            .collect(),
    );
    queues.pool = vec![2, 3, 4];
    v.push(queues);
    v
}

// ---------------------------------------------------------------------------------
// Playing a case and normalizing what came back.

fn read_until(s: &mut TcpStream, want: &[u8], timeout: Duration) -> Vec<u8> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    while Instant::now() < deadline && !out.windows(want.len()).any(|w| w == want) {
        let mut buf = [0u8; 65536];
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    out
}

/// Play a case; what each connection received (after its CONNECT's PONG).
fn play(port: u16, c: &Case) -> Vec<Vec<u8>> {
    let mut socks = Vec::new();
    for (i, cn) in c.conns.iter().enumerate() {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        read_until(&mut s, b"\r\n", Duration::from_secs(2));
        let mut o = serde_json::json!({
            "verbose": false, "pedantic": false, "headers": true,
            "name": format!("c{i}"), "user": cn.user, "pass": cn.user,
        });
        let extra: Value = serde_json::from_str(cn.opts).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            o[k] = v.clone();
        }
        let mut setup = format!("CONNECT {o}\r\n");
        for sub in cn.subs.split("\r\n").filter(|l| !l.is_empty()) {
            setup.push_str(sub);
            setup.push_str("\r\n");
        }
        setup.push_str("PING\r\n");
        s.write_all(setup.as_bytes()).unwrap();
        let got = read_until(&mut s, b"PONG\r\n", Duration::from_secs(2));
        assert!(
            got.windows(6).any(|w| w == b"PONG\r\n"),
            "{}: connection {i} not ready: {:?}",
            c.name,
            String::from_utf8_lossy(&got)
        );
        socks.push(s);
    }
    let mut outs: Vec<Vec<u8>> = vec![Vec::new(); socks.len()];
    let mut answered = vec![0usize; socks.len()];
    for (n, data) in &c.steps {
        match data.strip_prefix(REPLY) {
            Some(template) => {
                let reply = wait_reply(&mut socks[*n], &mut outs[*n], answered[*n]);
                answered[*n] += 1;
                let subject = reply.unwrap_or_else(|| panic!("{}: connection {n} got no request", c.name));
                // The template is an HPUB on `_`: publish it on the reply subject instead.
                let rest = &template[b"HPUB _".len()..];
                let mut m = format!("HPUB {subject}").into_bytes();
                m.extend_from_slice(rest);
                let _ = socks[*n].write_all(&m);
            }
            None => {
                let _ = socks[*n].write_all(data);
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    // Until every connection was quiet for a while.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = Instant::now();
    for s in &socks {
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    }
    let mut open = vec![true; socks.len()];
    while Instant::now() < deadline && last.elapsed() < Duration::from_millis(300) {
        for (i, s) in socks.iter_mut().enumerate() {
            if !open[i] {
                continue;
            }
            let mut buf = [0u8; 65536];
            match s.read(&mut buf) {
                Ok(0) => {
                    open[i] = false;
                    outs[i].extend_from_slice(b"<CLOSED>\r\n");
                }
                Ok(n) => {
                    outs[i].extend_from_slice(&buf[..n]);
                    last = Instant::now();
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => {
                    open[i] = false;
                    outs[i].extend_from_slice(b"<CLOSED>\r\n");
                }
            }
        }
    }
    outs
}

/// Read on `s` (keeping what came in `seen`) until the message after the first `skip`
/// ones with a reply subject, if it is not there yet; its reply subject.
fn wait_reply(s: &mut TcpStream, seen: &mut Vec<u8>, skip: usize) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(2);
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    while Instant::now() < deadline {
        let replies: Vec<String> = split_frames(seen)
            .iter()
            .filter_map(|f| {
                let args: Vec<&str> = f.line.split(' ').collect();
                match (args.first(), args.len()) {
                    (Some(&"MSG"), 5) | (Some(&"HMSG"), 6) if !args[1].starts_with("trc") => Some(args[3].to_string()),
                    _ => None,
                }
            })
            .collect();
        if let Some(r) = replies.get(skip) {
            return Some(r.clone());
        }
        let mut buf = [0u8; 65536];
        match s.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    None
}

/// A received frame: the protocol line, and for MSG/HMSG the header block and payload.
struct Frame {
    line: String,
    header: Option<Vec<u8>>,
    payload: Vec<u8>,
}

fn split_frames(mut b: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let Some(nl) = b.windows(2).position(|w| w == b"\r\n") else {
            out.push(Frame {
                line: format!("<partial {}>", String::from_utf8_lossy(b)),
                header: None,
                payload: Vec::new(),
            });
            break;
        };
        let line = String::from_utf8_lossy(&b[..nl]).into_owned();
        b = &b[nl + 2..];
        let args: Vec<&str> = line.split(' ').filter(|a| !a.is_empty()).collect();
        let num = |i: usize| args.get(i).and_then(|a| a.parse::<usize>().ok()).unwrap_or(0);
        let (hdr, total) = match args.first() {
            Some(&"MSG") => (0, num(args.len() - 1)),
            Some(&"HMSG") => (num(args.len() - 2), num(args.len() - 1)),
            _ => {
                out.push(Frame {
                    line,
                    header: None,
                    payload: Vec::new(),
                });
                continue;
            }
        };
        let total = total.min(b.len());
        let hdr = hdr.min(total);
        let header = (args[0] == "HMSG").then(|| b[..hdr].to_vec());
        let payload = b[hdr..total].to_vec();
        b = &b[(total + 2).min(b.len())..];
        out.push(Frame { line, header, payload });
    }
    out
}

/// A snappy framing stream, decoded (compressed and uncompressed chunks).
fn unsnappy(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let kind = b[0];
        let len = usize::from(b[1]) | usize::from(b[2]) << 8 | usize::from(b[3]) << 16;
        let body = &b[4..4 + len];
        b = &b[4 + len..];
        match kind {
            0x00 => out.extend_from_slice(&snappy_block(&body[4..])),
            0x01 => out.extend_from_slice(&body[4..]),
            _ => {}
        }
    }
    out
}

fn snappy_block(b: &[u8]) -> Vec<u8> {
    let mut i = 0;
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let c = b[i];
        i += 1;
        n |= usize::from(c & 0x7f) << shift;
        shift += 7;
        if c & 0x80 == 0 {
            break;
        }
    }
    let mut out: Vec<u8> = Vec::with_capacity(n);
    while i < b.len() {
        let tag = b[i];
        i += 1;
        let (len, off) = match tag & 3 {
            0 => {
                let mut len = usize::from(tag >> 2);
                if len >= 60 {
                    let extra = len - 59;
                    len = 0;
                    for k in 0..extra {
                        len |= usize::from(b[i + k]) << (8 * k);
                    }
                    i += extra;
                }
                out.extend_from_slice(&b[i..i + len + 1]);
                i += len + 1;
                continue;
            }
            1 => {
                let len = usize::from((tag >> 2) & 7) + 4;
                let off = usize::from(tag >> 5) << 8 | usize::from(b[i]);
                i += 1;
                (len, off)
            }
            2 => {
                let off = usize::from(b[i]) | usize::from(b[i + 1]) << 8;
                i += 2;
                (usize::from(tag >> 2) + 1, off)
            }
            _ => {
                let off = u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
                i += 4;
                (usize::from(tag >> 2) + 1, off)
            }
        };
        let start = out.len() - off;
        for k in 0..len {
            let c = out[start + k];
            out.push(c);
        }
    }
    out
}

fn header_value(h: &[u8], key: &str) -> Option<String> {
    String::from_utf8_lossy(h)
        .split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{key}: ")).map(str::to_string))
}

/// A trace event, with what differs by design masked and the steps after the first
/// ones in a fixed order.
fn norm_event(mut v: Value, members: bool) -> String {
    if let Some(s) = v.get_mut("server").and_then(Value::as_object_mut) {
        for k in ["name", "id", "seq", "time"] {
            if s.contains_key(k) {
                s.insert(k.into(), Value::String(format!("<{k}>")));
            }
        }
    }
    if let Some(evs) = v.get_mut("events").and_then(Value::as_array_mut) {
        for e in evs.iter_mut() {
            let Some(o) = e.as_object_mut() else { continue };
            if o.contains_key("ts") {
                o.insert("ts".into(), Value::String("<ts>".into()));
            }
            if o.contains_key("cid") {
                o.insert("cid".into(), Value::String("<cid>".into()));
            }
            if members && o.contains_key("queue") {
                o.insert("name".into(), Value::String("<member>".into()));
            }
            for (_, x) in o.iter_mut() {
                if x.as_str().is_some_and(|t| t.starts_with("_R_.")) {
                    *x = Value::String("<_R_>".into());
                }
            }
        }
        let head = evs
            .iter()
            .take_while(|e| matches!(e["type"].as_str(), Some("in" | "sm")))
            .count();
        let mut rest: Vec<Value> = evs.drain(head..).collect();
        rest.sort_by_key(|e| e.to_string());
        evs.extend(rest);
    }
    v.to_string()
}

fn norm_frame(f: &Frame, pooled: bool, members: bool) -> Option<String> {
    let args: Vec<&str> = f.line.split(' ').filter(|a| !a.is_empty()).collect();
    match args.first() {
        Some(&"PING") | Some(&"PONG") => return None,
        Some(&"MSG") | Some(&"HMSG") => {}
        _ => return Some(f.line.clone()),
    }
    let subject = args.get(1).copied().unwrap_or_default();
    if TRACE_SUBJECTS.contains(&subject) {
        let enc = f
            .header
            .as_deref()
            .and_then(|h| header_value(h, "Content-Encoding"))
            .unwrap_or_default();
        let body = match enc.as_str() {
            "gzip" => {
                let mut d = flate2::read::GzDecoder::new(&f.payload[..]);
                let mut out = Vec::new();
                d.read_to_end(&mut out).unwrap();
                out
            }
            "snappy" => unsnappy(&f.payload),
            _ => f.payload.clone(),
        };
        let Ok(v) = serde_json::from_slice::<Value>(&body) else {
            return Some(format!(
                "TRACE {subject} undecodable {:?}",
                String::from_utf8_lossy(&body)
            ));
        };
        return Some(format!("TRACE {subject} enc={enc} {}", norm_event(v, members)));
    }
    let mut reply = if args.len() == if args[0] == "MSG" { 5 } else { 6 } {
        args[3].to_string()
    } else {
        String::new()
    };
    if reply.starts_with("_R_.") {
        reply = "<_R_>".into();
    }
    let header = f.header.as_deref().map(|h| {
        let text = String::from_utf8_lossy(h).into_owned();
        match text.find("\"rtt\":") {
            Some(i) => {
                let end = text[i + 6..]
                    .find(|c: char| !c.is_ascii_digit())
                    .map_or(text.len(), |e| i + 6 + e);
                format!("{}\"rtt\":<rtt>{}", &text[..i], &text[end..])
            }
            None => text,
        }
    });
    let sid = if pooled {
        "<sid>"
    } else {
        args.get(2).copied().unwrap_or_default()
    };
    // A system service's answer: its server description masked as in events.
    let payload = match serde_json::from_slice::<Value>(&f.payload) {
        Ok(v) if v.get("server").is_some() => norm_event(v, false),
        _ => String::from_utf8_lossy(&f.payload).into_owned(),
    };
    Some(format!("{} {subject} {sid} {reply} {:?} {payload:?}", args[0], header))
}

/// What each connection of a case got, normalized and sorted (pooled connections as one).
fn normalized(c: &Case, outs: &[Vec<u8>]) -> Vec<(String, Vec<String>)> {
    let mut res = Vec::new();
    let mut pool = Vec::new();
    for (i, out) in outs.iter().enumerate() {
        let pooled = c.pool.contains(&i);
        let mut frames: Vec<String> = split_frames(out)
            .iter()
            .filter_map(|f| norm_frame(f, pooled, !c.pool.is_empty()))
            .collect();
        if pooled {
            pool.append(&mut frames);
        } else {
            frames.sort();
            res.push((format!("c{i}"), frames));
        }
    }
    if !c.pool.is_empty() {
        pool.sort();
        res.push(("pool".into(), pool));
    }
    res
}

fn start_pair(r: Reactor, shards: usize, conf: &str) -> (Server, Server) {
    let reference = Server::start_cmd(
        &reference_server(),
        &["-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-c", conf],
    );
    let n = shards.to_string();
    let ours = Server::start_cmd(
        bin(),
        &[
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-m",
            "-1",
            "-c",
            conf,
            "--shards",
            &n,
            "--reactor",
            r.flag(),
        ],
    );
    (reference, ours)
}

fn write_config(tag: &str, text: &str) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("rnats-trace-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("trace.conf");
    std::fs::write(&conf, text).unwrap();
    let path = conf.to_str().unwrap().to_string();
    (dir, path)
}

fn against_reference(r: Reactor, shards: usize) {
    let (dir, conf) = write_config(&format!("{}-{shards}", r.flag()), CONFIG);
    let (reference, ours) = start_pair(r, shards, &conf);
    let cs = cases();
    let run = |srv: &Server| {
        cs.iter()
            .map(|c| {
                let out = normalized(c, &play(srv.port, c));
                common::diff::settle(srv);
                out
            })
            .collect::<Vec<_>>()
    };
    let (want, got) = std::thread::scope(|s| {
        let a = s.spawn(|| run(&reference));
        let b = s.spawn(|| run(&ours));
        (a.join().unwrap(), b.join().unwrap())
    });
    if std::env::var_os("RNATS_TRACE_DUMP").is_some() {
        for (c, w) in cs.iter().zip(&want) {
            eprintln!("== {}\n{w:#?}", c.name);
        }
    }
    let mut failures = Vec::new();
    for (c, (w, g)) in cs.iter().zip(want.iter().zip(&got)) {
        if w != g {
            failures.push(format!("{}:\n  reference: {w:#?}\n  rnats:     {g:#?}", c.name));
        }
    }
    // Every case must have produced something to compare.
    for (c, w) in cs.iter().zip(&want) {
        assert!(
            w.iter().any(|(_, f)| f.iter().any(|x| x.starts_with("TRACE ")))
                || c.name.contains("invalid")
                || c.name.contains("malformed"),
            "{}: the reference sent no trace event",
            c.name
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ ({shards} shards):\n{}",
        failures.len(),
        cs.len(),
        failures.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(traces_like_the_reference_on_one_shard, |r| against_reference(r, 1));
both_reactors!(traces_like_the_reference_on_four_shards, |r| against_reference(r, 4));

/// `msg_trace { sampling: 1% }`: a few sampled `traceparent` messages are traced, the
/// others are delivered with tracing turned off in their header, and the share is the
/// reference's (about 2 in 100: it keeps a draw 0..99 at most the percentage).
fn sampling_share(r: Reactor) {
    let (dir, conf) = write_config(&format!("sampling-{}", r.flag()), CONFIG);
    let (reference, ours) = start_pair(r, 2, &conf);
    let n = 300;
    let mut batch = Vec::new();
    for _ in 0..n {
        batch.extend_from_slice(&hpub("foo", "", &[SAMPLED], b"s"));
    }
    let c = case(
        "sampling",
        vec![conn("c", ""), conn("c", "SUB c.trace 1"), conn("c", "SUB foo 1")],
        vec![(0, batch)],
    );
    for srv in [&reference, &ours] {
        let outs = play(srv.port, &c);
        let events = split_frames(&outs[1])
            .iter()
            .filter(|f| f.line.starts_with("MSG c.trace"))
            .count();
        let delivered = split_frames(&outs[2]);
        let msgs = delivered.iter().filter(|f| f.line.starts_with("HMSG foo")).count();
        let disabled = delivered
            .iter()
            .filter(|f| {
                f.header
                    .as_deref()
                    .and_then(|h| header_value(h, "Nats-Trace-Dest"))
                    .as_deref()
                    == Some("trace disabled")
            })
            .count();
        assert_eq!(msgs, n, "every message delivered");
        assert_eq!(events + disabled, n, "each message either traced or marked disabled");
        assert!(events <= 30, "about 2% traced, got {events} of {n}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(traceparent_sampling_share, |r| sampling_share(r));

/// Without a system account nats-server sends no trace events, but a trace-only message
/// is still not delivered.
fn without_system_account(r: Reactor) {
    let (dir, conf) = write_config(
        &format!("nosys-{}", r.flag()),
        &format!("no_system_account: true\n{CONFIG}"),
    );
    let (reference, ours) = start_pair(r, 2, &conf);
    let c = case(
        "no-system-account",
        vec![conn("b", ""), conn("b", "SUB trc 1\r\nSUB foo 2")],
        vec![(0, traced("foo")), (0, hpub("foo", "", &[DEST, ONLY], b"only"))],
    );
    let want = normalized(&c, &play(reference.port, &c));
    let got = normalized(&c, &play(ours.port, &c));
    assert_eq!(got, want);
    assert!(!want[1].1.iter().any(|f| f.starts_with("TRACE")));
    assert_eq!(want[1].1.len(), 1, "only the traced message is delivered: {want:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(no_events_without_a_system_account, |r| without_system_account(r));
