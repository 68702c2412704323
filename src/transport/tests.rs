//! The transport stack driven in memory: a rustls client and a raw WebSocket client talk
//! to a [`Transport`] through byte buffers, as the driver would.

use super::*;
use rustls::pki_types::ServerName;
use std::time::Duration;

/// A CA, a server certificate for `localhost` and a client certificate, as PEM files.
pub(crate) struct Pki {
    pub dir: std::path::PathBuf,
    pub ca: rcgen::Certificate,
    pub ca_key: rcgen::KeyPair,
}

impl Pki {
    pub fn new() -> Pki {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "rnats-transport-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut ca = rcgen::CertificateParams::default();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name.push(rcgen::DnType::CommonName, "test ca");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
        let p = Pki {
            dir,
            ca: ca_cert,
            ca_key,
        };
        p.issue("server", &["localhost"], "localhost");
        p.issue("client", &[], "app");
        p
    }

    /// A certificate signed by the CA, written as `<name>-cert.pem`/`<name>-key.pem`.
    pub fn issue(&self, name: &str, dns: &[&str], cn: &str) {
        let mut params = rcgen::CertificateParams::new(dns.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Synadia");
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        std::fs::write(self.dir.join(format!("{name}-cert.pem")), cert.pem()).unwrap();
        std::fs::write(self.dir.join(format!("{name}-key.pem")), key.serialize_pem()).unwrap();
    }

    pub fn path(&self, f: &str) -> String {
        self.dir.join(f).to_str().unwrap().to_string()
    }

    pub fn server_options(&self, verify: bool) -> tls::TlsOptions {
        tls::TlsOptions {
            cert_file: self.path("server-cert.pem"),
            key_file: self.path("server-key.pem"),
            ca_file: if verify { self.path("ca.pem") } else { String::new() },
            verify,
            ..Default::default()
        }
    }

    pub fn client(&self, with_cert: bool) -> rustls::ClientConnection {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let b = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let cfg = if with_cert {
            use rustls_pki_types::pem::PemObject;
            let chain = rustls_pki_types::CertificateDer::pem_file_iter(self.path("client-cert.pem"))
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
            let key = rustls_pki_types::PrivateKeyDer::from_pem_file(self.path("client-key.pem")).unwrap();
            b.with_client_auth_cert(chain, key).unwrap()
        } else {
            b.with_no_client_auth()
        };
        rustls::ClientConnection::new(Arc::new(cfg), ServerName::try_from("localhost").unwrap()).unwrap()
    }
}

fn tls_mode(p: &Pki, verify: bool) -> TlsMode {
    TlsMode {
        config: tls::build_server_config(&p.server_options(verify)).unwrap(),
        timeout: Duration::from_secs(2),
        handshake_first: false,
        fallback: None,
        allow_non_tls: false,
        pinned: None,
        ocsp_peer: None,
        rate: None,
    }
}

/// Move bytes both ways until neither side has anything to say.
fn pump(c: &mut rustls::ClientConnection, t: &mut Transport, app: &mut Vec<u8>) -> Result<Events, TransportError> {
    let mut all = Events::default();
    for _ in 0..20 {
        let mut to_server = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut to_server).unwrap();
        }
        let ev = t.on_read(&to_server, Instant::now(), app)?;
        if ev.tls_done.is_some() {
            all.tls_done = ev.tls_done;
        }
        if ev.send_info.is_some() {
            all.send_info = ev.send_info;
        }
        let mut to_client = Vec::new();
        t.write_to(&mut to_client).unwrap();
        let mut rd = &to_client[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
        }
        c.process_new_packets().unwrap();
        if to_server.is_empty() && to_client.is_empty() {
            break;
        }
    }
    Ok(all)
}

fn client_plain(c: &mut rustls::ClientConnection) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = c.reader().read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[test]
fn tls_after_info_then_protocol_both_ways() {
    let p = Pki::new();
    let lt = ListenerTransport {
        tls: Some(tls_mode(&p, true)),
        ws: None,
    };
    let mut t = Transport::new(&lt, Instant::now());
    assert!(t.wants_raw() && !t.defers_info());
    t.push_raw(b"INFO {} \r\n");
    let mut raw = Vec::new();
    t.write_to(&mut raw).unwrap();
    assert_eq!(raw, b"INFO {} \r\n");
    let mut c = p.client(true);
    let mut app = Vec::new();
    let ev = pump(&mut c, &mut t, &mut app).unwrap();
    let peer = ev.tls_done.expect("handshake done");
    assert_eq!(peer.subject, "CN=app,O=Synadia");
    assert!(t.accepts_output());
    use std::io::Write;
    c.writer().write_all(b"CONNECT {}\r\nPING\r\n").unwrap();
    pump(&mut c, &mut t, &mut app).unwrap();
    assert_eq!(app, b"CONNECT {}\r\nPING\r\n");
    t.push_output(b"PONG\r\n");
    pump(&mut c, &mut t, &mut app).unwrap();
    assert_eq!(client_plain(&mut c), b"PONG\r\n");
}

