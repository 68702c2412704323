//! TLS for clients (FEATURES.md §10): the INFO fields, the upgrade after INFO or first
//! (with and without the fallback delay), `allow_non_tls`, mutual TLS, `verify_and_map`,
//! pinned certificates, handshake timeouts and failures, the `--tls*` flags and
//! certificate reload — with async-nats and a synchronous rustls client, on both
//! reactors.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::pki::{info_json, Pki, Subject, TlsClient};
use common::{rt, scratch_dir, Reactor, Server};
use futures::StreamExt;
use std::io::Read;
use std::time::{Duration, Instant};

fn start_with(r: Reactor, pki: &Pki, conf: &str) -> Server {
    let path = pki.dir.join(format!("server-{}.conf", rand_suffix()));
    std::fs::write(&path, conf).unwrap();
    Server::start(r, &["-c", path.to_str().unwrap()])
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

fn plain_info(port: u16) -> serde_json::Value {
    let mut raw = common::Raw::connect(port);
    info_json(&std::mem::take(&mut raw.info))
}

both_reactors!(info_then_tls_with_async_nats, |r| {
    let pki = Pki::new(&scratch_dir());
    let srv = start_with(r, &pki, &pki.tls_block("timeout: 1"));
    assert!(srv
        .log_lines()
        .iter()
        .any(|l| l.contains("TLS required for client connections")));
    let info = plain_info(srv.port);
    assert_eq!(info["tls_required"], true);
    assert!(info.get("tls_verify").is_none() && info.get("tls_available").is_none());
    rt().block_on(async {
        let nc = pki.nats_options(None).connect(srv.url()).await.unwrap();
        let mut sub = nc.subscribe("tls.>").await.unwrap();
        nc.flush().await.unwrap();
        for size in [16usize, 1024, 200_000] {
            nc.publish("tls.x", vec![b'a'; size].into()).await.unwrap();
            let m = tokio::time::timeout(Duration::from_secs(5), sub.next())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(m.payload.len(), size);
        }
    });
});

both_reactors!(mutual_tls_accepts_good_and_rejects_bad_certificates, |r| {
    let dir = scratch_dir();
    let pki = Pki::new(&dir);
    pki.issue(
        "client",
        &Subject {
            dn: vec![(rcgen::DnType::CommonName, "app")],
            ..Default::default()
        },
    );
    pki.issue(
        "expired",
        &Subject {
            dn: vec![(rcgen::DnType::CommonName, "old")],
            expired: true,
            ..Default::default()
        },
    );
    let other = Pki::named(&dir, "other");
    other.issue(
        "stranger",
        &Subject {
            dn: vec![(rcgen::DnType::CommonName, "stranger")],
            ..Default::default()
        },
    );
    let srv = start_with(r, &pki, &pki.tls_block("verify: true\n timeout: 1"));
    let info = plain_info(srv.port);
    assert_eq!(
        (info["tls_required"].clone(), info["tls_verify"].clone()),
        (true.into(), true.into())
    );
    // A good certificate.
    let mut c = TlsClient::connect(srv.port, pki.client_config(Some("client"))).unwrap();
    c.handshake_nats("{\"verbose\":false}").unwrap();
    rt().block_on(async {
        let nc = pki.nats_options(Some("client")).connect(srv.url()).await.unwrap();
        nc.flush().await.unwrap();
        // No certificate: the connection fails.
        let err = pki
            .nats_options(None)
            .retry_on_initial_connect()
            .max_reconnects(Some(1))
            .connection_timeout(Duration::from_secs(2))
            .connect(srv.url())
            .await;
        if let Ok(nc) = err {
            assert!(tokio::time::timeout(Duration::from_secs(2), nc.flush())
                .await
                .map_or(true, |r| r.is_err()));
        }
    });
    // No certificate, an expired one, one from another CA: each fails, others keep going.
    for (client, needle) in [
        (None, "client didn't provide a certificate"),
        (Some("expired"), "certificate has expired or is not yet valid"),
    ] {
        let cfg = pki.client_config(client);
        if let Ok(mut t) = TlsClient::connect(srv.port, cfg) {
            assert!(t.handshake_nats("{}").is_err());
        }
        srv.wait_for_log(needle, Duration::from_secs(5)).unwrap();
    }
    let mut roots_other = rustls::RootCertStore::empty();
    roots_other.add(pki.ca.der().clone()).unwrap();
    let stranger = {
        use rustls::pki_types::pem::PemObject;
        let chain = rustls::pki_types::CertificateDer::pem_file_iter(other.path("stranger-cert.pem"))
            .unwrap()
            .map(|c| c.unwrap())
            .collect();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(other.path("stranger-key.pem")).unwrap();
        std::sync::Arc::new(
            rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots_other)
                .with_client_auth_cert(chain, key)
                .unwrap(),
        )
    };
    if let Ok(mut t) = TlsClient::connect(srv.port, stranger) {
        assert!(t.handshake_nats("{}").is_err());
    }
    srv.wait_for_log("certificate signed by unknown authority", Duration::from_secs(5))
        .unwrap();
    // The first client is unaffected.
    c.send("PING\r\n");
    assert_eq!(c.line().unwrap(), "PONG");
});

