//! Monitoring endpoints against the reference: the same clients do the same things on
//! rnats (1 and 4 shards, both reactors) and on nats-server 2.14.0, then every endpoint
//! is asked the same questions. Answers must have the same status, content type, CORS
//! header, field names and JSON types everywhere, and the same values except where they
//! cannot agree (ids, ports, times, memory, sublist cache internals).
//!
//! The servers run with `no_system_account`: the system account's own subscriptions and
//! imports are compared in `system_account_is_reported` only.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{reference_server, Raw, Reactor, Server};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A response: status, headers (lower-case names) and body.
struct Http {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
}

fn get(port: u16, path: &str) -> Http {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Http {
        status,
        headers,
        body: body.to_string(),
    }
}

/// Fields whose values differ between any two servers (shape still compared).
const VOLATILE: &[&str] = &[
    "server_id",
    "server_name",
    "now",
    "start",
    "last_activity",
    "stop",
    "uptime",
    "idle",
    "rtt",
    "port",
    "http_port",
    "update_time",
    "config_load_time",
    "mem",
    "cpu",
    "go",
    "cores",
    "gomaxprocs",
    // Sublist cache internals: the trees cache differently.
    "num_cache",
    "num_matches",
    "cache_hit_rate",
    "max_fanout",
    "avg_fanout",
];

/// Fields only one side has.
const OURS_ONLY: &[&str] = &["rnats_shards", "rnats_reactor"];
const REF_ONLY: &[&str] = &["git_commit"];

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

/// Differences between `ours` and `theirs` under `path`; fields named in `skip` are not
/// compared at all (known differences of a scenario).
fn diff(path: &str, ours: &Value, theirs: &Value, skip: &[&str], out: &mut Vec<String>) {
    let key = path.rsplit('.').next().unwrap_or("");
    let key = key.split('[').next().unwrap_or("");
    if skip.contains(&key) {
        return;
    }
    if kind(ours) != kind(theirs) {
        out.push(format!("{path}: {ours} vs reference {theirs}"));
        return;
    }
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            // What a closed connection had queued depends on when nats-server's goroutine
            // took its snapshot.
            let closed = a.contains_key("reason");
            for (k, v) in a {
                if closed && k == "pending_bytes" {
                    continue;
                }
                match b.get(k) {
                    Some(w) => diff(&format!("{path}.{k}"), v, w, skip, out),
                    None if OURS_ONLY.contains(&k.as_str()) => {}
                    None => out.push(format!("{path}.{k}: only in rnats ({v})")),
                }
            }
            for (k, w) in b {
                if !a.contains_key(k) && !REF_ONLY.contains(&k.as_str()) {
                    out.push(format!("{path}.{k}: only in the reference ({w})"));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                out.push(format!("{path}: {} items vs reference {}", a.len(), b.len()));
            }
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), v, w, skip, out);
            }
        }
        _ if VOLATILE.contains(&key) => {}
        // Request counts depend on how often a test polled; `request_counts_match` checks them.
        _ if path.contains(".http_req_stats.") => {}
        (Value::Number(a), Value::Number(b)) => {
            if a.as_f64() != b.as_f64() {
                out.push(format!("{path}: {a} vs reference {b}"));
            }
        }
        _ => {
            if ours != theirs {
                out.push(format!("{path}: {ours} vs reference {theirs}"));
            }
        }
    }
}

/// Sort every array of objects under `key` (Go lists these from hash maps).
fn sort_arrays(v: &mut Value, keys: &[&str]) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if keys.contains(&k.as_str()) {
                    if let Value::Array(a) = x {
                        a.sort_by_key(stable_text);
                    }
                }
                sort_arrays(x, keys);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| sort_arrays(x, keys)),
        _ => {}
    }
}

/// An item's text without its volatile fields (its sort key).
fn stable_text(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let kept: serde_json::Map<String, Value> = m
                .iter()
                .filter(|(k, _)| !VOLATILE.contains(&k.as_str()))
                .map(|(k, x)| (k.clone(), x.clone()))
                .collect();
            Value::Object(kept).to_string()
        }
        other => other.to_string(),
    }
}

/// Arrays whose order is a hash-map order in nats-server.
const UNORDERED: &[&str] = &[
    "subscriptions_list",
    "subscriptions_list_detail",
    "accounts",
    "account_statz",
    "imports",
    "exports",
];