#[test]
fn tls_failures_read_like_the_reference() {
    let p = Pki::new();
    let lt = ListenerTransport {
        tls: Some(tls_mode(&p, true)),
        ws: None,
    };
    // Plaintext to a TLS port.
    let mut t = Transport::new(&lt, Instant::now());
    t.push_raw(b"INFO {} \r\n");
    let err = t
        .on_read(b"CONNECT {}\r\n", Instant::now(), &mut Vec::new())
        .unwrap_err();
    assert_eq!(
        err,
        TransportError::Tls {
            text: "tls: first record does not look like a TLS handshake".into(),
            handshake: true
        }
    );
    // No client certificate where one is required.
    let mut t = Transport::new(&lt, Instant::now());
    let mut c = p.client(false);
    let err = pump(&mut c, &mut t, &mut Vec::new()).unwrap_err();
    assert_eq!(
        err,
        TransportError::Tls {
            text: "tls: client didn't provide a certificate".into(),
            handshake: true
        }
    );
    // A stalled handshake expires; EOF in the middle is "EOF".
    let now = Instant::now();
    let mut t = Transport::new(&lt, now);
    assert_eq!(t.expire(now), Expired::Nothing);
    assert_eq!(t.expire(now + Duration::from_secs(3)), Expired::HandshakeTimeout);
    let mut t = Transport::new(&lt, now);
    assert!(matches!(t.on_eof(), Some(TransportError::Tls { text, .. }) if text == "EOF"));
}

#[test]
fn pinned_certificates() {
    let p = Pki::new();
    let mut mode = tls_mode(&p, true);
    mode.pinned = Some(["00".repeat(32)].into_iter().collect());
    let lt = ListenerTransport {
        tls: Some(mode),
        ws: None,
    };
    let mut t = Transport::new(&lt, Instant::now());
    let mut c = p.client(true);
    let err = pump(&mut c, &mut t, &mut Vec::new()).unwrap_err();
    assert_eq!(
        err,
        TransportError::Tls {
            text: "certificate not pinned".into(),
            handshake: true
        }
    );
}

#[test]
fn handshake_first_and_fallback() {
    let p = Pki::new();
    let mut mode = tls_mode(&p, false);
    mode.handshake_first = true;
    let lt = ListenerTransport {
        tls: Some(mode.clone()),
        ws: None,
    };
    let mut t = Transport::new(&lt, Instant::now());
    assert!(t.defers_info() && !t.wants_raw());
    let mut c = p.client(false);
    let ev = pump(&mut c, &mut t, &mut Vec::new()).unwrap();
    assert_eq!(ev.send_info, Some(Some(true)));
    // Fallback: no data within the delay sends the INFO raw, then TLS follows.
    mode.fallback = Some(Duration::from_millis(50));
    let lt = ListenerTransport {
        tls: Some(mode),
        ws: None,
    };
    let now = Instant::now();
    let mut t = Transport::new(&lt, now);
    assert_eq!(t.expire(now + Duration::from_millis(60)), Expired::SendInfo);
    assert!(t.wants_raw());
    t.push_raw(b"INFO {} \r\n");
    let mut c = p.client(false);
    let mut raw = Vec::new();
    t.write_to(&mut raw).unwrap();
    assert_eq!(raw, b"INFO {} \r\n");
    let ev = pump(&mut c, &mut t, &mut Vec::new()).unwrap();
    assert!(ev.tls_done.is_some());
    assert_eq!(ev.send_info, None);
}