both_reactors!(verify_and_map_by_dn_email_and_dns, |r| {
    let pki = Pki::new(&scratch_dir());
    pki.issue(
        "dn",
        &Subject {
            dn: vec![
                (rcgen::DnType::OrganizationName, "Synadia"),
                (rcgen::DnType::CommonName, "app"),
            ],
            ..Default::default()
        },
    );
    pki.issue(
        "mail",
        &Subject {
            dn: vec![(rcgen::DnType::CommonName, "ignored")],
            emails: vec!["ops@example.com"],
            ..Default::default()
        },
    );
    pki.issue(
        "dns",
        &Subject {
            dn: vec![(rcgen::DnType::CommonName, "ignored too")],
            dns: vec!["svc.example.com"],
            ..Default::default()
        },
    );
    pki.issue(
        "nobody",
        &Subject {
            dn: vec![(rcgen::DnType::CommonName, "nobody")],
            ..Default::default()
        },
    );
    let conf = format!(
        "{}authorization {{ users = [ {{user: \"O=Synadia,CN=app\"}}, {{user: \"ops@example.com\"}}, {{user: \"svc.example.com\"}} ] }}\n",
        pki.tls_block("verify_and_map: true\n timeout: 1")
    );
    let srv = start_with(r, &pki, &conf);
    for name in ["dn", "mail", "dns"] {
        let mut c = TlsClient::connect(srv.port, pki.client_config(Some(name))).unwrap();
        assert_eq!(info_json(&c.info)["auth_required"], true);
        c.handshake_nats("{\"verbose\":false}")
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let mut c = TlsClient::connect(srv.port, pki.client_config(Some("nobody"))).unwrap();
    assert_eq!(
        c.handshake_nats("{\"verbose\":false}").unwrap_err(),
        "-ERR 'Authorization Violation'"
    );
});

both_reactors!(handshake_first_both_modes, |r| {
    let pki = Pki::new(&scratch_dir());
    let srv = start_with(r, &pki, &pki.tls_block("handshake_first: true\n timeout: 1"));
    assert!(srv
        .log_lines()
        .iter()
        .any(|l| l.contains("Clients that are not using \"TLS Handshake First\" option will fail to connect")));
    // The INFO comes encrypted, after the handshake.
    let mut c = TlsClient::connect_first(srv.port, pki.client_config(None)).unwrap();
    c.handshake_nats("{\"verbose\":false}").unwrap();
    assert_eq!(info_json(&c.info)["tls_required"], true);
    rt().block_on(async {
        let nc = pki.nats_options(None).tls_first().connect(srv.url()).await.unwrap();
        nc.flush().await.unwrap();
    });
    // A client waiting for the INFO gets nothing and is closed after the timeout.
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t0 = Instant::now();
    let mut b = [0u8; 64];
    assert_eq!(raw.read(&mut b).unwrap_or(0), 0);
    assert!(t0.elapsed() >= Duration::from_millis(800), "{:?}", t0.elapsed());
    drop(srv);

    // With a fallback delay, both kinds of client connect.
    let srv = start_with(r, &pki, &pki.tls_block("handshake_first: \"300ms\"\n timeout: 1"));
    let mut c = TlsClient::connect_first(srv.port, pki.client_config(None)).unwrap();
    c.handshake_nats("{\"verbose\":false}").unwrap();
    let t0 = Instant::now();
    let mut c = TlsClient::connect(srv.port, pki.client_config(None)).unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(250));
    assert_eq!(info_json(&c.info)["tls_required"], true);
    c.handshake_nats("{\"verbose\":false}").unwrap();
    rt().block_on(async {
        let nc = pki.nats_options(None).connect(srv.url()).await.unwrap();
        nc.flush().await.unwrap();
    });
});

