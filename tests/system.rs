//! The system account's requests and events against the reference: the same clients do
//! the same things on rnats (1 and 4 shards, both reactors) and on nats-server 2.14.0,
//! a system account user asks every `$SYS.REQ` subject the same questions and watches
//! `$SYS.>`, and the JSON is compared: the same messages on the same subjects, the same
//! fields with the same JSON types, and the same values except where two servers cannot
//! agree (ids, times, ports, memory, CPU, sublist cache internals, client ids).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{reference_server, Reactor, Server};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// A small NATS client over raw TCP.

#[derive(Clone, Debug)]
struct Msg {
    subject: String,
    header: Option<String>,
    payload: Vec<u8>,
}

impl Msg {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.payload)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {:?}", self.subject, self.text()))
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.payload).into_owned()
    }
}

struct Nats {
    s: TcpStream,
    buf: Vec<u8>,
    info: Value,
    /// Protocol lines that were not messages (`-ERR`, `INFO`).
    lines: Vec<String>,
    next: u64,
}

impl Nats {
    fn connect(port: u16, connect: Value) -> Nats {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        let mut n = Nats {
            s,
            buf: Vec::new(),
            info: Value::Null,
            lines: Vec::new(),
            next: 0,
        };
        let info = n.line(Duration::from_secs(5)).unwrap();
        n.info = serde_json::from_str(info.trim_start_matches("INFO ").trim()).unwrap();
        let mut c = serde_json::json!({"verbose": false, "pedantic": false, "headers": true, "protocol": 1});
        if let (Some(o), Some(extra)) = (c.as_object_mut(), connect.as_object()) {
            for (k, v) in extra {
                o.insert(k.clone(), v.clone());
            }
        }
        n.send(&format!("CONNECT {c}\r\n"));
        n
    }

    /// Connected as `user`, with the handshake done.
    fn user(port: u16, user: &str, name: &str) -> Nats {
        let mut n = Nats::connect(port, serde_json::json!({"user": user, "pass": "p", "name": name}));
        n.sync();
        n
    }

    fn send(&mut self, s: &str) {
        self.s.write_all(s.as_bytes()).unwrap();
    }

    fn fill(&mut self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        self.s.set_read_timeout(Some(left)).unwrap();
        let mut chunk = [0u8; 65536];
        match self.s.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(_) => false,
        }
    }

    fn line(&mut self, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..p + 2).collect();
                return Some(String::from_utf8_lossy(&line[..p]).into_owned());
            }
            if !self.fill(deadline) {
                return None;
            }
        }
    }

    /// The next message within `timeout` (PINGs answered, other lines kept).
    fn next_msg(&mut self, timeout: Duration) -> Option<Msg> {
        let deadline = Instant::now() + timeout;
        loop {
            let line = self.line(deadline.saturating_duration_since(Instant::now()))?;
            if let Some(m) = self.handle(line) {
                return Some(m);
            }
        }
    }

    /// A message for a MSG/HMSG line; other lines are answered (PING) or kept.
    fn handle(&mut self, line: String) -> Option<Msg> {
        let args: Vec<&str> = line.split(' ').collect();
        match args[0] {
            "PING" => {
                self.send("PONG\r\n");
                None
            }
            "MSG" | "HMSG" => {
                let hmsg = args[0] == "HMSG";
                let total: usize = args.last().unwrap().parse().unwrap();
                let hlen: usize = if hmsg { args[args.len() - 2].parse().unwrap() } else { 0 };
                while self.buf.len() < total + 2 {
                    assert!(self.fill(Instant::now() + Duration::from_secs(5)), "short message");
                }
                let data: Vec<u8> = self.buf.drain(..total + 2).collect();
                Some(Msg {
                    subject: args[1].to_string(),
                    header: hmsg.then(|| String::from_utf8_lossy(&data[..hlen]).into_owned()),
                    payload: data[hlen..total].to_vec(),
                })
            }
            _ => {
                self.lines.push(line);
                None
            }
        }
    }

    /// PING and wait for the PONG; messages that arrive meanwhile are returned.
    fn sync(&mut self) -> Vec<Msg> {
        self.send("PING\r\n");
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let line = self
                .line(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|| panic!("no PONG; lines {:?}", self.lines));
            if line == "PONG" {
                return got;
            }
            got.extend(self.handle(line));
        }
    }

    fn sub(&mut self, subject: &str, sid: u32) {
        self.send(&format!("SUB {subject} {sid}\r\n"));
        self.sync();
    }

    fn publish(&mut self, subject: &str, reply: &str, header: Option<&str>, body: &[u8]) {
        let mut out = Vec::new();
        match header {
            Some(h) => out.extend_from_slice(
                format!("HPUB {subject} {reply} {} {}\r\n{h}", h.len(), h.len() + body.len()).as_bytes(),
            ),
            None => out.extend_from_slice(format!("PUB {subject} {reply} {}\r\n", body.len()).as_bytes()),
        }
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
        self.s.write_all(&out).unwrap();
    }

    /// A request with a fresh `_R.<n>` reply (the client subscribes `_R.>` first). Waits
    /// `first` for an answer, then a little for more.
    fn request(&mut self, subject: &str, header: Option<&str>, body: &[u8], first: Duration) -> Vec<Msg> {
        self.next += 1;
        let reply = format!("_R.{}", self.next);
        self.publish(subject, &reply, header, body);
        let mut got = Vec::new();
        let mut wait = first;
        while let Some(m) = self.next_msg(wait) {
            if m.subject == reply {
                got.push(m);
                wait = Duration::from_millis(50);
            }
        }
        got
    }

    /// Everything that arrives until `quiet` passes without a message.
    fn drain(&mut self, quiet: Duration) -> Vec<Msg> {
        let mut got = Vec::new();
        while let Some(m) = self.next_msg(quiet) {
            got.push(m);
        }
        got
    }
}

