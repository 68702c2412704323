//! How the load generator reaches the server: plain TCP, TLS (rustls, full handshakes, no
//! certificate checks — loopback only), WebSocket (RFC 6455 frames, masked as clients
//! must) or WebSocket over TLS. Chosen once per process (`--transport`).
//!
//! When the perf lab starts the servers itself, [`server_args`] writes a certificate and
//! a configuration that turns the chosen transport on, the same file for both servers.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The client transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    #[default]
    Tcp,
    Tls,
    Ws,
    Wss,
}

static CURRENT: OnceLock<Transport> = OnceLock::new();

/// Choose the transport for the whole process (first call wins).
pub fn set(t: Transport) {
    let _ = CURRENT.set(t);
}

/// The transport in use.
pub fn current() -> Transport {
    CURRENT.get().copied().unwrap_or_default()
}

impl Transport {
    pub fn websocket(self) -> bool {
        matches!(self, Transport::Ws | Transport::Wss)
    }
}

/// Accepts any server certificate (the perf lab talks to its own servers on loopback).
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn client_config() -> Arc<rustls::ClientConfig> {
    static CFG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CFG.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map(|b| {
                b.dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
                    .with_no_client_auth()
            })
            .unwrap_or_else(|_| {
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth()
            });
        // Every connection does a full handshake (what `handshakes` measures).
        cfg.resumption = rustls::client::Resumption::disabled();
        Arc::new(cfg)
    })
    .clone()
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A connection's byte stream.
pub enum Stream {
    Tcp(TcpStream),
    Tls(Box<Tls>),
    Ws(Box<Ws<TcpStream>>),
    Wss(Box<Ws<Tls>>),
}

impl Stream {
    /// The socket underneath (timeouts, non-blocking mode).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Tcp(s) => s,
            Stream::Tls(s) => &s.sock,
            Stream::Ws(w) => &w.inner,
            Stream::Wss(w) => &w.inner.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
            Stream::Ws(w) => w.read(buf),
            Stream::Wss(w) => w.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
            Stream::Ws(w) => w.write(buf),
            Stream::Wss(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
            Stream::Ws(w) => w.flush(),
            Stream::Wss(w) => w.flush(),
        }
    }
}

fn tls_over(tcp: TcpStream) -> io::Result<Tls> {
    let name = rustls::pki_types::ServerName::try_from("localhost").map_err(|e| io::Error::other(e.to_string()))?;
    let conn = rustls::ClientConnection::new(client_config(), name).map_err(io::Error::other)?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// Connect to `addr` with the current transport. For TLS the server's plain INFO comes
/// first (`handshake_first` is not used), so it is read and kept to hand out first.
pub fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<(Stream, Vec<u8>)> {
    let tcp = TcpStream::connect_timeout(&addr, timeout)?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(timeout))?;
    let t = current();
    let out = match t {
        Transport::Tcp => (Stream::Tcp(tcp), Vec::new()),
        Transport::Tls => {
            let mut tcp = tcp;
            let info = read_line(&mut tcp)?;
            (Stream::Tls(Box::new(tls_over(tcp)?)), info)
        }
        Transport::Ws => {
            let (ws, rest) = Ws::upgrade(tcp)?;
            (Stream::Ws(Box::new(ws)), rest)
        }
        Transport::Wss => {
            let (ws, rest) = Ws::upgrade(tls_over(tcp)?)?;
            (Stream::Wss(Box::new(ws)), rest)
        }
    };
    Ok(out)
}

fn read_line(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match s.read(&mut b)? {
            0 => return Err(ErrorKind::UnexpectedEof.into()),
            _ => line.push(b[0]),
        }
        if line.len() > 64 * 1024 {
            return Err(io::Error::new(ErrorKind::InvalidData, "INFO line too long"));
        }
    }
    Ok(line)
}

/// A WebSocket client connection: writes are masked binary frames, reads return the data
/// frames' payloads.
pub struct Ws<S: Read + Write> {
    inner: S,
    /// Raw bytes read and not yet decoded.
    raw: Vec<u8>,
    /// Decoded payload not yet returned.
    data: Vec<u8>,
    data_pos: usize,
    frame: Vec<u8>,
}

