//! Accounts, imports/exports, mappings, permissions and configured users, compared with
//! the reference nats-server: the same config file, the same raw protocol bytes, the
//! same replies (FEATURES.md §7, §8, §9). rnats runs with 4 shards so that every
//! cross-account path also crosses shards; both reactors.
//!
//! Values that are random by design are normalized on both sides: `_R_.` reply subjects,
//! and the volatile fields of `Nats-Request-Info` headers and `$SYS` responses (ids,
//! times, round-trip times).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::diff::{compare, Scenario, Step::*};
use common::{bin, reference_server, Reactor, Server};

const CONFIG: &str = r#"
accounts {
  A {
    users = [ {user: a, password: a} ]
    exports = [
      {stream: "feed.>"}
      {service: "svc.>"}
      {service: "list.>", response: stream}
      {service: "private.svc", accounts: [B]}
      {service: "lat.svc", latency: {sampling: 100, subject: "lat.results"}}
    ]
  }
  B {
    users = [ {user: b, password: b}, {user: b2, password: b2} ]
    imports = [
      {stream: {account: A, subject: "feed.>"}, prefix: "a"}
      {service: {account: A, subject: "svc.>"}}
      {service: {account: A, subject: "list.>"}}
      {service: {account: A, subject: "private.svc"}, to: "priv"}
      {service: {account: A, subject: "lat.svc"}}
    ]
  }
  C {
    users = [
      {user: c, password: c, permissions: {
        publish: {allow: ["foo.>", "map.>", "_INBOX.>", "$SYS.REQ.USER.INFO"], deny: ["foo.secret"]}
        subscribe: {deny: ["foo.secret", "bar.* q1"]}
      }}
      {user: c2, password: c2}
      {user: r, password: r, permissions: {publish: {allow: ["none"]}, allow_responses: true}}
      {nkey: UAPOK2P7EN3UFBL7SBJPQK3M3JMLALYRYKX5XWSVMVYK63ZMBHTOHVJR}
    ]
    mappings = {
      "map.src": "map.dst"
      "map.*.*": "map.$2.$1"
    }
    limits { max_connections: 4 }
  }
}
"#;

/// The nkey user of account C (from the docs' nkey example); no test here holds its seed,
/// so every CONNECT with it is a failed signature check.
const NKEY: &str = "UAPOK2P7EN3UFBL7SBJPQK3M3JMLALYRYKX5XWSVMVYK63ZMBHTOHVJR";

fn connect(user: &str) -> Vec<u8> {
    format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":true,\"no_responders\":true,\"user\":\"{user}\",\"pass\":\"{user}\"}}\r\n"
    )
    .into_bytes()
}

fn msg(user: &str, rest: &str) -> Vec<u8> {
    let mut v = connect(user);
    v.extend_from_slice(rest.as_bytes());
    v
}

fn sc(name: &str, conns: usize, steps: Vec<common::diff::Step>) -> Scenario {
    Scenario {
        name: name.into(),
        conns,
        steps,
    }
}

