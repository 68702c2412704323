//! Tokens made by `rnats::auth::jwt` against the reference Go nats-server 2.14: an
//! operator, a system account and an account (with a plain and a scoped signing key) are
//! encoded here, preloaded into the reference server's memory resolver, and users made here
//! connect over raw TCP (nonce signed with the user key). The server must accept the good
//! ones, apply the scoped key's template, and refuse the bad ones with
//! `-ERR 'Authorization Violation'`.
//!
//! The server binary is `$NATS_REFERENCE_SERVER`, else
//! `/root/.cache/nats-reference/2.14.0/nats-server`; without either the test prints a note
//! and passes.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nkeys::KeyPair;
use rnats::auth::jwt::codec::b64_encode;
use rnats::auth::jwt::{
    decorate_jwt, AccountClaims, Encode, Export, ExportType, OperatorClaims, UserClaims, UserPermissionLimits,
    UserScope,
};

fn reference_server() -> Option<PathBuf> {
    let path = std::env::var_os("NATS_REFERENCE_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root/.cache/nats-reference/2.14.0/nats-server"));
    path.exists().then_some(path)
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

fn start(bin: &PathBuf, operator_file: &str, sys: &str, preload: &[(String, String)]) -> Server {
    let dir = std::env::temp_dir().join(format!("rnats-jwt-ref-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let op_path = dir.join("op.jwt");
    std::fs::write(&op_path, operator_file).expect("write op.jwt");
    let port = free_port();
    let mut conf = format!(
        "listen: 127.0.0.1:{port}\noperator: \"{}\"\nsystem_account: {sys}\nresolver: MEMORY\nresolver_preload: {{\n",
        op_path.display()
    );
    for (k, v) in preload {
        conf.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    conf.push_str("}\n");
    let conf_path = dir.join("server.conf");
    std::fs::write(&conf_path, conf).expect("write conf");
    let log = std::fs::File::create(dir.join("server.log")).expect("log file");
    let child = Command::new(bin)
        .arg("-c")
        .arg(&conf_path)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start reference server");
    let mut server = Server { child, port, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("reference server exited ({status}): {}", server.log());
        }
        assert!(Instant::now() < deadline, "reference server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    server
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
    let connect = serde_json::json!({"jwt": jwt, "sig": sig, "verbose": false, "pedantic": false, "protocol": 1});
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
        ..Default::default()
    }];
    let acc_jwt = acc_claims.encode(&op, t).expect("account");

    // The operator file is decorated, as nsc writes it.
    let op_file = decorate_jwt(&op_jwt).expect("decorate");
    let server = start(
        &bin,
        &op_file,
        &sys.public_key(),
        &[(sys.public_key(), sys_jwt), (acc.public_key(), acc_jwt)],
    );

    // A user signed by the account key.
    let u1 = KeyPair::new_user();
    let mut c1 = UserClaims::new(u1.public_key());
    c1.claims.name = "u1".into();
    let (resp, _c) = connect(server.port, &c1.encode(&acc, t).expect("u1"), &u1);
    assert_eq!(resp, ["PONG"], "user signed by the account key");

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

    // The preloaded accounts raised no validation findings.
    let log = server.log();
    assert!(log.contains("Server is ready"), "{log}");
    assert!(
        !log.contains("validation issues") && !log.contains("not valid"),
        "{log}"
    );
}
