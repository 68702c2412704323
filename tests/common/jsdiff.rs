//! The JetStream API differential harness: request sequences played over raw protocol
//! against nats-server 2.14.0 and rnats, each reply parsed as JSON (or its status line for
//! header-only answers) with the volatile parts masked. Used by `tests/jetstream_diff*.rs`.

use super::Server;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One request: subject, optional header lines, body.
pub struct Req(pub &'static str, pub &'static str, pub String);

pub fn r(subject: &'static str, body: &str) -> Req {
    Req(subject, "", body.to_string())
}

pub fn h(subject: &'static str, headers: &'static str, body: &str) -> Req {
    Req(subject, headers, body.to_string())
}

/// The same scenarios with every stream created on memory storage (a create whose body
/// names no storage gets `"storage":"memory"`), named `<name> (memory)`.
#[allow(dead_code)]
pub fn on_memory(scenarios: Vec<(&'static str, Vec<Req>)>) -> Vec<(&'static str, Vec<Req>)> {
    scenarios
        .into_iter()
        .map(|(name, reqs)| {
            let reqs = reqs
                .into_iter()
                .map(|Req(subject, headers, body)| {
                    let create = subject.starts_with("$JS.API.STREAM.CREATE.");
                    let body = if create && body.starts_with('{') && !body.contains("\"storage\"") {
                        format!("{{\"storage\":\"memory\",{}", &body[1..])
                    } else {
                        body
                    };
                    Req(subject, headers, body)
                })
                .collect();
            let name: &'static str = Box::leak(format!("{name} (memory)").into_boxed_str());
            (name, reqs)
        })
        .collect()
}

/// Mask what differs between any two servers or runs.
pub fn mask(v: &mut Value) {
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
pub fn shape(hdr: &str, body: &str) -> String {
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
///
/// Three pseudo subjects script the rest: `_sleep` waits the body's milliseconds;
/// `_sub` subscribes the body's subject (one side subscription per connection, sid 2);
/// `_take` waits 300 ms and records every message the side subscription got so far,
/// subject, full header block (`Nats-Time-Stamp` masked) and body.
pub fn play(port: u16, reqs: &[Req]) -> Vec<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    s.write_all(b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\nSUB _r.> 1\r\nPING\r\n")
        .unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, |b| find(b, b"PONG\r\n").is_some());
    buf.clear();
    let mut out = Vec::new();
    let mut side = Vec::new();
    for (i, Req(subject, headers, body)) in reqs.iter().enumerate() {
        match *subject {
            "_sleep" => {
                std::thread::sleep(Duration::from_millis(body.parse().unwrap()));
                out.push(format!("_sleep {body}"));
                continue;
            }
            "_sub" => {
                s.write_all(format!("SUB {body} 2\r\nPING\r\n").as_bytes()).unwrap();
                read_until(&mut s, &mut buf, |b| find(b, b"PONG\r\n").is_some());
                side.extend(side_frames(&buf));
                buf.clear();
                out.push(format!("_sub {body}"));
                continue;
            }
            "_take" => {
                let until = Instant::now() + Duration::from_millis(300);
                read_until(&mut s, &mut buf, |_| Instant::now() > until);
                side.extend(side_frames(&buf));
                buf.clear();
                out.push(format!("_take: {}", std::mem::take(&mut side).join(" ; ")));
                continue;
            }
            _ => {}
        }
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
        side.extend(side_frames(&buf));
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

/// The complete messages of the side subscription (sid 2) in `buf`, as recorded.
fn side_frames(buf: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(buf).to_string();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(nl) = text[at..].find("\r\n") {
        let line = &text[at..at + nl];
        let args: Vec<&str> = line.split(' ').collect();
        let start = at + nl + 2;
        let (hl, total) = match args.first() {
            Some(&"MSG") => (0, args.last().and_then(|n| n.parse::<usize>().ok())),
            Some(&"HMSG") => (
                args.get(args.len() - 2)
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(0),
                args.last().and_then(|n| n.parse::<usize>().ok()),
            ),
            _ => {
                at = start;
                continue;
            }
        };
        let Some(total) = total.filter(|t| text.len() >= start + t + 2) else {
            break;
        };
        if args.get(2) == Some(&"2") {
            let hdr: Vec<String> = text[start..start + hl]
                .split("\r\n")
                .map(|l| match l.split_once(": ") {
                    Some(("Nats-Time-Stamp", _)) => "Nats-Time-Stamp: *".to_string(),
                    _ => l.to_string(),
                })
                .collect();
            let body = &text[start + hl..start + total];
            out.push(format!("{} [{}] {body}", args.get(1).unwrap_or(&""), hdr.join("|")));
        }
        at = start + total + 2;
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

/// Play every scenario on a fresh reference and a fresh rnats (`--shards shards`, reactor `r`)
/// and assert the replies are equal.
pub fn compare(r: super::Reactor, shards: &str, scenarios: Vec<(&'static str, Vec<Req>)>) {
    let reference = super::reference_server();
    let rdir = std::env::temp_dir().join(format!("rnats-jsdiff-ref-{}-{shards}-{:?}", std::process::id(), r));
    let odir = std::env::temp_dir().join(format!("rnats-jsdiff-ours-{}-{shards}-{:?}", std::process::id(), r));
    for (name, reqs) in scenarios {
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
        if std::env::var_os("JSDIFF_SHOW").is_some() {
            eprintln!("scenario {name:?}, reference:\n{}", theirs.join("\n"));
        }
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