both_reactors!(allow_non_tls_serves_both, |r| {
    let pki = Pki::new(&scratch_dir());
    let conf = format!("{}allow_non_tls: true\n", pki.tls_block("timeout: 1"));
    let srv = start_with(r, &pki, &conf);
    let mut raw = srv.raw();
    let info = info_json(&raw.info);
    assert_eq!(info["tls_available"], true);
    assert!(info.get("tls_required").is_none());
    raw.handshake();
    let mut c = TlsClient::connect(srv.port, pki.client_config(None)).unwrap();
    c.handshake_nats("{\"verbose\":false}").unwrap();
    // Both see each other's messages.
    c.send("SUB x 1\r\nPING\r\n");
    assert_eq!(c.line().unwrap(), "PONG");
    raw.send_str("PUB x 2\r\nhi\r\n");
    assert_eq!(c.line().unwrap(), "MSG x 1 2");
    assert_eq!(c.line().unwrap(), "hi");
});

both_reactors!(stalled_handshake_and_plaintext_are_closed, |r| {
    let pki = Pki::new(&scratch_dir());
    let srv = start_with(r, &pki, &pki.tls_block("timeout: 0.5"));
    let mut good = TlsClient::connect(srv.port, pki.client_config(None)).unwrap();
    good.handshake_nats("{\"verbose\":false}").unwrap();
    // Reads the INFO and then says nothing.
    let mut stall = common::Raw::connect(srv.port);
    let t0 = Instant::now();
    let rest = stall.until_closed(Duration::from_secs(5));
    assert_eq!(rest, "");
    assert!(t0.elapsed() >= Duration::from_millis(400));
    srv.wait_for_log("TLS handshake timeout", Duration::from_secs(2))
        .unwrap();
    // Plaintext to the TLS port: closed without an answer.
    let mut plain = common::Raw::connect(srv.port);
    plain.send_str("CONNECT {}\r\nPING\r\n");
    assert_eq!(plain.until_closed(Duration::from_secs(5)), "");
    srv.wait_for_log(
        "TLS handshake error: tls: first record does not look like a TLS handshake",
        Duration::from_secs(2),
    )
    .unwrap();
    // Garbage records after a valid start, and a truncated handshake.
    let mut junk = common::Raw::connect(srv.port);
    junk.send(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]);
    let _ = junk.until_closed(Duration::from_secs(5));
    let mut cut = common::Raw::connect(srv.port);
    cut.send(&[0x16, 0x03, 0x01, 0x02]);
    drop(cut);
    good.send("PING\r\n");
    assert_eq!(good.line().unwrap(), "PONG");
});