impl<S: Read + Write> Ws<S> {
    fn upgrade(mut inner: S) -> io::Result<(Ws<S>, Vec<u8>)> {
        inner.write_all(
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )?;
        inner.flush()?;
        let mut raw = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(p) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let n = inner.read(&mut chunk)?;
            if n == 0 {
                return Err(ErrorKind::UnexpectedEof.into());
            }
            raw.extend_from_slice(&chunk[..n]);
            if raw.len() > 64 * 1024 {
                return Err(io::Error::new(ErrorKind::InvalidData, "upgrade answer too long"));
            }
        };
        if !raw.starts_with(b"HTTP/1.1 101") {
            return Err(io::Error::other(format!(
                "websocket upgrade refused: {}",
                String::from_utf8_lossy(&raw[..head_end.min(raw.len())])
            )));
        }
        raw.drain(..head_end);
        let mut ws = Ws {
            inner,
            raw,
            data: Vec::new(),
            data_pos: 0,
            frame: Vec::new(),
        };
        ws.decode();
        Ok((ws, Vec::new()))
    }

    /// Decode whole frames from `raw` into `data`.
    fn decode(&mut self) {
        let mut pos = 0;
        loop {
            let b = &self.raw[pos..];
            if b.len() < 2 {
                break;
            }
            let (len, hdr) = match b[1] & 0x7f {
                126 if b.len() >= 4 => (usize::from(u16::from_be_bytes([b[2], b[3]])), 4),
                127 if b.len() >= 10 => {
                    let mut l = [0u8; 8];
                    l.copy_from_slice(&b[2..10]);
                    (u64::from_be_bytes(l) as usize, 10)
                }
                126 | 127 => break,
                n => (usize::from(n), 2),
            };
            if b.len() < hdr + len {
                break;
            }
            if matches!(b[0] & 0x0f, 0..=2) {
                self.data.extend_from_slice(&b[hdr..hdr + len]);
            }
            pos += hdr + len;
        }
        self.raw.drain(..pos);
    }
}

impl<S: Read + Write> Read for Ws<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.data_pos < self.data.len() {
                let n = (self.data.len() - self.data_pos).min(buf.len());
                buf[..n].copy_from_slice(&self.data[self.data_pos..self.data_pos + n]);
                self.data_pos += n;
                if self.data_pos == self.data.len() {
                    self.data.clear();
                    self.data_pos = 0;
                }
                return Ok(n);
            }
            let mut chunk = vec![0u8; buf.len().max(64 * 1024)];
            let n = self.inner.read(&mut chunk)?;
            if n == 0 {
                return Ok(0);
            }
            self.raw.extend_from_slice(&chunk[..n]);
            self.decode();
        }
    }
}

impl<S: Read + Write> Write for Ws<S> {
    /// One masked binary frame for all of `buf`.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mask = [0x5a, 0xa5, 0x3c, 0xc3];
        self.frame.clear();
        self.frame.push(0x82);
        match buf.len() {
            n if n <= 125 => self.frame.push(0x80 | n as u8),
            n if n < 65536 => {
                self.frame.push(0x80 | 126);
                self.frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                self.frame.push(0x80 | 127);
                self.frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        self.frame.extend_from_slice(&mask);
        self.frame.extend(buf.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        self.inner.write_all(&self.frame)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A self-signed certificate for `localhost` and a configuration turning the current
/// transport on, written once per process; the extra server arguments (`-c <file>`) and
/// the port clients connect to (the WebSocket port, or `None` for the client port).
/// A configuration file already in the arguments (`-c <file>`, the lab's auth setup) is
/// included from the generated one.
pub fn server_args(ws_port: u16, include: Option<&str>) -> io::Result<Option<(Vec<String>, Option<u16>)>> {
    let t = current();
    if t == Transport::Tcp {
        return Ok(None);
    }
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR
        .get_or_init(|| std::env::temp_dir().join(format!("rnats-perf-tls-{}", std::process::id())))
        .clone();
    std::fs::create_dir_all(&dir)?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    if !cert.exists() {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).map_err(io::Error::other)?;
        std::fs::write(&cert, ck.cert.pem())?;
        std::fs::write(&key, ck.key_pair.serialize_pem())?;
    }
    let tls = format!(
        "tls {{ cert_file: {:?}, key_file: {:?} }}",
        cert.display(),
        key.display()
    );
    let text = match t {
        Transport::Tcp => String::new(),
        Transport::Tls => format!("{tls}\n"),
        Transport::Ws => format!("websocket {{ listen: \"127.0.0.1:{ws_port}\", no_tls: true }}\n"),
        Transport::Wss => format!("websocket {{ listen: \"127.0.0.1:{ws_port}\", {tls} }}\n"),
    };
    let text = match include {
        Some(f) => format!("include {f:?}\n{text}"),
        None => text,
    };
    let conf = dir.join(format!("{ws_port}.conf"));
    std::fs::write(&conf, text)?;
    Ok(Some((
        vec!["-c".into(), conf.display().to_string()],
        t.websocket().then_some(ws_port),
    )))
}
