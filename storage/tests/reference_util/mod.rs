//! Test machinery shared by the reference tests: start the reference nats-server with
//! JetStream in a temporary store dir, and a small raw-protocol NATS client (CONNECT, PUB,
//! HPUB, SUB, MSG/HMSG) enough to drive the JetStream API.

#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The reference nats-server binary: `NATS_REFERENCE_SERVER`, or what the repository's
/// `tools/reference-server` prints (it fetches the binary into the user's cache on first
/// use), as the root crate's tests find it. Looked up once per test binary.
pub fn reference_server() -> String {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(p) = std::env::var("NATS_REFERENCE_SERVER") {
            return p;
        }
        let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/reference-server");
        let out = Command::new(&tool)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", tool.display()));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
    .clone()
}

/// Kept for the tests' early returns: the reference is required (found or fetched as
/// above), so this is true or panics.
pub fn reference_available() -> bool {
    let p = reference_server();
    assert!(Path::new(&p).exists(), "the reference nats-server is missing at {p}");
    true
}

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "rnats-storage-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running reference server.
pub struct RefServer {
    pub child: Option<Child>,
    pub port: u16,
    pub store_dir: PathBuf,
    pub conf: PathBuf,
}

impl RefServer {
    /// Start with `extra_js` inside the `jetstream { }` block (e.g. `key: "x", cipher: aes`).
    /// The server picks its own port (`-1`) and the test reads it from the log: a port
    /// chosen here could be taken by a parallel test's server before this one binds it.
    pub fn start(dir: &Path, extra_js: &str) -> RefServer {
        let store_dir = dir.join("store");
        let conf = dir.join("server.conf");
        std::fs::write(
            &conf,
            format!(
                "listen: 127.0.0.1:-1\njetstream {{\n  store_dir: {:?}\n  {extra_js}\n}}\n",
                store_dir.display().to_string()
            ),
        )
        .unwrap();
        Self::start_conf(conf, store_dir)
    }

    fn start_conf(conf: PathBuf, store_dir: PathBuf) -> RefServer {
        let log = conf.with_extension("log");
        let _ = std::fs::remove_file(&log);
        let mut child = Command::new(reference_server())
            .arg("-c")
            .arg(&conf)
            .arg("-l")
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the reference");
        let deadline = Instant::now() + Duration::from_secs(10);
        let port = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let listening = text
                .lines()
                .find_map(|l| l.split("Listening for client connections on ").nth(1))
                .and_then(|a| a.trim().rsplit(':').next()?.parse::<u16>().ok());
            if let (Some(port), true) = (listening, text.contains("Server is ready")) {
                break port;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the reference exited ({status}) before it was ready:\n{text}");
            }
            assert!(Instant::now() < deadline, "reference did not start:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        };
        RefServer {
            child: Some(child),
            port,
            store_dir,
            conf,
        }
    }

    /// Start again on the same config and store (after a stop); the port may change.
    pub fn restart(&mut self) {
        let mut s = Self::start_conf(self.conf.clone(), self.store_dir.clone());
        self.child = s.child.take();
        self.port = s.port;
    }

    pub fn client(&self) -> Client {
        Client::connect(self.port)
    }

    /// Stop cleanly (SIGTERM: the reference writes its state and exits).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    panic!("reference did not stop on SIGTERM");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// kill -9.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The directory of stream `name` in account `$G`.
    pub fn stream_dir(&self, name: &str) -> PathBuf {
        self.store_dir.join("jetstream").join("$G").join("streams").join(name)
    }
}

impl Drop for RefServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A received message.
#[derive(Clone, Debug)]
pub struct Msg {
    pub subject: String,
    pub reply: Option<String>,
    pub headers: Vec<u8>,
    pub payload: Vec<u8>,
}

impl Msg {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.payload).unwrap_or(Value::Null)
    }
    /// The status code of a header-only status message (`NATS/1.0 204`).
    pub fn status(&self) -> Option<u16> {
        let line = self.headers.split(|&b| b == b'\r').next()?;
        let s = std::str::from_utf8(line).ok()?;
        s.strip_prefix("NATS/1.0 ")?.get(..3)?.parse().ok()
    }
}