both_reactors!(pinned_certs, |r| {
    let pki = Pki::new(&scratch_dir());
    pki.issue(
        "client",
        &Subject {
            dn: vec![(rcgen::DnType::CommonName, "app")],
            ..Default::default()
        },
    );
    pki.issue(
        "other",
        &Subject {
            dn: vec![(rcgen::DnType::CommonName, "other")],
            ..Default::default()
        },
    );
    let pem = std::fs::read(pki.path("client-cert.pem")).unwrap();
    let der = {
        use rustls::pki_types::pem::PemObject;
        rustls::pki_types::CertificateDer::from_pem_slice(&pem).unwrap()
    };
    let spki = rnats::transport::tls::x509::Certificate::parse(&der).unwrap().spki;
    let pin = rnats::transport::tls::peer::hex(ring::digest::digest(&ring::digest::SHA256, &spki).as_ref());
    let srv = start_with(
        r,
        &pki,
        &pki.tls_block(&format!("verify: true\n timeout: 1\n pinned_certs: [\"{pin}\"]")),
    );
    let mut c = TlsClient::connect(srv.port, pki.client_config(Some("client"))).unwrap();
    c.handshake_nats("{\"verbose\":false}").unwrap();
    if let Ok(mut t) = TlsClient::connect(srv.port, pki.client_config(Some("other"))) {
        assert!(t.handshake_nats("{}").is_err());
    }
    srv.wait_for_log("TLS handshake error: certificate not pinned", Duration::from_secs(5))
        .unwrap();
});

both_reactors!(tls_flags, |r| {
    let pki = Pki::new(&scratch_dir());
    let (cert, key) = (pki.path("server-cert.pem"), pki.path("server-key.pem"));
    let srv = Server::start(r, &["--tls", "--tlscert", &cert, "--tlskey", &key]);
    assert_eq!(plain_info(srv.port)["tls_required"], true);
    rt().block_on(async {
        let nc = pki.nats_options(None).connect(srv.url()).await.unwrap();
        nc.flush().await.unwrap();
    });
    let ca = pki.path("ca.pem");
    let srv = Server::start(
        r,
        &["--tlsverify", "--tlscert", &cert, "--tlskey", &key, "--tlscacert", &ca],
    );
    assert_eq!(plain_info(srv.port)["tls_verify"], true);
});

both_reactors!(certificates_reload_with_sighup, |r| {
    let dir = scratch_dir();
    let pki = Pki::new(&dir);
    let srv = start_with(r, &pki, &pki.tls_block("timeout: 1"));
    let mut before = TlsClient::connect(srv.port, pki.client_config(None)).unwrap();
    before.handshake_nats("{\"verbose\":false}").unwrap();
    // A new CA and server certificate in the same files.
    let fresh = Pki::new(&dir);
    srv.signal(libc::SIGHUP);
    srv.wait_for_log("Reloaded server configuration", Duration::from_secs(5))
        .unwrap();
    // New connections get the new certificate: the old CA no longer verifies it.
    assert!(TlsClient::connect(srv.port, pki.client_config(None)).is_err());
    let mut after = TlsClient::connect(srv.port, fresh.client_config(None)).unwrap();
    after.handshake_nats("{\"verbose\":false}").unwrap();
    // The old connection goes on.
    before.send("PING\r\n");
    assert_eq!(before.line().unwrap(), "PONG");
});

/// `https_port` from the "Starting https monitor on" line.
fn https_port(srv: &Server) -> u16 {
    srv.log_lines()
        .iter()
        .find_map(|l| l.split("Starting https monitor on ").nth(1))
        .and_then(|hp| hp.rsplit(':').next())
        .and_then(|p| p.trim().parse().ok())
        .expect("no https monitor")
}

/// GET `path` over HTTPS with a rustls client trusting `pki`: status and body, and the
/// certificate the server presented.
fn https_get(pki: &Pki, port: u16, path: &str) -> (u16, String, Vec<u8>) {
    use std::io::Write;
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let conn = rustls::ClientConnection::new(pki.client_config(None), "localhost".try_into().unwrap()).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let cert = s.conn.peer_certificates().unwrap()[0].to_vec();
    let resp = String::from_utf8_lossy(&resp).to_string();
    let status = resp.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body, cert)
}

fn sha256_hex(b: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, b)
        .as_ref()
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