/// Ask both servers `path`; every difference found is added to `failures`.
fn compare(ours: &Server, reference: &Server, path: &str, unordered: &[&str], failures: &mut Vec<String>) {
    compare_skipping(ours, reference, path, unordered, &[], failures)
}

/// [`compare`], not comparing the fields named in `skip`.
fn compare_skipping(
    ours: &Server,
    reference: &Server,
    path: &str,
    unordered: &[&str],
    skip: &[&str],
    failures: &mut Vec<String>,
) {
    let a = get(ours.http_port.unwrap(), path);
    let b = get(reference.http_port.unwrap(), path);
    let mut problems = Vec::new();
    if a.status != b.status {
        problems.push(format!("status {} vs reference {}", a.status, b.status));
    }
    for h in ["content-type", "access-control-allow-origin"] {
        if a.headers.get(h) != b.headers.get(h) {
            problems.push(format!(
                "{h}: {:?} vs reference {:?}",
                a.headers.get(h),
                b.headers.get(h)
            ));
        }
    }
    // JSONP: compare what is inside `cb(...)`.
    let unwrap = |body: &str| -> String {
        let callback = body
            .split_once('(')
            .filter(|(cb, _)| !cb.is_empty() && cb.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        match callback.and_then(|(_, rest)| rest.strip_suffix(')')) {
            Some(inner) => inner.to_string(),
            None => body.to_string(),
        }
    };
    let (ab, bb) = (unwrap(&a.body), unwrap(&b.body));
    match (serde_json::from_str::<Value>(&ab), serde_json::from_str::<Value>(&bb)) {
        (Ok(mut x), Ok(mut y)) => {
            let keys: Vec<&str> = UNORDERED.iter().chain(unordered).copied().collect();
            sort_arrays(&mut x, &keys);
            sort_arrays(&mut y, &keys);
            if !unordered.is_empty() {
                for v in [&mut x, &mut y] {
                    if let Some(Value::Array(c)) = v.get_mut("connections") {
                        c.sort_by_key(|e| e["cid"].as_u64());
                    }
                }
            }
            diff("", &x, &y, skip, &mut problems);
        }
        // The index pages are each server's own.
        _ if a
            .headers
            .get("content-type")
            .is_some_and(|t| t.starts_with("text/html")) => {}
        _ => {
            if a.body.trim() != b.body.trim() {
                problems.push(format!("body {:?} vs reference {:?}", a.body, b.body));
            }
        }
    }
    if !problems.is_empty() {
        failures.push(format!("{path}:\n    {}", problems.join("\n    ")));
    }
}

fn assert_no_failures(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} endpoints differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The two servers of a comparison, with the same config file.
struct Pair {
    ours: Server,
    reference: Server,
    _dir: std::path::PathBuf,
}

fn start_pair(r: Reactor, shards: usize, conf: &str) -> Pair {
    let dir = common::scratch_dir();
    let file = dir.join("monitor.conf");
    std::fs::write(&file, conf).unwrap();
    let f = file.to_str().unwrap().to_string();
    let n = shards.to_string();
    let ours = Server::start(r, &["-m", "-1", "--shards", &n, "-c", &f]);
    let reference = Server::start_cmd(
        &reference_server(),
        &["-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-c", &f],
    );
    Pair {
        ours,
        reference,
        _dir: dir,
    }
}

fn connect(s: &Server, connect: &str) -> Raw {
    let mut c = s.raw();
    c.send_str(&format!("CONNECT {connect}\r\nPING\r\n"));
    c.expect("PONG\r\n");
    c
}

/// Send and wait until the server answered the trailing PING.
fn run(c: &mut Raw, cmds: &str) -> String {
    c.send_str(cmds);
    c.send_str("PING\r\n");
    let mut got = String::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !got.ends_with("PONG\r\n") && Instant::now() < deadline {
        got.push_str(&c.read_line(Duration::from_secs(5)));
        got.push_str("\r\n");
    }
    got
}

fn json(s: &Server, path: &str) -> Value {
    serde_json::from_str(&get(s.http_port.unwrap(), path).body).unwrap()
}

/// Wait until `path` says `field` is `want`.
fn wait_for(s: &Server, path: &str, field: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = json(s, path);
        if v[field].as_u64() == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{path}: {field} is {} not {want}", v[field]);
        std::thread::sleep(Duration::from_millis(20));
    }
}