/// A blocking raw-protocol client.
pub struct Client {
    rd: BufReader<TcpStream>,
    wr: TcpStream,
    inbox_n: u64,
    sid: u64,
    /// Messages that arrived while a request waited for its reply (the reference may
    /// deliver a snapshot's first chunk before the API answer): `next_msg` returns them
    /// first, in order.
    held: std::collections::VecDeque<Msg>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        let mut c = Client {
            rd: BufReader::new(s.try_clone().unwrap()),
            wr: s,
            inbox_n: 0,
            sid: 1,
            held: Default::default(),
        };
        let mut line = String::new();
        c.rd.read_line(&mut line).unwrap();
        assert!(line.starts_with("INFO "), "{line}");
        c.send(b"CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"no_responders\":true,\"protocol\":1}\r\nPING\r\n");
        c.wait_pong();
        c.send(b"SUB _INBOX.t.> 1\r\n");
        c
    }

    pub fn send(&mut self, b: &[u8]) {
        self.wr.write_all(b).unwrap();
    }

    pub fn wait_pong(&mut self) {
        loop {
            let mut line = String::new();
            self.rd.read_line(&mut line).unwrap();
            if line.starts_with("PONG") {
                return;
            }
            assert!(!line.starts_with("-ERR"), "{line}");
        }
    }

    pub fn subscribe(&mut self, subject: &str) -> u64 {
        self.sid += 1;
        let sid = self.sid;
        self.send(format!("SUB {subject} {sid}\r\n").as_bytes());
        self.send(b"PING\r\n");
        self.wait_pong();
        sid
    }

    pub fn publish(&mut self, subject: &str, reply: Option<&str>, headers: &[u8], payload: &[u8]) {
        let reply = reply.map(|r| format!(" {r}")).unwrap_or_default();
        let mut out = if headers.is_empty() {
            format!("PUB {subject}{reply} {}\r\n", payload.len()).into_bytes()
        } else {
            format!(
                "HPUB {subject}{reply} {} {}\r\n",
                headers.len(),
                headers.len() + payload.len()
            )
            .into_bytes()
        };
        out.extend_from_slice(headers);
        out.extend_from_slice(payload);
        out.extend_from_slice(b"\r\n");
        self.send(&out);
    }

    /// The next MSG/HMSG (PINGs answered on the way).
    pub fn next_msg(&mut self) -> Msg {
        if let Some(m) = self.held.pop_front() {
            return m;
        }
        self.read_msg()
    }

    /// The next MSG/HMSG from the socket.
    fn read_msg(&mut self) -> Msg {
        loop {
            let mut line = String::new();
            let n = self.rd.read_line(&mut line).unwrap();
            assert!(n > 0, "connection closed");
            let line = line.trim_end();
            if line == "PING" {
                self.send(b"PONG\r\n");
                continue;
            }
            if line == "PONG" || line == "+OK" || line.is_empty() || line.starts_with("INFO ") {
                continue;
            }
            assert!(!line.starts_with("-ERR"), "{line}");
            let parts: Vec<&str> = line.split(' ').collect();
            let (subject, reply, hlen, total) = match parts[0] {
                "MSG" => {
                    let (reply, n) = if parts.len() == 5 {
                        (Some(parts[3]), parts[4])
                    } else {
                        (None, parts[3])
                    };
                    (parts[1], reply, 0usize, n.parse::<usize>().unwrap())
                }
                "HMSG" => {
                    let (reply, h, t) = if parts.len() == 6 {
                        (Some(parts[3]), parts[4], parts[5])
                    } else {
                        (None, parts[3], parts[4])
                    };
                    (
                        parts[1],
                        reply,
                        h.parse::<usize>().unwrap(),
                        t.parse::<usize>().unwrap(),
                    )
                }
                other => panic!("unexpected {other}: {line}"),
            };
            let mut body = vec![0u8; total + 2];
            self.rd.read_exact(&mut body).unwrap();
            body.truncate(total);
            let payload = body.split_off(hlen);
            return Msg {
                subject: subject.to_string(),
                reply: reply.map(str::to_string),
                headers: body,
                payload,
            };
        }
    }

    pub fn new_inbox(&mut self) -> String {
        self.inbox_n += 1;
        format!("_INBOX.t.{}", self.inbox_n)
    }

    /// Request and wait for the reply (other messages are held for `next_msg`).
    pub fn request(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> Msg {
        let inbox = self.new_inbox();
        self.publish(subject, Some(&inbox), headers, payload);
        loop {
            let m = self.read_msg();
            if m.subject == inbox {
                return m;
            }
            // Late replies to earlier requests are dropped; anything else is kept.
            if !m.subject.starts_with("_INBOX.t.") {
                self.held.push_back(m);
            }
        }
    }

    pub fn api(&mut self, subject: &str, body: &Value) -> Value {
        let m = self.request(subject, b"", body.to_string().as_bytes());
        let v = m.json();
        assert!(v.get("error").is_none(), "{subject}: {v}");
        v
    }

    /// Publish to a stream and return the acknowledged sequence.
    pub fn js_publish(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> u64 {
        let m = self.request(subject, headers, payload);
        let v = m.json();
        v["seq"].as_u64().unwrap_or_else(|| panic!("publish to {subject}: {v}"))
    }
}

/// One message as published and acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    pub seq: u64,
    pub subject: String,
    pub headers: Vec<u8>,
    pub payload: Vec<u8>,
}

