//! Differential scenarios: raw protocol bytes played against two servers (rnats and the
//! reference) and the normalized replies compared.
#![allow(dead_code, clippy::unwrap_used, clippy::indexing_slicing)]

use super::Server;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use Step::*;

/// One connection's part of a scenario: bytes to send, in order, with optional pauses.
pub enum Step {
    /// Send on connection `n`.
    Send(usize, Vec<u8>),
    /// Let the server settle.
    Sleep(u64),
    /// Wait (up to 2 s) on connection `n` for a message with a reply subject and publish
    /// this payload to that reply (a responder whose reply subject is not known ahead).
    Reply(usize, Vec<u8>),
    /// Wait (up to 5 s) until connection `n` has received these bytes (for replies whose
    /// order against a PONG nats-server does not fix: it answers system requests from
    /// another goroutine).
    Await(usize, &'static str),
}

pub struct Scenario {
    pub name: String,
    pub conns: usize,
    pub steps: Vec<Step>,
}

/// Split a reply stream into frames: protocol lines, with MSG/HMSG payloads attached.
pub fn frames(out: &str) -> Vec<String> {
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
pub fn normalize(out: &str) -> String {
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
pub fn play(port: u16, sc: &Scenario) -> Vec<String> {
    let mut conns: Vec<TcpStream> = (0..sc.conns)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    let mut early: Vec<Vec<u8>> = vec![Vec::new(); sc.conns];
    for step in &sc.steps {
        match step {
            Send(n, data) => {
                let _ = conns[*n].write_all(data);
            }
            Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Await(n, what) => wait_for(&mut conns[*n], &mut early[*n], what.as_bytes()),
            Reply(n, payload) => {
                if let Some(reply) = wait_reply(&mut conns[*n], &mut early[*n]) {
                    let mut m = format!("PUB {reply} {}\r\n", payload.len()).into_bytes();
                    m.extend_from_slice(payload);
                    m.extend_from_slice(b"\r\n");
                    let _ = conns[*n].write_all(&m);
                }
            }
        }
    }
    conns
        .iter_mut()
        .enumerate()
        .map(|(i, c)| {
            let want_pongs = pings_sent(sc, i);
            let mut out = std::mem::take(&mut early[i]);
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

/// Read from `c` (appending to `seen`) until `seen` holds `what`.
fn wait_for(c: &mut TcpStream, seen: &mut Vec<u8>, what: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    while Instant::now() < deadline && !seen.windows(what.len()).any(|w| w == what) {
        let mut buf = [0u8; 65536];
        match c.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
}

/// Read from `c` (appending to `seen`) until a MSG/HMSG with a reply subject arrives.
fn wait_reply(c: &mut TcpStream, seen: &mut Vec<u8>) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(2);
    let start = seen.len();
    c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    while Instant::now() < deadline {
        let text = String::from_utf8_lossy(&seen[start..]).into_owned();
        for f in frames(&text) {
            let line = f.lines().next().unwrap_or_default().to_string();
            let args: Vec<&str> = line.split(' ').collect();
            let reply = match (args.first(), args.len()) {
                (Some(&"MSG"), 5) => args.get(3),
                (Some(&"HMSG"), 6) => args.get(3),
                _ => None,
            };
            if let Some(r) = reply {
                if f.ends_with("\r\n") && f.len() > line.len() + 2 {
                    return Some(r.to_string());
                }
            }
        }
        let mut buf = [0u8; 65536];
        match c.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    None
}

/// Wait until the server has dropped every connection of the previous scenario, so
/// that its subscriptions cannot leak into the next one.
pub fn settle(s: &Server) {
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

/// Play every scenario against both servers (side by side, each server one scenario
/// after another) and fail listing every scenario whose normalized output differs.
/// `norm` is applied to each connection's output after the standard normalization.
pub fn compare(reference: &Server, ours: &Server, scs: &[Scenario], norm: &(dyn Fn(&str) -> String + Sync)) {
    let run = |srv: &Server| {
        scs.iter()
            .map(|sc| {
                let r: Vec<String> = play(srv.port, sc).iter().map(|o| norm(o)).collect();
                settle(srv);
                r
            })
            .collect::<Vec<_>>()
    };
    let (want, got) = std::thread::scope(|scope| {
        let a = scope.spawn(|| run(reference));
        let b = scope.spawn(|| run(ours));
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut failures = Vec::new();
    for (sc, (want, got)) in scs.iter().zip(want.into_iter().zip(got)) {
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