both_reactors!(https_monitoring_and_connz_tls_fields, |r| {
    let dir = scratch_dir();
    let pki = Pki::new(&dir);
    pki.issue(
        "client",
        &Subject {
            dn: vec![
                (rcgen::DnType::OrganizationName, "Synadia"),
                (rcgen::DnType::CommonName, "app"),
            ],
            ..Default::default()
        },
    );
    let conf = format!("https_port: -1\n{}", pki.tls_block("verify: true"));
    let srv = start_with(r, &pki, &conf);
    let port = https_port(&srv);
    let (status, body, _) = https_get(&pki, port, "/varz");
    assert_eq!(status, 200);
    let varz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (varz["https_port"].clone(), varz["http_port"].clone()),
        ((-1).into(), 0.into())
    );
    // A client with a certificate: /connz shows its TLS details, and its certificates
    // with auth.
    let mut c = TlsClient::connect(srv.port, pki.client_config(Some("client"))).unwrap();
    c.handshake_nats("{\"verbose\":false}").unwrap();
    let (_, body, _) = https_get(&pki, port, "/connz?auth=1");
    let connz: serde_json::Value = serde_json::from_str(&body).unwrap();
    let conn = &connz["connections"][0];
    assert_eq!(conn["tls_version"], "1.3");
    assert!(conn["tls_cipher_suite"].as_str().unwrap().starts_with("TLS_"));
    assert!(conn.get("tls_first").is_none());
    let certs = conn["tls_peer_certs"].as_array().unwrap();
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_file(pki.path("client-cert.pem")).unwrap();
    assert_eq!(certs[0]["subject"], "CN=app,O=Synadia");
    assert_eq!(certs[0]["cert_sha256"], sha256_hex(&der));
    assert_eq!(certs[0]["spki_sha256"].as_str().unwrap().len(), 64);
    let (_, body, _) = https_get(&pki, port, "/connz");
    let connz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(connz["connections"][0].get("tls_peer_certs").is_none());
    assert_eq!(connz["connections"][0]["tls_version"], "1.3");
    // Plain HTTP on the HTTPS port: Go's answer.
    let (status, body) = common::http_get(port, "/varz");
    assert_eq!(
        (status, body.as_str()),
        (400, "Client sent an HTTP request to an HTTPS server.\n")
    );
    srv.wait_for_log(
        "monitoring: TLS handshake error from 127.0.0.1:",
        Duration::from_secs(5),
    )
    .unwrap();
    // New certificates after SIGHUP serve new HTTPS connections too.
    let (_, _, before) = https_get(&pki, port, "/varz");
    let fresh = Pki::new(&dir);
    srv.signal(libc::SIGHUP);
    srv.wait_for_log("Reloaded server configuration", Duration::from_secs(5))
        .unwrap();
    let (status, _, after) = https_get(&fresh, port, "/varz");
    assert_eq!(status, 200);
    assert_ne!(before, after);
});

