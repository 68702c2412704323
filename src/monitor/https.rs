//! HTTPS monitoring (`https_port`, `https`, `-ms`): the monitoring server's connections
//! go through TLS first, on tokio-rustls, with the client port's TLS settings. As in
//! nats-server, monitoring asks for no client certificate unless OCSP peer checks are
//! on (then the client block's verification and checks apply), and a reload replaces
//! the certificates for new connections. Handshake failures are logged as the
//! reference's HTTP server logs them (`monitoring: TLS handshake error from ...`).

use crate::transport::ocsp::peer::{Check, PeerChecker};
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// The handshake must be done within this (nats-server's `ReadHeaderTimeout` covers it).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// What HTTPS connections are served with; replaced on reload.
pub struct HttpsConfig {
    current: RwLock<(Arc<rustls::ServerConfig>, Option<Arc<PeerChecker>>)>,
}

impl HttpsConfig {
    pub fn new(cfg: Arc<rustls::ServerConfig>, peer: Option<Arc<PeerChecker>>) -> Arc<HttpsConfig> {
        Arc::new(HttpsConfig {
            current: RwLock::new((cfg, peer)),
        })
    }

    /// New connections use `cfg` (and `peer`) from now on.
    pub fn replace(&self, cfg: Arc<rustls::ServerConfig>, peer: Option<Arc<PeerChecker>>) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = (cfg, peer);
    }

    fn get(&self) -> (Arc<rustls::ServerConfig>, Option<Arc<PeerChecker>>) {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The TLS side of one accepted connection; `None` (logged) when it fails.
    pub async fn accept(&self, stream: TcpStream, from: SocketAddr) -> Option<TlsStream<TcpStream>> {
        let (cfg, peer) = self.get();
        // Go's HTTP server answers plain HTTP on a TLS port, without logging it.
        let mut head = [0u8; 5];
        // The first five bytes (a TLS record header), as they trickle in.
        let peeked = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
            loop {
                match stream.peek(&mut head).await {
                    Ok(n) if n >= head.len() || n == 0 => return n,
                    Ok(_) => tokio::time::sleep(Duration::from_millis(2)).await,
                    Err(_) => return 0,
                }
            }
        })
        .await;
        if let Ok(5) = peeked {
            if [&b"GET /"[..], b"HEAD ", b"POST ", b"PUT /", b"OPTIO"].contains(&&head[..]) {
                use tokio::io::AsyncWriteExt;
                let mut stream = stream;
                // Take the request's head first (bounded, briefly), so that closing does
                // not reset the connection before the answer is read.
                use tokio::io::AsyncReadExt;
                let mut seen = Vec::new();
                let mut chunk = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") && seen.len() < 64 * 1024 {
                    match tokio::time::timeout(Duration::from_secs(1), stream.read(&mut chunk)).await {
                        Ok(Ok(n)) if n > 0 => seen.extend_from_slice(chunk.get(..n).unwrap_or_default()),
                        _ => break,
                    }
                }
                let _ = stream
                    .write_all(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
                    .await;
                tracing::error!(
                    "monitoring: TLS handshake error from {from}: client sent an HTTP request to an HTTPS server"
                );
                return None;
            }
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
        let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::error!("monitoring: TLS handshake error from {from}: {}", go_text(&e));
                return None;
            }
            Err(_) => {
                tracing::error!("monitoring: TLS handshake error from {from}: EOF");
                return None;
            }
        };
        if let Some(checker) = peer {
            let chain = tls.get_ref().1.peer_certificates().unwrap_or_default().to_vec();
            let ok = match checker.check(&chain) {
                Check::Done(v) => v,
                Check::Pending(p) => loop {
                    if let Some(v) = p.verdict() {
                        break v;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                },
            };
            if !ok {
                tracing::error!(
                    "monitoring: TLS handshake error from {from}: {}",
                    crate::transport::ocsp::peer::REJECT
                );
                return None;
            }
        }
        Some(tls)
    }
}

/// Go's words for a failed handshake, where rustls says why.
fn go_text(e: &std::io::Error) -> String {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(t) => crate::transport::tls::session::go_error_text(t, true),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => "EOF".into(),
        None => e.to_string(),
    }
}
