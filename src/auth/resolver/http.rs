//! A minimal blocking HTTP/1.1 client for the URL resolver: `GET` over a fresh TCP
//! connection (`Connection: close`), one overall deadline for connect, request and
//! response, redirects followed (at most 10, as Go's client), bodies by `Content-Length`,
//! chunked, or to the end of the connection, capped in size. `https://` runs over rustls
//! with the client configuration the resolver was given (`resolver_tls`, else the
//! system's trust store).
//!
//! Error texts follow Go's `net/http` where a user sees them (the reference logs
//! `could not fetch <"url">: Get "url": dial tcp 127.0.0.1:80: connect: connection refused`).

use base64::Engine;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Go's `MaxResponseHeaderBytes` default.
const MAX_HEADER_BYTES: usize = 1 << 20;
/// Go's client gives up after this many redirects.
const MAX_REDIRECTS: usize = 10;

/// A parsed `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub https: bool,
    /// `host[:port]` as written (the `Host` header).
    pub authority: String,
    pub host: String,
    pub port: u16,
    /// Path and query (`/` if empty).
    pub target: String,
    /// `user:pass` of the URL, for basic authentication.
    pub userinfo: Option<String>,
}

/// Parses `url`; the `http` and `https` schemes are accepted.
pub fn parse_url(url: &str) -> Result<HttpUrl, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("unsupported protocol scheme {}", quote("")));
    };
    let https = match scheme.to_ascii_lowercase().as_str() {
        "http" => false,
        "https" => true,
        other => return Err(format!("unsupported protocol scheme {}", quote(other))),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let tail = tail.split('#').next().unwrap_or_default();
    let target = if tail.is_empty() {
        "/".to_string()
    } else if tail.starts_with('?') {
        format!("/{tail}")
    } else {
        tail.to_string()
    };
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u.to_string()), h),
        None => (None, authority),
    };
    let default_port = if https { 443 } else { 80 };
    let (host, port) =
        split_host_port(hostport, default_port).ok_or_else(|| format!("invalid host {}", quote(hostport)))?;
    if host.is_empty() {
        return Err("http: no Host in request URL".into());
    }
    Ok(HttpUrl {
        https,
        authority: hostport.to_string(),
        host,
        port,
        target,
        userinfo,
    })
}

fn split_host_port(s: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        match after.strip_prefix(':') {
            Some(p) => (h, Some(p)),
            None if after.is_empty() => (h, None),
            None => return None,
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        None | Some("") => default_port,
        Some(p) => p.parse().ok()?,
    };
    Some((host.to_string(), port))
}

fn quote(s: &str) -> String {
    crate::auth::jwt::json::go_quote(s)
}

/// A response: the status as the server wrote it (`404 Not Found`) and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub code: u16,
    pub status: String,
    pub body: Vec<u8>,
}

/// Why a GET failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GetError {
    /// No response (Go's `*url.Error` text: `Get "url": reason`).
    #[error("{0}")]
    Transport(String),
    /// The response came but its body could not be read.
    #[error("{0}")]
    Body(String),
}

/// Where a request is in its lifetime, for the timeout text.
#[derive(Clone, Copy)]
enum Phase {
    Headers,
    Body,
}

fn timeout_text(phase: Phase) -> String {
    match phase {
        Phase::Headers => "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into(),
        Phase::Body => "context deadline exceeded (Client.Timeout or context cancellation while reading body)".into(),
    }
}

/// `GET url`, everything within `timeout`; a body longer than `max_body` is an error.
/// `tls` is used for `https://` URLs.
pub fn get(
    url: &str,
    timeout: Duration,
    max_body: usize,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<Response, GetError> {
    let deadline = Instant::now() + timeout;
    let mut current = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let transport = |why: String| GetError::Transport(format!("Get {}: {why}", quote(&current)));
        let u = parse_url(&current).map_err(transport)?;
        let mut conn = Conn::open(&u, deadline, tls).map_err(transport)?;
        conn.send(&u).map_err(transport)?;
        let head = conn.head().map_err(transport)?;
        if let (301 | 302 | 303 | 307 | 308, Some(loc)) = (head.code, head.location.as_deref()) {
            current = resolve(&u, loc);
            continue;
        }
        let body = conn.body(&head, max_body).map_err(GetError::Body)?;
        return Ok(Response {
            code: head.code,
            status: head.status,
            body,
        });
    }
    Err(GetError::Transport(format!(
        "Get {}: stopped after {MAX_REDIRECTS} redirects",
        quote(&current)
    )))
}