/// The same TLS fields, by name and shape, as the reference's; and its refusals of
/// HTTPS monitoring settings.
#[test]
fn differential_https_monitoring_and_connz_tls() {
    let dir = scratch_dir();
    let pki = Pki::new(&dir);
    pki.issue(
        "client",
        &Subject {
            dn: vec![(rcgen::DnType::CommonName, "app")],
            ..Default::default()
        },
    );
    let reference = common::reference_server();
    let conf = pki.dir.join("https.conf");
    std::fs::write(&conf, format!("https_port: -1\n{}", pki.tls_block("verify: true"))).unwrap();
    let conf = conf.to_str().unwrap();
    let mut shapes = Vec::new();
    for bin in [common::bin().to_string(), reference.clone()] {
        let srv = Server::start_cmd(&bin, &["-a", "127.0.0.1", "-p", "-1", "-c", conf]);
        let port = https_port(&srv);
        let mut c = TlsClient::connect(srv.port, pki.client_config(Some("client"))).unwrap();
        c.handshake_nats("{\"verbose\":false}").unwrap();
        let (_, body, _) = https_get(&pki, port, "/connz?auth=1");
        let connz: serde_json::Value = serde_json::from_str(&body).unwrap();
        let conn = connz["connections"][0].as_object().unwrap().clone();
        let mut keys: Vec<String> = conn.keys().filter(|k| k.starts_with("tls")).cloned().collect();
        keys.sort();
        let certs = conn["tls_peer_certs"].clone();
        shapes.push((keys, certs, conn["tls_version"].clone()));
    }
    assert_eq!(shapes[0], shapes[1]);
    // Refusals: no TLS block; both HTTP and HTTPS.
    for (i, body) in [
        "https_port: -1\n".to_string(),
        format!("http_port: 8222\nhttps_port: 8443\n{}", pki.tls_block("")),
    ]
    .iter()
    .enumerate()
    {
        let f = pki.dir.join(format!("bad-https{i}.conf"));
        std::fs::write(&f, body).unwrap();
        let f = f.to_str().unwrap();
        let last = |program: &str| {
            let out = std::process::Command::new(program)
                .args(["-p", "-1", "-c", f])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr).to_string();
            let line = err.lines().last().unwrap_or_default().to_string();
            (
                out.status.code(),
                line.split("] ").last().unwrap_or_default().to_string(),
            )
        };
        assert_eq!(last(common::bin()), last(&reference), "{body}");
    }
}

/// What a client sees (INFO fields, the answer to plaintext and to a stalled handshake)
/// is what the reference shows.
#[test]
fn differential_tls_info_and_failures() {
    let pki = Pki::new(&scratch_dir());
    let reference = common::reference_server();
    for extra in ["timeout: 0.5", "verify: true\n timeout: 0.5"] {
        for allow in [false, true] {
            let conf = format!("{}allow_non_tls: {allow}\n", pki.tls_block(extra));
            let path = pki.dir.join(format!("diff-{}.conf", rand_suffix()));
            std::fs::write(&path, &conf).unwrap();
            let p = path.to_str().unwrap();
            let ours = Server::start(Reactor::Mio, &["-c", p]);
            let theirs = Server::start_cmd(&reference, &["-a", "127.0.0.1", "-p", "-1", "-c", p]);
            let pick = |port: u16| {
                let i = plain_info(port);
                (
                    i["tls_required"].clone(),
                    i["tls_verify"].clone(),
                    i["tls_available"].clone(),
                )
            };
            assert_eq!(pick(ours.port), pick(theirs.port), "{conf}");
            if !allow {
                for port in [ours.port, theirs.port] {
                    let mut plain = common::Raw::connect(port);
                    plain.send_str("CONNECT {}\r\n");
                    assert_eq!(plain.until_closed(Duration::from_secs(5)), "", "port {port}");
                    let mut stall = common::Raw::connect(port);
                    assert_eq!(stall.until_closed(Duration::from_secs(5)), "", "port {port}");
                }
                for srv in [&ours, &theirs] {
                    // The reference logs the read timeout, and "TLS handshake timeout" when
                    // its timer wins the race with the read.
                    srv.wait_for_log("TLS handshake error: read tcp", Duration::from_secs(3))
                        .unwrap();
                    srv.wait_for_log(
                        "first record does not look like a TLS handshake",
                        Duration::from_secs(3),
                    )
                    .unwrap();
                }
            }
        }
    }
}

