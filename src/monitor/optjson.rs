//! The JSON bodies of `$SYS.REQ.*` monitoring requests, decoded the way Go's
//! `encoding/json` fills nats-server's `*EventOptions` structs: keys match field names
//! case-insensitively, unknown keys and `null` are ignored, the first mistyped field is
//! the error, and error texts are Go's (`json: cannot unmarshal string into Go struct
//! field ConnzEventOptions.ConnzOptions.auth of type bool`, `unexpected end of JSON
//! input`, ...).

use serde_json::Value;

/// The Go type a field has (and names in errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int,
    /// `int64`.
    Int64,
    Uint,
    Str,
    Strs,
    /// `server.ConnState`: an integer.
    State,
    /// `time.Duration`: integer nanoseconds.
    Duration,
}

impl Kind {
    fn go_name(self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Int64 => "int64",
            Kind::Uint => "uint64",
            Kind::Str => "string",
            Kind::Strs => "[]string",
            Kind::State => "server.ConnState",
            Kind::Duration => "time.Duration",
        }
    }
}

/// One field of an options struct: its JSON name, the Go struct that declares it (the
/// embedded options or `EventFilterOptions`), and its type.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub group: &'static str,
    pub kind: Kind,
}

/// A decoded value.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Str(String),
    Strs(Vec<String>),
}

/// The request filter every `*EventOptions` embeds (`EventFilterOptions`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub server_name: String,
    pub cluster: String,
    pub host: String,
    pub exact_match: bool,
    pub tags: Vec<String>,
    pub domain: String,
}

impl EventFilter {
    /// The filter fields, declared by `EventFilterOptions`.
    pub const FIELDS: [Field; 6] = [
        f("server_name", "EventFilterOptions", Kind::Str),
        f("cluster", "EventFilterOptions", Kind::Str),
        f("host", "EventFilterOptions", Kind::Str),
        f("exact_match", "EventFilterOptions", Kind::Bool),
        f("tags", "EventFilterOptions", Kind::Strs),
        f("domain", "EventFilterOptions", Kind::Str),
    ];

    /// Take a decoded value if it is a filter field.
    pub fn take(&mut self, name: &str, v: &Val) -> bool {
        match (name, v) {
            ("server_name", Val::Str(s)) => self.server_name = s.clone(),
            ("cluster", Val::Str(s)) => self.cluster = s.clone(),
            ("host", Val::Str(s)) => self.host = s.clone(),
            ("exact_match", Val::Bool(b)) => self.exact_match = *b,
            ("tags", Val::Strs(t)) => self.tags = t.clone(),
            ("domain", Val::Str(s)) => self.domain = s.clone(),
            _ => return false,
        }
        true
    }

    /// nats-server's `filterRequest`: true if a server so described should not answer.
    pub fn excludes(&self, name: &str, host: &str, cluster: &str, tags: &[String], domain: &str) -> bool {
        let differs = |want: &str, have: &str| {
            !want.is_empty()
                && if self.exact_match {
                    want != have
                } else {
                    !have.contains(want)
                }
        };
        if differs(&self.server_name, name) || differs(&self.host, host) || differs(&self.cluster, cluster) {
            return true;
        }
        if self
            .tags
            .iter()
            .any(|t| !tags.iter().any(|h| h.eq_ignore_ascii_case(t)))
        {
            return true;
        }
        !self.domain.is_empty() && self.domain != domain
    }
}

/// A field declaration.
pub const fn f(name: &'static str, group: &'static str, kind: Kind) -> Field {
    Field { name, group, kind }
}

/// Go's `quoteChar` of the byte where a syntax error was found.
fn quote_char(c: char) -> String {
    match c {
        '\'' => "'\\''".to_string(),
        '"' => "'\"'".to_string(),
        c => {
            let q = crate::proto::reply::go_quote(c.to_string().as_bytes());
            let inner = q.get(1..q.len().saturating_sub(1)).unwrap_or_default();
            format!("'{inner}'")
        }
    }
}