fn scenarios() -> Vec<Scenario> {
    vec![
        sc(
            "accounts-are-isolated",
            2,
            vec![
                Send(0, msg("a", "SUB foo 1\r\nSUB foo q 2\r\nPING\r\n")),
                Send(1, msg("b", "SUB foo 1\r\nSUB foo q 2\r\nPING\r\n")),
                Sleep(50),
                Send(1, b"PUB foo 2\r\nhi\r\nPING\r\n".to_vec()),
                Sleep(50),
                Send(0, b"PUB foo 2\r\nyo\r\nPING\r\n".to_vec()),
            ],
        ),
        sc(
            "stream-import-with-prefix",
            2,
            vec![
                Send(1, msg("b", "SUB a.feed.> 1\r\nSUB feed.> 2\r\nPING\r\n")),
                Sleep(50),
                Send(0, msg("a", "PUB feed.x rep 2\r\nhi\r\nPUB other 1\r\nx\r\nPING\r\n")),
            ],
        ),
        sc(
            "service-import-request-reply",
            2,
            vec![
                Send(0, msg("a", "SUB svc.echo 1\r\nPING\r\n")),
                Sleep(50),
                Send(1, msg("b", "SUB _INBOX.b 9\r\nPUB svc.echo _INBOX.b 4\r\nping\r\n")),
                Reply(0, b"pong".to_vec()),
                Sleep(50),
                Send(1, b"PING\r\n".to_vec()),
                Send(0, b"PING\r\n".to_vec()),
            ],
        ),
        // The results are read on a connection of their own: the reference sends the 400
        // of a request without a reply from its internal send loop, so whether it comes
        // before or after that request's delivery to the service varies from run to run.
        sc(
            "service-latency-tracking",
            3,
            vec![
                Send(0, msg("a", "SUB lat.svc 1\r\nPING\r\n")),
                Send(2, msg("a", "SUB lat.results 2\r\nPING\r\n")),
                Sleep(50),
                Send(1, msg("b", "SUB _INBOX.t 9\r\nPUB lat.svc _INBOX.t 1\r\nq\r\n")),
                Reply(0, b"a".to_vec()),
                Sleep(100),
                Send(1, b"PUB lat.svc 1\r\nn\r\nPING\r\n".to_vec()),
                Sleep(100),
                Send(0, b"PING\r\n".to_vec()),
                Send(2, b"PING\r\n".to_vec()),
            ],
        ),
        sc(
            "singleton-response-only-once",
            2,
            vec![
                Send(0, msg("a", "SUB svc.once 1\r\nPING\r\n")),
                Sleep(50),
                Send(1, msg("b", "SUB _INBOX.o 9\r\nPUB svc.once _INBOX.o 0\r\n\r\n")),
                Reply(0, b"one".to_vec()),
                Sleep(50),
                Reply(0, b"two".to_vec()),
                Sleep(50),
                Send(1, b"PING\r\n".to_vec()),
            ],
        ),
        sc(
            "streamed-responses",
            2,
            vec![
                Send(0, msg("a", "SUB list.all 1\r\nPING\r\n")),
                Sleep(50),
                Send(1, msg("b", "SUB _INBOX.l 9\r\nPUB list.all _INBOX.l 0\r\n\r\n")),
                Reply(0, b"1".to_vec()),
                Sleep(30),
                Send(1, b"PING\r\n".to_vec()),
            ],
        ),
        sc(
            "private-export-under-another-name",
            2,
            vec![
                Send(0, msg("a", "SUB private.svc 1\r\nPING\r\n")),
                Sleep(50),
                Send(
                    1,
                    msg(
                        "b",
                        "SUB _INBOX.p 9\r\nPUB priv _INBOX.p 1\r\nx\r\nPUB private.svc _INBOX.p 1\r\ny\r\nPING\r\n",
                    ),
                ),
            ],
        ),
        sc(
            "service-import-without-responders",
            1,
            vec![Send(
                0,
                msg("b", "SUB _INBOX.n 1\r\nPUB svc.nobody _INBOX.n 0\r\n\r\nPING\r\n"),
            )],
        ),
        sc(
            "permissions-publish-and-subscribe",
            1,
            vec![Send(
                0,
                msg(
                    "c",
                    "SUB foo.secret 1\r\nSUB bar.x q1 2\r\nSUB bar.x q2 3\r\nSUB foo.* 4\r\n\
                     PUB foo.secret 1\r\ns\r\nPUB other 1\r\no\r\nPUB foo.ok 1\r\nk\r\nPING\r\n",
                ),
            )],
        ),
        sc(
            "permissions-delivery-filter",
            2,
            vec![
                Send(0, msg("c", "SUB foo.* 1\r\nSUB > 2\r\nPING\r\n")),
                Sleep(50),
                Send(1, msg("c2", "PUB foo.secret 1\r\ns\r\nPUB foo.open 1\r\no\r\nPING\r\n")),
            ],
        ),
        sc(
            "allow-responses",
            2,
            vec![
                Send(0, msg("r", "SUB req 1\r\nPUB elsewhere 1\r\nx\r\nPING\r\n")),
                Sleep(50),
                Send(1, msg("c2", "SUB _INBOX.r 1\r\nPUB req _INBOX.r 1\r\nq\r\n")),
                Reply(0, b"answer".to_vec()),
                Reply(0, b"again".to_vec()),
                Sleep(50),
                Send(1, b"PING\r\n".to_vec()),
                Send(0, b"PING\r\n".to_vec()),
            ],
        ),
        sc(
            "mappings",
            1,
            // nats-server applies mappings only from the read after CONNECT
            // (COMPATIBILITY.md), so the publishes come in a second write.
            vec![
                Send(0, msg("c2", "SUB map.> 1\r\nPING\r\n")),
                Sleep(50),
                Send(
                    0,
                    b"PUB map.src 1\r\na\r\nPUB map.one.two 1\r\nb\r\nPUB map.dst 1\r\nc\r\nPING\r\n".to_vec(),
                ),
            ],
        ),
        sc(
            "wrong-password",
            1,
            vec![Send(
                0,
                b"CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"nope\"}\r\nPING\r\n".to_vec(),
            )],
        ),
        sc(
            "unknown-user",
            1,
            vec![Send(
                0,
                b"CONNECT {\"verbose\":false,\"user\":\"zz\",\"pass\":\"zz\"}\r\nPING\r\n".to_vec(),
            )],
        ),
        sc(
            "no-credentials",
            1,
            vec![Send(0, b"CONNECT {\"verbose\":false}\r\nPING\r\n".to_vec())],
        ),
        sc(
            "nkey-garbage-signature",
            1,
            vec![Send(
                0,
                format!("CONNECT {{\"verbose\":false,\"nkey\":\"{NKEY}\",\"sig\":\"not-a-signature\"}}\r\nPING\r\n")
                    .into_bytes(),
            )],
        ),
        sc(
            "nkey-without-signature",
            1,
            vec![Send(
                0,
                format!("CONNECT {{\"verbose\":false,\"nkey\":\"{NKEY}\"}}\r\nPING\r\n").into_bytes(),
            )],
        ),
        sc(
            "nkey-signature-of-wrong-type",
            1,
            vec![Send(
                0,
                format!("CONNECT {{\"verbose\":false,\"nkey\":\"{NKEY}\",\"sig\":5}}\r\nPING\r\n").into_bytes(),
            )],
        ),
        sc(
            "unknown-nkey",
            1,
            vec![Send(
                0,
                b"CONNECT {\"verbose\":false,\"nkey\":\"UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4\",\"sig\":\"AAAA\"}\r\nPING\r\n".to_vec(),
            )],
        ),
        sc(
            "user-of-wrong-type",
            1,
            vec![Send(0, b"CONNECT {\"verbose\":false,\"user\":7,\"pass\":\"c\"}\r\nPING\r\n".to_vec())],
        ),
        sc(
            "jwt-in-config-mode",
            1,
            vec![Send(0, b"CONNECT {\"verbose\":false,\"jwt\":\"eyJ.garbage.x\",\"sig\":\"x\"}\r\nPING\r\n".to_vec())],
        ),
        sc(
            "account-connection-limit",
            5,
            vec![
                Send(0, msg("c2", "PING\r\n")),
                Send(1, msg("c2", "PING\r\n")),
                Send(2, msg("c2", "PING\r\n")),
                Send(3, msg("c2", "PING\r\n")),
                Sleep(100),
                Send(4, msg("c2", "PING\r\n")),
            ],
        ),
        sc(
            "user-info",
            1,
            // nats-server answers from another goroutine, before or after a PONG that
            // follows at once; rnats always before. The PING waits for the answer.
            vec![
                Send(0, msg("c", "SUB _INBOX.u 1\r\nPUB $SYS.REQ.USER.INFO _INBOX.u 0\r\n\r\n")),
                Await(0, "MSG _INBOX.u 1 "),
                Send(0, b"PING\r\n".to_vec()),
            ],
        ),
    ]
}