/// `-t` on `tls`, `websocket`, `ocsp` and `allow_non_tls` blocks: the same output and exit
/// code as the reference (certificates are loaded when the file is read).
#[test]
fn check_config_matches_the_reference() {
    let pki = Pki::new(&scratch_dir());
    let reference = common::reference_server();
    let (cert, key, ca) = (
        pki.path("server-cert.pem"),
        pki.path("server-key.pem"),
        pki.path("ca.pem"),
    );
    let ok = format!("cert_file: {cert:?}\n key_file: {key:?}\n");
    let cases = [
        format!("tls {{\n{ok}}}\n"),
        format!("tls {{\n{ok} ca_file: {ca:?}\n verify: true\n timeout: 3\n}}\n"),
        "tls {\n cert_file: \"/nope/c.pem\"\n key_file: \"/nope/k.pem\"\n}\n".to_string(),
        format!("tls {{\n cert_file: {cert:?}\n}}\n"),
        format!("tls {{\n key_file: {key:?}\n}}\n"),
        format!("tls {{\n{ok} foo: 1\n}}\n"),
        "tls {\n cert_file: 5\n}\n".to_string(),
        format!("tls {{\n{ok} timeout: \"x\"\n}}\n"),
        format!("tls {{\n{ok} handshake_first: \"bogus\"\n}}\n"),
        format!("tls {{\n{ok} handshake_first: 5\n}}\n"),
        format!("tls {{\n{ok} handshake_first: \"auto\"\n}}\n"),
        format!("tls {{\n{ok} handshake_first: \"100ms\"\n}}\n"),
        format!("tls {{\n{ok} cipher_suites: [\"TLS_RSA_WITH_RC4_128_SHA\"]\n}}\n"),
        format!("tls {{\n{ok} cipher_suites: [\"NOPE\"]\n}}\n"),
        format!("tls {{\n{ok} cipher_suites: [\"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\"]\n curve_preferences: [\"CurveP256\"]\n}}\n"),
        format!("tls {{\n{ok} curve_preferences: [\"NOPE\"]\n}}\n"),
        format!("tls {{\n{ok} min_version: \"1.1\"\n}}\n"),
        format!("tls {{\n{ok} min_version: \"1.3\"\n}}\n"),
        format!("tls {{\n{ok} min_version: \"2\"\n}}\n"),
        format!("tls {{\n{ok} pinned_certs: [\"abc\"]\n}}\n"),
        format!("tls {{\n{ok} ca_file: \"/nope/ca.pem\"\n}}\n"),
        format!("tls {{\n{ok} ca_file: {key:?}\n}}\n"),
        format!("tls {{\n cert_file: {key:?}\n key_file: {key:?}\n}}\n"),
        format!("tls {{\n{ok} verify_cert_and_check_known_urls: true\n}}\n"),
        format!("tls {{\n{ok} cert_store: \"WindowsCurrentUser\"\n}}\n"),
        format!("tls {{\n{ok} verify_and_map: true\n}}\nallow_non_tls: true\n"),
        "tls: 5\n".to_string(),
        "allow_non_tls: 5\n".to_string(),
        "websocket {\n port: 8080\n}\n".to_string(),
        "websocket {\n port: 8080\n no_tls: true\n foo: 1\n}\n".to_string(),
        "websocket {\n port: 8080\n no_tls: true\n handshake_timeout: \"x\"\n}\n".to_string(),
        "websocket {\n port: 8080\n no_tls: true\n compression: true\n same_origin: true\n allowed_origins: [\"https://a.b\"]\n}\n".to_string(),
        "websocket: 5\n".to_string(),
        "ws {\n listen: \"127.0.0.1:8080\"\n no_tls: true\n authorization { user: a, password: b, timeout: 2 }\n}\n".to_string(),
        format!("websocket {{\n port: 8080\n tls {{\n{ok} }}\n}}\n"),
        "ocsp { mode: \"bogus\" }\n".to_string(),
        "ocsp { foo: 1 }\n".to_string(),
        "ocsp: 5\n".to_string(),
        "ocsp: false\n".to_string(),
        "ocsp_cache: true\n".to_string(),
        "ocsp_cache: 5\n".to_string(),
        "ocsp_cache { type: local, local_store: \"/tmp/x\", preserve_revoked: true, save_interval: \"2m\" }\n".to_string(),
        "ocsp_cache { type: bogus }\n".to_string(),
        "ocsp_cache { type: 5 }\n".to_string(),
        "ocsp_cache { nope: 1 }\n".to_string(),
        "ocsp_cache { save_interval: \"x\" }\n".to_string(),
        format!("tls {{\n{ok} verify: true\n ocsp_peer {{ verify: true, ca_timeout: 1, allowed_clockskew: \"5s\" }}\n}}\n"),
        format!("tls {{\n{ok} ocsp_peer {{ verify: 1 }}\n}}\n"),
        format!("tls {{\n{ok} ocsp_peer: 3\n}}\n"),
        "https: \"127.0.0.1:8443\"\n".to_string(),
    ];
    let run = |program: &str, f: &str| {
        let out = std::process::Command::new(program)
            .args(["-t", "-c", f])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).replace(f, "FILE"),
        )
    };
    for (i, text) in cases.iter().enumerate() {
        let f = pki.dir.join(format!("check{i}.conf"));
        std::fs::write(&f, text).unwrap();
        let f = f.to_str().unwrap();
        let want = run(&reference, f);
        let mut got = run(common::bin(), f);
        // The digest differs only when the two parse differently.
        got.1 = got.1.replace("rnats", "nats-server");
        assert_eq!(got, want, "{text}");
    }
}

