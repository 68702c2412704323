//! OCSP (FEATURES.md §25): stapling of the server certificate (`ocsp { mode }` and
//! must-staple certificates) and OCSP checks of client certificates (`ocsp_peer`), with
//! a real responder (`openssl ocsp` over an index of good and revoked certificates) and
//! a small responder in the test that answers whatever bytes a case needs (wrong signer,
//! expired, malformed). Startup refusals and log lines are compared with the reference
//! nats-server; client handshakes run on both reactors.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
#[path = "common/ocsp_build.rs"]
mod ocsp_build;

use common::pki::TlsClient;
use common::{free_port, reference_server, scratch_dir, Reactor, Server};
use rnats::transport::ocsp::{CertStatus, Response};
use rnats::transport::tls::x509::Certificate;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// A CA with an OCSP responder certificate, and certificates naming the responder at
/// `port` in their AIA, made with the openssl CLI; `index.txt` marks `revoked-*` ones
/// revoked and leaves `unknown-*` ones out.
struct OcspPki {
    dir: PathBuf,
    port: u16,
}

const EXT: &str = r#"
[xca]
basicConstraints=critical,CA:true
keyUsage=critical,keyCertSign,cRLSign
[server]
basicConstraints=CA:false
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1
authorityInfoAccess=OCSP;URI:http://127.0.0.1:PORT
[staple]
basicConstraints=CA:false
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1
authorityInfoAccess=OCSP;URI:http://127.0.0.1:PORT
tlsfeature=status_request
[client]
basicConstraints=CA:false
keyUsage=digitalSignature
extendedKeyUsage=clientAuth
authorityInfoAccess=OCSP;URI:http://127.0.0.1:PORT
[plainclient]
basicConstraints=CA:false
keyUsage=digitalSignature
extendedKeyUsage=clientAuth
[responder]
basicConstraints=CA:false
keyUsage=digitalSignature
extendedKeyUsage=OCSPSigning
"#;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl CLI");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl OcspPki {
    fn new(port: u16) -> OcspPki {
        let dir = scratch_dir();
        let cnf = std::fs::read_to_string("/etc/ssl/openssl.cnf").unwrap_or_default();
        std::fs::write(
            dir.join("ext.cnf"),
            format!("{cnf}\n{}", EXT.replace("PORT", &port.to_string())),
        )
        .unwrap();
        openssl(
            &dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "ca-key.pem",
                "-out",
                "ca.pem",
                "-subj",
                "/CN=OCSP Test CA",
                "-days",
                "30",
                "-extensions",
                "xca",
                "-config",
                "ext.cnf",
            ],
        );
        std::fs::write(dir.join("index.txt"), "").unwrap();
        std::fs::write(dir.join("index.txt.attr"), "unique_subject = no\n").unwrap();
        let p = OcspPki { dir, port };
        p.issue("responder", "responder", "/CN=OCSP responder");
        p
    }

    /// `<name>-cert.pem`, `<name>-key.pem` with extension section `ext`; recorded in the
    /// index unless `name` starts with `unknown`.
    fn issue(&self, name: &str, ext: &str, subj: &str) {
        let key = format!("{name}-key.pem");
        let csr = format!("{name}.csr");
        let cert = format!("{name}-cert.pem");
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                subj,
            ],
        );
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-out",
                &cert,
                "-days",
                "10",
                "-extfile",
                "ext.cnf",
                "-extensions",
                ext,
            ],
        );
        if name.starts_with("unknown") || name == "responder" {
            return;
        }
        let c = self.cert(name);
        let serial: String = c.serial.iter().map(|b| format!("{b:02X}")).collect();
        let expiry = "351231235959Z";
        let line = if name.starts_with("revoked") {
            format!("R\t{expiry}\t250101000000Z\t{serial}\tunknown\t{subj}\n")
        } else {
            format!("V\t{expiry}\t\t{serial}\tunknown\t{subj}\n")
        };
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.join("index.txt"))
            .unwrap();
        f.write_all(line.as_bytes()).unwrap();
    }

    fn path(&self, f: &str) -> String {
        self.dir.join(f).to_str().unwrap().to_string()
    }

    fn cert(&self, name: &str) -> Certificate {
        use rustls::pki_types::pem::PemObject;
        let file = if name == "ca" {
            "ca.pem".to_string()
        } else {
            format!("{name}-cert.pem")
        };
        let der = rustls::pki_types::CertificateDer::from_pem_file(self.path(&file)).unwrap();
        Certificate::parse(&der).unwrap()
    }

    fn tls(&self, server: &str, extra: &str) -> String {
        format!(
            "tls {{\n cert_file: {:?}\n key_file: {:?}\n ca_file: {:?}\n {extra}\n}}\n",
            self.path(&format!("{server}-cert.pem")),
            self.path(&format!("{server}-key.pem")),
            self.path("ca.pem")
        )
    }

    fn write_conf(&self, name: &str, body: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_string()
    }

    /// A rustls client trusting the CA, presenting `client`, remembering the staple.
    fn client(&self, client: Option<&str>) -> (Arc<rustls::ClientConfig>, Arc<Mutex<Vec<u8>>>) {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from_pem_file(self.path("ca.pem")).unwrap())
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .unwrap();
        let staple = Arc::new(Mutex::new(Vec::new()));
        let verifier = Arc::new(StapleCatcher {
            inner,
            staple: staple.clone(),
        });
        let b = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let cfg = match client {
            Some(name) => {
                let chain =
                    vec![
                        rustls::pki_types::CertificateDer::from_pem_file(self.path(&format!("{name}-cert.pem")))
                            .unwrap(),
                    ];
                let key =
                    rustls::pki_types::PrivateKeyDer::from_pem_file(self.path(&format!("{name}-key.pem"))).unwrap();
                b.with_client_auth_cert(chain, key).unwrap()
            }
            None => b.with_no_client_auth(),
        };
        (Arc::new(cfg), staple)
    }
}