/// Go's text for a syntax error, from serde_json's position and message.
fn syntax_error(body: &[u8], e: &serde_json::Error) -> String {
    if e.is_eof() {
        return "unexpected end of JSON input".to_string();
    }
    let text = String::from_utf8_lossy(body);
    let line = text.lines().nth(e.line().saturating_sub(1)).unwrap_or_default();
    let c = line
        .chars()
        .nth(e.column().saturating_sub(1))
        .or_else(|| line.chars().last())
        .unwrap_or(' ');
    let msg = e.to_string();
    let context = if msg.starts_with("key must be a string") {
        "looking for beginning of object key string"
    } else if msg.starts_with("expected `:`") {
        "after object key"
    } else if msg.starts_with("expected `,` or `}`") {
        "after object key:value pair"
    } else if msg.starts_with("expected `,` or `]`") {
        "after array element"
    } else if msg.starts_with("trailing comma") {
        if c == '}' {
            "looking for beginning of object key string"
        } else {
            "looking for beginning of value"
        }
    } else if msg.starts_with("trailing") {
        "after top-level value"
    } else {
        "looking for beginning of value"
    };
    format!("invalid character {} {context}", quote_char(c))
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Decode `body` as the Go struct `outer` with `fields`: the values present, in document
/// order, or Go's error text.
pub fn decode(body: &[u8], outer: &str, fields: &[Field]) -> Result<Vec<(&'static str, Val)>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| syntax_error(body, &e))?;
    let obj = match v {
        Value::Object(o) => o,
        Value::Null => return Ok(Vec::new()),
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type server.{outer}",
                kind_of(&other)
            ))
        }
    };
    let mut out = Vec::new();
    let mut first_err: Option<String> = None;
    for (key, val) in obj.iter() {
        let Some(field) = fields.iter().find(|f| f.name.eq_ignore_ascii_case(key)) else {
            continue;
        };
        if val.is_null() {
            continue;
        }
        // A field of the outer struct itself has an empty group.
        let path = if field.group.is_empty() {
            field.name.to_string()
        } else {
            format!("{}.{}", field.group, field.name)
        };
        let mismatch = |what: String| {
            format!(
                "json: cannot unmarshal {what} into Go struct field {outer}.{path} of type {}",
                field.kind.go_name()
            )
        };
        let got = match (field.kind, val) {
            (Kind::Bool, Value::Bool(b)) => Ok(Val::Bool(*b)),
            (Kind::Str, Value::String(s)) => Ok(Val::Str(s.clone())),
            (Kind::Int | Kind::Int64 | Kind::State | Kind::Duration, Value::Number(n)) => {
                n.as_i64().map(Val::Int).ok_or_else(|| mismatch(format!("number {n}")))
            }
            (Kind::Uint, Value::Number(n)) => n.as_u64().map(Val::Uint).ok_or_else(|| mismatch(format!("number {n}"))),
            (Kind::Strs, Value::Array(items)) => {
                let mut v = Vec::with_capacity(items.len());
                let mut bad = None;
                for it in items {
                    match it {
                        Value::String(s) => v.push(s.clone()),
                        Value::Null => v.push(String::new()),
                        other => {
                            bad = Some(format!(
                                "json: cannot unmarshal {} into Go struct field {outer}.{path} of type string",
                                kind_of(other),
                            ));
                            break;
                        }
                    }
                }
                bad.map_or(Ok(Val::Strs(v)), Err)
            }
            (_, other) => Err(mismatch(kind_of(other).to_string())),
        };
        match got {
            Ok(v) => out.push((field.name, v)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELDS: [Field; 5] = [
        f("auth", "ConnzOptions", Kind::Bool),
        f("limit", "ConnzOptions", Kind::Int),
        f("cid", "ConnzOptions", Kind::Uint),
        f("state", "ConnzOptions", Kind::State),
        f("acc", "ConnzOptions", Kind::Str),
    ];

    fn err(body: &str) -> String {
        decode(body.as_bytes(), "ConnzEventOptions", &FIELDS)
            .err()
            .unwrap_or_default()
    }

    #[test]
    fn errors_are_go_texts() {
        // Each text was captured from nats-server 2.14.0 answering $SYS.REQ.SERVER.PING.CONNZ.
        let cases = [
            (
                r#"{"auth":"x"}"#,
                "json: cannot unmarshal string into Go struct field ConnzEventOptions.ConnzOptions.auth of type bool",
            ),
            (
                r#"{"state":"x"}"#,
                "json: cannot unmarshal string into Go struct field ConnzEventOptions.ConnzOptions.state of type server.ConnState",
            ),
            ("[1]", "json: cannot unmarshal array into Go value of type server.ConnzEventOptions"),
            ("x", "invalid character 'x' looking for beginning of value"),
            (
                r#"{"limit":1.5}"#,
                "json: cannot unmarshal number 1.5 into Go struct field ConnzEventOptions.ConnzOptions.limit of type int",
            ),
            (
                r#"{"cid":-1}"#,
                "json: cannot unmarshal number -1 into Go struct field ConnzEventOptions.ConnzOptions.cid of type uint64",
            ),
            (
                r#"{"limit":"1"}"#,
                "json: cannot unmarshal string into Go struct field ConnzEventOptions.ConnzOptions.limit of type int",
            ),
            (r#"{"a":1,}"#, "invalid character '}' looking for beginning of object key string"),
            (r#"{"a" 1}"#, "invalid character '1' after object key"),
            ("{", "unexpected end of JSON input"),
            ("  ", "unexpected end of JSON input"),
        ];
        for (body, want) in cases {
            assert_eq!(err(body), want, "{body}");
        }
    }

    #[test]
    fn keys_fold_case_and_unknown_or_null_are_ignored() {
        let got = decode(
            br#"{"AUTH":true,"Limit":3,"other":[1],"acc":null,"cid":9,"state":2}"#,
            "ConnzEventOptions",
            &FIELDS,
        );
        assert_eq!(
            got,
            Ok(vec![
                ("auth", Val::Bool(true)),
                ("limit", Val::Int(3)),
                ("cid", Val::Uint(9)),
                ("state", Val::Int(2))
            ])
        );
        assert_eq!(decode(b"null", "X", &FIELDS), Ok(vec![]));
    }

    #[test]
    fn event_filter_matches_like_filter_request() {
        let mut fl = EventFilter::default();
        assert!(!fl.excludes("srv-a", "127.0.0.1", "", &[], ""));
        fl.server_name = "srv".into();
        assert!(!fl.excludes("srv-a", "h", "", &[], ""));
        fl.exact_match = true;
        assert!(fl.excludes("srv-a", "h", "", &[], ""));
        let mut fl = EventFilter {
            tags: vec!["blue".into()],
            ..Default::default()
        };
        assert!(fl.excludes("a", "h", "", &[], ""));
        assert!(!fl.excludes("a", "h", "", &["BLUE".into()], ""));
        fl.tags.clear();
        fl.domain = "hub".into();
        assert!(fl.excludes("a", "h", "", &[], "leaf"));
    }
}
