//! Counters, atomic batch publish, fast batch publish and message schedules compared with
//! the reference (nats-server 2.14.0): configurations, PubAcks (`val`, `batch`/`count`),
//! the batch and schedule errors with their exact texts, and the fast batch flow-control
//! messages. Both reactors, one and three shards.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::jsdiff::{h, r, Req};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn compare(rx: common::Reactor, shards: &str) {
    // Every scenario on file storage, then again with the streams on memory storage.
    let mut all = scenarios();
    all.extend(common::jsdiff::on_memory(scenarios()));
    common::jsdiff::compare(rx, shards, all);
}

const B1: &str = "Nats-Batch-Id: b1\r\nNats-Batch-Sequence: 1";

fn scenarios() -> Vec<(&'static str, Vec<Req>)> {
    vec![
        (
            "counter configs",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.C",
                    r#"{"name":"C","subjects":["c.>"],"allow_msg_counter":true}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.C2",
                    r#"{"name":"C2","subjects":["c2"],"allow_msg_counter":true,"discard":"new"}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.C3",
                    r#"{"name":"C3","subjects":["c3"],"allow_msg_counter":true,"allow_msg_ttl":true}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.C4",
                    r#"{"name":"C4","subjects":["c4"],"allow_msg_counter":true,"retention":"workqueue"}"#,
                ),
                r("$JS.API.STREAM.UPDATE.C", r#"{"name":"C","subjects":["c.>"]}"#),
                r("$JS.API.STREAM.INFO.C", ""),
            ],
        ),
        (
            "counter publishes",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.C",
                    r#"{"name":"C","subjects":["c.>"],"allow_msg_counter":true}"#,
                ),
                h("c.a", "Nats-Incr: 5", ""),
                h("c.a", "Nats-Incr: +123456789012345678901234567890", ""),
                h("c.a", "Nats-Incr: -7", ""),
                h("c.a", "Nats-Incr: x", ""),
                h("c.a", "Nats-Incr: 1_0", ""),
                h("c.a", "Nats-Incr: ", ""),
                h("c.a", "Nats-Incr: 1", "body"),
                r("c.a", ""),
                h("c.a", "Nats-Incr: 1\r\nNats-Expected-Last-Sequence: 1", ""),
                h("c.a", "Nats-Incr: 1\r\nNats-Rollup: sub", ""),
                h("c.a", "Nats-Incr: 1\r\nNats-Expected-Stream: C", ""),
                h("c.a", "Nats-Incr: 1\r\nNats-Msg-Id: m1", ""),
                h("c.a", "Nats-Incr: 1\r\nNats-Msg-Id: m1", ""),
                h("c.b", "Nats-Incr: -1", ""),
                h("c.b", "Nats-Incr: -99999999999999999999", ""),
                r("$JS.API.STREAM.MSG.GET.C", r#"{"last_by_subj":"c.a"}"#),
                r("$JS.API.STREAM.MSG.GET.C", r#"{"last_by_subj":"c.b"}"#),
                r("$JS.API.STREAM.CREATE.N", r#"{"name":"N","subjects":["n"]}"#),
                h("n", "Nats-Incr: 1", ""),
                h("n", "Nats-Incr: x", ""),
            ],
        ),
        (
            "atomic batches",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.A",
                    r#"{"name":"A","subjects":["a.>"],"allow_atomic":true,"allow_rollup_hdrs":true}"#,
                ),
                h("a.x", B1, "1"),
                h("a.x", "Nats-Batch-Id: b1\r\nNats-Batch-Sequence: 2", "2"),
                h("a.x", "Nats-Batch-Id: b1\r\nNats-Batch-Sequence: 3\r\nNats-Batch-Commit: 1", "3"),
                r("$JS.API.STREAM.INFO.A", ""),
                h("a.x", "Nats-Batch-Id: b2\r\nNats-Batch-Sequence: 2", "x"),
                h("a.x", "Nats-Batch-Id: b2\r\nNats-Batch-Sequence: 1", "x"),
                h("a.x", "Nats-Batch-Id: b2\r\nNats-Batch-Sequence: 3", "x"),
                h("a.x", "Nats-Batch-Id: b3\r\nNats-Batch-Sequence: 1", "x"),
                h("a.x", "Nats-Batch-Id: b3\r\nNats-Batch-Sequence: 2\r\nNats-Batch-Commit: yes", "x"),
                // Fails at commit: nothing of it is stored.
                h("a.x", "Nats-Batch-Id: b4\r\nNats-Batch-Sequence: 1", "x"),
                h("a.x", "Nats-Batch-Id: b4\r\nNats-Batch-Sequence: 2\r\nNats-Expected-Last-Sequence: 9", "x"),
                h("a.x", "Nats-Batch-Id: b4\r\nNats-Batch-Sequence: 3\r\nNats-Batch-Commit: 1", "x"),
                r("$JS.API.STREAM.INFO.A", ""),
                h("a.x", "Nats-Batch-Id: b5\r\nNats-Batch-Sequence: 1\r\nNats-Msg-Id: d", "x"),
                h("a.x", "Nats-Batch-Id: b5\r\nNats-Batch-Sequence: 2\r\nNats-Msg-Id: d\r\nNats-Batch-Commit: 1", "x"),
                h("a.x", "Nats-Batch-Id: b6\r\nNats-Batch-Sequence: 1\r\nNats-Expected-Last-Msg-Id: d", "x"),
                h("a.x", "Nats-Batch-Id: b6\r\nNats-Batch-Sequence: 2\r\nNats-Batch-Commit: 1", "x"),
                h("a.x", "Nats-Batch-Id: b7\r\nNats-Batch-Sequence: 1", "x"),
                h("a.x", "Nats-Batch-Id: b7\r\nNats-Batch-Sequence: 2\r\nNats-Rollup: all", "x"),
                h("a.x", "Nats-Batch-Id: b7\r\nNats-Batch-Sequence: 3\r\nNats-Batch-Commit: 1", "x"),
                h("a.x", "Nats-Batch-Id: b8\r\nNats-Batch-Sequence: 1", "x"),
                h("a.y", "Nats-Batch-Id: b8\r\nNats-Batch-Sequence: 2", "y"),
                h("a.x", "Nats-Batch-Id: b8\r\nNats-Batch-Sequence: 3\r\nNats-Batch-Commit: eob", ""),
                r("$JS.API.STREAM.MSG.GET.A", r#"{"last_by_subj":"a.y"}"#),
                h("a.x", "Nats-Batch-Id: b9\r\nNats-Batch-Sequence: 1\r\nNats-Batch-Commit: eob", ""),
                h("a.x", "Nats-Batch-Id: b10\r\nNats-Batch-Sequence: 1001", "x"),
                h(
                    "a.x",
                    "Nats-Batch-Id: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\nNats-Batch-Sequence: 1",
                    "x",
                ),
                h("a.x", "Nats-Batch-Id: b11", "x"),
                h(
                    "a.x",
                    "Nats-Batch-Id: b12\r\nNats-Batch-Sequence: 1\r\nNats-Expected-Last-Sequence: 6\r\nNats-Batch-Commit: 1",
                    "x",
                ),
                h(
                    "a.z",
                    "Nats-Batch-Id: b13\r\nNats-Batch-Sequence: 1\r\nNats-Expected-Last-Subject-Sequence: 0",
                    "x",
                ),
                h(
                    "a.z",
                    "Nats-Batch-Id: b13\r\nNats-Batch-Sequence: 2\r\nNats-Expected-Last-Subject-Sequence: 0\r\nNats-Batch-Commit: 1",
                    "x",
                ),
                h(
                    "a.l",
                    "Nats-Batch-Id: b14\r\nNats-Batch-Sequence: 1\r\nNats-Required-Api-Level: 2",
                    "x",
                ),
                h(
                    "a.l",
                    "Nats-Batch-Id: b14\r\nNats-Batch-Sequence: 2\r\nNats-Required-Api-Level: 99",
                    "x",
                ),
                h(
                    "a.l",
                    "Nats-Batch-Id: b15\r\nNats-Batch-Sequence: 1\r\nNats-Required-Api-Level: 1\r\nNats-Batch-Commit: 1",
                    "x",
                ),
                r("$JS.API.STREAM.MSG.GET.A", r#"{"last_by_subj":"a.l"}"#),
                r("$JS.API.STREAM.INFO.A", ""),
                r("$JS.API.STREAM.CREATE.NA", r#"{"name":"NA","subjects":["na"]}"#),
                h("na", B1, "x"),
                r(
                    "$JS.API.STREAM.CREATE.AS",
                    r#"{"name":"AS","subjects":["as"],"allow_atomic":true,"persist_mode":"async"}"#,
                ),
            ],
        ),
        (
            "atomic batch limits",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.L",
                    r#"{"name":"L","subjects":["l"],"allow_atomic":true,"max_msgs":2,"discard":"new"}"#,
                ),
                h("l", "Nats-Batch-Id: q\r\nNats-Batch-Sequence: 1", "x"),
                h("l", "Nats-Batch-Id: q\r\nNats-Batch-Sequence: 2", "x"),
                h("l", "Nats-Batch-Id: q\r\nNats-Batch-Sequence: 3\r\nNats-Batch-Commit: 1", "x"),
                h("l", "Nats-Batch-Id: q2\r\nNats-Batch-Sequence: 1", "x"),
                h("l", "Nats-Batch-Id: q2\r\nNats-Batch-Sequence: 2\r\nNats-Batch-Commit: 1", "x"),
                r("$JS.API.STREAM.INFO.L", ""),
            ],
        ),
        (
            "atomic batch checks",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.K",
                    r#"{"name":"K","subjects":["k.>"],"allow_atomic":true,"allow_rollup_hdrs":true,"max_msgs_per_subject":1,"discard":"new","discard_new_per_subject":true}"#,
                ),
                h("k.a", "Nats-Batch-Id: r\r\nNats-Batch-Sequence: 1", "x"),
                h("k.a", "Nats-Batch-Id: r\r\nNats-Batch-Sequence: 2\r\nNats-Rollup: sub\r\nNats-Batch-Commit: 1", "x"),
                h("k.b", "Nats-Batch-Id: p\r\nNats-Batch-Sequence: 1", "x"),
                h("k.b", "Nats-Batch-Id: p\r\nNats-Batch-Sequence: 2\r\nNats-Batch-Commit: 1", "x"),
                h("k.c", "Nats-Batch-Id: q\r\nNats-Batch-Sequence: 1", "x"),
                h(
                    "k.c",
                    "Nats-Batch-Id: q\r\nNats-Batch-Sequence: 2\r\nNats-Expected-Last-Subject-Sequence: 0\r\nNats-Batch-Commit: 1",
                    "x",
                ),
                h("k.d", "Nats-Batch-Id: t\r\nNats-Batch-Sequence: 1\r\nNats-TTL: 5s\r\nNats-Batch-Commit: 1", "x"),
                h("k.d", "Nats-Batch-Id: t2\r\nNats-Batch-Sequence: 1\r\nNats-Rollup: nope\r\nNats-Batch-Commit: 1", "x"),
                h("k.d", "Nats-Batch-Id: t3\r\nNats-Batch-Sequence: 1\r\nNats-Expected-Stream: Z\r\nNats-Batch-Commit: 1", "x"),
                h("k.d", "Nats-Batch-Id: t4\r\nNats-Batch-Sequence: 1\r\nNats-Incr: 1\r\nNats-Batch-Commit: 1", ""),
                h("k.e", "Nats-Batch-Id: ok\r\nNats-Batch-Sequence: 1\r\nNats-Rollup: all\r\nNats-Batch-Commit: 1", "x"),
                r("$JS.API.STREAM.INFO.K", ""),
                r(
                    "$JS.API.STREAM.CREATE.KC",
                    r#"{"name":"KC","subjects":["kc"],"allow_atomic":true,"allow_msg_counter":true}"#,
                ),
                h("kc", "Nats-Incr: 2", ""),
                h("kc", "Nats-Batch-Id: c\r\nNats-Batch-Sequence: 1\r\nNats-Incr: 3", ""),
                h("kc", "Nats-Batch-Id: c\r\nNats-Batch-Sequence: 2\r\nNats-Batch-Commit: 1", ""),
                h("kc", "Nats-Batch-Id: c2\r\nNats-Batch-Sequence: 1\r\nNats-Incr: 3\r\nNats-Batch-Commit: 1", ""),
                r("$JS.API.STREAM.MSG.GET.KC", r#"{"last_by_subj":"kc"}"#),
                h("kc", "Nats-Incr: 1", ""),
            ],
        ),
        (
            "schedule headers",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.S",
                    r#"{"name":"S","subjects":["s.>"],"allow_msg_schedules":true}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.SP",
                    r#"{"name":"SP","subjects":["sp"],"allow_msg_schedules":true,"allow_rollup_hdrs":false}"#,
                ),
                r("$JS.API.STREAM.UPDATE.S", r#"{"name":"S","subjects":["s.>"]}"#),
                h("s.a", "Nats-Schedule: @at 2099-01-01T00:00:00Z\r\nNats-Schedule-Target: s.out", "x"),
                h("s.b", "Nats-Schedule: @at nope\r\nNats-Schedule-Target: s.out", "x"),
                h("s.b", "Nats-Schedule: @every 100ms\r\nNats-Schedule-Target: s.out", "x"),
                h("s.b", "Nats-Schedule: * * * * *\r\nNats-Schedule-Target: s.out", "x"),
                h("s.b", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: other", "x"),
                h("s.b", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: s.b", "x"),
                h("s.b", "Nats-Schedule: @every 1h", "x"),
                h("s.b", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: s.out\r\nNats-Schedule-TTL: 5s", "x"),
                h("s.b", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: s.out\r\nNats-Schedule-TTL: x", "x"),
                h("s.b", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: s.out\r\nNats-Schedule-Rollup: all", "x"),
                h("s.b", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: s.out\r\nNats-Rollup: all", "x"),
                h("s.b", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: s.out\r\nNats-Schedule-Source: s.out", "x"),
                h("s.b", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: s.out\r\nNats-Schedule-Source: zz", "x"),
                h("s.b", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: s.out\r\nNats-Schedule-Time-Zone: X/Y", "x"),
                h("s.b", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: s.out\r\nNats-Schedule-Time-Zone: UTC", "x"),
                h(
                    "s.c",
                    "Nats-Schedule: 0 0 9 * * mon-fri\r\nNats-Schedule-Target: s.out\r\nNats-Schedule-Time-Zone: Europe/Amsterdam",
                    "x",
                ),
                h("s.c", "Nats-Schedule: @daily\r\nNats-Schedule-Target: s.out", "x"),
                h("s.b", "Nats-Scheduler: s.a", "x"),
                h("s.b", "Nats-Schedule-Next: soon\r\nNats-Scheduler: s.a", "x"),
                h("s.b", "Nats-Schedule-Next: purge\r\nNats-Scheduler: s.b", "x"),
                h("s.b", "Nats-Schedule-Next: purge\r\nNats-Scheduler: s.c", "x"),
                r("$JS.API.STREAM.INFO.S", ""),
                r("$JS.API.STREAM.CREATE.NS", r#"{"name":"NS","subjects":["ns"]}"#),
                h("ns", "Nats-Schedule: @every 1h\r\nNats-Schedule-Target: ns.x", "x"),
                h("ns", "Nats-Schedule: bad", "x"),
                h("ns", "Nats-Schedule-Next: purge\r\nNats-Scheduler: ns.b", "x"),
            ],
        ),
        (
            "batch publish configs",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.F",
                    r#"{"name":"F","subjects":["f"],"allow_batched":true}"#,
                ),
                r("$JS.API.STREAM.INFO.F", ""),
                r("$JS.API.STREAM.CREATE.F2", r#"{"name":"F2","subjects":["f2"]}"#),
                r(
                    "$JS.API.STREAM.UPDATE.F2",
                    r#"{"name":"F2","subjects":["f2"],"allow_batched":true,"allow_atomic":true}"#,
                ),
            ],
        ),
    ]
}

/// Fast batch publishes: each message's reply subject carries the batch; every message
/// the server sends back within a moment is collected.
fn fast_batches() -> Vec<(&'static str, &'static str, &'static str, String)> {
    let f = |id: &str, flow: u16, gap: &str, seq: u64, op: u8| format!("_r.{id}.{flow}.{gap}.{seq}.{op}.$FI");
    let mut v = vec![(
        "$JS.API.STREAM.CREATE.FB",
        "",
        r#"{"name":"FB","subjects":["fb.>"],"allow_batched":true}"#,
        "_r.create".to_string(),
    )];
    for s in 1..=5 {
        v.push(("fb.a", "", "m", f("u1", 2, "fail", s, if s == 1 { 0 } else { 1 })));
    }
    v.extend([
        ("fb.a", "", "", f("u1", 2, "fail", 5, 4)),
        ("fb.a", "", "", f("u1", 2, "fail", 9, 4)),
        ("fb.a", "", "m", f("u1", 2, "fail", 6, 2)),
        ("fb.a", "", "m", f("u2", 10, "fail", 1, 0)),
        ("fb.a", "", "m", f("u2", 10, "fail", 3, 1)),
        ("fb.a", "", "m", f("u3", 10, "ok", 1, 0)),
        ("fb.a", "", "m", f("u3", 10, "ok", 3, 1)),
        ("fb.a", "", "m", f("u3", 10, "ok", 4, 3)),
        ("fb.a", "", "m", f("u4", 10, "fail", 2, 1)),
        ("fb.a", "", "m", f("u4", 10, "fail", 1, 9)),
        ("fb.a", "", "m", "_r.$FI".to_string()),
        ("fb.a", "", "m", f("u7", 10, "fail", 1, 2)),
        ("fb.d", "Nats-Msg-Id: d1", "m", f("u9", 10, "fail", 1, 2)),
        ("fb.d", "Nats-Msg-Id: d1", "m", f("u10", 10, "fail", 1, 2)),
        ("fb.d", "Nats-Msg-Id: d1", "m", f("u11", 10, "fail", 1, 0)),
        ("fb.d", "", "m", f("u11", 10, "fail", 2, 2)),
        ("$JS.API.STREAM.INFO.FB", "", "", "_r.info".to_string()),
        (
            "$JS.API.STREAM.CREATE.NB",
            "",
            r#"{"name":"NB","subjects":["nb"]}"#,
            "_r.c2".to_string(),
        ),
        ("nb", "", "m", f("u1", 10, "fail", 1, 0)),
    ]);
    v
}

fn play_fast(port: u16) -> Vec<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    s.write_all(b"CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB _r.> 1\r\nPING\r\n")
        .unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut drain = |s: &mut TcpStream, settle: Duration| {
        let mut got = Vec::new();
        let end = Instant::now() + settle;
        while Instant::now() < end {
            if let Ok(n) = s.read(&mut chunk) {
                got.extend_from_slice(&chunk[..n]);
            }
        }
        String::from_utf8_lossy(&got).to_string()
    };
    drain(&mut s, Duration::from_millis(200));
    for (subject, headers, body, reply) in fast_batches() {
        let msg = if headers.is_empty() {
            format!("PUB {subject} {reply} {}\r\n{body}\r\n", body.len())
        } else {
            let hdr = format!("NATS/1.0\r\n{headers}\r\n\r\n");
            let total = hdr.len() + body.len();
            format!("HPUB {subject} {reply} {} {total}\r\n{hdr}{body}\r\n", hdr.len())
        };
        s.write_all(msg.as_bytes()).unwrap();
        let text = drain(&mut s, Duration::from_millis(250));
        // Every message: its subject and masked body.
        let mut lines = text.split("\r\n");
        let mut got = Vec::new();
        while let Some(l) = lines.next() {
            if let Some(rest) = l.strip_prefix("MSG ") {
                let subj = rest.split(' ').next().unwrap_or_default().to_string();
                let body = lines.next().unwrap_or_default();
                got.push(format!("{subj} {}", common::jsdiff::shape("", body)));
            }
        }
        out.push(format!("{subject} via {reply}: {}", got.join(" ; ")));
    }
    out
}

fn compare_fast(rx: common::Reactor, shards: &str) {
    let reference = common::reference_server();
    let rdir = std::env::temp_dir().join(format!("rnats-fbdiff-ref-{}-{shards}-{rx:?}", std::process::id()));
    let odir = std::env::temp_dir().join(format!("rnats-fbdiff-ours-{}-{shards}-{rx:?}", std::process::id()));
    let _ = std::fs::remove_dir_all(&rdir);
    let _ = std::fs::remove_dir_all(&odir);
    let theirs = {
        let s = common::Server::start_cmd(
            &reference,
            &["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", rdir.to_str().unwrap()],
        );
        play_fast(s.port)
    };
    let ours = {
        let s = common::Server::start(rx, &["--shards", shards, "-js", "-sd", odir.to_str().unwrap()]);
        play_fast(s.port)
    };
    let _ = std::fs::remove_dir_all(&rdir);
    let _ = std::fs::remove_dir_all(&odir);
    let diffs: Vec<String> = theirs
        .iter()
        .zip(&ours)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("reference: {a}\n    rnats: {b}"))
        .collect();
    assert!(diffs.is_empty(), "fast batches:\n{}", diffs.join("\n"));
    assert_eq!(theirs.len(), ours.len());
}

mod one_shard {
    use super::*;
    both_reactors!(responses_match_the_reference, |r| super::compare(r, "1"));
    both_reactors!(fast_batches_match_the_reference, |r| super::compare_fast(r, "1"));
}

mod three_shards {
    use super::*;
    both_reactors!(responses_match_the_reference, |r| super::compare(r, "3"));
    both_reactors!(fast_batches_match_the_reference, |r| super::compare_fast(r, "3"));
}
