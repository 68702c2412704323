//! Tokens made by `rnats::auth::jwt` against the reference Go nats-server 2.14: an
//! operator, a system account and an account (with a plain and a scoped signing key) are
//! encoded here, preloaded into the reference server's memory resolver, and users made here
//! connect over raw TCP (nonce signed with the user key). The server must accept the good
//! ones, apply the scoped key's template, and refuse the bad ones with
//! `-ERR 'Authorization Violation'`.
//!
//! The same scenario runs against rnats in operator mode (both reactors, 4 shards): it
//! must give the same verdicts.
//!
//! The reference binary comes from the test harness (`NATS_REFERENCE_SERVER`, or
//! `tools/reference-server`).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nkeys::KeyPair;
use rnats::auth::jwt::codec::{b64_decode, b64_encode};
use rnats::auth::jwt::json::to_go_json;
use rnats::auth::jwt::{
    decode_authorization_request, decorate_jwt, AccountClaims, ActivationClaims, AuthorizationResponseClaims, Encode,
    Export, ExportType, Import, OperatorClaims, UserClaims, UserPermissionLimits, UserScope,
};

fn reference_server() -> Option<PathBuf> {
    Some(PathBuf::from(common::reference_server()))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Server {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Starts `bin` with `conf(dir, port)` as its configuration and `extra` flags; on
/// another port when a parallel test's server took the first one.
fn start_with(bin: &PathBuf, extra: &[&str], conf: impl Fn(&std::path::Path, u16) -> String) -> Server {
    for _ in 0..5 {
        let dir = std::env::temp_dir().join(format!("rnats-jwt-ref-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let port = free_port();
        let conf = conf(&dir, port);
        let conf_path = dir.join("server.conf");
        std::fs::write(&conf_path, conf).expect("write conf");
        let log = std::fs::File::create(dir.join("server.log")).expect("log file");
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf_path)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start reference server");
        let mut server = Server { child, port, dir };
        if common::wait_ready_on(&mut server.child, &server.dir.join("server.log"), port) {
            return server;
        }
        eprintln!(
            "server exited before it was ready, again on another port:\n{}",
            server.log()
        );
    }
    panic!("the server would not start in five attempts");
}

struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn line(&mut self) -> String {
        let mut l = String::new();
        self.reader.read_line(&mut l).expect("read line");
        l.trim_end().to_string()
    }

    fn send(&mut self, s: &str) {
        self.writer.write_all(s.as_bytes()).expect("write");
    }

    /// Lines up to and including `PONG`, or up to the connection's close.
    fn until_pong(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let l = self.line();
            let done = l == "PONG" || l.is_empty();
            if l == "PING" {
                self.send("PONG\r\n");
            } else if !l.starts_with("INFO ") {
                // (the server may send an updated INFO after CONNECT)
                out.push(l);
            }
            if done {
                return out;
            }
        }
    }
}

/// Connects with `jwt`, signing the nonce with `user`; returns what the server answered to
/// CONNECT + PING and the connection.
fn connect(port: u16, jwt: &str, user: &KeyPair) -> (Vec<String>, Conn) {
    connect_via(port, jwt, user, None)
}

/// [`connect`], through the trusted proxy `proxy` when given (its `proxy_sig`).
fn connect_via(port: u16, jwt: &str, user: &KeyPair, proxy: Option<&KeyPair>) -> (Vec<String>, Conn) {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut conn = Conn {
        reader: BufReader::new(stream.try_clone().expect("clone")),
        writer: stream,
    };
    let info = conn.line();
    let json: serde_json::Value = serde_json::from_str(info.strip_prefix("INFO ").expect("INFO")).expect("INFO json");
    let nonce = json["nonce"].as_str().expect("nonce");
    let sig = b64_encode(&user.sign(nonce.as_bytes()).expect("sign"));
    let mut connect = serde_json::json!({"jwt": jwt, "sig": sig, "verbose": false, "pedantic": false, "protocol": 1});
    if let Some(p) = proxy {
        connect["proxy_sig"] = b64_encode(&p.sign(nonce.as_bytes()).expect("sign")).into();
    }
    conn.send(&format!("CONNECT {connect}\r\nPING\r\n"));
    (conn.until_pong(), conn)
}

const AUTH_VIOLATION: &str = "-ERR 'Authorization Violation'";

#[test]
fn reference_server_accepts_tokens_made_here() {
    let Some(bin) = reference_server() else {
        eprintln!("note: no reference nats-server (set NATS_REFERENCE_SERVER); skipping");
        return;
    };
    operator_mode(&bin, &[]);
}

// rnats in operator mode: the same tokens, the same verdicts (4 shards, both reactors).
both_reactors!(rnats_accepts_and_refuses_the_same_tokens, |r| operator_mode(
    &PathBuf::from(common::bin()),
    &["--shards", "4", "--reactor", r.flag()]
));

fn operator_mode(bin: &PathBuf, extra: &[&str]) {
    let t = now();
    let op = KeyPair::new_operator();
    let sys = KeyPair::new_account();
    let acc = KeyPair::new_account();
    let plain_sk = KeyPair::new_account();
    let scoped_sk = KeyPair::new_account();

    let mut op_claims = OperatorClaims::new(op.public_key());
    op_claims.claims.name = "op".into();
    op_claims.nats.system_account = sys.public_key();
    op_claims.nats.assert_server_version = "2.10.0".into();
    let op_jwt = op_claims.encode(&op, t).expect("operator");

    let mut sys_claims = AccountClaims::new(sys.public_key());
    sys_claims.claims.name = "SYS".into();
    let sys_jwt = sys_claims.encode(&op, t).expect("sys");

    let mut acc_claims = AccountClaims::new(acc.public_key());
    acc_claims.claims.name = "A".into();
    acc_claims.nats.generic.tags = vec!["region:eu".into()];
    acc_claims.nats.signing_keys.add(plain_sk.public_key());
    let mut scope = UserScope::new(scoped_sk.public_key());
    scope.role = "per-user".into();
    scope.template.permissions.publish.allow = vec!["{{name()}}.>".into(), "{{account-tag(region)}}.in".into()];
    scope.template.permissions.subscribe.allow = vec!["_INBOX.>".into()];
    acc_claims.nats.signing_keys.add_scope(scope);
    acc_claims.nats.exports = vec![Export {
        name: "svc".into(),
        subject: "svc.>".into(),
        export_type: ExportType::Service,
        token_req: true,
        ..Default::default()
    }];
    let acc_jwt = acc_claims.encode(&op, t).expect("account");

    // Another account imports the service with an activation token signed by a signing key.
    let importer = KeyPair::new_account();
    let mut act = ActivationClaims::new(importer.public_key());
    act.nats.import_subject = "svc.>".into();
    act.nats.import_type = ExportType::Service;
    act.nats.issuer_account = acc.public_key();
    let mut importer_claims = AccountClaims::new(importer.public_key());
    importer_claims.claims.name = "B".into();
    importer_claims.nats.imports = vec![Import {
        subject: "svc.a".into(),
        account: acc.public_key(),
        token: act.encode(&plain_sk, t).expect("activation"),
        import_type: ExportType::Service,
        ..Default::default()
    }];
    assert!(importer_claims.validate(t).is_ok());
    let importer_jwt = importer_claims.encode(&op, t).expect("importer");

    // The operator file is decorated, as nsc writes it.
    let op_file = decorate_jwt(&op_jwt).expect("decorate");
    let proxy = KeyPair::new_user();
    let preload = [
        (sys.public_key(), sys_jwt),
        (acc.public_key(), acc_jwt),
        (importer.public_key(), importer_jwt),
    ];
    let server = start_with(bin, extra, |dir, port| {
        let op_path = dir.join("op.jwt");
        std::fs::write(&op_path, &op_file).expect("write op.jwt");
        let mut conf = format!(
            "listen: 127.0.0.1:{port}\noperator: \"{}\"\nsystem_account: {}\nresolver: MEMORY\nresolver_preload: {{\n",
            op_path.display(),
            sys.public_key()
        );
        for (k, v) in &preload {
            conf.push_str(&format!("  {k}: \"{v}\"\n"));
        }
        conf + &format!("}}\nproxies {{ trusted: [{{key: {}}}] }}\n", proxy.public_key())
    });

    // A user signed by the account key.
    let u1 = KeyPair::new_user();
    let mut c1 = UserClaims::new(u1.public_key());
    c1.claims.name = "u1".into();
    let (resp, mut conn1) = connect(server.port, &c1.encode(&acc, t).expect("u1"), &u1);
    assert_eq!(resp, ["PONG"], "user signed by the account key: {}", server.log());
    // Its user info names the account by its JWT name.
    conn1.send("SUB _INBOX.ui 9\r\nPUB $SYS.REQ.USER.INFO _INBOX.ui 0\r\n\r\n");
    let info = loop {
        if conn1.line().starts_with("MSG _INBOX.ui ") {
            break conn1.line();
        }
    };
    let info: serde_json::Value = serde_json::from_str(&info).expect("user info json");
    assert_eq!(info["data"]["account"], acc.public_key().as_str(), "{info}");
    assert_eq!(info["data"]["account_name"], "A", "{info}");
    assert_eq!(info["data"]["user_name"], "u1", "{info}");

    // A user signed by a plain signing key, with issuer_account.
    let u2 = KeyPair::new_user();
    let mut c2 = UserClaims::new(u2.public_key());
    c2.nats.issuer_account = acc.public_key();
    c2.claims.expires = (t + 600) as i64;
    let (resp, _c) = connect(server.port, &c2.encode(&plain_sk, t).expect("u2"), &u2);
    assert_eq!(resp, ["PONG"], "user signed by a signing key");

    // A scoped user: no permissions of its own; the template applies.
    let u3 = KeyPair::new_user();
    let mut c3 = UserClaims::new(u3.public_key());
    c3.claims.name = "alice".into();
    c3.nats.issuer_account = acc.public_key();
    c3.nats.limits = UserPermissionLimits::default();
    let (resp, mut conn) = connect(server.port, &c3.encode(&scoped_sk, t).expect("u3"), &u3);
    assert_eq!(resp, ["PONG"], "scoped user");
    conn.send("PUB alice.x 0\r\n\r\nPUB eu.in 0\r\n\r\nPING\r\n");
    assert_eq!(conn.until_pong(), ["PONG"], "template subjects are allowed");
    conn.send("PUB bob.x 0\r\n\r\nPING\r\n");
    assert_eq!(
        conn.until_pong(),
        ["-ERR 'Permissions Violation for Publish to \"bob.x\"'", "PONG"]
    );
    // The log line names the account as `<key>/<JWT name>` and the user by its key.
    let line = format!(
        "\"{}/A/jwt:{}\" - Publish Violation - Subject \"bob.x\"",
        acc.public_key(),
        u3.public_key()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server.log().contains(&line) {
        assert!(Instant::now() < deadline, "no {line} in\n{}", server.log());
        std::thread::sleep(Duration::from_millis(20));
    }

    // Refused: signed by an account key the account does not know.
    let stranger = KeyPair::new_account();
    let u4 = KeyPair::new_user();
    let mut c4 = UserClaims::new(u4.public_key());
    c4.nats.issuer_account = acc.public_key();
    let (resp, _c) = connect(server.port, &c4.encode(&stranger, t).expect("u4"), &u4);
    assert_eq!(
        resp.first().map(String::as_str),
        Some(AUTH_VIOLATION),
        "unknown signing key: {resp:?}"
    );

    // Refused: expired.
    let u5 = KeyPair::new_user();
    let mut c5 = UserClaims::new(u5.public_key());
    c5.claims.expires = (t - 10) as i64;
    let (resp, _c) = connect(server.port, &c5.encode(&acc, t - 100).expect("u5"), &u5);
    assert_eq!(
        resp.first().map(String::as_str),
        Some(AUTH_VIOLATION),
        "expired: {resp:?}"
    );

    // Refused: scoped key but the user carries its own permissions.
    let u6 = KeyPair::new_user();
    let mut c6 = UserClaims::new(u6.public_key());
    c6.nats.issuer_account = acc.public_key();
    let (resp, _c) = connect(server.port, &c6.encode(&scoped_sk, t).expect("u6"), &u6);
    assert_eq!(
        resp.first().map(String::as_str),
        Some(AUTH_VIOLATION),
        "scoped with permissions: {resp:?}"
    );

    // Refused: the nonce signed by another key.
    let (resp, _c) = connect(server.port, &c1.encode(&acc, t).expect("u1"), &KeyPair::new_user());
    assert_eq!(
        resp.first().map(String::as_str),
        Some(AUTH_VIOLATION),
        "bad nonce signature: {resp:?}"
    );

    // A user that must come through a trusted proxy.
    let u7 = KeyPair::new_user();
    let mut c7 = UserClaims::new(u7.public_key());
    c7.nats.limits.proxy_required = true;
    let j7 = c7.encode(&acc, t).expect("u7");
    let (resp, _c) = connect(server.port, &j7, &u7);
    assert_eq!(
        resp.first().map(String::as_str),
        Some(AUTH_VIOLATION),
        "proxy required: {resp:?}"
    );
    let (resp, _c) = connect_via(server.port, &j7, &u7, Some(&proxy));
    assert_eq!(resp, ["PONG"], "through the trusted proxy");
    let (resp, _c) = connect_via(server.port, &j7, &u7, Some(&KeyPair::new_user()));
    assert_eq!(
        resp.first().map(String::as_str),
        Some(AUTH_VIOLATION),
        "untrusted proxy: {resp:?}"
    );
    // A user without the requirement may still come through it.
    let (resp, _c) = connect_via(server.port, &c1.encode(&acc, t).expect("u1"), &u1, Some(&proxy));
    assert_eq!(resp, ["PONG"], "proxied user without the requirement");

    // Connect times in a named zone: a window around now in Tokyo admits, one later
    // today does not, an unknown zone refuses.
    let tokyo = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::get("Asia/Tokyo").expect("tz"));
    let clock = |z: &jiff::Zoned| z.strftime("%H:%M:%S").to_string();
    let plus = |h: i64| tokyo.checked_add(jiff::SignedDuration::from_hours(h)).expect("time");
    for (zone, from, to, admitted) in [
        ("Asia/Tokyo", plus(-1), plus(1), true),
        ("Asia/Tokyo", plus(2), plus(3), false),
        ("Mars/Olympus_Mons", plus(-1), plus(1), false),
    ] {
        let u = KeyPair::new_user();
        let mut c = UserClaims::new(u.public_key());
        c.nats.limits.limits.user.locale = zone.into();
        c.nats.limits.limits.user.times = vec![rnats::auth::jwt::types::TimeRange {
            start: clock(&from),
            end: clock(&to),
        }];
        let (resp, _c) = connect(server.port, &c.encode(&acc, t).expect("times"), &u);
        let want = if admitted { "PONG" } else { AUTH_VIOLATION };
        assert_eq!(
            resp.first().map(String::as_str),
            Some(want),
            "{zone} {}-{}",
            clock(&from),
            clock(&to)
        );
    }

    // The preloaded accounts raised no validation findings.
    let log = server.log();
    assert!(log.contains("Server is ready"), "{log}");
    assert!(
        !log.contains("validation issues") && !log.contains("not valid"),
        "{log}"
    );
}

/// Reads one `MSG <subject> <sid> [reply] <len>` and its payload; returns (reply, payload).
fn read_msg(conn: &mut Conn) -> (String, String) {
    loop {
        let l = conn.line();
        if l == "PING" {
            conn.send("PONG\r\n");
            continue;
        }
        if l.starts_with("INFO ") {
            continue;
        }
        let parts: Vec<&str> = l.split(' ').collect();
        assert_eq!(parts.first(), Some(&"MSG"), "{l}");
        let reply = if parts.len() == 5 {
            parts[3].to_string()
        } else {
            String::new()
        };
        let payload = conn.line();
        return (reply, payload);
    }
}

#[test]
fn reference_server_auth_callout_round_trip() {
    let Some(bin) = reference_server() else {
        eprintln!("note: no reference nats-server (set NATS_REFERENCE_SERVER); skipping");
        return;
    };
    callout_round_trip(&bin, &[]);
}

// rnats's auth callout against the same auth service (4 shards, both reactors).
both_reactors!(rnats_auth_callout_round_trip, |r| callout_round_trip(
    &PathBuf::from(common::bin()),
    &["--shards", "4", "--reactor", r.flag()]
));

fn callout_round_trip(bin: &PathBuf, extra: &[&str]) {
    let issuer = KeyPair::new_account();
    let server = start_with(bin, extra, |_, port| {
        format!(
            "listen: 127.0.0.1:{port}\n\
             accounts {{ AUTH {{ users: [ {{ user: auth, password: pwd }} ] }}, APP {{}} }}\n\
             authorization {{ auth_callout {{ issuer: {}, auth_users: [ auth ], account: AUTH }} }}\n",
            issuer.public_key()
        )
    });
    // The auth service.
    let stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut svc = Conn {
        reader: BufReader::new(stream.try_clone().expect("clone")),
        writer: stream,
    };
    svc.line();
    svc.send("CONNECT {\"user\":\"auth\",\"pass\":\"pwd\",\"verbose\":false,\"protocol\":1}\r\nSUB $SYS.REQ.USER.AUTH 1\r\nPING\r\n");
    assert_eq!(svc.until_pong(), ["PONG"]);

    // (user, the service allows, the user JWT it returns requires a proxy)
    for (user, allow, proxy) in [("bob", true, false), ("eve", false, false), ("pam", true, true)] {
        let stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let mut client = Conn {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
        };
        client.line();
        client.send(&format!(
            "CONNECT {{\"user\":\"{user}\",\"pass\":\"secret\",\"verbose\":false,\"protocol\":1}}\r\nPING\r\n"
        ));

        // The request the Go server encoded decodes and verifies here.
        let (reply, token) = read_msg(&mut svc);
        let req = decode_authorization_request(&token).expect("request decodes");
        // Written back, the claims are the bytes the Go server wrote.
        let payload = b64_decode(token.split('.').nth(1).expect("payload")).expect("base64");
        assert_eq!(
            to_go_json(&req).expect("json"),
            String::from_utf8(payload).expect("utf8")
        );
        let t = now();
        assert!(req.validate(t).is_ok(), "{:?}", req.validation(t));
        assert_eq!(req.claims.subject, issuer.public_key());
        assert_eq!(req.claims.audience, "nats-authorization-request");
        assert_eq!(req.claims.issuer, req.nats.server.id);
        assert_eq!(
            (
                req.nats.connect_options.username.as_str(),
                req.nats.connect_options.password.as_str()
            ),
            (user, "secret")
        );
        assert_eq!(req.nats.connect_options.protocol, 1);
        assert_eq!(req.nats.client_information.host, "127.0.0.1");
        assert_eq!(req.nats.client_information.kind, "Client");

        let mut resp = AuthorizationResponseClaims::new(req.nats.user_nkey.clone(), req.nats.server.id.clone());
        if allow {
            let mut uc = UserClaims::new(req.nats.user_nkey.clone());
            uc.claims.name = user.into();
            uc.claims.audience = "APP".into();
            uc.nats.limits.proxy_required = proxy;
            resp.nats.jwt = uc.encode(&issuer, t).expect("user jwt");
        } else {
            resp.nats.error = "not today".into();
        }
        let resp_jwt = resp.encode(&issuer, t).expect("response");
        if allow && !proxy {
            // Sent while the server waits for the verdict: read once it arrives, in order.
            client.send("SUB t 1\r\nPUB t 5\r\nheld!\r\nPING\r\n");
            std::thread::sleep(Duration::from_millis(50));
        }
        svc.send(&format!("PUB {reply} {}\r\n{resp_jwt}\r\n", resp_jwt.len()));
        let answer = client.until_pong();
        if allow && !proxy {
            assert_eq!(answer, ["PONG"], "{}", server.log());
            assert_eq!(client.until_pong(), ["MSG t 1 5", "held!", "PONG"]);
        } else {
            assert_eq!(answer.first().map(String::as_str), Some(AUTH_VIOLATION), "{answer:?}");
        }
    }
}

/// Reads one MSG or HMSG exactly (payloads may be binary): (reply, header, payload).
fn read_frame(conn: &mut Conn) -> (String, String, Vec<u8>) {
    use std::io::Read;
    loop {
        let l = conn.line();
        if l == "PING" {
            conn.send("PONG\r\n");
            continue;
        }
        if l.starts_with("INFO ") || l.is_empty() {
            continue;
        }
        let parts: Vec<&str> = l.split_whitespace().collect();
        let (reply, hlen, total) = match parts.as_slice() {
            ["MSG", _, _, r, n] => (r.to_string(), 0, n.parse::<usize>().unwrap()),
            ["MSG", _, _, n] => (String::new(), 0, n.parse().unwrap()),
            ["HMSG", _, _, r, h, n] => (r.to_string(), h.parse().unwrap(), n.parse().unwrap()),
            ["HMSG", _, _, h, n] => (String::new(), h.parse().unwrap(), n.parse().unwrap()),
            _ => panic!("not a message: {l}"),
        };
        let mut buf = vec![0u8; total + 2];
        conn.reader.read_exact(&mut buf).expect("payload");
        buf.truncate(total);
        let payload = buf.split_off(hlen);
        return (reply, String::from_utf8_lossy(&buf).into_owned(), payload);
    }
}

/// An auth service connection that subscribes `$SYS.REQ.USER.AUTH` after `connect`.
fn service(port: u16, connect: &str) -> Conn {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut svc = Conn {
        reader: BufReader::new(stream.try_clone().expect("clone")),
        writer: stream,
    };
    svc.line();
    svc.send(&format!("{connect}SUB $SYS.REQ.USER.AUTH 1\r\nPING\r\n"));
    assert_eq!(svc.until_pong(), ["PONG"]);
    svc
}

fn plain_client(port: u16, user: &str) -> Conn {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut client = Conn {
        reader: BufReader::new(stream.try_clone().expect("clone")),
        writer: stream,
    };
    client.line();
    client.send(&format!(
        "CONNECT {{\"user\":\"{user}\",\"pass\":\"secret\",\"verbose\":false,\"protocol\":1}}\r\nPING\r\n"
    ));
    client
}

/// Config-mode callout with an xkey: the request is sealed to the service's key (the
/// server's key in `Nats-Server-Xkey`), and a sealed response is accepted.
fn xkey_callout(bin: &PathBuf, extra: &[&str]) {
    let issuer = KeyPair::new_account();
    let svc_xkey = nkeys::XKey::new();
    let server = start_with(bin, extra, |_, port| {
        format!(
            "listen: 127.0.0.1:{port}\n\
             accounts {{ AUTH {{ users: [ {{ user: auth, password: pwd }} ] }}, APP {{}} }}\n\
             authorization {{ auth_callout {{ issuer: {}, auth_users: [ auth ], account: AUTH, xkey: {} }} }}\n",
            issuer.public_key(),
            svc_xkey.public_key()
        )
    });
    let mut svc = service(
        server.port,
        "CONNECT {\"user\":\"auth\",\"pass\":\"pwd\",\"verbose\":false,\"protocol\":1,\"headers\":true}\r\n",
    );
    let mut client = plain_client(server.port, "bob");
    let (reply, hdr, sealed) = read_frame(&mut svc);
    let server_xkey = hdr
        .lines()
        .find_map(|l| l.strip_prefix("Nats-Server-Xkey: "))
        .unwrap_or_else(|| panic!("no xkey header in {hdr:?}"))
        .to_string();
    let sender = nkeys::XKey::from_public_key(&server_xkey).unwrap();
    let token = String::from_utf8(svc_xkey.open(&sealed, &sender).expect("open")).unwrap();
    let req = decode_authorization_request(&token).expect("request decodes");
    assert_eq!(req.nats.server.xkey, server_xkey);
    let t = now();
    let mut uc = UserClaims::new(req.nats.user_nkey.clone());
    uc.claims.audience = "APP".into();
    let mut resp = AuthorizationResponseClaims::new(req.nats.user_nkey.clone(), req.nats.server.id.clone());
    resp.nats.jwt = uc.encode(&issuer, t).unwrap();
    let resp_jwt = resp.encode(&issuer, t).unwrap();
    let sealed = svc_xkey.seal(resp_jwt.as_bytes(), &sender).unwrap();
    let mut pubm = format!("PUB {reply} {}\r\n", sealed.len()).into_bytes();
    pubm.extend_from_slice(&sealed);
    pubm.extend_from_slice(b"\r\n");
    svc.writer.write_all(&pubm).unwrap();
    assert_eq!(client.until_pong(), ["PONG"], "{}", server.log());
}

#[test]
fn reference_xkey_callout() {
    xkey_callout(&reference_server().unwrap(), &[]);
}

both_reactors!(rnats_xkey_callout, |r| xkey_callout(
    &PathBuf::from(common::bin()),
    &["--shards", "3", "--reactor", r.flag()]
));

/// A callout nobody answers: the client is refused once the auth timeout passes.
fn callout_timeout(bin: &PathBuf, extra: &[&str]) -> Vec<String> {
    let issuer = KeyPair::new_account();
    let server = start_with(bin, extra, |_, port| {
        format!(
            "listen: 127.0.0.1:{port}\n\
             accounts {{ AUTH {{ users: [ {{ user: auth, password: pwd }} ] }} }}\n\
             authorization {{ timeout: 1, auth_callout {{ issuer: {}, auth_users: [ auth ], account: AUTH }} }}\n",
            issuer.public_key()
        )
    });
    let _svc = service(
        server.port,
        "CONNECT {\"user\":\"auth\",\"pass\":\"pwd\",\"verbose\":false}\r\n",
    );
    let started = Instant::now();
    let mut client = plain_client(server.port, "late");
    let out = client.until_pong();
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    out
}

#[test]
fn callout_timeout_like_the_reference() {
    let want = callout_timeout(&reference_server().unwrap(), &[]);
    assert_eq!(want.first().map(String::as_str), Some(AUTH_VIOLATION));
    for r in common::reactor_flags() {
        let got = callout_timeout(&PathBuf::from(common::bin()), &["--shards", "2", "--reactor", r]);
        assert_eq!(got, want, "{r}");
    }
}

/// Operator mode: account AUTH delegates to a callout (external authorization); a
/// client with the sentinel bearer JWT is placed by the service's response.
fn operator_callout(bin: &PathBuf, extra: &[&str]) {
    let t = now();
    let op = KeyPair::new_operator();
    let sys = KeyPair::new_account();
    let auth = KeyPair::new_account();
    let svc_user = KeyPair::new_user();
    let mut op_claims = OperatorClaims::new(op.public_key());
    op_claims.nats.system_account = sys.public_key();
    let op_jwt = op_claims.encode(&op, t).unwrap();
    let sys_jwt = AccountClaims::new(sys.public_key()).encode(&op, t).unwrap();
    let mut auth_claims = AccountClaims::new(auth.public_key());
    auth_claims.claims.name = "AUTH".into();
    auth_claims.nats.authorization.auth_users = vec![svc_user.public_key()];
    let auth_jwt = auth_claims.encode(&op, t).unwrap();
    // The sentinel: a bearer user of AUTH that can do nothing by itself.
    let sentinel_kp = KeyPair::new_user();
    let mut sentinel = UserClaims::new(sentinel_kp.public_key());
    sentinel.nats.limits.bearer_token = true;
    sentinel.nats.limits.permissions.publish.deny = vec![">".into()];
    sentinel.nats.limits.permissions.subscribe.deny = vec![">".into()];
    let sentinel_jwt = sentinel.encode(&auth, t).unwrap();
    let server = start_with(bin, extra, |dir, port| {
        let op_path = dir.join("op.jwt");
        std::fs::write(&op_path, &op_jwt).unwrap();
        format!(
            "listen: 127.0.0.1:{port}\noperator: \"{}\"\nsystem_account: {}\nresolver: MEMORY\n\
             resolver_preload: {{ {}: \"{}\", {}: \"{}\" }}\n",
            op_path.display(),
            sys.public_key(),
            sys.public_key(),
            sys_jwt,
            auth.public_key(),
            auth_jwt
        )
    });
    // The service authenticates as an auth user of AUTH.
    let svc_jwt = UserClaims::new(svc_user.public_key()).encode(&auth, t).unwrap();
    let (resp, mut svc) = connect(server.port, &svc_jwt, &svc_user);
    assert_eq!(resp, ["PONG"], "{}", server.log());
    svc.send("SUB $SYS.REQ.USER.AUTH 1\r\nPING\r\n");
    assert_eq!(svc.until_pong(), ["PONG"]);
    for allow in [true, false] {
        let (_, mut client) = {
            let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut c = Conn {
                reader: BufReader::new(stream.try_clone().unwrap()),
                writer: stream,
            };
            c.line();
            let connect =
                serde_json::json!({"jwt": sentinel_jwt, "user": "carol", "pass": "x", "verbose": false, "protocol": 1});
            c.send(&format!("CONNECT {connect}\r\nPING\r\n"));
            ((), c)
        };
        let (reply, _, token) = read_frame(&mut svc);
        let req = decode_authorization_request(std::str::from_utf8(&token).unwrap()).expect("request");
        assert_eq!(req.claims.subject, auth.public_key());
        assert_eq!(req.nats.connect_options.username, "carol");
        let mut resp = AuthorizationResponseClaims::new(req.nats.user_nkey.clone(), req.nats.server.id.clone());
        if allow {
            let mut uc = UserClaims::new(req.nats.user_nkey.clone());
            uc.claims.name = "carol".into();
            uc.nats.limits.permissions.publish.allow = vec!["carol.>".into()];
            resp.nats.jwt = uc.encode(&auth, t).unwrap();
        } else {
            resp.nats.error = "no".into();
        }
        let resp_jwt = resp.encode(&auth, t).unwrap();
        svc.send(&format!("PUB {reply} {}\r\n{resp_jwt}\r\n", resp_jwt.len()));
        let answer = client.until_pong();
        if allow {
            assert_eq!(answer, ["PONG"], "{}", server.log());
            client.send("PUB carol.x 0\r\n\r\nPUB bob.x 0\r\n\r\nPING\r\n");
            assert_eq!(
                client.until_pong(),
                ["-ERR 'Permissions Violation for Publish to \"bob.x\"'", "PONG"]
            );
        } else {
            assert_eq!(answer.first().map(String::as_str), Some(AUTH_VIOLATION), "{answer:?}");
        }
    }
}

#[test]
fn reference_operator_callout() {
    operator_callout(&reference_server().unwrap(), &[]);
}

both_reactors!(rnats_operator_callout, |r| operator_callout(
    &PathBuf::from(common::bin()),
    &["--shards", "3", "--reactor", r.flag()]
));

/// A revocation pushed through the system account while the user is connected: the
/// user gets `User Authentication Revoked` and is closed; the update is answered.
fn revocation_pushed(bin: &PathBuf, extra: &[&str]) -> (Vec<String>, String) {
    let t = now();
    let op = KeyPair::new_operator();
    let sys = KeyPair::new_account();
    let acc = KeyPair::new_account();
    let mut oc = OperatorClaims::new(op.public_key());
    oc.nats.system_account = sys.public_key();
    let op_jwt = oc.encode(&op, t).unwrap();
    let sys_jwt = AccountClaims::new(sys.public_key()).encode(&op, t).unwrap();
    let acc_claims = AccountClaims::new(acc.public_key());
    let acc_jwt = acc_claims.encode(&op, t).unwrap();
    let server = start_with(bin, extra, |dir, port| {
        let op_path = dir.join("op.jwt");
        std::fs::write(&op_path, &op_jwt).unwrap();
        let jwts = dir.join("jwts");
        std::fs::create_dir_all(&jwts).unwrap();
        format!(
            "listen: 127.0.0.1:{port}\noperator: \"{}\"\nsystem_account: {}\n\
             resolver: {{ type: full, dir: \"{}\" }}\n\
             resolver_preload: {{ {}: \"{}\", {}: \"{}\" }}\n",
            op_path.display(),
            sys.public_key(),
            jwts.display(),
            sys.public_key(),
            sys_jwt,
            acc.public_key(),
            acc_jwt
        )
    });
    let u = KeyPair::new_user();
    let (resp, mut user) = connect(
        server.port,
        &UserClaims::new(u.public_key()).encode(&acc, t).unwrap(),
        &u,
    );
    assert_eq!(resp, ["PONG"], "{}", server.log());
    let su = KeyPair::new_user();
    let (resp, mut admin) = connect(
        server.port,
        &UserClaims::new(su.public_key()).encode(&sys, t).unwrap(),
        &su,
    );
    assert_eq!(resp, ["PONG"], "{}", server.log());
    let mut revoking = acc_claims.clone();
    revoking.nats.revocations.revoke(u.public_key(), (t + 5) as i64);
    let new_jwt = revoking.encode(&op, t + 1).unwrap();
    admin.send(&format!(
        "SUB _INBOX.upd 1\r\nPUB $SYS.REQ.ACCOUNT.{}.CLAIMS.UPDATE _INBOX.upd {}\r\n{new_jwt}\r\n",
        acc.public_key(),
        new_jwt.len()
    ));
    let (_, answer) = read_msg(&mut admin);
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let mut closed = Vec::new();
    loop {
        let l = user.line();
        if l.is_empty() {
            break;
        }
        if !l.starts_with("INFO ") {
            closed.push(l);
        }
    }
    let data = &answer["data"];
    assert_eq!(data["account"], acc.public_key());
    (closed, format!("{} {}", data["code"], data["message"]))
}

#[test]
fn pushed_revocation_closes_like_the_reference() {
    let want = revocation_pushed(&reference_server().unwrap(), &[]);
    assert_eq!(want.0, ["-ERR 'User Authentication Revoked'"]);
    for r in common::reactor_flags() {
        let got = revocation_pushed(&PathBuf::from(common::bin()), &["--shards", "3", "--reactor", r]);
        assert_eq!(got, want, "{r}");
    }
}