/// Standard base64 (with padding) as the JetStream API encodes headers and data.
pub fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("bad base64 {c}"),
        }
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c) << (18 - 6 * i);
        }
        let k = chunk.len() * 6 / 8;
        for i in 0..k {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

/// Standard base64 with padding.
pub fn base64_encode(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(c) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Unix nanoseconds of an RFC 3339 UTC time as the reference prints it
/// (`2026-12-01T10:31:15.123456789Z`).
pub fn rfc3339_nanos(s: &str) -> i64 {
    let s = s.strip_suffix('Z').expect("UTC time");
    let (date, time) = s.split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let t: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let (y, m, day) = (d[0], d[1], d[2]);
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let mut nanos: i64 = 0;
    if !frac.is_empty() {
        let f = format!("{frac:0<9}");
        nanos = f[..9].parse().unwrap();
    }
    ((days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2]) * 1_000_000_000) + nanos
}

/// A message as the reference serves it (`$JS.API.STREAM.MSG.GET`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefMsg {
    pub seq: u64,
    pub subject: String,
    pub headers: Vec<u8>,
    pub payload: Vec<u8>,
    pub ts: i64,
}

/// Every message of `stream` from the reference, by direct gets from first to last.
pub fn reference_messages(c: &mut Client, stream: &str) -> (Value, Vec<RefMsg>) {
    let info = c.api(&format!("$JS.API.STREAM.INFO.{stream}"), &serde_json::json!({}));
    let st = info["state"].clone();
    let (first, last) = (st["first_seq"].as_u64().unwrap(), st["last_seq"].as_u64().unwrap());
    let mut out = Vec::new();
    if st["messages"].as_u64() == Some(0) {
        return (st, out);
    }
    for seq in first..=last {
        let m = c.request(
            &format!("$JS.API.STREAM.MSG.GET.{stream}"),
            b"",
            serde_json::json!({ "seq": seq }).to_string().as_bytes(),
        );
        let v = m.json();
        if v.get("error").is_some() {
            assert_eq!(v["error"]["err_code"], 10037, "{v}");
            continue;
        }
        let msg = &v["message"];
        out.push(RefMsg {
            seq,
            subject: msg["subject"].as_str().unwrap().to_string(),
            headers: msg["hdrs"].as_str().map(base64_decode).unwrap_or_default(),
            payload: msg["data"].as_str().map(base64_decode).unwrap_or_default(),
            ts: rfc3339_nanos(msg["time"].as_str().unwrap()),
        });
    }
    (st, out)
}
