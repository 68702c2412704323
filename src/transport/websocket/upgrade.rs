//! The WebSocket opening handshake (RFC 6455 §4.2), sans-IO: an HTTP/1.x request parser
//! fed bytes as they arrive, nats-server's checks in its order (method, host, upgrade,
//! connection, key, version, origin) and its answers: `101 Switching Protocols` with the
//! accept key, the compression and no-masking extensions and the configured headers, or
//! the error Go's `http.Error` writes.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use base64::Engine;

/// Largest request head accepted (Go's `http.DefaultMaxHeaderBytes`).
pub const MAX_REQUEST_HEAD: usize = 1 << 20;

const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A parsed request head.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// `HTTP/1.1` → (1, 1).
    pub version: (u8, u8),
    /// Header lines in order, names as sent.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// Every value of header `name` (case-insensitive).
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The first value of header `name` (Go's `Header.Get`), or "".
    pub fn get(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or("", |(_, v)| v.as_str())
    }

    /// Some value of `name`, split at commas, is the token `token` (case-insensitive).
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.values(name)
            .flat_map(|v| v.split(','))
            .any(|t| t.trim_matches([' ', '\t']).eq_ignore_ascii_case(token))
    }

    /// The cookies of the `Cookie` headers, as (name, value).
    pub fn cookies(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for line in self.values("Cookie") {
            for part in line.split(';') {
                let part = part.trim();
                let Some((n, v)) = part.split_once('=') else { continue };
                if n.is_empty() {
                    continue;
                }
                let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(v);
                out.push((n.to_string(), v.to_string()));
            }
        }
        out
    }
}

/// A request that could not be read: Go's server answers these itself (not its handler)
/// and closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Garbage request line or header.
    Malformed,
    /// HTTP/1.1 without `Host`.
    MissingHost,
    /// The head exceeds [`MAX_REQUEST_HEAD`].
    TooLarge,
}

impl ParseError {
    /// The raw response Go's `net/http` sends.
    pub fn response(&self) -> Vec<u8> {
        let (status, text) = match self {
            ParseError::Malformed => ("400 Bad Request", "400 Bad Request"),
            ParseError::MissingHost => (
                "400 Bad Request: missing required Host header",
                "400 Bad Request: missing required Host header",
            ),
            ParseError::TooLarge => (
                "431 Request Header Fields Too Large",
                "431 Request Header Fields Too Large",
            ),
        };
        format!("HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n{text}")
            .into_bytes()
    }
}

/// Accumulates a request head. `feed` returns the request once the blank line arrived,
/// and how many bytes of the input it used (anything after belongs to the client's
/// first frames, which it must not send before the answer).
#[derive(Debug, Default)]
pub struct RequestParser {
    buf: Vec<u8>,
}

fn parse_head(head: &[u8]) -> Result<Request, ParseError> {
    let text = std::str::from_utf8(head).map_err(|_| ParseError::Malformed)?;
    let mut lines = text.split("\r\n");
    let first = lines.next().ok_or(ParseError::Malformed)?;
    let mut parts = first.split(' ');
    let (Some(method), Some(path), Some(proto), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(ParseError::Malformed);
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_graphic()) || path.is_empty() {
        return Err(ParseError::Malformed);
    }
    let version = match proto {
        "HTTP/1.1" => (1, 1),
        "HTTP/1.0" => (1, 0),
        _ => return Err(ParseError::Malformed),
    };
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            continue;
        }
        let (name, value) = line.split_once(':').ok_or(ParseError::Malformed)?;
        if name.is_empty() || name.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(ParseError::Malformed);
        }
        headers.push((name.to_string(), value.trim_matches([' ', '\t']).to_string()));
    }
    let req = Request {
        method: method.to_string(),
        path: path.to_string(),
        version,
        headers,
    };
    if version == (1, 1) && !req.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("Host")) {
        return Err(ParseError::MissingHost);
    }
    Ok(req)
}

