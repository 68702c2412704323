//! JetStream monitoring against the reference: the same streams, messages and consumers
//! are created over raw NATS on rnats (1 and 4 shards, both reactors) and on
//! nats-server 2.14.0, then `/jsz` with its options, `/varz`'s `jetstream`, `/healthz`
//! with its JetStream checks, and the `$SYS` JSZ/HEALTHZ requests are asked of both.
//! Answers must have the same status, field names, JSON types and values, except the
//! values that cannot agree (ids, times, store paths) and the per-account API counters
//! (rnats counts API requests server-wide only).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{reference_server, Raw, Reactor, Server};
use serde_json::Value;
use std::time::Duration;

/// Values that differ between any two servers (the shape is still compared).
const VOLATILE: &[&str] = &[
    "server_id",
    "now",
    "created",
    "ts",
    "first_ts",
    "last_ts",
    "leader",
    "store_dir",
    "last_active",
];

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Differences between `ours` and `theirs` under `path`.
fn diff(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    let key = path.rsplit('.').next().unwrap_or("");
    let key = key.split('[').next().unwrap_or("");
    if kind(ours) != kind(theirs) {
        out.push(format!("{path}: {ours} vs reference {theirs}"));
        return;
    }
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                match b.get(k) {
                    Some(w) => diff(&format!("{path}.{k}"), v, w, out),
                    None => out.push(format!("{path}.{k}: only in rnats ({v})")),
                }
            }
            for (k, w) in b {
                if !a.contains_key(k) {
                    out.push(format!("{path}.{k}: only in the reference ({w})"));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                out.push(format!("{path}: {} items vs reference {}", a.len(), b.len()));
            }
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), v, w, out);
            }
        }
        _ if VOLATILE.contains(&key) => {}
        _ => {
            if ours != theirs {
                out.push(format!("{path}: {ours} vs reference {theirs}"));
            }
        }
    }
}