// ---------------------------------------------------------------------------------------
// JSON comparison.

/// Values two servers cannot agree on (their shape is still compared).
const VOLATILE: &[&str] = &[
    "id",
    "server_id",
    "now",
    "start",
    "stop",
    "time",
    "timestamp",
    "seq",
    "uptime",
    "idle",
    "rtt",
    "port",
    "http_port",
    "mem",
    "cpu",
    "cores",
    "gomaxprocs",
    "go",
    "last_activity",
    // What is queued for a client at the moment of asking.
    "pending_bytes",
    "config_load_time",
    "update_time",
    "cid",
    // Sublist cache internals.
    "num_cache",
    "num_matches",
    "cache_hit_rate",
    "max_fanout",
    "avg_fanout",
    // Go's runtime.
    "cmdline",
];
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

/// Differences under `path`; keys in `skip` are not compared at all.
fn diff(path: &str, ours: &Value, theirs: &Value, skip: &[&str], out: &mut Vec<String>) {
    let key = path.rsplit('.').next().unwrap_or("").split('[').next().unwrap_or("");
    if skip.contains(&key) {
        return;
    }
    if kind(ours) != kind(theirs) {
        out.push(format!("{path}: {ours} vs reference {theirs}"));
        return;
    }
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                match b.get(k) {
                    Some(w) => diff(&format!("{path}.{k}"), v, w, skip, out),
                    None if OURS_ONLY.contains(&k.as_str()) || skip.contains(&k.as_str()) => {}
                    None => out.push(format!("{path}.{k}: only in rnats ({v})")),
                }
            }
            for (k, w) in b {
                if !a.contains_key(k) && !REF_ONLY.contains(&k.as_str()) && !skip.contains(&k.as_str()) {
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
        (Value::Number(a), Value::Number(b)) if a.as_f64() != b.as_f64() => {
            out.push(format!("{path}: {a} vs reference {b}"));
        }
        (Value::Number(_), Value::Number(_)) => {}
        _ if ours != theirs => out.push(format!("{path}: {ours} vs reference {theirs}")),
        _ => {}
    }
}

/// Sort arrays under these keys (Go lists them from hash maps) by their stable text.
const UNORDERED: &[&str] = &[
    "subscriptions_list",
    "subscriptions_list_detail",
    "imports",
    "exports",
    "account_statz",
    "connections",
    "accounts",
];

fn stable_text(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let kept: std::collections::BTreeMap<&str, String> = m
                .iter()
                .filter(|(k, _)| !VOLATILE.contains(&k.as_str()) && k.as_str() != "sid")
                .map(|(k, x)| (k.as_str(), stable_text(x)))
                .collect();
            format!("{kept:?}")
        }
        other => other.to_string(),
    }
}

fn sort_arrays(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if UNORDERED.contains(&k.as_str()) {
                    if let Value::Array(a) = x {
                        a.sort_by_key(stable_text);
                    }
                }
                sort_arrays(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(sort_arrays),
        _ => {}
    }
}

/// Compare two messages' JSON; differences are added to `out` under `what`.
fn compare_json(what: &str, ours: &Value, theirs: &Value, skip: &[&str], out: &mut Vec<String>) {
    let (mut a, mut b) = (ours.clone(), theirs.clone());
    sort_arrays(&mut a);
    sort_arrays(&mut b);
    let mut problems = Vec::new();
    diff("", &a, &b, skip, &mut problems);
    if !problems.is_empty() {
        out.push(format!("{what}:\n    {}", problems.join("\n    ")));
    }
}

fn assert_none(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// The servers.

const CONF: &str = r#"
server_name: "srv-system"
accounts {
  SYS { users [{user: sys, password: p}] }
  A { users [{user: a, password: p}, {user: a2, password: p}] }
  B { users [{user: b, password: p}] }
}
authorization { users [{user: g, password: p}] }
system_account: SYS
"#;

struct Pair {
    ours: Server,
    reference: Server,
    dir: std::path::PathBuf,
}

impl Pair {
    fn start(r: Reactor, shards: usize, conf: &str) -> Pair {
        let dir = common::scratch_dir();
        let file = dir.join("system.conf");
        std::fs::write(&file, conf).unwrap();
        let f = file.to_str().unwrap().to_string();
        let n = shards.to_string();
        let ours = Server::start(r, &["-m", "-1", "--shards", &n, "-c", &f]);
        let reference = Server::start_cmd(
            &reference_server(),
            &["-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-c", &f],
        );
        Pair { ours, reference, dir }
    }

    fn both(&self) -> [&Server; 2] {
        [&self.ours, &self.reference]
    }
}

fn server_id(n: &Nats) -> String {
    n.info["server_id"].as_str().unwrap().to_string()
}

// ---------------------------------------------------------------------------------------
// Requests.

/// One request: subject (`<ID>` is the server's id), body, `Accept-Encoding`, and the
/// fields not compared for it.
struct Case {
    subject: &'static str,
    body: &'static str,
    encoding: Option<&'static str>,
    skip: &'static [&'static str],
}

const fn case(subject: &'static str, body: &'static str) -> Case {
    Case {
        subject,
        body,
        encoding: None,
        skip: &[],
    }
}

