//! The part of Go's `net/url.Parse` that claim validation depends on: whether a URL parses,
//! and its scheme, userinfo, host and path. Error texts are Go's
//! (`parse "<url>": <reason>`).

/// The pieces of a parsed URL that validation looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Url {
    /// Lower-cased scheme, empty if none.
    pub scheme: String,
    /// A userinfo (`user@` or `user:pass@`) was present.
    pub has_user: bool,
    /// The host with port, as written (brackets kept).
    pub host: String,
    /// The path (percent escapes not decoded, only checked).
    pub path: String,
}

impl Url {
    /// Go's `URL.Hostname()`: the host without port and without IPv6 brackets.
    pub fn hostname(&self) -> &str {
        let h = self.host.as_str();
        if let Some(rest) = h.strip_prefix('[') {
            return rest.split(']').next().unwrap_or_default();
        }
        match h.rfind(':') {
            Some(i) => h.get(..i).unwrap_or_default(),
            None => h,
        }
    }
}

/// Parses like Go's `url.Parse`; the error is Go's message.
pub(crate) fn parse(raw: &str) -> Result<Url, String> {
    parse_inner(raw).map_err(|reason| format!("parse {}: {}", super::json::go_quote(raw), reason))
}

fn parse_inner(raw: &str) -> Result<Url, String> {
    let (rest, fragment) = raw.split_once('#').unwrap_or((raw, ""));
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    check_escapes(fragment)?;
    let mut url = Url::default();
    if rest == "*" {
        url.path = "*".into();
        return Ok(url);
    }
    let rest = match scheme_split(rest)? {
        Some((scheme, tail)) => {
            url.scheme = scheme.to_ascii_lowercase();
            tail
        }
        None => rest,
    };
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // Opaque form (`scheme:opaque`): no host, no path.
            return Ok(url);
        }
        let first_segment = rest.split('/').next().unwrap_or_default();
        if first_segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    let mut rest = rest;
    if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let after = rest.get(2..).unwrap_or_default();
        let (authority, tail) = match after.find('/') {
            Some(i) => (after.get(..i).unwrap_or_default(), after.get(i..).unwrap_or_default()),
            None => (after, ""),
        };
        let host = match authority.rfind('@') {
            Some(i) => {
                let userinfo = authority.get(..i).unwrap_or_default();
                if !userinfo.bytes().all(valid_userinfo_byte) {
                    return Err("net/url: invalid userinfo".into());
                }
                check_escapes(userinfo)?;
                url.has_user = true;
                authority.get(i + 1..).unwrap_or_default()
            }
            None => authority,
        };
        check_host(host)?;
        url.host = host.to_string();
        rest = tail;
    }
    check_escapes(rest)?;
    url.path = rest.to_string();
    Ok(url)
}

/// Go's `getScheme`: `Some((scheme, rest))` when the text starts with a scheme and `:`.
fn scheme_split(s: &str) -> Result<Option<(&str, &str)>, String> {
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => {
                return Ok(Some((
                    s.get(..i).unwrap_or_default(),
                    s.get(i + 1..).unwrap_or_default(),
                )))
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

fn valid_userinfo_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&b)
}

fn check_host(host: &str) -> Result<(), String> {
    let port = if let Some(inner) = host.strip_prefix('[') {
        let Some(close) = inner.find(']') else {
            return Err("missing ']' in host".into());
        };
        inner.get(close + 1..).unwrap_or_default()
    } else {
        match host.rfind(':') {
            Some(i) => host.get(i..).unwrap_or_default(),
            None => "",
        }
    };
    let port_ok = port.is_empty() || (port.starts_with(':') && port.bytes().skip(1).all(|b| b.is_ascii_digit()));
    if !port_ok {
        return Err(format!("invalid port {} after host", super::json::go_quote(port)));
    }
    check_escapes(host)?;
    if let Some(c) = host.chars().find(|&c| c.is_ascii() && !host_char_ok(c)) {
        return Err(format!(
            "invalid character {} in host name",
            super::json::go_quote(&c.to_string())
        ));
    }
    Ok(())
}

fn host_char_ok(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"%".contains(c)
}

fn check_escapes(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let ok = b.get(i + 1).is_some_and(u8::is_ascii_hexdigit) && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
            if !ok {
                let end = (i + 3).min(b.len());
                return Err(format!(
                    "invalid URL escape {}",
                    super::json::go_quote(s.get(i..end).unwrap_or("%"))
                ));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go() {
        let u = parse("NATS://user:pw@host.example:4222/p").unwrap();
        assert_eq!(
            (u.scheme.as_str(), u.has_user, u.hostname(), u.path.as_str()),
            ("nats", true, "host.example", "/p")
        );
        let u = parse("tls://[::1]:4222").unwrap();
        assert_eq!((u.hostname(), u.path.as_str()), ("::1", ""));
        let u = parse("host:4222").unwrap();
        assert_eq!((u.scheme.as_str(), u.host.as_str()), ("host", ""));
        assert_eq!(parse("/only/path").unwrap().scheme, "");
    }

    #[test]
    fn errors_are_gos() {
        let cases = [
            (":x", r#"parse ":x": missing protocol scheme"#),
            (
                "http://a b",
                r#"parse "http://a b": invalid character " " in host name"#,
            ),
            ("http://h:x1", r#"parse "http://h:x1": invalid port ":x1" after host"#),
            ("http://[::1", r#"parse "http://[::1": missing ']' in host"#),
            ("http://h/%zz", r#"parse "http://h/%zz": invalid URL escape "%zz""#),
            ("a:b/c", "ok"),
            (
                "1a:b",
                r#"parse "1a:b": first path segment in URL cannot contain colon"#,
            ),
            (
                "http://h\n",
                r#"parse "http://h\n": net/url: invalid control character in URL"#,
            ),
        ];
        for (input, want) in cases {
            let got = match parse(input) {
                Ok(_) => "ok".to_string(),
                Err(e) => e,
            };
            assert_eq!(got, want, "{input}");
        }
    }
}
