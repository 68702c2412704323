//! Asking a responder over HTTP(S): `POST` of the DER request, or `GET` with it base64
//! in the path (RFC 6960 appendix A), on hyper's HTTP/1.1 client (https responders over
//! tokio-rustls with the system's roots). Failures read as Go's `net/http` client words
//! them (`Post "http://...": dial tcp 127.0.0.1:80: connect: connection refused`), since
//! nats-server logs and returns those texts.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// Responses above this are refused (OCSP responses are a few KiB).
pub const MAX_BODY: usize = 1024 * 1024;

/// A parsed `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// Path and query (`/` when empty).
    pub path: String,
}

impl Url {
    pub fn parse(text: &str) -> Result<Url, String> {
        let (https, rest) = if let Some(r) = text.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = text.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(format!("unsupported protocol scheme in {text:?}"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (rest.get(..i).unwrap_or_default(), rest.get(i..).unwrap_or("/")),
            None => (rest, "/"),
        };
        let authority = authority.rsplit('@').next().unwrap_or_default();
        let default_port = if https { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| format!("invalid URL {text:?}"))?;
            match after.strip_prefix(':') {
                Some(p) => (
                    h.to_string(),
                    p.parse().map_err(|_| format!("invalid port in {text:?}"))?,
                ),
                None => (h.to_string(), default_port),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse().map_err(|_| format!("invalid port in {text:?}"))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(format!("no Host in request URL {text:?}"));
        }
        Ok(Url {
            https,
            host,
            port,
            path: path.to_string(),
        })
    }

    fn host_header(&self) -> String {
        let default = if self.https { 443 } else { 80 };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// What a responder answered: the HTTP status and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Go's text for a failed connection attempt.
fn dial_error(url: &Url, e: &std::io::Error) -> String {
    let addr = if url.host.contains(':') {
        format!("[{}]:{}", url.host, url.port)
    } else {
        format!("{}:{}", url.host, url.port)
    };
    let what = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_string(),
        _ if e.to_string().contains("failed to lookup") || e.to_string().contains("Name or service") => {
            return format!("dial tcp: lookup {}: no such host", url.host)
        }
        _ => e.to_string(),
    };
    format!("dial tcp {addr}: {what}")
}

async fn exchange<S>(stream: S, req: hyper::Request<Full<Bytes>>) -> Result<Answer, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok(Answer {
        status,
        body: body.to_vec(),
    })
}

fn tls_connector() -> tokio_rustls::TlsConnector {
    let roots = crate::transport::tls::config::system_roots();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth());
    let cfg = cfg.unwrap_or_else(|_| {
        rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth()
    });
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
}

async fn send(method: &str, url_text: &str, body: Option<&[u8]>) -> Result<Answer, String> {
    let url = Url::parse(url_text)?;
    let tcp = tokio::net::TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|e| dial_error(&url, &e))?;
    let _ = tcp.set_nodelay(true);
    let mut b = hyper::Request::builder()
        .method(method)
        .uri(url.path.as_str())
        .header(hyper::header::HOST, url.host_header());
    if body.is_some() {
        b = b
            .header(hyper::header::CONTENT_TYPE, "application/ocsp-request")
            .header(hyper::header::ACCEPT, "application/ocsp-response");
    }
    let req = b
        .body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default())))
        .map_err(|e| e.to_string())?;
    if url.https {
        let name = rustls_pki_types::ServerName::try_from(url.host.clone()).map_err(|e| e.to_string())?;
        let tls = tls_connector().connect(name, tcp).await.map_err(|e| e.to_string())?;
        exchange(tls, req).await
    } else {
        exchange(tcp, req).await
    }
}

/// One request with Go's `http.Client{Timeout}` semantics and error texts.
async fn request(method: &str, url: &str, body: Option<&[u8]>, timeout: Duration) -> Result<Answer, String> {
    let go_method = if method == "POST" { "Post" } else { "Get" };
    match tokio::time::timeout(timeout, send(method, url, body)).await {
        Ok(Ok(a)) => Ok(a),
        Ok(Err(e)) => Err(format!("{go_method} {url:?}: {e}")),
        Err(_) => Err(format!(
            "{go_method} {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )),
    }
}

/// `POST` the DER request to `url`.
pub async fn post(url: &str, der: &[u8], timeout: Duration) -> Result<Answer, String> {
    request("POST", url, Some(der), timeout).await
}

/// `GET` `url` (the request already in its path).
pub async fn get(url: &str, timeout: Duration) -> Result<Answer, String> {
    request("GET", url, None, timeout).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = Url::parse("http://127.0.0.1:8888").unwrap();
        assert_eq!(
            (u.https, u.host.as_str(), u.port, u.path.as_str()),
            (false, "127.0.0.1", 8888, "/")
        );
        let u = Url::parse("https://ocsp.example.com/a/b?c").unwrap();
        assert_eq!(
            (u.port, u.path.as_str(), u.host_header().as_str()),
            (443, "/a/b?c", "ocsp.example.com")
        );
        let u = Url::parse("http://[::1]:81/x").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.host_header().as_str()),
            ("::1", 81, "[::1]:81")
        );
        assert!(Url::parse("ldap://x").is_err());
        assert!(Url::parse("http://:80").is_err());
        assert!(Url::parse("http://h:notaport").is_err());
    }

    #[test]
    fn refused_and_served() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // A port nothing listens on.
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let url = format!("http://127.0.0.1:{port}");
        let e = rt.block_on(post(&url, b"x", Duration::from_secs(2))).unwrap_err();
        assert_eq!(
            e,
            format!("Post \"{url}\": dial tcp 127.0.0.1:{port}: connect: connection refused")
        );
        // A minimal HTTP server answering one request.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let h = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc").unwrap();
            req
        });
        let a = rt
            .block_on(get(&format!("http://127.0.0.1:{port}/MFQw"), Duration::from_secs(2)))
            .unwrap();
        assert_eq!(
            a,
            Answer {
                status: 200,
                body: b"abc".to_vec()
            }
        );
        let req = h.join().unwrap();
        assert!(req.starts_with("GET /MFQw HTTP/1.1\r\n"), "{req}");
        // A server that never answers: the client's timeout.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let e = rt.block_on(get(&url, Duration::from_millis(200))).unwrap_err();
        assert!(
            e.ends_with("context deadline exceeded (Client.Timeout exceeded while awaiting headers)"),
            "{e}"
        );
    }
}