#[derive(Debug)]
struct StapleCatcher {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    staple: Arc<Mutex<Vec<u8>>>,
}

impl rustls::client::danger::ServerCertVerifier for StapleCatcher {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        *self.staple.lock().unwrap() = ocsp_response.to_vec();
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, &[], now)
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `openssl ocsp` serving the PKI's index; killed on drop.
struct Responder(Child);

impl Responder {
    fn start(pki: &OcspPki) -> Responder {
        let port = pki.port.to_string();
        let child = Command::new("openssl")
            .args([
                "ocsp",
                "-index",
                "index.txt",
                "-port",
                &port,
                "-rsigner",
                "responder-cert.pem",
                "-rkey",
                "responder-key.pem",
                "-CA",
                "ca.pem",
                "-ndays",
                "1",
            ])
            .current_dir(&pki.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("openssl ocsp");
        // Ready once it says it accepts (a probe connection would upset it: it serves
        // one connection at a time and gives up on a request it cannot read).
        let mut child = child;
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains("waiting for OCSP client connections") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("openssl ocsp did not start");
        Responder(child)
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A responder in the test: answers every request with `body` (HTTP 200) until dropped.
struct FakeResponder {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeResponder {
    fn start(port: u16, body: Vec<u8>) -> FakeResponder {
        // The port may be a moment away from free (a responder just stopped on it).
        let deadline = Instant::now() + Duration::from_secs(5);
        let l = loop {
            match TcpListener::bind(("127.0.0.1", port)) {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("bind {port}: {e}"),
            }
        };
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s2.load(std::sync::atomic::Ordering::SeqCst) {
                match l.accept() {
                    Ok((mut s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                        let mut buf = [0u8; 8192];
                        let _ = s.read(&mut buf);
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/ocsp-response\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = s.write_all(head.as_bytes());
                        let _ = s.write_all(&body);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FakeResponder {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeResponder {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // The port is free again once the listener is gone.
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Run a server binary with `conf` until it exits or `wait` passes; its stderr and
/// whether it exited (with its code).
fn run_briefly(bin: &str, conf: &str, wait: Duration) -> (String, Option<i32>) {
    let mut child = Command::new(bin)
        .args(["-c", conf])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + wait;
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (err, code)
}

fn start(r: Reactor, conf: &str) -> Server {
    Server::start(r, &["-c", conf])
}

/// Log lines without their `[pid] date time ` prefix.
fn messages(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| match l.starts_with('[') {
            true => l.splitn(4, ' ').nth(3).unwrap_or(l).to_string(),
            false => l.clone(),
        })
        .collect()
}

fn has(lines: &[String], needle: &str) -> bool {
    lines.iter().any(|l| l.contains(needle))
}

// --- stapling ---

both_reactors!(must_staple_certificate_is_stapled_and_seen_by_clients, |r| {
    let port = free_port();
    let pki = OcspPki::new(port);
    pki.issue("staple", "staple", "/CN=localhost");
    let _resp = Responder::start(&pki);
    let conf = pki.write_conf("s.conf", &format!("port: -1\n{}", pki.tls("staple", "")));
    let srv = start(r, &conf);
    srv.wait_for_log("Found OCSP status for Client certificate at", Duration::from_secs(10))
        .unwrap();
    let lines = srv.log_lines();
    assert!(
        has(&lines, "[INF] OCSP Stapling enabled for Client connections"),
        "{lines:#?}"
    );
    let file = pki.path("staple-cert.pem");
    let found = lines.iter().find(|l| l.contains("Found OCSP status")).unwrap();
    assert!(
        found.contains(&format!(
            "Found OCSP status for Client certificate at '{file}': good, next update "
        )),
        "{found}"
    );
    assert!(found.contains(", checking again in 11h59m"), "{found}");
    // A client asking for the status gets the good response, signed for this certificate.
    let (cfg, staple) = pki.client(None);
    let mut c = TlsClient::connect(srv.port, cfg).unwrap();
    c.handshake_nats("{}").unwrap();
    let raw = staple.lock().unwrap().clone();
    assert!(!raw.is_empty(), "no staple");
    let ca = pki.cert("ca");
    let resp = Response::parse(&raw, &ca).unwrap();
    assert_eq!(resp.status, CertStatus::Good);
    assert!(resp.is_for(&pki.cert("staple").serial));
});

#[test]
fn modes_decide_what_is_stapled_as_the_reference() {
    let port = free_port();
    let pki = OcspPki::new(port);
    pki.issue("staple", "staple", "/CN=localhost");
    pki.issue("server", "server", "/CN=localhost");
    let _resp = Responder::start(&pki);
    // (config, stapled?)
    let cases = [
        (format!("port: -1\n{}", pki.tls("server", "")), false),
        (
            format!("port: -1\nocsp {{ mode: always }}\n{}", pki.tls("server", "")),
            true,
        ),
        (
            format!("port: -1\nocsp {{ mode: auto }}\n{}", pki.tls("server", "")),
            false,
        ),
        (
            format!("port: -1\nocsp {{ mode: must }}\n{}", pki.tls("staple", "")),
            true,
        ),
        (
            format!("port: -1\nocsp {{ mode: never }}\n{}", pki.tls("staple", "")),
            false,
        ),
        (format!("port: -1\nocsp: false\n{}", pki.tls("staple", "")), false),
    ];
    for (i, (body, stapled)) in cases.iter().enumerate() {
        let conf = pki.write_conf(&format!("m{i}.conf"), body);
        for bin in [common::bin().to_string(), reference_server()] {
            let srv = Server::start_cmd(&bin, &["-c", &conf, "-a", "127.0.0.1"]);
            let (cfg, staple) = pki.client(None);
            let mut c = TlsClient::connect(srv.port, cfg).unwrap();
            c.handshake_nats("{}").unwrap();
            assert_eq!(!staple.lock().unwrap().is_empty(), *stapled, "{bin}: {body}");
            assert_eq!(
                has(&srv.log_lines(), "OCSP Stapling enabled for Client connections"),
                *stapled,
                "{bin}: {body}"
            );
        }
    }
}

#[test]
fn startup_refusals_match_the_reference() {
    let port = free_port();
    let pki = OcspPki::new(port);
    pki.issue("revoked-staple", "staple", "/CN=localhost");
    pki.issue("unknown-server", "server", "/CN=localhost");
    pki.issue("server", "server", "/CN=localhost");
    pki.issue("plainclient", "plainclient", "/CN=not a server");
    let down = free_port();
    let _resp = Responder::start(&pki);
    let no_ca = format!(
        "tls {{ cert_file: {:?}, key_file: {:?} }}",
        pki.path("server-cert.pem"),
        pki.path("server-key.pem")
    );
    let cases = [
        // Revoked, in a mode that shuts down on revocation.
        format!("ocsp {{ mode: must }}\n{}", pki.tls("revoked-staple", "")),
        // Unknown to the responder, mode always.
        format!("ocsp {{ mode: always }}\n{}", pki.tls("unknown-server", "")),
        // The responder is down (the override URL).
        format!(
            "ocsp {{ mode: always, url: \"http://127.0.0.1:{down}\" }}\n{}",
            pki.tls("server", "")
        ),
        // No CA to find the issuer with.
        format!("ocsp {{ mode: always }}\n{no_ca}"),
        // A leaf that is not for servers has no issuer in Go's eyes.
        format!("ocsp {{ mode: always }}\n{}", pki.tls("plainclient", "")),
        // Peer checks need mutual TLS.
        format!("port: -1\n{}", pki.tls("server", "ocsp_peer: true")),
    ];
    for (i, body) in cases.iter().enumerate() {
        let conf = pki.write_conf(&format!("r{i}.conf"), &format!("port: -1\n{body}"));
        let (ours, our_code) = run_briefly(common::bin(), &conf, Duration::from_secs(10));
        let (theirs, their_code) = run_briefly(&reference_server(), &conf, Duration::from_secs(10));
        assert_eq!(their_code, Some(1), "reference: {body}\n{theirs}");
        assert_eq!(our_code, Some(1), "rnats: {body}\n{ours}");
        assert_eq!(ours, theirs, "{body}");
        assert!(ours.starts_with("nats-server: "), "{ours}");
    }
}

#[test]
fn revoked_in_auto_mode_starts_and_logs_as_the_reference() {
    let port = free_port();
    let pki = OcspPki::new(port);
    pki.issue("revoked-staple", "staple", "/CN=localhost");
    let _resp = Responder::start(&pki);
    let conf = pki.write_conf("a.conf", &format!("port: -1\n{}", pki.tls("revoked-staple", "")));
    let want = format!(
        "[ERR] Received OCSP status for Client certificate '{}': revoked",
        pki.path("revoked-staple-cert.pem")
    );
    for bin in [common::bin().to_string(), reference_server()] {
        let srv = Server::start_cmd(&bin, &["-c", &conf, "-a", "127.0.0.1"]);
        srv.wait_for_log(&want, Duration::from_secs(10)).unwrap();
        // The revoked response is what clients get stapled.
        let (cfg, staple) = pki.client(None);
        let mut c = TlsClient::connect(srv.port, cfg).unwrap();
        c.handshake_nats("{}").unwrap();
        let resp = Response::parse(&staple.lock().unwrap(), &pki.cert("ca")).unwrap();
        assert_eq!(resp.status, CertStatus::Revoked, "{bin}");
    }
}

#[test]
fn staple_is_stored_and_reused_from_store_dir() {
    let port = free_port();
    let pki = OcspPki::new(port);
    pki.issue("staple", "staple", "/CN=localhost");
    let store = pki.dir.join("store");
    let conf = pki.write_conf(
        "st.conf",
        &format!(
            "port: -1\nstore_dir: {:?}\n{}",
            store.to_str().unwrap(),
            pki.tls("staple", "")
        ),
    );
    {
        let _resp = Responder::start(&pki);
        let (out, code) = run_briefly(common::bin(), &conf, Duration::from_secs(2));
        assert_eq!(code, None, "{out}");
    }
    let leaf = pki.cert("staple");
    let key: String = ring::digest::digest(&ring::digest::SHA256, &leaf.raw)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let saved = std::fs::read(store.join("ocsp").join(key)).unwrap();
    assert_eq!(
        Response::parse(&saved, &pki.cert("ca")).unwrap().status,
        CertStatus::Good
    );
    // The responder is gone: the stored response still lets the server start.
    let srv = start(Reactor::Mio, &conf);
    let (cfg, staple) = pki.client(None);
    let mut c = TlsClient::connect(srv.port, cfg).unwrap();
    c.handshake_nats("{}").unwrap();
    assert_eq!(*staple.lock().unwrap(), saved);
}

#[test]
fn garbage_from_the_responder_refuses_the_start() {
    let port = free_port();
    let pki = OcspPki::new(port);
    pki.issue("server", "server", "/CN=localhost");
    let ca = pki.cert("ca");
    let leaf = pki.cert("server");
    let other = rcgen::KeyPair::generate().unwrap();
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let single = |next: Option<SystemTime>, this: SystemTime| ocsp_build::Single {
        serial: leaf.serial.clone(),
        status: 0,
        this_update: this,
        next_update: next,
    };
    fn signer<'a>(ca: &'a Certificate, key: &'a [u8]) -> ocsp_build::Signer<'a> {
        ocsp_build::Signer {
            issuer_subject: &ca.raw_subject,
            issuer_key: &ca.public_key,
            key_pkcs8: key,
            cert: None,
        }
    }
    let other_der = other.serialize_der();
    let ca_key = std::fs::read_to_string(pki.dir.join("ca-key.pem")).unwrap();
    let ca_pkcs8 = rcgen::KeyPair::from_pem(&ca_key).unwrap().serialize_der();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"definitely not DER".to_vec(), "failed to get remote status: "),
        (
            ocsp_build::error_response(6),
            "failed to get remote status: ocsp: error from server: unauthorized",
        ),
        (
            ocsp_build::build(&signer(&ca, &other_der), &[single(Some(now + hour), now - hour)]),
            "failed to get remote status: bad OCSP signature: ",
        ),
        (
            ocsp_build::build(&signer(&ca, &ca_pkcs8), &[single(Some(now - hour), now - 2 * hour)]),
            "invalid ocsp NextUpdate, is past time: ",
        ),
        (
            ocsp_build::build(&signer(&ca, &ca_pkcs8), &[single(None, now + hour)]),
            "invalid ocsp ThisUpdate, is future time: ",
        ),
    ];
    let prefix = format!(
        "nats-server: bad OCSP status update for certificate at '{}': ",
        pki.path("server-cert.pem")
    );
    for (i, (body, want)) in cases.into_iter().enumerate() {
        let _fake = FakeResponder::start(port, body);
        let conf = pki.write_conf(
            &format!("g{i}.conf"),
            &format!("port: -1\nocsp {{ mode: always }}\n{}", pki.tls("server", "")),
        );
        let (ours, code) = run_briefly(common::bin(), &conf, Duration::from_secs(10));
        let (theirs, their_code) = run_briefly(&reference_server(), &conf, Duration::from_secs(10));
        assert_eq!((code, their_code), (Some(1), Some(1)), "{ours}\n{theirs}");
        assert!(ours.starts_with(&format!("{prefix}{want}")), "{ours}");
        // The reference's own wording of the same failure has the same beginning.
        let head = want.split(": ").next().unwrap();
        assert!(theirs.starts_with(&format!("{prefix}{head}")), "{theirs}");
    }
}

// --- peer checks ---

fn peer_pki() -> (OcspPki, u16) {
    let port = free_port();
    let pki = OcspPki::new(port);
    pki.issue("server", "server", "/CN=localhost");
    pki.issue("good", "client", "/O=Test/CN=good client");
    pki.issue("revoked", "client", "/O=Test/CN=revoked client");
    pki.issue("unknown", "client", "/O=Test/CN=unknown client");
    pki.issue("plainclient", "plainclient", "/O=Test/CN=no responder");
    (pki, port)
}

fn peer_conf(pki: &OcspPki, name: &str, peer: &str) -> String {
    let cache = pki.dir.join(format!("rc-{name}"));
    pki.write_conf(
        name,
        &format!(
            "port: -1\nhttp_port: -1\nocsp_cache {{ local_store: {:?} }}\n{}",
            cache.to_str().unwrap(),
            pki.tls("server", &format!("verify: true\n ocsp_peer: {peer}"))
        ),
    )
}

/// Connect with `client`'s certificate: PONG, or why not.
fn try_client(pki: &OcspPki, port: u16, client: &str) -> Result<(), String> {
    let (cfg, _) = pki.client(Some(client));
    let mut c = TlsClient::connect(port, cfg)?;
    c.handshake_nats("{}")
}

both_reactors!(peer_check_good_revoked_unknown, |r| {
    let (pki, _) = peer_pki();
    let _resp = Responder::start(&pki);
    let conf = peer_conf(&pki, "p.conf", "true");
    let srv = Server::start(r, &["-c", &conf, "-D"]);
    assert!(has(&srv.log_lines(), "[INF] OCSP peer cache online, type [local]"));
    try_client(&pki, srv.port, "good").unwrap();
    try_client(&pki, srv.port, "plainclient").unwrap();
    for bad in ["revoked", "unknown"] {
        assert!(try_client(&pki, srv.port, bad).is_err(), "{bad} was let in");
    }
    srv.wait_for_log("with CA status [unknown]", Duration::from_secs(5))
        .unwrap();
    let lines = srv.log_lines();
    for want in [
        "[DBG] OCSP verify pass for [CN=good client,O=Test]",
        "[DBG] Chain [0] has no OCSP eligible links, thus peer is valid",
        "[WRN] OCSP verify fail for [CN=revoked client,O=Test] with CA status [revoked]",
        "[WRN] OCSP verify fail for [CN=unknown client,O=Test] with CA status [unknown]",
        " - TLS handshake error: client not OCSP valid",
        " - Client connection closed: TLS Handshake Failure",
    ] {
        assert!(has(&lines, want), "{want:?} not in {lines:#?}");
    }
    // The second time, the cache answers.
    try_client(&pki, srv.port, "good").unwrap();
    srv.wait_for_log("Cached OCSP response is current, status [good]", Duration::from_secs(5))
        .unwrap();
    let (_, body) = srv.http_get("/varz");
    let varz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(varz["tls_ocsp_peer_verify"], true);
    assert_eq!(
        varz["ocsp_peer_cache"],
        serde_json::json!({
            "cache_type": "local",
            "cache_hits": 1,
            "cache_misses": 3,
            "cached_responses": 3,
            "cached_revoked_responses": 1,
            "cached_good_responses": 1,
            "cached_unknown_responses": 1
        })
    );
});

#[test]
fn peer_check_log_lines_match_the_reference() {
    let (pki, _) = peer_pki();
    let _resp = Responder::start(&pki);
    let mut seen = Vec::new();
    let mut seen_varz: Vec<serde_json::Value> = Vec::new();
    for (i, bin) in [common::bin().to_string(), reference_server()].iter().enumerate() {
        let conf = peer_conf(&pki, &format!("cmp{i}.conf"), "true");
        let srv = Server::start_cmd(bin, &["-c", &conf, "-a", "127.0.0.1", "-D"]);
        try_client(&pki, srv.port, "good").unwrap();
        assert!(try_client(&pki, srv.port, "revoked").is_err());
        try_client(&pki, srv.port, "good").unwrap();
        srv.wait_for_log("Cached OCSP response is current", Duration::from_secs(5))
            .unwrap();
        let (_, body) = srv.http_get("/varz");
        let varz: serde_json::Value = serde_json::from_str(&body).unwrap();
        seen_varz.push(varz["ocsp_peer_cache"].clone());
        let ocsp: Vec<String> = messages(&srv.log_lines())
            .into_iter()
            .filter(|l| {
                l.contains("OCSP") || l.contains("Chain [") || l.contains("not OCSP valid") || l.contains("peer cache")
            })
            .filter(|l| !l.contains("compression ratio"))
            .map(|l| match l.find(" - cid:") {
                // Connection labels differ in their port and id only.
                Some(_) => l.split(" - ").skip(2).collect::<Vec<_>>().join(" - "),
                None => l.replace(&format!("rc-cmp{i}"), "rc-cmpN"),
            })
            .collect();
        seen.push(ocsp);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen_varz[0], seen_varz[1]);
}

both_reactors!(peer_check_when_the_responder_is_down, |r| {
    let (pki, _) = peer_pki();
    for (peer, allowed) in [
        ("true", false),
        ("{ verify: true, allow_when_ca_unreachable: true }", true),
        ("{ verify: true, warn_only: true }", true),
    ] {
        let conf = peer_conf(&pki, "down.conf", peer);
        let srv = Server::start(r, &["-c", &conf]);
        let got = try_client(&pki, srv.port, "good");
        assert_eq!(got.is_ok(), allowed, "{peer}: {got:?}");
        srv.wait_for_log(
            "Attempt to obtain OCSP response from CA responder for [CN=good client,O=Test] failed: exhausted OCSP responders: Get ",
            Duration::from_secs(5),
        )
        .unwrap();
        if allowed && peer.contains("allow_when") {
            srv.wait_for_log(
                "AllowWhenCAUnreachable set; no cached revocation so allowing",
                Duration::from_secs(2),
            )
            .unwrap();
        }
    }
});

both_reactors!(peer_check_policies_for_unknown_and_garbage, |r| {
    let (pki, port) = peer_pki();
    {
        let _resp = Responder::start(&pki);
        let conf = peer_conf(&pki, "u.conf", "{ verify: true, unknown_is_good: true }");
        let srv = Server::start(r, &["-c", &conf]);
        try_client(&pki, srv.port, "unknown").unwrap();
        assert!(try_client(&pki, srv.port, "revoked").is_err());
    }
    // Garbage, a stranger's signature, an expired response: rejected, or let in with
    // warn_only.
    let ca = pki.cert("ca");
    let leaf = pki.cert("good");
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let other = rcgen::KeyPair::generate().unwrap().serialize_der();
    let ca_key = std::fs::read_to_string(pki.dir.join("ca-key.pem")).unwrap();
    let ca_pkcs8 = rcgen::KeyPair::from_pem(&ca_key).unwrap().serialize_der();
    let single = |this: SystemTime, next: Option<SystemTime>| ocsp_build::Single {
        serial: leaf.serial.clone(),
        status: 0,
        this_update: this,
        next_update: next,
    };
    let build = |key: &[u8], s: ocsp_build::Single| {
        ocsp_build::build(
            &ocsp_build::Signer {
                issuer_subject: &ca.raw_subject,
                issuer_key: &ca.public_key,
                key_pkcs8: key,
                cert: None,
            },
            &[s],
        )
    };
    let cases = [
        (
            b"garbage".to_vec(),
            "Could not parse OCSP CA response for [CN=good client,O=Test]: ",
        ),
        (
            build(&other, single(now - hour, Some(now + hour))),
            "Could not parse OCSP CA response for [CN=good client,O=Test]: bad OCSP signature: ",
        ),
        (
            build(&ca_pkcs8, single(now - 3 * hour, Some(now - 2 * hour))),
            "New OCSP CA response obtained for [CN=good client,O=Test] but not current",
        ),
    ];
    for (i, (body, want)) in cases.into_iter().enumerate() {
        let _fake = FakeResponder::start(port, body);
        for (peer, allowed) in [("true", false), ("{ verify: true, warn_only: true }", true)] {
            let conf = peer_conf(&pki, &format!("g{i}-{allowed}.conf"), peer);
            let srv = Server::start(r, &["-c", &conf]);
            assert_eq!(try_client(&pki, srv.port, "good").is_ok(), allowed, "{want} {peer}");
            srv.wait_for_log(want, Duration::from_secs(5)).unwrap();
        }
    }
    // The server's own certificate stays fine with a good one (sanity of the builder).
    let _fake = FakeResponder::start(port, build(&ca_pkcs8, single(now - hour, Some(now + hour))));
    let conf = peer_conf(&pki, "ok.conf", "true");
    let srv = Server::start(r, &["-c", &conf]);
    try_client(&pki, srv.port, "good").unwrap();
});
