//! The URL account resolver over `https://` with `resolver_tls`, against the reference:
//! an HTTPS account server in the test (certificates from `common::pki`), operator mode
//! with `resolver: URL(https://127.0.0.1:<port>/jwt/v1/accounts/)`, and the same outcome
//! on both servers for each TLS setting — the CA given, none (the system's trust store
//! does not know the test CA: startup fails on the base URL check), `insecure`, and an
//! account server that wants a client certificate (given, or not).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::pki::Pki;
use common::{bin, reference_server, Reactor};
use nkeys::KeyPair;
use rnats::auth::jwt::{AccountClaims, Encode, OperatorClaims, UserClaims};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// An HTTPS account server: `/jwt/v1/accounts/` answers 200, `/jwt/v1/accounts/<key>`
/// the JWT of `key`. With `client_ca`, clients must present a certificate of that CA.
fn account_server(pki: &Pki, accounts: Vec<(String, String)>, client_ca: bool) -> u16 {
    use rustls::pki_types::pem::PemObject;
    let chain: Vec<_> = rustls::pki_types::CertificateDer::pem_file_iter(pki.path("server-cert.pem"))
        .unwrap()
        .map(|c| c.unwrap())
        .collect();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(pki.path("server-key.pem")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let b = if client_ca {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca.der().clone()).unwrap();
        let v = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        b.with_client_cert_verifier(v)
    } else {
        b.with_no_client_auth()
    };
    let cfg = Arc::new(b.with_single_cert(chain, key).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(sock) = sock else { continue };
            let (cfg, accounts) = (cfg.clone(), accounts.clone());
            std::thread::spawn(move || {
                let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
                let conn = rustls::ServerConnection::new(cfg).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, sock);
                let mut line = String::new();
                if BufReader::new(&mut tls).read_line(&mut line).is_err() {
                    return;
                }
                let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                let body = match path.strip_prefix("/jwt/v1/accounts/") {
                    Some("") => Some(String::new()),
                    Some(k) => accounts.iter().find(|(a, _)| a == k).map(|(_, j)| j.clone()),
                    None => None,
                };
                let reply = match body {
                    Some(b) => format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                        b.len()
                    ),
                    None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into(),
                };
                let _ = tls.write_all(reply.as_bytes());
                let _ = tls.flush();
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    port
}

struct Setup {
    pki: Pki,
    dir: std::path::PathBuf,
    op_file: String,
    sys: String,
    acc: KeyPair,
    accounts: Vec<(String, String)>,
}

fn setup(name: &str) -> Setup {
    let dir = common::scratch_dir().join(name);
    let pki = Pki::new(&dir);
    pki.issue(
        "resolver",
        &common::pki::Subject {
            dn: vec![(rcgen::DnType::CommonName, "resolver")],
            ..Default::default()
        },
    );
    let t = now();
    let op = KeyPair::new_operator();
    let sys = KeyPair::new_account();
    let acc = KeyPair::new_account();
    let mut oc = OperatorClaims::new(op.public_key());
    oc.nats.system_account = sys.public_key();
    let op_file = dir.join("op.jwt");
    std::fs::write(&op_file, oc.encode(&op, t).unwrap()).unwrap();
    let mut sc = AccountClaims::new(sys.public_key());
    sc.claims.name = "SYS".into();
    let mut ac = AccountClaims::new(acc.public_key());
    ac.claims.name = "A".into();
    let accounts = vec![
        (sys.public_key(), sc.encode(&op, t).unwrap()),
        (acc.public_key(), ac.encode(&op, t).unwrap()),
    ];
    Setup {
        op_file: op_file.to_str().unwrap().to_string(),
        sys: sys.public_key(),
        pki,
        dir,
        acc,
        accounts,
    }
}

/// What a server does with `resolver_tls`: it starts and a user of account A connects
/// (`Ok("PONG")`), or startup fails (`Err(<the line naming the failed fetch>)`).
fn outcome(program: &str, extra: &[&str], s: &Setup, port: u16, resolver_tls: &str) -> Result<String, String> {
    let client_port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let conf = s.dir.join(format!("server-{client_port}.conf"));
    std::fs::write(
        &conf,
        format!(
            "listen: 127.0.0.1:{client_port}\noperator: {:?}\nsystem_account: {}\n\
             resolver: URL(https://127.0.0.1:{port}/jwt/v1/accounts/)\n{resolver_tls}\n",
            s.op_file, s.sys
        ),
    )
    .unwrap();
    let mut child = Command::new(program)
        .arg("-c")
        .arg(&conf)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let result = loop {
        if let Ok(Some(_)) = child.try_wait() {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            let line = err
                .lines()
                .find(|l| l.contains("could not fetch"))
                .map(|l| l.split("could not fetch").nth(1).unwrap_or_default().to_string())
                .unwrap_or(err);
            break Err(line);
        }
        // A server that listens and then fails its startup fetch resets the connection:
        // look again (its exit is seen above).
        if let Some(line) = TcpStream::connect(("127.0.0.1", client_port))
            .ok()
            .and_then(|sock| connect_user(sock, &s.acc))
        {
            break Ok(line);
        }
        assert!(Instant::now() < deadline, "{program} neither started nor failed");
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// CONNECT as a new user of account A; the first line of the answer (`None`: the
/// connection was closed before the INFO).
fn connect_user(sock: TcpStream, acc: &KeyPair) -> Option<String> {
    use base64::Engine;
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut r = BufReader::new(sock.try_clone().unwrap());
    let mut info = String::new();
    if r.read_line(&mut info).unwrap_or(0) == 0 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(info.trim_start_matches("INFO ").trim()).unwrap();
    let nonce = v["nonce"].as_str().unwrap();
    let u = KeyPair::new_user();
    let jwt = UserClaims::new(u.public_key()).encode(acc, now()).unwrap();
    let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(u.sign(nonce.as_bytes()).unwrap());
    let connect = serde_json::json!({"jwt": jwt, "sig": sig, "verbose": false, "pedantic": false});
    (&sock)
        .write_all(format!("CONNECT {connect}\r\nPING\r\n").as_bytes())
        .unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    Some(line.trim_end().to_string())
}

fn against_reference(r: Reactor) {
    let s = setup(&format!("resolver-tls-{}", r.flag()));
    let open = account_server(&s.pki, s.accounts.clone(), false);
    let mutual = account_server(&s.pki, s.accounts.clone(), true);
    let ca = s.pki.path("ca.pem");
    let (cert, key) = (s.pki.path("resolver-cert.pem"), s.pki.path("resolver-key.pem"));
    let cases = [
        ("the CA", open, format!("resolver_tls {{ ca_file: {ca:?} }}")),
        ("no resolver_tls", open, String::new()),
        ("insecure", open, "resolver_tls { insecure: true }".to_string()),
        (
            "client certificate",
            mutual,
            format!("resolver_tls {{ ca_file: {ca:?}, cert_file: {cert:?}, key_file: {key:?} }}"),
        ),
        (
            "no client certificate",
            mutual,
            format!("resolver_tls {{ ca_file: {ca:?} }}"),
        ),
    ];
    let reference = reference_server();
    let mut seen = Vec::new();
    for (name, port, block) in &cases {
        let want = outcome(&reference, &[], &s, *port, block);
        let got = outcome(bin(), &["--shards", "2", "--reactor", r.flag()], &s, *port, block);
        // Go's HTTP client sometimes prefixes a TLS alert seen while its read loop peeks
        // with `readLoopPeekFailLocked: ` (timing): the words after it are compared.
        match (&want, &got) {
            (Ok(a), Ok(b)) => assert_eq!(
                a.replace("readLoopPeekFailLocked: ", ""),
                b.replace("readLoopPeekFailLocked: ", ""),
                "{name}"
            ),
            // Both refuse to start on the base URL check, with the same words.
            (Err(a), Err(b)) => assert_eq!(
                a.replace("readLoopPeekFailLocked: ", ""),
                b.replace("readLoopPeekFailLocked: ", ""),
                "{name}"
            ),
            _ => panic!("{name}: reference {want:?}, rnats {got:?}"),
        }
        seen.push((*name, got.is_ok()));
    }
    assert_eq!(
        seen,
        [
            ("the CA", true),
            ("no resolver_tls", false),
            ("insecure", true),
            ("client certificate", true),
            ("no client certificate", false)
        ]
    );
    let _ = std::fs::remove_dir_all(&s.dir);
}

both_reactors!(https_resolver_like_the_reference, |r| against_reference(r));