#[test]
fn allow_non_tls_sniffs_the_first_byte() {
    let p = Pki::new();
    let mut mode = tls_mode(&p, false);
    mode.allow_non_tls = true;
    let lt = ListenerTransport {
        tls: Some(mode),
        ws: None,
    };
    let mut t = Transport::new(&lt, Instant::now());
    let mut app = Vec::new();
    let ev = t.on_read(b"CONNECT {}\r\n", Instant::now(), &mut app).unwrap();
    assert!(ev.passthrough);
    assert_eq!(app, b"CONNECT {}\r\n");
    let mut t = Transport::new(&lt, Instant::now());
    t.push_raw(b"INFO {} \r\n");
    t.write_to(&mut Vec::new()).unwrap();
    let mut c = p.client(false);
    let ev = pump(&mut c, &mut t, &mut Vec::new()).unwrap();
    assert!(ev.tls_done.is_some());
}

const UPGRADE: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

#[test]
fn websocket_upgrade_frames_and_close() {
    let lt = ListenerTransport {
        tls: None,
        ws: Some(WsMode::default()),
    };
    let mut t = Transport::new(&lt, Instant::now());
    assert!(t.is_websocket());
    let mut app = Vec::new();
    let (a, b) = UPGRADE.split_at(30);
    assert!(t.on_read(a, Instant::now(), &mut app).unwrap().upgraded.is_none());
    let ev = t.on_read(b, Instant::now(), &mut app).unwrap();
    assert!(ev.upgraded.is_some());
    let mut out = Vec::new();
    t.write_to(&mut out).unwrap();
    assert!(out.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
    // A masked frame in; the core's bytes go out framed.
    let mask = [1u8, 2, 3, 4];
    let payload = b"PING\r\n";
    let mut frame = vec![0x82, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    t.on_read(&frame, Instant::now(), &mut app).unwrap();
    assert_eq!(app, b"PING\r\n");
    t.push_output(b"PONG\r\n");
    let mut out = Vec::new();
    t.write_to(&mut out).unwrap();
    assert_eq!(out, b"\x82\x06PONG\r\n");
    t.close(ClosedState::ServerShutdown);
    let mut out = Vec::new();
    t.write_to(&mut out).unwrap();
    assert_eq!(out, [&[0x88, 17, 0x03, 0xe9][..], b"Server Shutdown"].concat());
    // Unmasked frames are a protocol error with the reference's close frame.
    let mut t = Transport::new(&lt, Instant::now());
    t.on_read(UPGRADE, Instant::now(), &mut Vec::new()).unwrap();
    t.write_to(&mut Vec::new()).unwrap();
    let err = t.on_read(b"\x82\x01x", Instant::now(), &mut Vec::new()).unwrap_err();
    assert_eq!(err.to_string(), "mask bit missing");
    let mut out = Vec::new();
    t.write_to(&mut out).unwrap();
    assert_eq!(out, [&[0x88, 18, 0x03, 0xea][..], b"mask bit missing"].concat());
}

#[test]
fn websocket_refusals_are_answered() {
    let lt = ListenerTransport {
        tls: None,
        ws: Some(WsMode::default()),
    };
    let mut t = Transport::new(&lt, Instant::now());
    let bad = String::from_utf8_lossy(UPGRADE).replace("Version: 13", "Version: 8");
    let err = t.on_read(bad.as_bytes(), Instant::now(), &mut Vec::new()).unwrap_err();
    assert_eq!(err, TransportError::Upgrade("invalid version".into()));
    let mut out = Vec::new();
    t.write_to(&mut out).unwrap();
    assert!(out.starts_with(b"HTTP/1.1 400 Bad Request\r\n"));
    let mut t = Transport::new(&lt, Instant::now());
    assert_eq!(
        t.on_read(b"BLAH\r\n\r\n", Instant::now(), &mut Vec::new()).unwrap_err(),
        TransportError::Http
    );
}

#[test]
fn websocket_over_tls() {
    let p = Pki::new();
    let lt = ListenerTransport {
        tls: Some(tls_mode(&p, false)),
        ws: Some(WsMode::default()),
    };
    let mut t = Transport::new(&lt, Instant::now());
    let mut c = p.client(false);
    use std::io::Write;
    c.writer().write_all(UPGRADE).unwrap();
    let mut app = Vec::new();
    let mut upgraded = false;
    for _ in 0..10 {
        let mut to_server = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut to_server).unwrap();
        }
        let ev = t.on_read(&to_server, Instant::now(), &mut app).unwrap();
        upgraded |= ev.upgraded.is_some();
        let mut to_client = Vec::new();
        t.write_to(&mut to_client).unwrap();
        let mut rd = &to_client[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
        }
        c.process_new_packets().unwrap();
    }
    assert!(upgraded);
    assert!(client_plain(&mut c).starts_with(b"HTTP/1.1 101"));
}