// The reference logs, at debug, "Starting TLS client connection handshake" once when a
// client's handshake begins (at accept, or when allow_non_tls / the handshake_first
// fallback sees the handshake arrive) and "TLS handshake complete" after it.
both_reactors!(tls_handshake_start_and_end_are_logged_at_debug, |r| {
    let pki = Pki::new(&scratch_dir());
    let cases = [
        ("after INFO", pki.tls_block("timeout: 1"), false),
        ("handshake_first", pki.tls_block("handshake_first: true"), true),
        ("handshake_first fallback", pki.tls_block("handshake_first: 50ms"), true),
        (
            "allow_non_tls",
            format!("{}allow_non_tls: true\n", pki.tls_block("timeout: 1")),
            false,
        ),
    ];
    for (case, conf, first) in cases {
        let path = pki.dir.join(format!("server-{}.conf", rand_suffix()));
        std::fs::write(&path, conf).unwrap();
        let srv = Server::start(r, &["-c", path.to_str().unwrap(), "-D"]);
        let mut c = if first {
            TlsClient::connect_first(srv.port, pki.client_config(None)).unwrap()
        } else {
            TlsClient::connect(srv.port, pki.client_config(None)).unwrap()
        };
        c.handshake_nats("{\"verbose\":false}").unwrap();
        srv.wait_for_log("- TLS handshake complete", Duration::from_secs(5))
            .unwrap_or_else(|log| panic!("{case}: {log}"));
        let lines = srv.log_lines();
        let at = |needle: &str| lines.iter().position(|l| l.contains(needle));
        assert_eq!(srv.count_log("- Starting TLS client connection handshake"), 1, "{case}");
        assert!(
            at("- Client connection created") < at("- Starting TLS client connection handshake")
                && at("- Starting TLS client connection handshake") < at("- TLS handshake complete"),
            "{case}: {lines:#?}"
        );
    }
});

// The reference serves a client whose first choice is AES-256-GCM (OpenSSL's default
// order, the Python client's) with AES-128-GCM, in TLS 1.3 and 1.2 alike.
both_reactors!(aes_128_gcm_is_preferred_like_the_reference, |r| {
    use rustls::crypto::ring;
    let pki = Pki::new(&scratch_dir());
    let srv = start_with(r, &pki, &pki.tls_block("timeout: 1"));
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.der().clone()).unwrap();
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut provider = ring::default_provider();
        // AES-256 first, as OpenSSL clients offer them.
        provider
            .cipher_suites
            .sort_by_key(|s| !format!("{:?}", s.suite()).contains("AES_256"));
        let cfg = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(provider))
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        let mut c = TlsClient::connect(srv.port, std::sync::Arc::new(cfg)).unwrap();
        c.handshake_nats("{\"verbose\":false}").unwrap();
        let suite = format!("{:?}", c.s.conn.negotiated_cipher_suite().unwrap().suite());
        assert!(suite.contains("AES_128_GCM"), "{version:?}: {suite}");
    }
});