/// Known differences taken out before comparing: the per-account API counters (rnats
/// keeps them server-wide) and Go's hash-map order of streams.
fn normalize(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if m.contains_key("stream_detail") || (m.contains_key("reserved_memory") && m.contains_key("id")) {
                    if let Some(api) = m.get_mut("api") {
                        *api = Value::Null;
                    }
                }
                if let Some(Value::Array(a)) = m.get_mut("stream_detail") {
                    a.sort_by_key(|s| s["name"].as_str().unwrap_or("").to_string());
                }
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

fn compare_json(what: &str, ours: &str, theirs: &str, failures: &mut Vec<String>) {
    let parse = |s: &str| serde_json::from_str::<Value>(s).map(normalize);
    match (parse(ours), parse(theirs)) {
        (Ok(a), Ok(b)) => {
            let mut problems = Vec::new();
            diff("", &a, &b, &mut problems);
            if !problems.is_empty() {
                failures.push(format!("{what}:\n    {}", problems.join("\n    ")));
            }
        }
        _ if ours.trim() == theirs.trim() => {}
        _ => failures.push(format!("{what}: {ours:?} vs reference {theirs:?}")),
    }
}

/// One request over NATS as `user`, its reply's payload.
fn request(s: &Server, user: &str, subject: &str, body: &str) -> String {
    let mut c = Raw::connect(s.port);
    c.send_str(&format!(
        "CONNECT {{\"verbose\":false,\"headers\":true,\"user\":\"{user}\",\"pass\":\"{user}\"}}\r\nSUB _R 1\r\nPUB {subject} _R {}\r\n{body}\r\nPING\r\n",
        body.len()
    ));
    loop {
        let line = c.read_line(Duration::from_secs(10));
        if line.starts_with("MSG ") {
            return c.read_line(Duration::from_secs(10));
        }
        assert!(!line.starts_with("-ERR"), "{subject}: {line}");
    }
}

fn publish(s: &Server, user: &str, subject: &str, n: usize) {
    let mut c = Raw::connect(s.port);
    c.send_str(&format!(
        "CONNECT {{\"verbose\":false,\"user\":\"{user}\",\"pass\":\"{user}\"}}\r\n"
    ));
    for i in 0..n {
        let p = format!("m{i}");
        c.send_str(&format!("PUB {subject} {}\r\n{p}\r\n", p.len()));
    }
    c.send_str("PING\r\n");
    c.expect("PONG\r\n");
}

fn config(store: &std::path::Path) -> String {
    format!(
        r#"
jetstream {{ store_dir: "{}", max_memory_store: 1GB, max_file_store: 2GB }}
accounts {{
  A {{ jetstream: {{ max_mem: 1MB, max_file: 10MB, max_streams: 5 }}, users: [{{user: a, password: a}}] }}
  B {{ jetstream: enabled, users: [{{user: b, password: b}}] }}
  C {{ users: [{{user: c, password: c}}] }}
  SYS {{ users: [{{user: sys, password: sys}}] }}
}}
system_account: SYS
"#,
        store.display()
    )
}

/// What both servers are given: two streams and a consumer in A, a stream in B.
fn play(s: &Server) {
    let created = [
        ("a", "S1", r#"{"name":"S1","subjects":["s1.>"],"max_bytes":100000}"#),
        (
            "a",
            "M1",
            r#"{"name":"M1","subjects":["m1.>"],"max_bytes":5000,"storage":"memory"}"#,
        ),
        ("b", "S2", r#"{"name":"S2","subjects":["s2.>"]}"#),
    ];
    for (user, name, cfg) in created {
        let r = request(s, user, &format!("$JS.API.STREAM.CREATE.{name}"), cfg);
        assert!(r.contains("\"did_create\":true"), "{r}");
    }
    publish(s, "a", "s1.x", 3);
    publish(s, "a", "m1.y", 2);
    publish(s, "b", "s2.z", 1);
    let r = request(
        s,
        "a",
        "$JS.API.CONSUMER.CREATE.S1.D1",
        r#"{"stream_name":"S1","config":{"durable_name":"D1","ack_policy":"explicit"}}"#,
    );
    assert!(r.contains("\"name\":\"D1\""), "{r}");
    // The acks are released after the writes are durable; wait for the counts to settle.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let v: Value = serde_json::from_str(&s.http_get("/jsz").1).unwrap();
        if v["messages"] == 6 && v["consumers"] == 1 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the streams did not settle");
}

const HTTP: &[&str] = &[
    "/jsz",
    "/jsz?accounts=1",
    "/jsz?consumers=1&config=1&raft=1",
    "/jsz?streams=1",
    "/jsz?acc=A&streams=1",
    "/jsz?acc=A&consumers=true",
    "/jsz?acc=NOPE&accounts=1",
    "/jsz?accounts=1&offset=1&limit=1",
    "/jsz?accounts=1&offset=5",
    "/jsz?leader-only=true",
    "/jsz?raft=x",
    "/healthz",
    "/healthz?js-enabled-only=true",
    "/healthz?js-server-only=true",
    "/healthz?account=A",
    "/healthz?account=B&stream=S2",
    "/healthz?account=A&stream=S1",
    "/healthz?account=A&stream=M1",
    "/healthz?account=A&stream=S1&consumer=D1",
    "/healthz?account=A&stream=S1&consumer=NOPE",
    "/healthz?account=A&stream=S1&consumer=NOPE&details=1",
    "/healthz?account=C",
    "/healthz?account=NOPE&details=true",
    "/healthz?stream=S1",
];

const SYS: &[(&str, &str)] = &[
    ("$SYS.REQ.SERVER.PING.JSZ", ""),
    (
        "$SYS.REQ.SERVER.PING.JSZ",
        r#"{"accounts":true,"consumer":true,"config":true}"#,
    ),
    ("$SYS.REQ.SERVER.PING.JSZ", r#"{"account":"B","streams":true}"#),
    ("$SYS.REQ.ACCOUNT.A.JSZ", ""),
    (
        "$SYS.REQ.ACCOUNT.A.JSZ",
        r#"{"streams":true,"consumer":true,"config":true}"#,
    ),
    ("$SYS.REQ.ACCOUNT.A.JSZ", r#"{"consumer":true}"#),
    ("$SYS.REQ.ACCOUNT.C.JSZ", ""),
    ("$SYS.REQ.ACCOUNT.SYS.JSZ", ""),
    ("$SYS.REQ.ACCOUNT.NOPE.JSZ", ""),
    (
        "$SYS.REQ.SERVER.PING.HEALTHZ",
        r#"{"account":"A","stream":"S1","consumer":"D1"}"#,
    ),
    ("$SYS.REQ.SERVER.PING.HEALTHZ", r#"{"account":"A","stream":"NOPE"}"#),
];

/// The parts of a `$SYS` answer that can agree: `data`, `error` and the server's
/// JetStream flags.
fn sys_view(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    serde_json::json!({
        "data": v["data"],
        "error": v["error"],
        "jetstream": v["server"]["jetstream"],
        "flags": v["server"]["flags"],
    })
    .to_string()
}

fn scenario(r: Reactor, shards: usize) {
    let dir = common::scratch_dir();
    let (ours_conf, ref_conf) = (dir.join("ours.conf"), dir.join("ref.conf"));
    std::fs::write(&ours_conf, config(&dir.join("ours"))).unwrap();
    std::fs::write(&ref_conf, config(&dir.join("ref"))).unwrap();
    let n = shards.to_string();
    let ours = Server::start(r, &["-m", "-1", "--shards", &n, "-c", ours_conf.to_str().unwrap()]);
    let reference = Server::start_cmd(
        &reference_server(),
        &[
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-m",
            "-1",
            "-c",
            ref_conf.to_str().unwrap(),
        ],
    );
    play(&ours);
    play(&reference);
    let mut failures = Vec::new();
    for path in HTTP {
        let (a, b) = (ours.http_get(path), reference.http_get(path));
        if a.0 != b.0 {
            failures.push(format!("{path}: status {} vs reference {}", a.0, b.0));
        }
        compare_json(path, &a.1, &b.1, &mut failures);
    }
    let jetstream = |s: &Server| {
        let v: Value = serde_json::from_str(&s.http_get("/varz").1).unwrap();
        v["jetstream"].to_string()
    };
    compare_json(
        "/varz jetstream",
        &jetstream(&ours),
        &jetstream(&reference),
        &mut failures,
    );
    let statsz = |s: &Server| {
        let v: Value = serde_json::from_str(&request(s, "sys", "$SYS.REQ.SERVER.PING.STATSZ", "")).unwrap();
        v["statsz"]["jetstream"].to_string()
    };
    compare_json("STATSZ jetstream", &statsz(&ours), &statsz(&reference), &mut failures);
    for (subject, body) in SYS {
        let a = sys_view(&request(&ours, "sys", subject, body));
        let b = sys_view(&request(&reference, "sys", subject, body));
        compare_json(&format!("{subject} {body}"), &a, &b, &mut failures);
    }
    // A stream directory nothing recovered and an account directory no account has.
    for side in ["ours", "ref"] {
        let root = dir.join(side).join("jetstream");
        std::fs::create_dir_all(root.join("A").join("streams").join("GHOST")).unwrap();
        std::fs::create_dir_all(root.join("ZZZ")).unwrap();
    }
    for path in [
        "/healthz",
        "/healthz?details=1",
        "/healthz?account=A&stream=GHOST",
        "/healthz?account=ZZZ",
    ] {
        let (a, b) = (ours.http_get(path), reference.http_get(path));
        if a != b {
            failures.push(format!("{path}: {a:?} vs reference {b:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // What the comparison leaves out, checked on rnats alone: the values themselves.
    let v: Value = serde_json::from_str(&ours.http_get("/jsz?consumers=1&config=1").1).unwrap();
    assert_eq!((v["streams"].as_u64(), v["messages"].as_u64()), (Some(3), Some(6)));
    assert_eq!(
        v["config"]["store_dir"],
        dir.join("ours").join("jetstream").to_str().unwrap()
    );
    let a = v["account_details"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "A")
        .unwrap();
    assert_eq!(a["reserved_memory"], 1 << 20);
    let s1 = a["stream_detail"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "S1")
        .unwrap();
    assert_eq!(s1["state"]["messages"], 3);
    assert_eq!(s1["consumer_detail"][0]["num_pending"], 3);
    assert_eq!(
        s1["consumer_detail"][0]["config"]["metadata"],
        serde_json::json!({"_nats.req.level": "0"})
    );
}

both_reactors!(jetstream_monitoring_matches_the_reference_on_one_shard, |r| scenario(
    r, 1
));
both_reactors!(jetstream_monitoring_matches_the_reference_on_four_shards, |r| scenario(
    r, 4
));

both_reactors!(without_jetstream_jsz_is_disabled_and_varz_empty, |r| {
    let s = Server::start(r, &["-m", "-1"]);
    let v: Value = serde_json::from_str(&s.http_get("/jsz?accounts=1").1).unwrap();
    assert_eq!(v["disabled"], true);
    assert!(v.get("account_details").is_none() && v.get("limits").is_none());
    let v: Value = serde_json::from_str(&s.http_get("/varz").1).unwrap();
    assert_eq!(v["jetstream"], serde_json::json!({}));
    assert_eq!(
        s.http_get("/jsz?leader-only=1"),
        (400, "filtered response: not leader".to_string())
    );
    assert_eq!(s.http_get("/healthz?account=A").0, 200);
    assert!(s.http_get("/metrics").1.contains("\nnats_jetstream_enabled 0\n"));
});