/// Replace values that differ by design: `_R_.` subjects, volatile JSON fields in
/// `Nats-Request-Info` headers and `$SYS` responses. Header and payload sizes are
/// recomputed after the rewrite.
fn normalize(out: &str) -> String {
    let mut res = String::new();
    for f in common::diff::frames(out) {
        let (line, body) = match f.split_once("\r\n") {
            Some((l, b)) => (l.to_string(), b.to_string()),
            None => (f.clone(), String::new()),
        };
        let mut args: Vec<String> = line.split(' ').map(mask_reply).collect();
        if args.first().map(String::as_str) == Some("HMSG") && args.len() >= 5 {
            let hlen: usize = args[args.len() - 2].parse().unwrap_or(0);
            let body = body.strip_suffix("\r\n").unwrap_or(&body);
            let (hdr, payload) = body.split_at(hlen.min(body.len()));
            let hdr: String = hdr
                .split("\r\n")
                .map(|h| match h.split_once(": ") {
                    Some((k, v)) if k == "Nats-Request-Info" => format!("{k}: {}", mask_json(v)),
                    _ => h.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\r\n");
            let payload = mask_json(payload);
            let n = args.len();
            args[n - 2] = hdr.len().to_string();
            args[n - 1] = (hdr.len() + payload.len()).to_string();
            res.push_str(&format!("{}\r\n{hdr}{payload}\r\n", args.join(" ")));
        } else if args.first().map(String::as_str) == Some("MSG") && args.len() >= 4 {
            let body = body.strip_suffix("\r\n").unwrap_or(&body);
            let payload = mask_json(body);
            let n = args.len();
            args[n - 1] = payload.len().to_string();
            res.push_str(&format!("{}\r\n{payload}\r\n", args.join(" ")));
        } else if f != "PING\r\n" {
            // Server PINGs come on a timer; whether one falls inside a scenario is timing.
            res.push_str(&f);
        }
    }
    res
}

fn mask_reply(a: &str) -> String {
    if a.starts_with("_R_.") {
        "_R_.X".to_string()
    } else {
        a.to_string()
    }
}

/// JSON with volatile values replaced by their kind and keys sorted; anything else
/// unchanged.
fn mask_json(text: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(text) else {
        return text.to_string();
    };
    if !v.is_object() {
        return text.to_string();
    }
    fn walk(v: &mut serde_json::Value) {
        if let Some(o) = v.as_object_mut() {
            for (k, val) in o.iter_mut() {
                match k.as_str() {
                    "rtt" | "start" | "id" | "host" | "time" | "seq" | "name" | "ver" | "server" | "timestamp"
                    | "service" | "system" | "total" => {
                        *val = serde_json::Value::String(format!("<{}>", kind(val)));
                    }
                    "allow" | "deny" => {
                        if let Some(a) = val.as_array_mut() {
                            a.sort_by_key(|x| x.to_string());
                        }
                    }
                    _ => walk(val),
                }
            }
        }
    }
    fn kind(v: &serde_json::Value) -> &'static str {
        match v {
            serde_json::Value::String(_) => "string",
            serde_json::Value::Number(_) => "number",
            serde_json::Value::Bool(_) => "bool",
            serde_json::Value::Object(_) => "object",
            serde_json::Value::Array(_) => "array",
            serde_json::Value::Null => "null",
        }
    }
    walk(&mut v);
    let sorted: std::collections::BTreeMap<String, serde_json::Value> = serde_json::from_value(v).unwrap_or_default();
    serde_json::to_string(&sorted).unwrap()
}

fn against_reference(r: Reactor) {
    let dir = std::env::temp_dir().join(format!("rnats-accounts-{}-{}", std::process::id(), r.flag()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("accounts.conf");
    std::fs::write(&conf, CONFIG).unwrap();
    let conf = conf.to_str().unwrap();
    let reference = Server::start_cmd(
        &reference_server(),
        &["-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-c", conf],
    );
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
            "4",
            "--reactor",
            r.flag(),
        ],
    );
    compare(&reference, &ours, &scenarios(), &normalize);
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(accounts_like_the_reference, |r| against_reference(r));