/// The URL a `Location` points to, relative to `base`.
fn resolve(base: &HttpUrl, loc: &str) -> String {
    let lower = loc.to_ascii_lowercase();
    let scheme = if base.https { "https" } else { "http" };
    if lower.starts_with("http://") || lower.starts_with("https://") {
        loc.to_string()
    } else if let Some(rest) = loc.strip_prefix("//") {
        format!("{scheme}://{rest}")
    } else if loc.starts_with('/') {
        format!("{scheme}://{}{loc}", base.authority)
    } else {
        let path = base.target.split('?').next().unwrap_or("/");
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        format!("{scheme}://{}{dir}/{loc}", base.authority)
    }
}

/// The status line and the headers that matter.
struct Head {
    code: u16,
    status: String,
    content_length: Option<u64>,
    chunked: bool,
    location: Option<String>,
}

/// The connection: plain TCP or TLS over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(t) => t.flush(),
        }
    }
}

struct Conn {
    r: BufReader<Stream>,
    deadline: Instant,
}

/// Go's name of a TLS alert (`crypto/tls`'s `alert.String()`).
fn go_alert(a: rustls::AlertDescription) -> String {
    use rustls::AlertDescription as A;
    match a {
        A::CloseNotify => "close notify".into(),
        A::UnexpectedMessage => "unexpected message".into(),
        A::BadRecordMac => "bad record MAC".into(),
        A::HandshakeFailure => "handshake failure".into(),
        A::BadCertificate => "bad certificate".into(),
        A::UnsupportedCertificate => "unsupported certificate".into(),
        A::CertificateRevoked => "revoked certificate".into(),
        A::CertificateExpired => "expired certificate".into(),
        A::CertificateUnknown => "unknown certificate".into(),
        A::IllegalParameter => "illegal parameter".into(),
        A::UnknownCA => "unknown certificate authority".into(),
        A::AccessDenied => "access denied".into(),
        A::DecodeError => "error decoding message".into(),
        A::DecryptError => "error decrypting message".into(),
        A::ProtocolVersion => "protocol version not supported".into(),
        A::InsufficientSecurity => "insufficient security level".into(),
        A::InternalError => "internal error".into(),
        A::UnrecognisedName => "unrecognized name".into(),
        A::NoApplicationProtocol => "no application protocol".into(),
        A::CertificateRequired => "certificate required".into(),
        other => format!("{other:?}"),
    }
}

/// Go's texts for the TLS failures a user meets (`tls: failed to verify certificate:
/// x509: certificate signed by unknown authority`, ...), else rustls's own.
fn tls_text(e: &io::Error) -> Option<String> {
    let inner = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    use rustls::CertificateError as C;
    let why = match inner {
        rustls::Error::InvalidCertificate(C::UnknownIssuer) => {
            "tls: failed to verify certificate: x509: certificate signed by unknown authority".to_string()
        }
        rustls::Error::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
            "tls: failed to verify certificate: x509: certificate has expired or is not yet valid".to_string()
        }
        rustls::Error::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            "tls: failed to verify certificate: x509: certificate is not valid for the host".to_string()
        }
        rustls::Error::AlertReceived(a) => format!("remote error: tls: {}", go_alert(*a)),
        other => format!("tls: {other}"),
    };
    Some(why)
}