impl RequestParser {
    /// Feed bytes; `Ok(Some((request, used)))` once the head is complete.
    pub fn feed(&mut self, data: &[u8]) -> Result<Option<(Request, usize)>, ParseError> {
        let before = self.buf.len();
        // Only look as far as the limit allows.
        let room = MAX_REQUEST_HEAD.saturating_sub(before);
        let take = data.get(..data.len().min(room + 4)).unwrap_or(data);
        self.buf.extend_from_slice(take);
        let from = before.saturating_sub(3);
        let found = self
            .buf
            .get(from..)
            .and_then(|tail| memchr::memmem::find(tail, b"\r\n\r\n"))
            .map(|p| from + p);
        match found {
            Some(p) if p <= MAX_REQUEST_HEAD => {
                let head = self.buf.get(..p).unwrap_or_default();
                let req = parse_head(head)?;
                let used = (p + 4).saturating_sub(before);
                self.buf = Vec::new();
                Ok(Some((req, used)))
            }
            Some(_) => Err(ParseError::TooLarge),
            None if self.buf.len() > MAX_REQUEST_HEAD => Err(ParseError::TooLarge),
            None => Ok(None),
        }
    }
}

/// The `Sec-WebSocket-Accept` value for a key.
pub fn accept_key(key: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.as_bytes());
    ctx.update(GUID);
    base64::engine::general_purpose::STANDARD.encode(ctx.finish().as_ref())
}

/// What `allowed_origins` holds, per host: (scheme, port).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins {
    pub same_origin: bool,
    pub allowed: Vec<(String, String, String)>,
}

/// Go's `url.ParseRequestURI` far enough for origins: `scheme://host[:port][/...]`.
fn parse_origin(s: &str) -> Result<(String, String), String> {
    let (scheme, rest) = s
        .split_once("://")
        .ok_or_else(|| format!("parse {s:?}: invalid URI for request"))?;
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) {
        return Err(format!("parse {s:?}: missing protocol scheme"));
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    Ok((scheme.to_string(), host.to_string()))
}

/// Go's `wsGetHostAndPort`: host lower-cased, the scheme's default port when none.
pub fn host_and_port(tls: bool, hostport: &str) -> Result<(String, String), String> {
    let default = if tls { "443" } else { "80" };
    if let Some(rest) = hostport.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("address {hostport}: missing ']' in address"))?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((h.to_ascii_lowercase(), p.to_string())),
            None if after.is_empty() => Ok((h.to_ascii_lowercase(), default.to_string())),
            None => Err(format!("address {hostport}: unexpected ']' in address")),
        };
    }
    match hostport.rsplit_once(':') {
        Some((h, _)) if h.contains(':') => Err(format!("address {hostport}: too many colons in address")),
        Some((h, p)) => Ok((h.to_ascii_lowercase(), p.to_string())),
        None => Ok((hostport.to_ascii_lowercase(), default.to_string())),
    }
}

impl Origins {
    /// Build from the options (each allowed origin was validated at startup).
    pub fn new(same_origin: bool, allowed: &[String]) -> Origins {
        let mut list = Vec::new();
        for a in allowed {
            if let Ok((scheme, host)) = parse_origin(a) {
                if let Ok((h, p)) = host_and_port(scheme == "https", &host) {
                    list.push((h, scheme, p));
                }
            }
        }
        Origins {
            same_origin,
            allowed: list,
        }
    }

    /// nats-server's `checkOrigin`.
    pub fn check(&self, req: &Request, tls: bool) -> Result<(), String> {
        if !self.same_origin && self.allowed.is_empty() {
            return Ok(());
        }
        let mut origin = req.get("Origin");
        if origin.is_empty() {
            origin = req.get("Sec-Websocket-Origin");
        }
        if origin.is_empty() {
            return Ok(());
        }
        let (scheme, host) = parse_origin(origin)?;
        let (oh, op) = host_and_port(scheme == "https", &host)?;
        if self.same_origin {
            let (rh, rp) = host_and_port(tls, req.get("Host"))?;
            let rs = if tls { "https" } else { "http" };
            if oh != rh || op != rp || !scheme.eq_ignore_ascii_case(rs) {
                return Err("not same origin".into());
            }
        }
        if !self.allowed.is_empty()
            && !self
                .allowed
                .iter()
                .any(|(h, s, p)| *h == oh && *s == scheme && *p == op)
        {
            return Err("not in the allowed list".into());
        }
        Ok(())
    }
}

