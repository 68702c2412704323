//! Test certificates made with rcgen (a CA, a server certificate for `localhost` and
//! 127.0.0.1, client certificates with chosen names), written as PEM files, and small
//! synchronous TLS clients over rustls for the protocol edges.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A CA and the certificates it issued, in a directory.
pub struct Pki {
    pub dir: PathBuf,
    pub ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

/// What a client certificate says about its holder.
#[derive(Default, Clone)]
pub struct Subject<'a> {
    pub dn: Vec<(rcgen::DnType, &'a str)>,
    pub dns: Vec<&'a str>,
    pub emails: Vec<&'a str>,
    pub uris: Vec<&'a str>,
    pub expired: bool,
}

impl Pki {
    /// A new CA in `dir`, with `server-cert.pem`/`server-key.pem` for localhost.
    pub fn new(dir: &Path) -> Pki {
        Self::named(dir, "ca")
    }

    /// A CA whose files are prefixed `name` (`<name>.pem`), server certificate included
    /// (as `<name>-server-*.pem` when `name` is not `ca`).
    pub fn named(dir: &Path, name: &str) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let mut ca = rcgen::CertificateParams::default();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, format!("{name} test CA"));
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), ca_cert.pem()).unwrap();
        let p = Pki {
            dir: dir.to_path_buf(),
            ca: ca_cert,
            ca_key,
        };
        let server = if name == "ca" {
            "server".to_string()
        } else {
            format!("{name}-server")
        };
        p.issue(
            &server,
            &Subject {
                dn: vec![(rcgen::DnType::CommonName, "localhost")],
                dns: vec!["localhost"],
                ..Default::default()
            },
        );
        p
    }

    /// Issue `<name>-cert.pem` and `<name>-key.pem`.
    pub fn issue(&self, name: &str, s: &Subject<'_>) {
        let mut params =
            rcgen::CertificateParams::new(s.dns.iter().map(|d| d.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in &s.dn {
            params.distinguished_name.push(t.clone(), *v);
        }
        if name.ends_with("server") {
            params
                .subject_alt_names
                .push(rcgen::SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
        }
        for e in &s.emails {
            params
                .subject_alt_names
                .push(rcgen::SanType::Rfc822Name((*e).try_into().unwrap()));
        }
        for u in &s.uris {
            params
                .subject_alt_names
                .push(rcgen::SanType::URI((*u).try_into().unwrap()));
        }
        if s.expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        std::fs::write(self.dir.join(format!("{name}-cert.pem")), cert.pem()).unwrap();
        std::fs::write(self.dir.join(format!("{name}-key.pem")), key.serialize_pem()).unwrap();
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).to_str().unwrap().to_string()
    }

    /// A `tls { }` block with the server certificate and `extra` lines.
    pub fn tls_block(&self, extra: &str) -> String {
        format!(
            "tls {{\n  cert_file: {:?}\n  key_file: {:?}\n  ca_file: {:?}\n  {extra}\n}}\n",
            self.path("server-cert.pem"),
            self.path("server-key.pem"),
            self.path("ca.pem"),
        )
    }

    /// A rustls client trusting this CA, presenting certificate `client` if given.
    pub fn client_config(&self, client: Option<&str>) -> Arc<rustls::ClientConfig> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let b = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let cfg = match client {
            Some(name) => {
                let chain = rustls::pki_types::CertificateDer::pem_file_iter(self.path(&format!("{name}-cert.pem")))
                    .unwrap()
                    .map(|c| c.unwrap())
                    .collect();
                let key =
                    rustls::pki_types::PrivateKeyDer::from_pem_file(self.path(&format!("{name}-key.pem"))).unwrap();
                b.with_client_auth_cert(chain, key).unwrap()
            }
            None => b.with_no_client_auth(),
        };
        Arc::new(cfg)
    }

    /// async-nats options trusting this CA (and presenting `client`).
    pub fn nats_options(&self, client: Option<&str>) -> async_nats::ConnectOptions {
        let mut o = async_nats::ConnectOptions::new()
            .require_tls(true)
            .add_root_certificates(self.dir.join("ca.pem"));
        if let Some(name) = client {
            o = o.add_client_certificate(
                self.dir.join(format!("{name}-cert.pem")),
                self.dir.join(format!("{name}-key.pem")),
            );
        }
        o
    }
}

/// A synchronous TLS connection to the server.
pub struct TlsClient {
    pub s: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    pub buf: Vec<u8>,
    /// The INFO line read before the handshake (empty for handshake first).
    pub info: String,
}

fn read_plain_line(s: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while !line.ends_with(b"\r\n") {
        match s.read(&mut b) {
            Ok(1) => line.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&line).trim_end().to_string()
}

impl TlsClient {
    /// Read the plain INFO, then do the handshake.
    pub fn connect(port: u16, cfg: Arc<rustls::ClientConfig>) -> Result<TlsClient, String> {
        let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let info = read_plain_line(&mut tcp);
        assert!(info.starts_with("INFO "), "{info:?}");
        Self::handshake(tcp, cfg, info)
    }

    /// Handshake at once (`handshake_first`).
    pub fn connect_first(port: u16, cfg: Arc<rustls::ClientConfig>) -> Result<TlsClient, String> {
        let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        Self::handshake(tcp, cfg, String::new())
    }

    fn handshake(tcp: TcpStream, cfg: Arc<rustls::ClientConfig>, info: String) -> Result<TlsClient, String> {
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let conn = rustls::ClientConnection::new(cfg, "localhost".try_into().unwrap()).unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock).map_err(|e| e.to_string())?;
        }
        Ok(TlsClient {
            s,
            buf: Vec::new(),
            info,
        })
    }

    pub fn send(&mut self, data: &str) {
        self.s.write_all(data.as_bytes()).unwrap();
        self.s.flush().unwrap();
    }

    /// One CRLF line, or an error (closed, timeout, TLS failure).
    pub fn line(&mut self) -> Result<String, String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..p + 2).collect();
                return Ok(String::from_utf8_lossy(&line[..p]).into_owned());
            }
            if Instant::now() > deadline {
                return Err("timeout".into());
            }
            let mut chunk = [0u8; 16384];
            match self.s.read(&mut chunk) {
                Ok(0) => return Err("closed".into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// CONNECT and PING; the PONG back (INFO first if it comes after the handshake).
    pub fn handshake_nats(&mut self, connect: &str) -> Result<(), String> {
        if self.info.is_empty() {
            self.info = self.line()?;
        }
        self.send(&format!("CONNECT {connect}\r\nPING\r\n"));
        loop {
            let l = self.line()?;
            if l == "PONG" {
                return Ok(());
            }
            if l.starts_with("-ERR") {
                return Err(l);
            }
        }
    }
}

/// Parse an INFO line's JSON.
pub fn info_json(line: &str) -> serde_json::Value {
    let body = line.strip_prefix("INFO ").unwrap_or(line);
    serde_json::from_str(body.trim()).unwrap()
}