const BASE_CONF: &str = "no_system_account: true\nmax_payload: 100\n";

/// The clients of the main scenario, kept open while the endpoints are compared.
fn play_clients(s: &Server) -> Vec<Raw> {
    let mut c1 = connect(
        s,
        r#"{"verbose":false,"pedantic":false,"name":"c1","lang":"rust","version":"1.2.3"}"#,
    );
    run(&mut c1, "SUB foo 1\r\nSUB bar q 2\r\nUNSUB 2 5\r\n");
    let mut c2 = connect(s, r#"{"verbose":false,"pedantic":false,"name":"c2","lang":"go"}"#);
    run(&mut c2, "SUB foo.* 7\r\nSUB foo 8\r\nSUB baz 9\r\n");
    run(&mut c1, "PUB foo 5\r\nhello\r\n");
    run(&mut c2, "PUB foo.x 2\r\nhi\r\nPUB foo.y 3\r\nhey\r\n");
    // Closed for different reasons, one after the other.
    let mut gone = connect(s, r#"{"verbose":false,"name":"gone"}"#);
    run(&mut gone, "SUB z 1\r\nSUB y 2\r\n");
    drop(gone);
    wait_for(s, "/connz?state=closed", "total", 1);
    let mut big = connect(s, r#"{"verbose":false,"name":"big"}"#);
    big.send_str("PUB foo 200\r\n");
    big.until_closed(Duration::from_secs(5));
    wait_for(s, "/connz?state=closed", "total", 2);
    let mut bad = connect(s, r#"{"verbose":false,"name":"bad"}"#);
    bad.send_str("FOO\r\n");
    bad.until_closed(Duration::from_secs(5));
    wait_for(s, "/connz?state=closed", "total", 3);
    wait_for(s, "/varz", "connections", 2);
    vec![c1, c2]
}

/// Paths compared in order; the second element lists arrays compared as sets beyond
/// the usual ones (an empty list: ordered as the reference orders it).
const PATHS: &[(&str, &[&str])] = &[
    ("/varz", &[]),
    ("/connz", &[]),
    ("/connz?subs=1", &[]),
    ("/connz?subs=true&auth=true", &[]),
    ("/connz?subs=detail", &[]),
    ("/connz?sort=cid&limit=1", &[]),
    ("/connz?sort=start&offset=1", &[]),
    ("/connz?sort=subs", &[]),
    ("/connz?sort=msgs_to", &[]),
    ("/connz?sort=msgs_from", &[]),
    ("/connz?sort=bytes_to", &[]),
    ("/connz?sort=bytes_from", &["connections"]),
    ("/connz?sort=pending", &["connections"]),
    ("/connz?sort=last", &["connections"]),
    ("/connz?sort=idle", &["connections"]),
    ("/connz?sort=uptime", &["connections"]),
    ("/connz?sort=rtt", &["connections"]),
    ("/connz?cid=2", &[]),
    ("/connz?cid=3&state=closed", &[]),
    ("/connz?cid=3", &[]),
    ("/connz?cid=3&state=all", &[]),
    ("/connz?offset=5", &[]),
    ("/connz?limit=-1&offset=-3", &[]),
    ("/connz?state=closed", &[]),
    ("/connz?state=CLOSED&auth=1", &[]),
    ("/connz?state=closed&subs=1", &[]),
    ("/connz?state=any", &[]),
    ("/connz?state=all&sort=msgs_from", &[]),
    ("/connz?state=closed&sort=stop", &[]),
    ("/connz?state=closed&sort=reason", &[]),
    ("/connz?acc=$G", &[]),
    ("/connz?acc=%24G&state=closed", &[]),
    ("/connz?acc=nope", &[]),
    ("/connz?user=nobody", &[]),
    ("/connz?mqtt_client=x", &[]),
    ("/subsz", &[]),
    ("/subsz?subs=1", &[]),
    ("/subscriptionsz?subs=1&test=foo.x", &[]),
    ("/subsz?subs=1&test=foo", &[]),
    ("/subsz?subs=1&offset=50", &[]),
    ("/subsz?acc=$G&subs=true", &[]),
    ("/subsz?acc=nope&subs=true", &[]),
    ("/accountz", &[]),
    ("/accountz?acc=$G", &[]),
    ("/accstatz", &[]),
    ("/accstatz?unused=1", &[]),
    ("/routez", &[]),
    ("/routez?subs=detail", &[]),
    ("/gatewayz?accs=1", &[]),
    ("/leafz?subs=1&acc=$G", &[]),
    ("/jsz", &[]),
    ("/jsz?accounts=true&streams=1&consumers=1&config=1", &[]),
    ("/healthz", &[]),
    ("/healthz?js-enabled-only=true", &[]),
    ("/healthz?js-server-only=1&details=true", &[]),
    ("/healthz?account=$G&stream=s&consumer=c", &[]),
    ("/healthz?stream=x", &[]),
    ("/healthz?stream=x&details=1", &[]),
    ("/healthz?account=A&consumer=c", &[]),
    ("/ipqueuesz", &[]),
    ("/raftz", &[]),
    ("/varz?callback=cb", &[]),
    ("/nope", &[]),
    ("/varz/", &[]),
    // Bad options: status and text.
    ("/connz?sort=bogus", &[]),
    ("/connz?sort=stop", &[]),
    ("/connz?sort=reason&state=all", &[]),
    ("/connz?state=xyz", &[]),
    ("/connz?auth=maybe", &[]),
    ("/connz?subs=2", &[]),
    ("/connz?offset=1.5", &[]),
    ("/connz?limit=x", &[]),
    ("/connz?cid=-1", &[]),
    ("/subsz?subs=x", &[]),
    ("/subsz?test=foo.*", &[]),
    ("/subsz?limit=a", &[]),
    ("/accountz?acc=nope", &[]),
    ("/accstatz?unused=x", &[]),
    ("/healthz?details=x", &[]),
    ("/healthz?js-enabled-only=2", &[]),
    ("/routez?subs=x", &[]),
    ("/leafz?subs=x", &[]),
    ("/gatewayz?accs=x", &[]),
    ("/jsz?leader-only=true", &[]),
    ("/jsz?raft=x", &[]),
    ("/ipqueuesz?all=x", &[]),
];

fn main_scenario(r: Reactor, shards: usize) {
    let p = start_pair(r, shards, BASE_CONF);
    let _a = play_clients(&p.ours);
    let _b = play_clients(&p.reference);
    let mut failures = Vec::new();
    for (path, unordered) in PATHS {
        compare(&p.ours, &p.reference, path, unordered, &mut failures);
    }
    assert_no_failures(failures);
    subsz_pages(&p);
}

/// Pages of `/subsz` cover the whole list once (their order is a hash order in nats-server,
/// so only the counts are compared with it).
fn subsz_pages(p: &Pair) {
    let all = json(&p.ours, "/subsz?subs=1");
    let total = all["total"].as_u64().unwrap();
    let mut seen = Vec::new();
    for off in 0..total {
        let page = json(&p.ours, &format!("/subsz?subs=1&limit=1&offset={off}"));
        assert_eq!(page["total"], total);
        assert_eq!(page["offset"], off);
        assert_eq!(page["limit"], 1);
        seen.push(page["subscriptions_list"][0].to_string());
    }
    let mut want: Vec<String> = all["subscriptions_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    want.sort();
    seen.sort();
    assert_eq!(seen, want);
    let r = json(&p.reference, "/subsz?subs=1&limit=2&offset=1");
    let o = json(&p.ours, "/subsz?subs=1&limit=2&offset=1");
    assert_eq!(o["total"], r["total"]);
    assert_eq!(
        o["subscriptions_list"].as_array().map(Vec::len),
        r["subscriptions_list"].as_array().map(Vec::len)
    );
}

both_reactors!(endpoints_match_the_reference_on_one_shard, |r| main_scenario(r, 1));
both_reactors!(endpoints_match_the_reference_on_four_shards, |r| main_scenario(r, 4));

const ACCOUNTS_CONF: &str = r#"
no_system_account: true
accounts {
  A {
    users = [{user: a, password: a}]
    exports = [{stream: "a.>"}, {service: "svc.a", response_type: stream}, {service: "svc.private", accounts: [B]}]
    mappings = { "m.src": [{destination: "m.dst", weight: 40%}], "m.one": "m.two" }
  }
  B {
    users = [{user: b, password: b}]
    imports = [
      {stream: {account: A, subject: "a.>"}, prefix: "fromA"}
      {service: {account: A, subject: "svc.a"}, to: "asvc"}
      {service: {account: A, subject: "svc.private"}}
    ]
  }
}
"#;

fn accounts_clients(s: &Server) -> Vec<Raw> {
    let mut a = connect(
        s,
        r#"{"verbose":false,"pedantic":false,"user":"a","pass":"a","name":"ca"}"#,
    );
    run(&mut a, "SUB a.1 1\r\nSUB svc.a 2\r\n");
    let mut b = connect(
        s,
        r#"{"verbose":false,"pedantic":false,"user":"b","pass":"b","name":"cb"}"#,
    );
    run(&mut b, "SUB fromA.a.> 1\r\n");
    run(&mut a, "PUB a.1 3\r\nabc\r\n");
    let mut gone = connect(s, r#"{"verbose":false,"user":"b","pass":"b","name":"gone"}"#);
    run(&mut gone, "SUB q 1\r\n");
    drop(gone);
    wait_for(s, "/connz?state=closed", "total", 1);
    let mut denied = s.raw();
    denied.send_str("CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"wrong\"}\r\nPING\r\n");
    denied.until_closed(Duration::from_secs(5));
    wait_for(s, "/connz?state=closed", "total", 2);
    vec![a, b]
}

/// Known differences in this scenario: nats-server gives the internal client of an
/// account with service imports a connection id (so client ids are shifted), adds a
/// "shadow" subscription to the exporter for every importer subscription of a stream
/// import (counted and listed there, and its deliveries counted as the exporter's
/// `sent`), and counts a message delivered through it on that shadow. rnats delivers
/// stream imports without such subscriptions.
const ACCOUNT_PATHS: &[(&str, &[&str])] = &[
    ("/connz?auth=1", &["cid"]),
    ("/connz?auth=1&subs=detail", &["cid", "msgs"]),
    ("/connz?acc=A&auth=true", &["cid"]),
    ("/connz?acc=B&state=closed&auth=1", &["cid"]),
    ("/connz?acc=B&state=all", &["cid"]),
    ("/connz?user=b&auth=1", &["cid"]),
    ("/connz?user=b&state=closed", &["cid"]),
    ("/connz?state=closed&auth=1&sort=reason", &["cid"]),
    ("/accountz", &[]),
    (
        "/accountz?acc=A",
        &["subscriptions", "num_subscriptions", "num_inserts"],
    ),
    ("/accountz?acc=B", &[]),
    ("/accstatz", &["num_subscriptions", "sent"]),
    ("/accstatz?unused=true", &["num_subscriptions", "sent"]),
    (
        "/subsz?acc=A&subs=1",
        &["num_subscriptions", "num_inserts", "total", "subscriptions_list"],
    ),
    ("/subsz?acc=B&subs=1", &["cid", "msgs", "sid"]),
    ("/varz", &["subscriptions"]),
];

fn accounts_scenario(r: Reactor, shards: usize) {
    let p = start_pair(r, shards, ACCOUNTS_CONF);
    let _a = accounts_clients(&p.ours);
    let _b = accounts_clients(&p.reference);
    let mut failures = Vec::new();
    for (path, skip) in ACCOUNT_PATHS {
        compare_skipping(&p.ours, &p.reference, path, &[], skip, &mut failures);
    }
    assert_no_failures(failures);
}

both_reactors!(accounts_match_the_reference_on_one_shard, |r| accounts_scenario(r, 1));
both_reactors!(accounts_match_the_reference_on_four_shards, |r| accounts_scenario(r, 4));

both_reactors!(request_counts_match, |r| {
    let p = start_pair(r, 2, "no_system_account: true\n");
    let paths = [
        "/",
        "/varz",
        "/connz",
        "/connz?sort=bogus",
        "/connz?auth=x",
        "/routez",
        "/routez?subs=x",
        "/gatewayz",
        "/leafz?subs=x",
        "/subsz",
        "/subscriptionsz",
        "/subsz?subs=x",
        "/accountz",
        "/accountz?acc=x",
        "/accstatz",
        "/jsz",
        "/healthz",
        "/healthz?details=x",
        "/ipqueuesz",
        "/raftz",
        "/stacksz",
        "/nope",
    ];
    for s in [&p.ours, &p.reference] {
        for path in paths {
            get(s.http_port.unwrap(), path);
        }
    }
    let a = json(&p.ours, "/varz");
    let b = json(&p.reference, "/varz");
    assert_eq!(a["http_req_stats"], b["http_req_stats"]);
});

both_reactors!(base_path_and_jsonp, |r| {
    let p = start_pair(r, 2, "no_system_account: true\nhttp_base_path: \"/mon/\"\n");
    let mut failures = Vec::new();
    for path in [
        "/mon",
        "/mon/varz",
        "/mon/connz?callback=f",
        "/mon/",
        "/varz",
        "/mon/healthz",
        "/monvarz",
    ] {
        compare(&p.ours, &p.reference, path, &[], &mut failures);
    }
    assert_no_failures(failures);
    let v = json(&p.ours, "/mon/varz");
    assert_eq!(v["http_base_path"], "/mon/");
    let page = get(p.ours.http_port.unwrap(), "/mon").body;
    assert!(page.contains("href=./mon/connz"), "{page}");
});

both_reactors!(system_account_is_reported, |r| {
    let p = start_pair(r, 2, "accounts { A { users = [{user: a, password: a}] } }\n");
    for s in [&p.ours, &p.reference] {
        assert_eq!(json(s, "/varz")["system_account"], "$SYS");
        let accts = json(s, "/accountz");
        assert_eq!(accts["system_account"], "$SYS");
        let mut names: Vec<String> = accts["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        names.sort();
        assert_eq!(names, vec!["$G", "$SYS", "A"]);
        let d = json(s, "/accountz?acc=$SYS");
        assert_eq!(d["account_detail"]["is_system"], true);
    }
    // Every account imports the system services (one subscription each, as counted by the
    // reference).
    let mut failures = Vec::new();
    compare(&p.ours, &p.reference, "/accountz?acc=A", &[], &mut failures);
    assert_no_failures(failures);
});

// The Python client's `test_unsubscribe` reads `/connz` after this traffic (and
// `test_subscribe` checks that a closed client is gone from it).
both_reactors!(python_client_connz_checks, |r| {
    let s = Server::start(r, &["-m", "-1", "--shards", "4"]);
    let rt = common::rt();
    rt.block_on(async {
        let nc = async_nats::connect(s.url()).await.unwrap();
        let mut sub = nc.subscribe("foo").await.unwrap();
        nc.publish("foo", "A".into()).await.unwrap();
        nc.publish("foo", "B".into()).await.unwrap();
        nc.flush().await.unwrap();
        use futures::StreamExt;
        for _ in 0..2 {
            tokio::time::timeout(Duration::from_secs(5), sub.next()).await.unwrap();
        }
        sub.unsubscribe().await.unwrap();
        nc.publish("foo", "C".into()).await.unwrap();
        nc.publish("foo", "D".into()).await.unwrap();
        nc.flush().await.unwrap();
        // async-nats's flush only writes; the Python test sleeps a second here.
        wait_for(&s, "/varz", "in_msgs", 4);
        let c = json(&s, "/connz?subs=detail");
        assert_eq!(c["connections"].as_array().unwrap().len(), 1, "{c}");
        let conn = &c["connections"][0];
        assert_eq!(conn["subscriptions"], 0, "{c}");
        assert_eq!(conn["in_msgs"], 4);
        assert_eq!(conn["in_bytes"], 4);
        assert_eq!(conn["out_msgs"], 2);
        assert_eq!(conn["out_bytes"], 2);
        drop(sub);
        drop(nc);
    });
    wait_for(&s, "/connz", "num_connections", 0);
    assert_eq!(json(&s, "/connz")["connections"], serde_json::json!([]));
});

both_reactors!(requests_are_served_concurrently, |r| {
    let s = Server::start(r, &["-m", "-1", "--shards", "2"]);
    let port = s.http_port.unwrap();
    // A client that sends half a request and stalls must not hold up the others.
    let mut stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stalled.write_all(b"GET /varz HTTP/1.1\r\nHost: x\r\n").unwrap();
    let t0 = Instant::now();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            std::thread::spawn(move || {
                let path = ["/connz?subs=1", "/metrics", "/shardz", "/subsz"][i % 4];
                get(port, path).status
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 200);
    }
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    drop(stalled);
});

both_reactors!(shardz_metrics_and_stacksz, |r| {
    let s = Server::start(r, &["-m", "-1", "--shards", "3"]);
    let mut cs: Vec<Raw> = (0..6).map(|_| s.raw()).collect();
    for c in cs.iter_mut() {
        c.handshake();
        c.send_str("SUB s 1\r\nPUB s 2\r\nhi\r\nPING\r\n");
        c.read_line(Duration::from_secs(5));
    }
    wait_for(&s, "/varz", "connections", 6);
    let z = json(&s, "/shardz");
    assert_eq!(z["num_shards"], 3);
    let shards = z["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 3);
    let conns: u64 = shards.iter().map(|x| x["connections"].as_u64().unwrap()).sum();
    let subs: u64 = shards.iter().map(|x| x["subscriptions"].as_u64().unwrap()).sum();
    // The server's own (internal) subscriptions are there too.
    let base = subs - 6;
    assert_eq!(conns, 6);
    for x in shards {
        assert_eq!(x["answered"], true);
        assert_eq!(x["connections"], 2, "round-robin placement: {z}");
        assert!(x["loop"]["iterations"].as_u64().unwrap() > 0);
        assert_eq!(x["mesh"]["inbound_batches"].as_array().unwrap().len(), 3);
        assert_eq!(x["mesh"]["ring_capacity"], 1024);
    }
    let m = get(s.http_port.unwrap(), "/metrics");
    assert_eq!(m.status, 200);
    assert_eq!(m.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    for want in [
        "nats_server_connections 6\n",
        "nats_server_subscriptions ",
        &format!("nats_subsz_subscriptions {}\n", base + 6),
        "nats_account_connections{account=\"$G\"} 6\n",
        "rnats_shard_connections{shard=\"2\"} 2\n",
        "rnats_shard_busy_seconds_total{shard=\"0\"} ",
        "rnats_shard_mesh_inbound_batches{shard=\"1\",from=\"0\"} ",
        "# TYPE nats_server_in_msgs_total counter\n",
        "rnats_shards_answered 3\n",
    ] {
        assert!(m.body.contains(want), "{want:?} missing from:\n{}", m.body);
    }
    // Every metric the sample dashboard uses exists.
    let dash = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/grafana/rnats.json")).unwrap();
    let _: Value = serde_json::from_str(&dash).unwrap();
    let mut used: Vec<&str> = Vec::new();
    for (i, _) in dash.match_indices("nats_") {
        let start = if dash[..i].ends_with('r') { i - 1 } else { i };
        let end = dash[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(dash.len(), |e| start + e);
        used.push(&dash[start..end]);
    }
    assert!(used.len() > 10);
    for name in used {
        assert!(
            m.body.contains(&format!("# TYPE {name} ")),
            "dashboard metric {name} not exported"
        );
    }
    let st = get(s.http_port.unwrap(), "/stacksz");
    assert!(st.body.contains("3 shards on the"), "{}", st.body);
    assert!(st.body.contains("rnats-shard-2"), "{}", st.body);
    let q = json(&s, "/ipqueuesz?all=1");
    assert!(q["shard 0 mesh from shard 1"]["pending"].is_number(), "{q}");
    // Without the clients, their subscriptions are gone from every count.
    drop(cs);
    wait_for(&s, "/varz", "connections", 0);
    let z = json(&s, "/shardz");
    let after: u64 = z["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["subscriptions"].as_u64().unwrap())
        .sum();
    assert_eq!(after, base, "{z}");
});

both_reactors!(closed_ring_is_bounded, |r| {
    let dir = common::scratch_dir();
    let file = dir.join("c.conf");
    std::fs::write(&file, "max_closed_clients: 3\n").unwrap();
    let s = Server::start(r, &["-m", "-1", "--shards", "2", "-c", file.to_str().unwrap()]);
    // One at a time, so the server closes them in cid order.
    for _ in 0..7 {
        let mut c = s.raw();
        c.handshake();
        drop(c);
        wait_for(&s, "/varz", "connections", 0);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let c = json(&s, "/connz?state=closed");
        let cids: Vec<u64> = c["connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["cid"].as_u64().unwrap())
            .collect();
        if cids == [5, 6, 7] {
            assert_eq!(c["total"], 3);
            break;
        }
        assert!(Instant::now() < deadline, "{c}");
        std::thread::sleep(Duration::from_millis(20));
    }
});