/// What the server offers.
#[derive(Debug, Clone, Default)]
pub struct UpgradePolicy {
    pub compression: bool,
    pub origins: Origins,
    /// Extra response header lines (`Name: value\r\n` each).
    pub raw_headers: String,
    /// The listener is TLS (same-origin checks compare with `https`).
    pub tls: bool,
}

/// The kind of connection the request path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Client,
    Leaf,
    Mqtt,
}

/// An accepted upgrade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgraded {
    pub kind: Kind,
    pub compress: bool,
    /// The client will not mask its frames (`Nats-No-Masking: true`).
    pub no_masking: bool,
    /// A valid IP from `X-Forwarded-For`.
    pub client_ip: Option<String>,
    /// `User-Agent` starts with `Mozilla/`.
    pub browser: bool,
    /// Safari: compressed frames are not fragmented.
    pub no_compressed_fragments: bool,
    pub cookies: Vec<(String, String)>,
    /// The `101` response.
    pub response: Vec<u8>,
}

/// A refused upgrade: the status and the reason logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub status: u16,
    pub reason: String,
    /// HTTP/1.0 requests are closed after the answer.
    pub http10: bool,
}

fn status_text(code: u16) -> &'static str {
    match code {
        400 => "Bad Request",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        _ => "Error",
    }
}

