//! JetStream API responses compared with the reference: the same request sequences (raw
//! protocol) against nats-server 2.14.0 and rnats, each response parsed as JSON (or its
//! status line for header-only answers) with the volatile parts (times, server names and
//! ids) masked, must be equal. Both reactors, one and three shards.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::Server;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One request: subject, optional header lines, body.
struct Req(&'static str, &'static str, String);

fn r(subject: &'static str, body: &str) -> Req {
    Req(subject, "", body.to_string())
}

fn h(subject: &'static str, headers: &'static str, body: &str) -> Req {
    Req(subject, headers, body.to_string())
}

/// Mask what differs between any two servers or runs.
fn mask(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match k.as_str() {
                    "created" | "ts" | "first_ts" | "last_ts" | "time" | "last_active" | "leader" | "server" | "id"
                    | "timestamp" | "leader_since" | "pause_remaining" => *x = Value::String("*".into()),
                    "_nats.ver" => *x = Value::String("*".into()),
                    _ => mask(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(mask),
        _ => {}
    }
}

/// A reply as compared: the status line of a header block, and the JSON body masked.
fn shape(hdr: &str, body: &str) -> String {
    let status = hdr.lines().next().unwrap_or("").to_string();
    let mut body = match serde_json::from_str::<Value>(body) {
        Ok(mut v) => {
            mask(&mut v);
            v.to_string()
        }
        Err(_) => body.to_string(),
    };
    if status.contains("NATS/1.0") && body.is_empty() {
        body = "<none>".into();
    }
    format!("{status} | {body}")
}

/// Play `reqs` on one connection, waiting for each reply (up to 2 s; "<timeout>" when
/// none comes, as for API subjects nobody serves).
fn play(port: u16, reqs: &[Req]) -> Vec<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    s.write_all(b"CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB _r.> 1\r\nPING\r\n")
        .unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, |b| find(b, b"PONG\r\n").is_some());
    buf.clear();
    let mut out = Vec::new();
    for (i, Req(subject, headers, body)) in reqs.iter().enumerate() {
        let reply = format!("_r.{i}");
        let msg = if headers.is_empty() {
            format!("PUB {subject} {reply} {}\r\n{body}\r\n", body.len())
        } else {
            let hdr = format!("NATS/1.0\r\n{headers}\r\n\r\n");
            format!(
                "HPUB {subject} {reply} {} {}\r\n{hdr}{body}\r\n",
                hdr.len(),
                hdr.len() + body.len()
            )
        };
        s.write_all(msg.as_bytes()).unwrap();
        let want = format!(" {reply} ");
        let got = read_until(&mut s, &mut buf, |b| frame_for(b, &want).is_some());
        match got.then(|| frame_for(&buf, &want)).flatten() {
            Some((hdr, body, end)) => {
                out.push(format!("{subject}: {}", shape(&hdr, &body)));
                buf.drain(..end);
            }
            None => out.push(format!("{subject}: <timeout>")),
        }
        // Anything else that arrived (other replies) is dropped with the frame.
        buf.clear();
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn read_until(s: &mut TcpStream, buf: &mut Vec<u8>, done: impl Fn(&[u8]) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut chunk = [0u8; 65536];
    while !done(buf) {
        if Instant::now() > deadline {
            return false;
        }
        match s.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
    }
    true
}

/// The (header, body, end offset) of the first MSG/HMSG to `want` (` _r.N `) in `buf`.
fn frame_for(buf: &[u8], want: &str) -> Option<(String, String, usize)> {
    let text = String::from_utf8_lossy(buf).to_string();
    let mut at = 0;
    while let Some(nl) = text[at..].find("\r\n") {
        let line = &text[at..at + nl];
        let args: Vec<&str> = line.split(' ').collect();
        let start = at + nl + 2;
        match args.first() {
            Some(&"MSG") => {
                let n: usize = args.last()?.parse().ok()?;
                if text.len() < start + n + 2 {
                    return None;
                }
                if line.contains(want) || line.ends_with(want.trim_end()) {
                    return Some((String::new(), text[start..start + n].to_string(), start + n + 2));
                }
                at = start + n + 2;
            }
            Some(&"HMSG") => {
                let total: usize = args.last()?.parse().ok()?;
                let hl: usize = args.get(args.len() - 2)?.parse().ok()?;
                if text.len() < start + total + 2 {
                    return None;
                }
                if line.contains(want) {
                    let hdr = text[start..start + hl].to_string();
                    let body = text[start + hl..start + total].to_string();
                    return Some((hdr, body, start + total + 2));
                }
                at = start + total + 2;
            }
            _ => at = start,
        }
    }
    None
}

fn scenarios() -> Vec<(&'static str, Vec<Req>)> {
    vec![
        (
            "stream crud",
            vec![
                r("$JS.API.INFO", ""),
                r("$JS.API.STREAM.CREATE.S1", r#"{"name":"S1","subjects":["s1.>"]}"#),
                r("$JS.API.STREAM.CREATE.S1", r#"{"name":"S1","subjects":["s1.>"]}"#),
                r("$JS.API.STREAM.CREATE.S1", r#"{"name":"S1","subjects":["other"]}"#),
                r("$JS.API.STREAM.CREATE.S2", r#"{"name":"S2","subjects":["s1.x"]}"#),
                r("$JS.API.STREAM.CREATE.S3", r#"{"name":"S4"}"#),
                r("$JS.API.STREAM.CREATE.S3", r#"{"name":"S3","bogus":1}"#),
                r("$JS.API.STREAM.CREATE.S3", r#"{"name":"S3","max_age":5}"#),
                r("$JS.API.STREAM.CREATE.S3", r#"{"name":"S3","#),
                r(
                    "$JS.API.STREAM.CREATE.M1",
                    r#"{"name":"M1","storage":"memory","max_msgs":10,"discard":"new"}"#,
                ),
                r("$JS.API.STREAM.INFO.S1", ""),
                r("$JS.API.STREAM.INFO.NOPE", ""),
                r("$JS.API.STREAM.NAMES", ""),
                r("$JS.API.STREAM.NAMES", r#"{"subject":"s1.a"}"#),
                r("$JS.API.STREAM.LIST", ""),
                r(
                    "$JS.API.STREAM.UPDATE.S1",
                    r#"{"name":"S1","subjects":["s1.>"],"storage":"memory"}"#,
                ),
                r(
                    "$JS.API.STREAM.UPDATE.S1",
                    r#"{"name":"S1","subjects":["s1.>","more"],"max_msgs":100}"#,
                ),
                r("$JS.API.STREAM.UPDATE.NOPE", r#"{"name":"NOPE"}"#),
                r("$JS.API.STREAM.DELETE.M1", ""),
                r("$JS.API.STREAM.DELETE.M1", ""),
                r("$JS.API.STREAM.NAMES", ""),
                r("$JS.API.FOO", ""),
            ],
        ),
        (
            "publish and get",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.P",
                    r#"{"name":"P","subjects":["p.*"],"allow_rollup_hdrs":true}"#,
                ),
                r("p.a", "one"),
                r("p.b", "two"),
                h("p.a", "Nats-Msg-Id: m1", "three"),
                h("p.a", "Nats-Msg-Id: m1", "three again"),
                h("p.a", "Nats-Expected-Stream: Q", "x"),
                h("p.a", "Nats-Expected-Last-Sequence: 1", "x"),
                h("p.a", "Nats-Expected-Last-Sequence: 3", "four"),
                h("p.b", "Nats-Expected-Last-Subject-Sequence: 2", "five"),
                h("p.b", "Nats-Expected-Last-Subject-Sequence: 2", "x"),
                h("p.a", "Nats-Expected-Last-Msg-Id: nope", "x"),
                h("p.a", "Nats-TTL: 10s", "x"),
                h("p.c", "Nats-Rollup: bogus", "x"),
                r("$JS.API.STREAM.MSG.GET.P", r#"{"seq":2}"#),
                r("$JS.API.STREAM.MSG.GET.P", r#"{"last_by_subj":"p.a"}"#),
                r("$JS.API.STREAM.MSG.GET.P", r#"{"next_by_subj":"p.b","seq":3}"#),
                r("$JS.API.STREAM.MSG.GET.P", r#"{"seq":99}"#),
                r("$JS.API.STREAM.MSG.GET.P", r#"{"seq":1,"last_by_subj":"p.a"}"#),
                r("$JS.API.STREAM.MSG.DELETE.P", r#"{"seq":1}"#),
                r("$JS.API.STREAM.MSG.DELETE.P", r#"{"seq":1}"#),
                r("$JS.API.STREAM.INFO.P", r#"{"deleted_details":true}"#),
                h("p.c", "Nats-Rollup: sub", "rolled"),
                r("$JS.API.STREAM.PURGE.P", r#"{"filter":"p.b"}"#),
                r("$JS.API.STREAM.PURGE.P", r#"{"seq":3,"keep":1}"#),
                r("$JS.API.STREAM.PURGE.P", ""),
                r("$JS.API.STREAM.INFO.P", ""),
            ],
        ),
        (
            "consumers",
            vec![
                r("$JS.API.STREAM.CREATE.C", r#"{"name":"C","subjects":["c.*"]}"#),
                r("c.1", "a"),
                r("c.2", "b"),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D1",
                    r#"{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit"}}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D1",
                    r#"{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit"}}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D1",
                    r#"{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit","max_deliver":5},"action":"create"}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D2",
                    r#"{"stream_name":"C","config":{"name":"D2"},"action":"update"}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D3",
                    r#"{"stream_name":"C","config":{"name":"D3","deliver_policy":"by_start_sequence"}}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D4.c.2",
                    r#"{"stream_name":"C","config":{"name":"D4","filter_subject":"c.2","deliver_subject":"dlv","ack_policy":"none"}}"#,
                ),
                r(
                    "$JS.API.CONSUMER.DURABLE.CREATE.C.D5",
                    r#"{"stream_name":"C","config":{"durable_name":"D5","ack_policy":"all","max_ack_pending":10}}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.NOPE.X",
                    r#"{"stream_name":"NOPE","config":{"name":"X"}}"#,
                ),
                r("$JS.API.CONSUMER.INFO.C.D1", ""),
                r("$JS.API.CONSUMER.INFO.C.NOPE", ""),
                r("$JS.API.CONSUMER.NAMES.C", ""),
                r("$JS.API.CONSUMER.MSG.NEXT.C.D1", r#"{"batch":1}"#),
                r("$JS.API.CONSUMER.MSG.NEXT.C.D4", ""),
                r(
                    "$JS.API.CONSUMER.PAUSE.C.D1",
                    r#"{"pause_until":"2099-01-01T00:00:00Z"}"#,
                ),
                r("$JS.API.CONSUMER.PAUSE.C.D1", ""),
                r("$JS.API.CONSUMER.DELETE.C.D5", ""),
                r("$JS.API.CONSUMER.DELETE.C.D5", ""),
                r("$JS.API.CONSUMER.NAMES.C", ""),
            ],
        ),
        (
            "pull statuses and direct get",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.K",
                    r#"{"name":"K","subjects":["k.>"],"allow_direct":true,"max_msgs_per_subject":2}"#,
                ),
                r("k.a", "1"),
                r("k.a", "2"),
                r("k.a", "3"),
                r("k.b", "4"),
                r("$JS.API.DIRECT.GET.K", r#"{"seq":3}"#),
                r("$JS.API.DIRECT.GET.K.k.a", ""),
                r("$JS.API.DIRECT.GET.K.k.zzz", ""),
                r("$JS.API.DIRECT.GET.K", ""),
                r("$JS.API.DIRECT.GET.K", r#"{"seq":1,"last_by_subj":"k.a"}"#),
                r(
                    "$JS.API.CONSUMER.CREATE.K.P",
                    r#"{"stream_name":"K","config":{"durable_name":"P","ack_policy":"explicit","max_batch":5}}"#,
                ),
                r("$JS.API.CONSUMER.MSG.NEXT.K.P", r#"{"batch":10}"#),
                r(
                    "$JS.API.CONSUMER.MSG.NEXT.K.P",
                    r#"{"batch":1,"idle_heartbeat":2000000000,"expires":1000000000}"#,
                ),
                r("$JS.API.CONSUMER.MSG.NEXT.K.P", r#"{"batch":bad}"#),
            ],
        ),
    ]
}

fn compare(r: common::Reactor, shards: &str) {
    let reference = common::reference_server();
    let rdir = std::env::temp_dir().join(format!("rnats-jsdiff-ref-{}-{shards}-{:?}", std::process::id(), r));
    let odir = std::env::temp_dir().join(format!("rnats-jsdiff-ours-{}-{shards}-{:?}", std::process::id(), r));
    for (name, reqs) in scenarios() {
        let _ = std::fs::remove_dir_all(&rdir);
        let _ = std::fs::remove_dir_all(&odir);
        let theirs = {
            let s = Server::start_cmd(
                &reference,
                &["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", rdir.to_str().unwrap()],
            );
            play(s.port, &reqs)
        };
        let ours = {
            let s = Server::start(r, &["--shards", shards, "-js", "-sd", odir.to_str().unwrap()]);
            play(s.port, &reqs)
        };
        let diffs: Vec<String> = theirs
            .iter()
            .zip(&ours)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("reference: {a}\n    rnats: {b}"))
            .collect();
        assert!(diffs.is_empty(), "scenario {name:?}:\n{}", diffs.join("\n"));
    }
    let _ = std::fs::remove_dir_all(&rdir);
    let _ = std::fs::remove_dir_all(&odir);
}

mod one_shard {
    use super::*;
    both_reactors!(responses_match_the_reference, |r| super::compare(r, "1"));
}

mod three_shards {
    use super::*;
    both_reactors!(responses_match_the_reference, |r| super::compare(r, "3"));
}