impl Conn {
    fn open(u: &HttpUrl, deadline: Instant, tls: &Arc<rustls::ClientConfig>) -> Result<Conn, String> {
        let addrs: Vec<SocketAddr> = (u.host.as_str(), u.port)
            .to_socket_addrs()
            .map_err(|_| format!("dial tcp: lookup {}: no such host", u.host))?
            .collect();
        let mut last = format!("dial tcp: lookup {}: no such host", u.host);
        for addr in addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timeout_text(Phase::Headers));
            }
            match TcpStream::connect_timeout(&addr, left) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    let stream = if u.https {
                        let name = rustls::pki_types::ServerName::try_from(u.host.clone())
                            .map_err(|_| format!("invalid host {}", quote(&u.host)))?;
                        let c = rustls::ClientConnection::new(tls.clone(), name).map_err(|e| format!("tls: {e}"))?;
                        Stream::Tls(Box::new(rustls::StreamOwned::new(c, s)))
                    } else {
                        Stream::Plain(s)
                    };
                    return Ok(Conn {
                        r: BufReader::new(stream),
                        deadline,
                    });
                }
                Err(e) if is_timeout(&e) => return Err(timeout_text(Phase::Headers)),
                Err(e) => last = format!("dial tcp {addr}: connect: {}", conf::go_os_error(&e)),
            }
        }
        Err(last)
    }

    /// Arm the socket for the time left; `Err` once the deadline has passed.
    fn arm(&mut self) -> io::Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
        self.r.get_ref().tcp().set_read_timeout(Some(left))?;
        self.r.get_ref().tcp().set_write_timeout(Some(left))
    }

    fn send(&mut self, u: &HttpUrl) -> Result<(), String> {
        let mut req = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: rnats\r\nAccept: */*\r\nConnection: close\r\n",
            u.target, u.authority
        );
        if let Some(ui) = &u.userinfo {
            let b64 = base64::engine::general_purpose::STANDARD.encode(ui.as_bytes());
            req.push_str(&format!("Authorization: Basic {b64}\r\n"));
        }
        req.push_str("\r\n");
        self.arm()
            .and_then(|()| self.r.get_mut().write_all(req.as_bytes()))
            .map_err(|e| io_text(&e, Phase::Headers))
    }

    /// One line without its CRLF; `limit` bytes at most (counted down).
    fn line(&mut self, limit: &mut usize, phase: Phase) -> Result<String, String> {
        let mut buf = Vec::new();
        loop {
            self.arm().map_err(|e| io_text(&e, phase))?;
            let avail = match self.r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_text(&e, phase)),
            };
            if avail.is_empty() {
                return Err(if buf.is_empty() { "EOF" } else { "unexpected EOF" }.into());
            }
            let (take, done) = match memchr::memchr(b'\n', avail) {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            if take > *limit {
                return Err(format!(
                    "net/http: server response headers exceeded {MAX_HEADER_BYTES} bytes"
                ));
            }
            *limit -= take;
            buf.extend_from_slice(avail.get(..take).unwrap_or_default());
            self.r.consume(take);
            if done {
                while matches!(buf.last(), Some(b'\n' | b'\r')) {
                    buf.pop();
                }
                return Ok(String::from_utf8_lossy(&buf).into_owned());
            }
        }
    }

    fn head(&mut self) -> Result<Head, String> {
        let mut limit = MAX_HEADER_BYTES;
        loop {
            let line = self.line(&mut limit, Phase::Headers)?;
            // Go's order of checks: a space, a three-digit code, then the version.
            let (proto, status) = line
                .split_once(' ')
                .ok_or_else(|| format!("malformed HTTP response {}", quote(&line)))?;
            let status = status.trim_start_matches(' ').to_string();
            let code_text = status.split(' ').next().unwrap_or_default();
            let code: u16 = Some(code_text)
                .filter(|c| c.len() == 3)
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| format!("malformed HTTP status code {}", quote(code_text)))?;
            if !is_http_version(proto) {
                return Err(format!("malformed HTTP version {}", quote(proto)));
            }
            let mut head = Head {
                code,
                status,
                content_length: None,
                chunked: false,
                location: None,
            };
            loop {
                let h = self.line(&mut limit, Phase::Headers)?;
                if h.is_empty() {
                    break;
                }
                let Some((name, value)) = h.split_once(':') else {
                    continue;
                };
                let value = value.trim();
                match name.trim().to_ascii_lowercase().as_str() {
                    "content-length" => {
                        head.content_length = Some(
                            value
                                .parse()
                                .map_err(|_| format!("bad Content-Length {}", quote(value)))?,
                        )
                    }
                    "transfer-encoding" => head.chunked = value.to_ascii_lowercase().contains("chunked"),
                    "location" => head.location = Some(value.to_string()),
                    _ => {}
                }
            }
            // Interim responses (100 Continue, 103 Early Hints) are skipped.
            if (100..200).contains(&head.code) && head.code != 101 {
                continue;
            }
            return Ok(head);
        }
    }

    /// Read exactly `n` bytes into `out`.
    fn exact(&mut self, n: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let mut left = n;
        let mut chunk = [0u8; 16 * 1024];
        while left > 0 {
            self.arm().map_err(|e| io_text(&e, Phase::Body))?;
            let want = usize::try_from(left).unwrap_or(usize::MAX).min(chunk.len());
            let buf = chunk.get_mut(..want).unwrap_or_default();
            match self.r.read(buf) {
                Ok(0) => return Err("unexpected EOF".into()),
                Ok(k) => {
                    out.extend_from_slice(buf.get(..k).unwrap_or_default());
                    left -= k as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_text(&e, Phase::Body)),
            }
        }
        Ok(())
    }

    fn body(&mut self, head: &Head, max: usize) -> Result<Vec<u8>, String> {
        let too_large = || format!("http: response body larger than {max} bytes");
        let mut out = Vec::new();
        if head.code == 204 || head.code == 304 {
            return Ok(out);
        }
        if head.chunked {
            let mut limit = MAX_HEADER_BYTES;
            loop {
                let line = self.line(&mut limit, Phase::Body)?;
                let size = line.split(';').next().unwrap_or_default().trim();
                let n = u64::from_str_radix(size, 16).map_err(|_| "invalid byte in chunk length".to_string())?;
                if n == 0 {
                    // Trailers, up to the empty line.
                    while !self.line(&mut limit, Phase::Body)?.is_empty() {}
                    return Ok(out);
                }
                if (out.len() as u64).saturating_add(n) > max as u64 {
                    return Err(too_large());
                }
                self.exact(n, &mut out)?;
                if !self.line(&mut limit, Phase::Body)?.is_empty() {
                    return Err("malformed chunked encoding".into());
                }
            }
        }
        if let Some(n) = head.content_length {
            if n > max as u64 {
                return Err(too_large());
            }
            self.exact(n, &mut out)?;
            return Ok(out);
        }
        let mut chunk = [0u8; 16 * 1024];
        loop {
            self.arm().map_err(|e| io_text(&e, Phase::Body))?;
            match self.r.read(&mut chunk) {
                Ok(0) => return Ok(out),
                Ok(k) => {
                    if out.len() + k > max {
                        return Err(too_large());
                    }
                    out.extend_from_slice(chunk.get(..k).unwrap_or_default());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_text(&e, Phase::Body)),
            }
        }
    }
}

/// `HTTP/<major>.<minor>` (Go's `ParseHTTPVersion`).
fn is_http_version(proto: &str) -> bool {
    let Some(v) = proto.strip_prefix("HTTP/") else {
        return false;
    };
    let Some((major, minor)) = v.split_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit());
    digits(major) && digits(minor)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)
}

fn io_text(e: &io::Error, phase: Phase) -> String {
    if let Some(t) = tls_text(e) {
        t
    } else if is_timeout(e) {
        timeout_text(phase)
    } else if e.kind() == io::ErrorKind::UnexpectedEof {
        "unexpected EOF".into()
    } else {
        conf::go_os_error(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse_url("http://user:pw@example.com:8080/a/b?c=1#frag").unwrap();
        assert_eq!(
            u,
            HttpUrl {
                https: false,
                authority: "example.com:8080".into(),
                host: "example.com".into(),
                port: 8080,
                target: "/a/b?c=1".into(),
                userinfo: Some("user:pw".into()),
            }
        );
        let u = parse_url("HTTP://[::1]/x").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.target.as_str()), ("::1", 80, "/x"));
        assert_eq!(parse_url("http://h").unwrap().target, "/");
        assert_eq!(parse_url("http://h?q").unwrap().target, "/?q");
        let s = parse_url("https://h/x").unwrap();
        assert_eq!((s.https, s.port, s.target.as_str()), (true, 443, "/x"));
        assert_eq!(
            parse_url("ftp://h/").unwrap_err(),
            r#"unsupported protocol scheme "ftp""#
        );
        assert!(parse_url("http://h:port/").is_err());
        assert!(parse_url("http:///x").is_err());
    }

    #[test]
    fn redirect_targets() {
        let base = parse_url("http://h:1/a/b/c?x").unwrap();
        assert_eq!(resolve(&base, "/z"), "http://h:1/z");
        assert_eq!(resolve(&base, "z"), "http://h:1/a/b/z");
        assert_eq!(resolve(&base, "//o:2/p"), "http://o:2/p");
        assert_eq!(resolve(&base, "http://q/r"), "http://q/r");
        let tls = parse_url("https://h:1/a/b").unwrap();
        assert_eq!(resolve(&tls, "/z"), "https://h:1/z");
        assert_eq!(resolve(&tls, "//o/p"), "https://o/p");
    }
}