/// Go's `http.TimeFormat` for `now`.
pub fn http_date(now: std::time::SystemTime) -> String {
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let (h, m, s) = (rem / 3600, (rem / 60) % 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if mo <= 2 { y + 1 } else { y };
    const WD: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MO: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let wd = WD.get(days.rem_euclid(7) as usize).copied().unwrap_or("Thu");
    let mon = MO.get((mo - 1).clamp(0, 11) as usize).copied().unwrap_or("Jan");
    format!("{wd}, {d:02} {mon} {y} {h:02}:{m:02}:{s:02} GMT")
}

impl Refused {
    /// The response Go's `http.Error` writes (plus the reference's version header).
    pub fn response(&self, now: std::time::SystemTime) -> Vec<u8> {
        let text = status_text(self.status);
        let proto = if self.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
        format!(
            "{proto} {} {text}\r\nContent-Type: text/plain; charset=utf-8\r\nSec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\nDate: {}\r\nContent-Length: {}\r\n\r\n{text}\n",
            self.status,
            http_date(now),
            text.len() + 1
        )
        .into_bytes()
    }
}

fn refuse(req: &Request, status: u16, reason: impl Into<String>) -> Refused {
    Refused {
        status,
        reason: reason.into(),
        http10: req.version == (1, 0),
    }
}

/// nats-server's `wsUpgrade` checks and answer. `extra` says whether the client sent
/// bytes after the request (it must wait for the answer).
pub fn upgrade(req: &Request, policy: &UpgradePolicy, extra: bool) -> Result<Upgraded, Refused> {
    let kind = if req.path.ends_with("/leafnode") {
        Kind::Leaf
    } else if req.path.ends_with("/mqtt") {
        Kind::Mqtt
    } else {
        Kind::Client
    };
    if req.method != "GET" {
        return Err(refuse(req, 405, "request method must be GET"));
    }
    if req.get("Host").is_empty() {
        return Err(refuse(req, 400, "'Host' missing in request"));
    }
    if !req.has_token("Upgrade", "websocket") {
        return Err(refuse(req, 400, "invalid value for header 'Upgrade'"));
    }
    if !req.has_token("Connection", "Upgrade") {
        return Err(refuse(req, 400, "invalid value for header 'Connection'"));
    }
    let key = req.get("Sec-Websocket-Key");
    if key.is_empty() {
        return Err(refuse(req, 400, "key missing"));
    }
    match base64::engine::general_purpose::STANDARD.decode(key) {
        Ok(k) if k.len() == 16 => {}
        _ => return Err(refuse(req, 400, "invalid websocket key")),
    }
    if !req.has_token("Sec-Websocket-Version", "13") {
        return Err(refuse(req, 400, "invalid version"));
    }
    if let Err(e) = policy.origins.check(req, policy.tls) {
        return Err(refuse(req, 403, format!("origin not allowed: {e}")));
    }
    let compress = policy.compression
        && req
            .values("Sec-Websocket-Extensions")
            .flat_map(|v| v.split(','))
            .flat_map(|e| e.split(';'))
            .any(|p| p.trim_matches([' ', '\t']).eq_ignore_ascii_case("permessage-deflate"));
    let no_masking = req.get("Nats-No-Masking") == "true";
    if extra {
        return Err(refuse(req, 400, "client sent data before handshake is complete"));
    }
    let mut response = Vec::with_capacity(256);
    response.extend_from_slice(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ",
    );
    response.extend_from_slice(accept_key(key).as_bytes());
    response.extend_from_slice(b"\r\n");
    if compress {
        response.extend_from_slice(
            b"Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n",
        );
    }
    if no_masking {
        response.extend_from_slice(b"Nats-No-Masking: true\r\n");
    }
    if kind == Kind::Mqtt {
        response.extend_from_slice(b"Sec-Websocket-Protocol: mqtt\r\n");
    }
    response.extend_from_slice(policy.raw_headers.as_bytes());
    response.extend_from_slice(b"\r\n");
    let client_ip = req
        .values("X-Forwarded-For")
        .next()
        .filter(|ip| ip.parse::<std::net::IpAddr>().is_ok())
        .map(str::to_string);
    let ua = req.get("User-Agent");
    let browser = ua.starts_with("Mozilla/");
    Ok(Upgraded {
        kind,
        compress,
        no_masking,
        client_ip,
        browser,
        no_compressed_fragments: browser && compress && ua.contains("Version/") && ua.contains("Safari/"),
        cookies: if kind == Kind::Leaf { Vec::new() } else { req.cookies() },
        response,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    const GOOD: &str = "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";

    fn parse(text: &str) -> Request {
        let mut p = RequestParser::default();
        p.feed(text.as_bytes()).unwrap().unwrap().0
    }

    #[test]
    fn accept_key_of_rfc6455() {
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn the_reference_checks_in_order() {
        let policy = UpgradePolicy::default();
        let cases: &[(&str, Option<(u16, &str)>)] = &[
            ("", None),
            ("X: 1\r\n", None),
            ("POST-IT", Some((405, "request method must be GET"))),
            ("no-upgrade", Some((400, "invalid value for header 'Upgrade'"))),
            ("no-connection", Some((400, "invalid value for header 'Connection'"))),
            ("no-key", Some((400, "key missing"))),
            ("bad-key", Some((400, "invalid websocket key"))),
            ("version-12", Some((400, "invalid version"))),
        ];
        for (variant, want) in cases {
            let text = match *variant {
                "POST-IT" => GOOD.replacen("GET", "POST", 1),
                "no-upgrade" => GOOD.replace("Upgrade: websocket\r\n", ""),
                "no-connection" => GOOD.replace("Connection: Upgrade\r\n", "Connection: keep-alive\r\n"),
                "no-key" => GOOD.replace("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", ""),
                "bad-key" => GOOD.replace("dGhlIHNhbXBsZSBub25jZQ==", "c2hvcnQ="),
                "version-12" => GOOD.replace("Version: 13", "Version: 12"),
                extra => format!("{GOOD}{extra}"),
            };
            let req = parse(&format!("{text}\r\n"));
            let got = upgrade(&req, &policy, false)
                .map(|_| ())
                .map_err(|r| (r.status, r.reason));
            match want {
                None => assert!(got.is_ok(), "{variant}: {got:?}"),
                Some((s, r)) => assert_eq!(got, Err((*s, r.to_string())), "{variant}"),
            }
        }
    }

    #[test]
    fn response_with_extensions_and_headers() {
        let policy = UpgradePolicy {
            compression: true,
            raw_headers: "X-A: b\r\n".into(),
            ..Default::default()
        };
        let req = parse(&format!(
            "{GOOD}Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\nNats-No-Masking: true\r\nX-Forwarded-For: 10.1.2.3\r\nCookie: jwt=abc; user=\"bob\"\r\nUser-Agent: Mozilla/5.0\r\n\r\n"
        ));
        let u = upgrade(&req, &policy, false).unwrap();
        assert!(u.compress && u.no_masking && u.browser && !u.no_compressed_fragments);
        assert_eq!(u.client_ip.as_deref(), Some("10.1.2.3"));
        assert_eq!(
            u.cookies,
            vec![("jwt".into(), "abc".into()), ("user".into(), "bob".into())]
        );
        assert_eq!(
            String::from_utf8(u.response).unwrap(),
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\nNats-No-Masking: true\r\nX-A: b\r\n\r\n"
        );
        let u = upgrade(&req, &policy, true).unwrap_err();
        assert_eq!(u.reason, "client sent data before handshake is complete");
    }

    #[test]
    fn parser_errors_and_splits() {
        let mut p = RequestParser::default();
        let full = format!("{GOOD}\r\nXYZ");
        for (i, b) in full.as_bytes().iter().enumerate() {
            let r = p.feed(std::slice::from_ref(b)).unwrap();
            if i + 1 < full.len() - 3 {
                assert!(r.is_none());
            } else if let Some((req, used)) = r {
                assert_eq!(req.method, "GET");
                assert_eq!(used, 1);
                break;
            }
        }
        assert_eq!(
            RequestParser::default().feed(b"GARBAGE\r\n\r\n"),
            Err(ParseError::Malformed)
        );
        assert_eq!(
            RequestParser::default().feed(b"GET / HTTP/1.1\r\n\r\n"),
            Err(ParseError::MissingHost)
        );
        assert!(RequestParser::default()
            .feed(b"GET / HTTP/1.0\r\n\r\n")
            .unwrap()
            .is_some());
        let mut p = RequestParser::default();
        let chunk = vec![b'a'; 64 * 1024];
        let mut res = Ok(None);
        for _ in 0..20 {
            res = p.feed(&chunk);
            if res.is_err() {
                break;
            }
        }
        assert_eq!(res, Err(ParseError::TooLarge));
    }

    #[test]
    fn origins() {
        let o = Origins::new(false, &["https://example.com".into(), "http://a.b:8080".into()]);
        let with = |origin: &str| parse(&format!("{GOOD}Origin: {origin}\r\n\r\n"));
        assert_eq!(o.check(&with("https://example.com"), false), Ok(()));
        assert_eq!(o.check(&with("https://EXAMPLE.com:443"), false), Ok(()));
        assert_eq!(o.check(&with("http://a.b:8080/x"), false), Ok(()));
        assert_eq!(
            o.check(&with("http://example.com"), false),
            Err("not in the allowed list".into())
        );
        let same = Origins::new(true, &[]);
        assert_eq!(same.check(&with("http://x"), false), Ok(()));
        assert_eq!(same.check(&with("https://x"), false), Err("not same origin".into()));
        assert_eq!(same.check(&with("https://x"), true), Ok(()));
    }

    #[test]
    fn refused_response_and_date() {
        let r = Refused {
            status: 405,
            reason: String::new(),
            http10: false,
        };
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_110_156);
        assert_eq!(http_date(t), "Tue, 01 Dec 2026 07:29:16 GMT");
        assert_eq!(
            String::from_utf8(r.response(t)).unwrap(),
            "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\nSec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\nDate: Tue, 01 Dec 2026 07:29:16 GMT\r\nContent-Length: 19\r\n\r\nMethod Not Allowed\n"
        );
    }
}