const fn skipping(subject: &'static str, body: &'static str, skip: &'static [&'static str]) -> Case {
    Case {
        subject,
        body,
        encoding: None,
        skip,
    }
}

/// Counters that count the requests and events of the test itself (their sizes carry
/// each server's own id and name) and the sublist's insert/remove history.
const TRAFFIC: &[&str] = &[
    "in_bytes",
    "out_bytes",
    "in_msgs",
    "out_msgs",
    "sent",
    "received",
    "num_inserts",
    "num_removes",
    "total_connections",
];

const SERVER_CASES: &[Case] = &[
    skipping("$SYS.REQ.SERVER.PING", "", TRAFFIC),
    case("$SYS.REQ.SERVER.PING.IDZ", ""),
    case("$SYS.REQ.SERVER.<ID>.IDZ", ""),
    skipping("$SYS.REQ.SERVER.PING.STATSZ", "", TRAFFIC),
    skipping("$SYS.REQ.SERVER.<ID>.STATSZ", "{}", TRAFFIC),
    case("$SYS.REQ.SERVER.PING.STATSZ", r#"{"server_name":"nomatch"}"#),
    skipping("$SYS.REQ.SERVER.PING.STATSZ", r#"{"server_name":"system"}"#, TRAFFIC),
    case("$SYS.REQ.SERVER.PING.STATSZ", "{bad"),
    // http_req_stats: the test's own HTTP requests; config_digest: each server's own.
    skipping(
        "$SYS.REQ.SERVER.PING.VARZ",
        "",
        &[
            "in_bytes",
            "out_bytes",
            "in_msgs",
            "out_msgs",
            "total_connections",
            "http_req_stats",
        ],
    ),
    case("$SYS.REQ.SERVER.PING.VARZ", r#"{"server_name":1}"#),
    case(
        "$SYS.REQ.SERVER.PING.VARZ",
        r#"{"exact_match":true,"server_name":"srv-sys"}"#,
    ),
    skipping("$SYS.REQ.SERVER.PING.SUBSZ", "", TRAFFIC),
    skipping(
        "$SYS.REQ.SERVER.PING.SUBSZ",
        r#"{"subscriptions":true,"account":"A","test":"foo"}"#,
        TRAFFIC,
    ),
    case("$SYS.REQ.SERVER.PING.SUBSZ", r#"{"limit":"x"}"#),
    skipping("$SYS.REQ.SERVER.PING.CONNZ", r#"{"acc":"A"}"#, TRAFFIC),
    skipping(
        "$SYS.REQ.SERVER.<ID>.CONNZ",
        r#"{"subscriptions":true,"auth":true,"acc":"A","sort":"subs"}"#,
        TRAFFIC,
    ),
    skipping(
        "$SYS.REQ.SERVER.PING.CONNZ",
        r#"{"subscriptions_detail":true,"acc":"A","filter_subject":"foo"}"#,
        TRAFFIC,
    ),
    skipping("$SYS.REQ.SERVER.PING.CONNZ", r#"{"state":1,"acc":"B"}"#, TRAFFIC),
    // States nats-server has no name for list nothing.
    case("$SYS.REQ.SERVER.PING.CONNZ", r#"{"state":3,"acc":"A"}"#),
    case("$SYS.REQ.SERVER.PING.CONNZ", r#"{"state":-1}"#),
    case("$SYS.REQ.SERVER.PING.CONNZ", r#"{"state":3,"sort":"stop"}"#),
    case("$SYS.REQ.SERVER.PING.CONNZ", r#"{"sort":"bogus"}"#),
    case("$SYS.REQ.SERVER.PING.CONNZ", r#"{"sort":"stop"}"#),
    case("$SYS.REQ.SERVER.PING.CONNZ", r#"{"acc":"NOPE"}"#),
    case("$SYS.REQ.SERVER.PING.CONNZ", r#"{"auth":"yes"}"#),
    case("$SYS.REQ.SERVER.PING.ROUTEZ", ""),
    case("$SYS.REQ.SERVER.PING.ROUTEZ", r#"{"subscriptions":1}"#),
    case("$SYS.REQ.SERVER.<ID>.GATEWAYZ", ""),
    case("$SYS.REQ.SERVER.PING.LEAFZ", r#"{"subscriptions":true}"#),
    skipping("$SYS.REQ.SERVER.PING.ACCOUNTZ", "", TRAFFIC),
    skipping("$SYS.REQ.SERVER.PING.ACCOUNTZ", r#"{"account":"A"}"#, TRAFFIC),
    case("$SYS.REQ.SERVER.PING.ACCOUNTZ", r#"{"account":"NOPE"}"#),
    case("$SYS.REQ.SERVER.PING.JSZ", ""),
    case("$SYS.REQ.SERVER.PING.JSZ", r#"{"leader_only":true}"#),
    case("$SYS.REQ.SERVER.PING.HEALTHZ", ""),
    case(
        "$SYS.REQ.SERVER.PING.HEALTHZ",
        r#"{"js-enabled-only":true,"details":true}"#,
    ),
    case("$SYS.REQ.SERVER.PING.HEALTHZ", r#"{"stream":"S"}"#),
    case("$SYS.REQ.SERVER.PING.PROFILEZ", ""),
    case(
        "$SYS.REQ.SERVER.PING.PROFILEZ",
        r#"{"name":"cpu","duration":20000000000}"#,
    ),
    // Go's runtime counters (rnats has only the resident size).
    skipping("$SYS.REQ.SERVER.PING.EXPVARZ", "", &["memstats", "cmdline"]),
    // The queues are each server's own.
    skipping("$SYS.REQ.SERVER.PING.IPQUEUESZ", "", &["data"]),
    case("$SYS.REQ.SERVER.PING.RAFTZ", ""),
    case("$SYS.REQ.SERVER.PING.RAFTZ", r#"{"account":"A"}"#),
    case("$SYS.REQ.SERVER.PING.NOPE", ""),
    case("$SYS.REQ.SERVER.<ID>.LDM", r#"{"cid":999999}"#),
    case("$SYS.REQ.SERVER.<ID>.KICK", r#"{"cid":999999}"#),
    case("$SYS.REQ.SERVER.<ID>.KICK", ""),
    case("$SYS.REQ.SERVER.<ID>.KICK", r#"{"cid":"x"}"#),
    Case {
        subject: "$SYS.REQ.SERVER.PING.HEALTHZ",
        body: "",
        encoding: Some("gzip"),
        skip: &[],
    },
    Case {
        subject: "$SYS.REQ.SERVER.PING.HEALTHZ",
        body: "",
        encoding: Some("snappy"),
        skip: &[],
    },
    Case {
        subject: "$SYS.REQ.SERVER.PING.IDZ",
        body: "",
        encoding: Some("br"),
        skip: &[],
    },
    Case {
        subject: "$SYS.REQ.SERVER.PING.HEALTHZ",
        body: "",
        encoding: Some("br"),
        skip: &[],
    },
    Case {
        subject: "$SYS.REQ.SERVER.PING.HEALTHZ",
        body: "{x",
        encoding: Some("gzip"),
        skip: &[],
    },
];

const ACCOUNT_CASES: &[Case] = &[
    skipping("$SYS.REQ.ACCOUNT.A.SUBSZ", "", TRAFFIC),
    skipping(
        "$SYS.REQ.ACCOUNT.A.SUBSZ",
        r#"{"account":"B","subscriptions":false}"#,
        TRAFFIC,
    ),
    skipping("$SYS.REQ.ACCOUNT.A.CONNZ", "", TRAFFIC),
    skipping(
        "$SYS.REQ.ACCOUNT.A.CONNZ",
        r#"{"acc":"B","subscriptions":true}"#,
        TRAFFIC,
    ),
    case("$SYS.REQ.ACCOUNT.A.LEAFZ", ""),
    case("$SYS.REQ.ACCOUNT.A.JSZ", ""),
    skipping("$SYS.REQ.ACCOUNT.A.INFO", "", TRAFFIC),
    skipping("$SYS.REQ.ACCOUNT.A.STATZ", "", TRAFFIC),
    skipping("$SYS.REQ.ACCOUNT.A.CONNS", "", TRAFFIC),
    skipping("$SYS.REQ.ACCOUNT.A.CONNS", r#"{"acc":"A"}"#, TRAFFIC),
    case("$SYS.REQ.ACCOUNT.A.CONNS", r#"{"acc":"B"}"#),
    case("$SYS.REQ.ACCOUNT.B.CONNS", ""),
    skipping("$SYS.REQ.ACCOUNT.B.STATZ", r#"{"include_unused":true}"#, TRAFFIC),
    case("$SYS.REQ.ACCOUNT.B.STATZ", ""),
    skipping("$SYS.REQ.ACCOUNT.PING.STATZ", "", TRAFFIC),
    skipping("$SYS.REQ.ACCOUNT.PING.STATZ", r#"{"accounts":["A","B"]}"#, TRAFFIC),
    skipping("$SYS.REQ.ACCOUNT.PING.STATZ", r#"{"include_unused":true}"#, TRAFFIC),
    case("$SYS.REQ.ACCOUNT.PING.CONNZ", ""),
    case("$SYS.REQ.ACCOUNT.PING.SUBSZ", ""),
    case("$SYS.REQ.ACCOUNT.PING.INFO", ""),
    case("$SYS.REQ.ACCOUNT.NOPE.INFO", ""),
    case("$SYS.REQ.ACCOUNT.NOPE.STATZ", ""),
    case("$SYS.REQ.ACCOUNT.NOPE.SUBSZ", ""),
    case("$SYS.REQ.ACCOUNT.A.CONNZ", "{bad"),
    case("$SYS.REQ.ACCOUNT.NSUBS", ""),
    case("$SYS.REQ.ACCOUNT.NSUBS", r#"{"acc":"A","subject":"foo"}"#),
    case(
        "$SYS.REQ.ACCOUNT.NSUBS",
        r#"{"acc":"A","subject":"foo","queue":"cQ=="}"#,
    ),
    case("$SYS.REQ.ACCOUNT.NSUBS", r#"{"acc":"A","subject":"foo.>"}"#),
    case("$SYS.REQ.ACCOUNT.NSUBS", r#"{"acc":"B","subject":"foo"}"#),
    case("$SYS.DEBUG.SUBSCRIBERS", "_R.>"),
    case("$SYS.DEBUG.SUBSCRIBERS", "_R.1"),
];

/// What a request got: each answer's header and JSON (or text).
fn answers(n: &mut Nats, c: &Case, first: Duration) -> Vec<(Option<String>, Value)> {
    let id = server_id(n);
    let subject = c.subject.replace("<ID>", &id);
    let header = c.encoding.map(|e| format!("NATS/1.0\r\nAccept-Encoding: {e}\r\n\r\n"));
    n.request(&subject, header.as_deref(), c.body.as_bytes(), first)
        .into_iter()
        .map(|m| {
            let body = decode_body(m.header.as_deref(), &m.payload);
            let v =
                serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into()));
            (m.header.clone(), v)
        })
        .collect()
}

/// Undo `Content-Encoding`.
fn decode_body(header: Option<&str>, body: &[u8]) -> Vec<u8> {
    let enc = header
        .and_then(|h| h.lines().find_map(|l| l.strip_prefix("Content-Encoding: ")))
        .unwrap_or("");
    match enc {
        "gzip" => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(body).read_to_end(&mut out).unwrap();
            out
        }
        "snappy" => unsnappy(body),
        _ => body.to_vec(),
    }
}

/// A framed-snappy stream with uncompressed chunks only (what both servers send for
/// small answers).
fn unsnappy(b: &[u8]) -> Vec<u8> {
    assert!(b.starts_with(b"\xff\x06\x00\x00sNaPpY"), "not framed snappy");
    let mut rest = &b[10..];
    let mut out = Vec::new();
    while rest.len() >= 4 {
        let len = usize::from(rest[1]) | usize::from(rest[2]) << 8 | usize::from(rest[3]) << 16;
        assert_eq!(rest[0], 0x01, "only uncompressed chunks expected");
        out.extend_from_slice(&rest[8..4 + len]);
        rest = &rest[4 + len..];
    }
    out
}

/// Ask both servers every case; differences go to `failures`.
fn compare_cases(ours: &mut Nats, theirs: &mut Nats, cases: &[Case], shards: usize, failures: &mut Vec<String>) {
    for c in cases {
        // With several shards the per-connection services are subscribed on each (the
        // counts are checked in `subscription_counts_include_the_services`).
        let mut skip: Vec<&str> = c.skip.to_vec();
        if shards > 1 {
            skip.extend(["subscriptions", "num_subscriptions"]);
        }
        let want = answers(theirs, c, Duration::from_millis(700));
        let wait = if want.is_empty() {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(3)
        };
        let got = answers(ours, c, wait);
        let what = format!(
            "{} {}{}",
            c.subject,
            c.body,
            c.encoding.map(|e| format!(" [{e}]")).unwrap_or_default()
        );
        if got.len() != want.len() {
            failures.push(format!(
                "{what}: {} answers vs reference {}: {got:?} vs {want:?}",
                got.len(),
                want.len()
            ));
            continue;
        }
        for ((gh, g), (wh, w)) in got.iter().zip(&want) {
            if gh != wh {
                failures.push(format!("{what}: header {gh:?} vs reference {wh:?}"));
            }
            compare_json(&what, g, w, &skip, failures);
        }
    }
}

/// The clients both scenarios of requests have: two in A (subscriptions, a queue group,
/// some traffic) and one in B that came and went.
fn request_clients(port: u16) -> Vec<Nats> {
    let mut a = Nats::user(port, "a", "a-1");
    a.send("SUB foo 1\r\nSUB foo q 2\r\nSUB foo.* 3\r\nSUB bar 4\r\n");
    a.sync();
    a.publish("foo", "", None, b"hello");
    a.sync();
    let mut a2 = Nats::user(port, "a2", "a-2");
    a2.send("SUB foo 1\r\n");
    a2.sync();
    let mut b = Nats::user(port, "b", "b-gone");
    b.sync();
    drop(b);
    std::thread::sleep(Duration::from_millis(200));
    vec![a, a2]
}

fn requests_scenario(r: Reactor, shards: usize) {
    let p = Pair::start(r, shards, CONF);
    let _ours = request_clients(p.ours.port);
    let _theirs = request_clients(p.reference.port);
    let mut ours = Nats::user(p.ours.port, "sys", "sys-req");
    let mut theirs = Nats::user(p.reference.port, "sys", "sys-req");
    for n in [&mut ours, &mut theirs] {
        n.sub("_R.>", 1);
    }
    let mut failures = Vec::new();
    compare_cases(&mut ours, &mut theirs, SERVER_CASES, shards, &mut failures);
    compare_cases(&mut ours, &mut theirs, ACCOUNT_CASES, shards, &mut failures);
    assert_none(failures);
}

both_reactors!(server_and_account_requests_one_shard, |r| requests_scenario(r, 1));
both_reactors!(server_and_account_requests_four_shards, |r| requests_scenario(r, 4));

/// Other accounts reach the account-scoped services through their imports, about
/// themselves only; the server-wide services are not theirs.
fn imports_scenario(r: Reactor, shards: usize) {
    let p = Pair::start(r, shards, CONF);
    let _ours = request_clients(p.ours.port);
    let _theirs = request_clients(p.reference.port);
    let cases = [
        skipping("$SYS.REQ.ACCOUNT.PING.CONNZ", "", TRAFFIC),
        skipping(
            "$SYS.REQ.SERVER.PING.CONNZ",
            r#"{"acc":"SYS","subscriptions":true}"#,
            TRAFFIC,
        ),
        skipping("$SYS.REQ.ACCOUNT.PING.STATZ", "", TRAFFIC),
        skipping("$SYS.REQ.ACCOUNT.PING.STATZ", r#"{"accounts":["B"]}"#, TRAFFIC),
        case("$SYS.REQ.USER.INFO", ""),
        case("$SYS.REQ.SERVER.PING", ""),
        case("$SYS.REQ.SERVER.PING.VARZ", ""),
        case("$SYS.REQ.ACCOUNT.A.INFO", ""),
    ];
    let mut failures = Vec::new();
    for user in ["a", "b"] {
        let mut ours = Nats::user(p.ours.port, user, "importer");
        let mut theirs = Nats::user(p.reference.port, user, "importer");
        for n in [&mut ours, &mut theirs] {
            n.sub("_R.>", 1);
        }
        compare_cases(&mut ours, &mut theirs, &cases, shards, &mut failures);
    }
    assert_none(failures);
}

both_reactors!(imported_requests_one_shard, |r| imports_scenario(r, 1));
both_reactors!(imported_requests_four_shards, |r| imports_scenario(r, 4));

// ---------------------------------------------------------------------------------------
// Events.

/// An event as compared: its subject with the server id replaced, and its JSON.
fn events_of(msgs: Vec<Msg>, id: &str) -> Vec<(String, Value)> {
    msgs.into_iter()
        // Periodic statistics come whenever they are due; they are compared on their own.
        .filter(|m| !m.subject.ends_with(".STATSZ"))
        .map(|m| (m.subject.replace(id, "<ID>"), m.json()))
        .collect()
}

/// Compare two event streams: the same subjects the same number of times, and each
/// subject's events in order.
fn compare_events(step: &str, ours: &[(String, Value)], theirs: &[(String, Value)], failures: &mut Vec<String>) {
    let subjects = |v: &[(String, Value)]| {
        let mut s: Vec<String> = v.iter().map(|(s, _)| s.clone()).collect();
        s.sort();
        s
    };
    if subjects(ours) != subjects(theirs) {
        failures.push(format!(
            "{step}: subjects {:?} vs reference {:?}",
            subjects(ours),
            subjects(theirs)
        ));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    for (s, _) in theirs {
        if seen.contains(&s.as_str()) {
            continue;
        }
        seen.push(s);
        let a: Vec<&Value> = ours.iter().filter(|(x, _)| x == s).map(|(_, v)| v).collect();
        let b: Vec<&Value> = theirs.iter().filter(|(x, _)| x == s).map(|(_, v)| v).collect();
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            compare_json(&format!("{step}: {s} #{i}"), x, y, &[], failures);
        }
    }
}

/// A watcher of `$SYS.>` in the system account and one of `$SYS.ACCOUNT.CLIENT.AUTH.ERR`
/// in `$G`.
struct Watchers {
    sys: Nats,
    global: Nats,
    id: String,
}

impl Watchers {
    fn start(port: u16) -> Watchers {
        let mut sys = Nats::user(port, "sys", "watcher");
        sys.sub("$SYS.>", 1);
        sys.sub("_R.>", 2);
        let mut global = Nats::user(port, "g", "global-watcher");
        global.sub("$SYS.ACCOUNT.CLIENT.AUTH.ERR", 1);
        let id = server_id(&sys);
        Watchers { sys, global, id }
    }

    /// What both saw until things went quiet.
    fn take(&mut self) -> Vec<(String, Value)> {
        let mut got = self.sys.drain(Duration::from_millis(600));
        got.extend(self.global.drain(Duration::from_millis(100)));
        let id = self.id.clone();
        events_of(got, &id)
            .into_iter()
            .map(|(s, v)| {
                if s == "$SYS.ACCOUNT.CLIENT.AUTH.ERR" {
                    (format!("$G {s}"), v)
                } else {
                    (s, v)
                }
            })
            .collect()
    }
}

/// One step of the events scenario, played on a server.
type Step = fn(port: u16, w: &mut Watchers);

fn connect_and_leave(port: u16, _: &mut Watchers) {
    let mut c = Nats::connect(
        port,
        serde_json::json!({"user": "a", "pass": "p", "name": "events-a", "lang": "rust", "version": "1.2.3"}),
    );
    c.sync();
    // Let the connection's count go out before it subscribes (the reference counts at once).
    std::thread::sleep(Duration::from_millis(150));
    c.send("SUB foo 1\r\nPUB foo 2\r\nhi\r\n");
    c.sync();
    std::thread::sleep(Duration::from_millis(150));
    c.send("UNSUB 1\r\n");
    c.sync();
    c.s.shutdown(std::net::Shutdown::Write).unwrap();
    let _ = c.drain(Duration::from_millis(300));
}

fn bad_password(port: u16, _: &mut Watchers) {
    let mut c = Nats::connect(port, serde_json::json!({"user": "a", "pass": "wrong", "name": "bad"}));
    let _ = c.drain(Duration::from_millis(300));
}

fn no_connect(port: u16, _: &mut Watchers) {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut b = [0u8; 4096];
    let _ = (&s).read(&mut b);
    s.shutdown(std::net::Shutdown::Write).unwrap();
    std::thread::sleep(Duration::from_millis(200));
}

fn kicked(port: u16, w: &mut Watchers) {
    let mut c = Nats::user(port, "b", "to-kick");
    std::thread::sleep(Duration::from_millis(150));
    let cid = c.info["client_id"].as_u64().unwrap();
    let id = w.id.clone();
    w.sys.publish(
        &format!("$SYS.REQ.SERVER.{id}.KICK"),
        "_R.kick",
        None,
        format!("{{\"cid\":{cid}}}").as_bytes(),
    );
    let _ = c.drain(Duration::from_millis(300));
}

fn lame_duck_one(port: u16, w: &mut Watchers) {
    let mut c = Nats::user(port, "b", "to-ldm");
    std::thread::sleep(Duration::from_millis(150));
    let cid = c.info["client_id"].as_u64().unwrap();
    let id = w.id.clone();
    w.sys.publish(
        &format!("$SYS.REQ.SERVER.{id}.LDM"),
        "_R.ldm",
        None,
        format!("{{\"cid\":{cid}}}").as_bytes(),
    );
    let _ = c.drain(Duration::from_millis(300));
    assert!(
        c.lines
            .iter()
            .any(|l| l.starts_with("INFO ") && l.contains("\"ldm\":true")),
        "no lame duck INFO: {:?}",
        c.lines
    );
}

fn events_scenario(r: Reactor, shards: usize) {
    let p = Pair::start(r, shards, CONF);
    let mut ours = Watchers::start(p.ours.port);
    let mut theirs = Watchers::start(p.reference.port);
    let conns = |acc: &str| {
        [
            format!("$SYS.ACCOUNT.{acc}.SERVER.CONNS"),
            format!("$SYS.SERVER.ACCOUNT.{acc}.CONNS"),
        ]
    };
    let came_and_went = |acc: &str| -> Vec<String> {
        let mut v = vec![
            format!("$SYS.ACCOUNT.{acc}.CONNECT"),
            format!("$SYS.ACCOUNT.{acc}.DISCONNECT"),
        ];
        v.extend(conns(acc));
        v.extend(conns(acc));
        v
    };
    let with = |mut v: Vec<String>, more: &[&str]| {
        v.extend(more.iter().map(|s| s.to_string()));
        v
    };
    let steps: [(&str, Step, Vec<String>); 5] = [
        ("connect, publish, disconnect", connect_and_leave, came_and_went("A")),
        (
            "wrong password",
            bad_password,
            with(
                Vec::new(),
                &[
                    "$G $SYS.ACCOUNT.CLIENT.AUTH.ERR",
                    "$SYS.ACCOUNT.$G.DISCONNECT",
                    "$SYS.SERVER.<ID>.CLIENT.AUTH.ERR",
                ],
            ),
        ),
        (
            "no CONNECT",
            no_connect,
            with(Vec::new(), &["$SYS.ACCOUNT.$G.DISCONNECT"]),
        ),
        (
            "kick",
            kicked,
            with(came_and_went("B"), &["$SYS.REQ.SERVER.<ID>.KICK", "_R.kick"]),
        ),
        (
            "lame duck one client",
            lame_duck_one,
            with(came_and_went("B"), &["$SYS.REQ.SERVER.<ID>.LDM", "_R.ldm"]),
        ),
    ];
    let mut failures = Vec::new();
    for (name, step, mut expected) in steps {
        let _ = ours.take();
        let _ = theirs.take();
        step(p.ours.port, &mut ours);
        let a = ours.take();
        step(p.reference.port, &mut theirs);
        let b = theirs.take();
        // The scenario itself (as the reference plays it).
        let mut subjects: Vec<String> = b.iter().map(|(s, _)| s.clone()).collect();
        subjects.sort();
        expected.sort();
        assert_eq!(subjects, expected, "{name}");
        compare_events(name, &a, &b, &mut failures);
    }
    assert_none(failures);
}

both_reactors!(client_events_one_shard, |r| events_scenario(r, 1));
both_reactors!(client_events_four_shards, |r| events_scenario(r, 4));

// The periodic STATSZ: the reference's cadence (0.25 s, 1.25 s, 3.25 s after the system
// account started, then doubling) and its shape.
both_reactors!(statsz_cadence_and_shape, |r| {
    let dir = common::scratch_dir();
    let file = dir.join("statsz.conf");
    std::fs::write(&file, CONF).unwrap();
    let f = file.to_str().unwrap().to_string();
    let mut got: Vec<Vec<(f64, Value)>> = Vec::new();
    for ours in [true, false] {
        let started = Instant::now();
        let s = if ours {
            Server::start(r, &["--shards", "2", "-c", &f])
        } else {
            Server::start_cmd(&reference_server(), &["-a", "127.0.0.1", "-p", "-1", "-c", &f])
        };
        let mut w = Nats::user(s.port, "sys", "statsz-watcher");
        w.sub("$SYS.SERVER.*.STATSZ", 1);
        let mut seen = Vec::new();
        while let Some(m) = w.next_msg(Duration::from_millis(3500)) {
            seen.push((started.elapsed().as_secs_f64(), m.json()));
            if seen.len() == 3 {
                break;
            }
        }
        got.push(seen);
    }
    let (ours, theirs) = (&got[0], &got[1]);
    assert!(ours.len() >= 2 && theirs.len() >= 2, "{ours:?} {theirs:?}");
    // Both saw the same broadcasts since the watcher connected: the gaps are 1 s, 2 s.
    let gaps = |v: &Vec<(f64, Value)>| v.windows(2).map(|w| w[1].0 - w[0].0).collect::<Vec<f64>>();
    for (a, b) in gaps(ours).iter().zip(gaps(theirs)) {
        assert!(
            (a - b).abs() < 0.3,
            "gaps {:?} vs reference {:?}",
            gaps(ours),
            gaps(theirs)
        );
    }
    let mut failures = Vec::new();
    // Two shards: the per-connection services are subscribed twice (see
    // `subscription_counts_include_the_services`).
    let skip: Vec<&str> = TRAFFIC.iter().copied().chain(["subscriptions"]).collect();
    compare_json("STATSZ", &ours[0].1, &theirs[0].1, &skip, &mut failures);
    assert_none(failures);
});

// `LAMEDUCK` and `SHUTDOWN`: the server's description, then nothing more from the system
// account (no disconnect events for the clients closed afterwards).
both_reactors!(lame_duck_and_shutdown_events, |r| {
    let conf = format!("{CONF}\nlame_duck_duration: \"30s\"\nlame_duck_grace_period: \"1s\"\n");
    for (sig, what) in [(libc::SIGUSR2, "LAMEDUCK"), (libc::SIGINT, "SHUTDOWN")] {
        let p = Pair::start(r, 2, &conf);
        let mut seen: Vec<Vec<(String, Value)>> = Vec::new();
        for s in p.both() {
            let mut w = Nats::user(s.port, "sys", "watcher");
            w.sub("$SYS.>", 1);
            let _other = Nats::user(s.port, "a", "other");
            let _ = w.drain(Duration::from_millis(300));
            s.signal(sig);
            let got = w.drain(Duration::from_millis(1500));
            seen.push(events_of(got, &server_id(&w)));
        }
        let mut failures = Vec::new();
        compare_events(what, &seen[0], &seen[1], &mut failures);
        assert_none(failures);
        assert_eq!(seen[0].len(), 1, "{:?}", seen[0]);
        assert_eq!(seen[0][0].0, format!("$SYS.SERVER.<ID>.{what}"));
        drop(p);
    }
});

// `RELOAD` reloads the configuration file (new clients see the new `max_payload`); a
// filter that names another server is not answered.
both_reactors!(reload_request, |r| {
    let p = Pair::start(r, 2, CONF);
    let mut failures = Vec::new();
    let mut ours = Nats::user(p.ours.port, "sys", "reloader");
    let mut theirs = Nats::user(p.reference.port, "sys", "reloader");
    for n in [&mut ours, &mut theirs] {
        n.sub("_R.>", 1);
    }
    std::fs::write(p.dir.join("system.conf"), format!("{CONF}\nmax_payload: 2000\n")).unwrap();
    let cases = [
        case("$SYS.REQ.SERVER.<ID>.RELOAD", r#"{"server_name":"other"}"#),
        case("$SYS.REQ.SERVER.<ID>.RELOAD", "{bad"),
        case("$SYS.REQ.SERVER.<ID>.RELOAD", ""),
    ];
    compare_cases(&mut ours, &mut theirs, &cases, 2, &mut failures);
    assert_none(failures);
    for s in p.both() {
        let n = Nats::user(s.port, "a", "after-reload");
        assert_eq!(n.info["max_payload"], 2000, "{}", n.info);
    }
});

// The system account's users follow their permissions like any other user: a denied
// request subject is a publish violation, a denied reply subscription is refused.
both_reactors!(system_users_have_permissions, |r| {
    let conf = r#"
accounts {
  SYS { users [
    {user: sys, password: p},
    {user: ro, password: p, permissions: {publish: {allow: ["$SYS.REQ.SERVER.PING.*"]}, subscribe: {deny: ["$SYS.ACCOUNT.>"]}}}
  ] }
  A { users [{user: a, password: p}] }
}
system_account: SYS
"#;
    let p = Pair::start(r, 2, conf);
    let mut lines = Vec::new();
    for s in p.both() {
        let mut n = Nats::user(s.port, "ro", "restricted");
        n.sub("_R.>", 1);
        n.sub("$SYS.ACCOUNT.A.CONNECT", 2);
        let id = server_id(&n);
        let idz = n.request("$SYS.REQ.SERVER.PING.IDZ", None, b"", Duration::from_secs(2));
        let varz = n.request(
            &format!("$SYS.REQ.SERVER.{id}.VARZ"),
            None,
            b"",
            Duration::from_millis(400),
        );
        n.sync();
        let errs: Vec<String> = n.lines.iter().filter(|l| l.starts_with("-ERR")).cloned().collect();
        lines.push((idz.len(), varz.len(), errs));
    }
    let id = |s: &Server| {
        let n = Nats::user(s.port, "sys", "x");
        server_id(&n)
    };
    let (ours_id, theirs_id) = (id(&p.ours), id(&p.reference));
    let mut theirs = lines[1].clone();
    theirs.2 = theirs.2.iter().map(|l| l.replace(&theirs_id, &ours_id)).collect();
    assert_eq!(lines[0], theirs);
    assert_eq!(lines[0].0, 1);
});

// With a system account, subscription counts include the system account's services as
// the reference counts them (per-shard `$SYS.REQ.USER.*.INFO` services once per shard).
both_reactors!(subscription_counts_include_the_services, |r| {
    for shards in [1usize, 4] {
        let p = Pair::start(r, shards, CONF);
        let count = |s: &Server, path: &str, field: &str| -> u64 {
            let (_, body) = s.http_get(path);
            let v: Value = serde_json::from_str(&body).unwrap();
            v[field].as_u64().unwrap()
        };
        let extra = shards as u64 - 1;
        for (path, field) in [("/varz", "subscriptions"), ("/subsz", "num_subscriptions")] {
            assert_eq!(
                count(&p.ours, path, field),
                count(&p.reference, path, field) + extra,
                "{path} with {shards} shards"
            );
        }
        let d = |s: &Server| {
            let (_, body) = s.http_get("/accountz?acc=SYS");
            let v: Value = serde_json::from_str(&body).unwrap();
            v["account_detail"]["subscriptions"].as_u64().unwrap()
        };
        assert_eq!(d(&p.ours), d(&p.reference) + extra, "SYS with {shards} shards");
    }
});
