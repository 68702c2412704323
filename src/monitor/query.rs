//! A request's query string as Go's `url.ParseQuery` reads it (`+` is a space, bad
//! escapes and pairs with `;` are dropped, the first value of a key wins), and the typed
//! getters of nats-server's monitor with their 400 texts.

use super::gofmt;
use super::MonitorError;

/// Decoded `key=value` pairs in order.
#[derive(Debug, Default, Clone)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

fn unhex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Go's `url.QueryUnescape`; `None` on a bad escape.
fn unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'%' => {
                let hi = unhex(*b.get(i + 1)?)?;
                let lo = unhex(*b.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

impl Query {
    /// Parse a raw query string (without the `?`).
    pub fn parse(raw: &str) -> Query {
        let mut pairs = Vec::new();
        for part in raw.split('&') {
            if part.is_empty() || part.contains(';') {
                continue;
            }
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            if let (Some(k), Some(v)) = (unescape(k), unescape(v)) {
                pairs.push((k, v));
            }
        }
        Query { pairs }
    }

    /// The first value of `key`, or `""`.
    pub fn get(&self, key: &str) -> &str {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }

    /// A boolean (absent: false).
    pub fn bool(&self, key: &str) -> Result<bool, MonitorError> {
        let v = self.get(key);
        if v.is_empty() {
            return Ok(false);
        }
        gofmt::parse_bool(v).map_err(|e| MonitorError::BadRequest(format!("Error decoding boolean for '{key}': {e}")))
    }

    /// An integer (absent: 0).
    pub fn int(&self, key: &str) -> Result<i64, MonitorError> {
        let v = self.get(key);
        if v.is_empty() {
            return Ok(0);
        }
        gofmt::parse_int(v).map_err(|e| MonitorError::BadRequest(format!("Error decoding int for '{key}': {e}")))
    }

    /// An unsigned integer (absent: 0).
    pub fn uint(&self, key: &str) -> Result<u64, MonitorError> {
        let v = self.get(key);
        if v.is_empty() {
            return Ok(0);
        }
        gofmt::parse_uint(v).map_err(|e| MonitorError::BadRequest(format!("Error decoding uint64 for '{key}': {e}")))
    }

    /// `subs=detail`, or `subs` as a boolean: (list, detail).
    pub fn subs(&self) -> Result<(bool, bool), MonitorError> {
        if self.get("subs").eq_ignore_ascii_case("detail") {
            return Ok((false, true));
        }
        Ok((self.bool("subs")?, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go() {
        let q = Query::parse("a=1&b=x+y&c=%24G&a=2&bad=%zz&semi=1;2&flag&e=");
        assert_eq!(q.get("a"), "1");
        assert_eq!(q.get("b"), "x y");
        assert_eq!(q.get("c"), "$G");
        assert_eq!(q.get("bad"), "");
        assert_eq!(q.get("semi"), "");
        assert_eq!(q.get("flag"), "");
        assert_eq!(q.get("missing"), "");
    }

    #[test]
    fn typed_values_and_their_errors() {
        let q = Query::parse("t=true&n=5&u=7&x=maybe&subs=DETAIL");
        assert!(q.bool("t").is_ok_and(|b| b));
        assert!(q.bool("missing").is_ok_and(|b| !b));
        assert_eq!(q.int("n").ok(), Some(5));
        assert_eq!(q.uint("u").ok(), Some(7));
        assert_eq!(
            q.bool("x").err().map(|e| e.to_string()),
            Some("Error decoding boolean for 'x': strconv.ParseBool: parsing \"maybe\": invalid syntax".into())
        );
        assert_eq!(
            q.int("x").err().map(|e| e.to_string()),
            Some("Error decoding int for 'x': strconv.Atoi: parsing \"maybe\": invalid syntax".into())
        );
        assert_eq!(
            q.uint("x").err().map(|e| e.to_string()),
            Some("Error decoding uint64 for 'x': strconv.ParseUint: parsing \"maybe\": invalid syntax".into())
        );
        assert_eq!(q.subs().ok(), Some((false, true)));
        assert_eq!(Query::parse("subs=1").subs().ok(), Some((true, false)));
        assert!(Query::parse("subs=x").subs().is_err());
    }
}
