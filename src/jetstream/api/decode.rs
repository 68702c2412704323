//! Strict decoding of API request bodies with the reference's errors (`400/10025 invalid
//! JSON: <Go's encoding/json text>`).
//!
//! The body is read by [`super::json_scan`] (Go's syntax errors and offsets, a stream of
//! values merged into one request as the reference's decoder loop does), then checked
//! against a [`Schema`] that describes the Go struct the reference decodes into: field
//! names (matched exactly, else ASCII case-insensitively, as Go matches them), Go types for
//! `cannot unmarshal string into Go struct field StreamConfigRequest.StreamConfig.max_msgs of
//! type int64`, integer ranges, the enums' own `can not unmarshal "\"x\""` errors and Go's
//! error precedence (an enum or time error aborts at once; a type or unknown-field error is
//! the first one kept while decoding goes on). The checked value, keys made canonical, is then
//! handed to serde.
//!
//! Not reproduced exactly: a time that fails to parse reports the whole string as the
//! unparsable part (`cannot parse "x" as "2006"`), which is what Go says when the year is
//! already wrong; an enum written with escapes (`"limit\u0073"`) is shown re-encoded, not as
//! typed; Unicode case folding of field names (Go also folds `ſ` and `K`) is ASCII only.

use super::config::StreamConfig;
use super::errors::ApiError;
use super::errors_table::JS_INVALID_JSON_ERR;
use super::json_scan::{parse_stream, JVal};
use super::time::GoTime;
use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};

/// A Go integer type: its name and range.
#[derive(Debug)]
pub struct IntKind {
    pub go: &'static str,
    pub min: i128,
    pub max: i128,
}

pub const INT64: IntKind = IntKind {
    go: "int64",
    min: i64::MIN as i128,
    max: i64::MAX as i128,
};
pub const INT: IntKind = IntKind {
    go: "int",
    min: i64::MIN as i128,
    max: i64::MAX as i128,
};
pub const INT32: IntKind = IntKind {
    go: "int32",
    min: i32::MIN as i128,
    max: i32::MAX as i128,
};
pub const UINT64: IntKind = IntKind {
    go: "uint64",
    min: 0,
    max: u64::MAX as i128,
};
pub const DURATION: IntKind = IntKind {
    go: "time.Duration",
    min: i64::MIN as i128,
    max: i64::MAX as i128,
};

/// What the reference decodes a field into.
#[derive(Debug)]
pub enum Kind {
    Str,
    Bool,
    Int(&'static IntKind),
    /// `time.Time` / `*time.Time` (its own `UnmarshalJSON`).
    Time,
    /// A type with its own `UnmarshalJSON`: given the value and its JSON text, the error.
    Custom(fn(&JVal, &str) -> Result<Value, CustomErr>),
    /// Go type name (`[]string`, `[]*server.StreamSource`) and element.
    Slice(&'static str, &'static Kind),
    /// Go type name (`map[string]string`) and value kind.
    Map(&'static str, &'static Kind),
    Struct(&'static Schema),
}

/// A custom unmarshaler's failure.
#[derive(Debug)]
pub enum CustomErr {
    /// Its own text (`can not unmarshal "\"x\""`).
    Text(String),
    /// A type error of the given JSON kind into the given Go type, reported with the field.
    Type(&'static str, &'static str),
}

/// A JSON field of a Go struct.
#[derive(Debug)]
pub struct Field {
    pub json: &'static str,
    pub kind: Kind,
}

/// A Go struct: its name (`Placement`), its type as Go prints it (`server.Placement`), its
/// own fields and its embedded structs (Go field name and fields).
#[derive(Debug)]
pub struct Schema {
    pub name: &'static str,
    pub go_type: &'static str,
    pub fields: &'static [Field],
    pub embedded: &'static [(&'static str, &'static [Field])],
}

/// Go's `strconv.Quote` for the texts errors show.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The JSON text of a value (strings re-encoded as Go would).
fn raw_text(v: &JVal) -> String {
    match v {
        JVal::Null => "null".into(),
        JVal::Bool(b) => b.to_string(),
        JVal::Num(n) => n.clone(),
        JVal::Str(s) => String::from_utf8(crate::proto::gojson::to_vec(s)).unwrap_or_default(),
        JVal::Arr(_) | JVal::Obj(_) => {
            String::from_utf8(crate::proto::gojson::to_vec(&to_plain(v))).unwrap_or_default()
        }
    }
}

fn to_plain(v: &JVal) -> Value {
    match v {
        JVal::Null => Value::Null,
        JVal::Bool(b) => Value::Bool(*b),
        JVal::Num(n) => n.parse::<Number>().map(Value::Number).unwrap_or(Value::Null),
        JVal::Str(s) => Value::String(s.clone()),
        JVal::Arr(a) => Value::Array(a.iter().map(to_plain).collect()),
        JVal::Obj(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), to_plain(v))).collect()),
    }
}

/// Where decoding is: the innermost struct and the Go field path.
struct Walker {
    saved: Option<String>,
    /// Refuse unknown fields (`DisallowUnknownFields`).
    strict: bool,
}

struct Ctx<'a> {
    strukt: Option<&'static str>,
    path: &'a [&'static str],
}

impl Walker {
    fn save(&mut self, msg: String) {
        if self.saved.is_none() {
            self.saved = Some(msg);
        }
    }

    fn type_err(&mut self, what: &str, go: &str, ctx: &Ctx<'_>) {
        let msg = type_err_text(what, go, ctx);
        self.save(msg);
    }

    /// `Ok(None)`: leave the field as it is (Go's no-op); `Err`: abort with this text.
    fn walk(&mut self, v: &JVal, kind: &Kind, ctx: &Ctx<'_>) -> Result<Option<Value>, String> {
        match (kind, v) {
            (Kind::Custom(f), _) => match f(v, &raw_text(v)) {
                Ok(out) => Ok(Some(out)),
                Err(CustomErr::Text(t)) => Err(t),
                Err(CustomErr::Type(what, go)) => Err(type_err_text(what, go, ctx)),
            },
            (Kind::Time, JVal::Null) => Ok(Some(Value::Null)),
            (Kind::Time, JVal::Str(s)) => match GoTime::parse(s) {
                Some(_) => Ok(Some(Value::String(s.clone()))),
                None => Err(format!(
                    "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse {} as \"2006\"",
                    go_quote(s),
                    go_quote(s)
                )),
            },
            (Kind::Time, _) => Err("Time.UnmarshalJSON: input is not a JSON string".into()),
            (Kind::Slice(..) | Kind::Map(..) | Kind::Struct(_), JVal::Null) => Ok(Some(Value::Null)),
            (_, JVal::Null) => Ok(None),
            (Kind::Str, JVal::Str(s)) => Ok(Some(Value::String(s.clone()))),
            (Kind::Bool, JVal::Bool(b)) => Ok(Some(Value::Bool(*b))),
            (Kind::Int(ik), JVal::Num(n)) => {
                let parsed = if ik.min >= 0 {
                    n.parse::<u64>().ok().map(i128::from)
                } else {
                    n.parse::<i64>().ok().map(i128::from)
                };
                match parsed.filter(|x| *x >= ik.min && *x <= ik.max) {
                    Some(x) => Ok(Some(if x < 0 {
                        Value::from(x as i64)
                    } else {
                        Value::from(x as u64)
                    })),
                    None => {
                        self.type_err(&format!("number {n}"), ik.go, ctx);
                        Ok(None)
                    }
                }
            }
            (Kind::Slice(_, elem), JVal::Arr(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for it in items {
                    out.push(self.walk(it, elem, ctx)?.unwrap_or_else(|| zero_of(elem)));
                }
                Ok(Some(Value::Array(out)))
            }
            (Kind::Map(_, elem), JVal::Obj(members)) => {
                let mut out = Map::new();
                for (k, it) in members {
                    if let Some(x) = self.walk(it, elem, ctx)? {
                        out.insert(k.clone(), x);
                    } else {
                        out.entry(k.clone()).or_insert_with(|| zero_of(elem));
                    }
                }
                Ok(Some(Value::Object(out)))
            }
            (Kind::Struct(schema), JVal::Obj(members)) => self.walk_struct(schema, members, ctx).map(Some),
            (kind, v) => {
                let go = go_name(kind);
                self.type_err(v.kind_name(), go, ctx);
                Ok(None)
            }
        }
    }

    fn walk_struct(
        &mut self,
        schema: &'static Schema,
        members: &[(String, JVal)],
        ctx: &Ctx<'_>,
    ) -> Result<Value, String> {
        let mut out = Map::new();
        for (key, v) in members {
            let Some((prefix, field)) = find_field(schema, key) else {
                if self.strict {
                    self.save(format!("json: unknown field {}", go_quote(key)));
                }
                continue;
            };
            let mut path: Vec<&'static str> = ctx.path.to_vec();
            if let Some(p) = prefix {
                path.push(p);
            }
            path.push(field.json);
            let inner = Ctx {
                strukt: Some(schema.name),
                path: &path,
            };
            if let Some(x) = self.walk(v, &field.kind, &inner)? {
                merge_into(&mut out, field.json, x);
            }
        }
        Ok(Value::Object(out))
    }
}

fn type_err_text(what: &str, go: &str, ctx: &Ctx<'_>) -> String {
    match ctx.strukt {
        Some(s) => format!(
            "json: cannot unmarshal {what} into Go struct field {s}.{} of type {go}",
            ctx.path.join(".")
        ),
        None => format!("json: cannot unmarshal {what} into Go value of type {go}"),
    }
}

fn go_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Str => "string",
        Kind::Bool => "bool",
        Kind::Int(ik) => ik.go,
        Kind::Time => "time.Time",
        Kind::Custom(_) => "",
        Kind::Slice(n, _) | Kind::Map(n, _) => n,
        Kind::Struct(s) => s.go_type,
    }
}

/// What an element left alone by Go holds (its zero value).
fn zero_of(kind: &Kind) -> Value {
    match kind {
        Kind::Str => Value::String(String::new()),
        Kind::Bool => Value::Bool(false),
        Kind::Int(_) => Value::from(0),
        Kind::Struct(_) => Value::Object(Map::new()),
        _ => Value::Null,
    }
}

fn find_field(schema: &'static Schema, key: &str) -> Option<(Option<&'static str>, &'static Field)> {
    let all = || {
        schema.fields.iter().map(|f| (None, f)).chain(
            schema
                .embedded
                .iter()
                .flat_map(|(p, fs)| fs.iter().map(move |f| (Some(*p), f))),
        )
    };
    all()
        .find(|(_, f)| f.json == key)
        .or_else(|| all().find(|(_, f)| f.json.eq_ignore_ascii_case(key)))
}

/// Decoding into a field that already holds an object merges (Go reuses the struct or map).
fn merge_into(out: &mut Map<String, Value>, key: &str, new: Value) {
    match (out.get_mut(key), new) {
        (Some(Value::Object(old)), Value::Object(newm)) => {
            for (k, v) in newm {
                merge_into(old, &k, v);
            }
        }
        (_, new) => {
            out.insert(key.to_string(), new);
        }
    }
}

fn invalid_json(text: impl std::fmt::Display) -> ApiError {
    JS_INVALID_JSON_ERR.err_with(text)
}

/// Check `body` against `schema` as the reference's request decoder does and return the
/// merged, canonical JSON object. An empty body gives an empty object.
pub fn decode_value(body: &[u8], schema: &'static Schema) -> Result<Map<String, Value>, ApiError> {
    let values = parse_stream(body).map_err(invalid_json)?;
    let mut acc = Map::new();
    let top = Kind::Struct(schema);
    for v in &values {
        let mut w = Walker {
            saved: None,
            strict: true,
        };
        let ctx = Ctx {
            strukt: None,
            path: &[],
        };
        let out = w.walk(v, &top, &ctx).map_err(invalid_json)?;
        if let Some(e) = w.saved {
            return Err(invalid_json(e));
        }
        if let Some(Value::Object(m)) = out {
            for (k, x) in m {
                merge_into(&mut acc, &k, x);
            }
        }
    }
    Ok(acc)
}

/// Go's plain `json.Unmarshal` (one value, unknown fields ignored), as direct get decodes;
/// the error is Go's text.
pub fn unmarshal_lenient<T: DeserializeOwned>(body: &[u8], schema: &'static Schema) -> Result<T, String> {
    let v = super::json_scan::parse_one(body).map_err(|e| match e {
        super::json_scan::ScanError::UnexpectedEof => "unexpected end of JSON input".to_string(),
        super::json_scan::ScanError::Syntax { msg, .. } => msg,
    })?;
    let mut w = Walker {
        saved: None,
        strict: false,
    };
    let out = w.walk(
        &v,
        &Kind::Struct(schema),
        &Ctx {
            strukt: None,
            path: &[],
        },
    )?;
    if let Some(e) = w.saved {
        return Err(e);
    }
    let m = match out {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    serde_json::from_value(Value::Object(m)).map_err(|e| e.to_string())
}

fn from_map<T: DeserializeOwned>(m: Map<String, Value>) -> Result<T, ApiError> {
    serde_json::from_value(Value::Object(m)).map_err(|e| invalid_json(format!("json: {e}")))
}

/// A request struct with the Go struct it mirrors.
pub trait GoRequest: DeserializeOwned + Default {
    const SCHEMA: &'static Schema;
}

/// Decode a request body strictly (unknown fields refused); an empty body decodes as the
/// type's zero value, as the reference's decoder leaves it.
pub fn decode<T: GoRequest>(body: &[u8]) -> Result<T, ApiError> {
    decode_as(body, T::SCHEMA)
}

/// [`decode`] against an explicit schema (one Rust type serving several Go request types,
/// as `NamesRequest` does, reports the Go name of the one in use).
pub fn decode_as<T: DeserializeOwned>(body: &[u8], schema: &'static Schema) -> Result<T, ApiError> {
    from_map(decode_value(body, schema)?)
}

/// For requests whose body may be absent: empty (or whitespace) → `T::default()`.
pub fn decode_optional<T: GoRequest>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(T::default());
    }
    decode(body)
}

/// The create/update request: a `StreamConfig` plus `pedantic`.
pub fn decode_stream_create(body: &[u8]) -> Result<(StreamConfig, bool), ApiError> {
    let mut m = decode_value(body, &super::stream_schema::STREAM_CONFIG_REQUEST)?;
    let pedantic = matches!(m.remove("pedantic"), Some(Value::Bool(true)));
    Ok((from_map(m)?, pedantic))
}

/// A bare `StreamConfig` (restore requests, stored configs).
pub fn decode_stream_config(body: &[u8]) -> Result<StreamConfig, ApiError> {
    decode_as(body, &super::stream_schema::STREAM_CONFIG)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create_err(body: &str) -> String {
        let e = decode_stream_create(body.as_bytes()).unwrap_err();
        assert_eq!((e.code, e.err_code), (400, 10025), "{body}");
        e.description
    }

    /// Each text here was observed from the reference (`$JS.API.STREAM.CREATE.A`).
    #[test]
    fn create_request_errors_match_the_reference() {
        let sf = "json: cannot unmarshal";
        let cases: &[(&str, &str)] = &[
            (r#"{"name":"A","foo":1}"#, r#"json: unknown field "foo""#),
            (r#"{"name":"A""#, "unexpected EOF"),
            ("xyz", "invalid character 'x' looking for beginning of value at offset 1"),
            (r#"{"name":"A","max_msgs":"x"}"#, "string into Go struct field StreamConfigRequest.StreamConfig.max_msgs of type int64"),
            (r#"{"name":"A","placement":{"cluster":5}}"#, "number into Go struct field Placement.StreamConfig.placement.cluster of type string"),
            (r#"{"name":"A","mirror":{"name":"B","opt_start_seq":-1}}"#, "number -1 into Go struct field StreamSource.StreamConfig.mirror.opt_start_seq of type uint64"),
            (r#"{"name":"A","sources":[{"name":"B","external":{"api":1}}]}"#, "number into Go struct field ExternalStream.StreamConfig.sources.external.api of type string"),
            (r#"{"name":"A","subjects":[1]}"#, "number into Go struct field StreamConfigRequest.StreamConfig.subjects of type string"),
            (r#"{"name":"A","subjects":"a"}"#, "string into Go struct field StreamConfigRequest.StreamConfig.subjects of type []string"),
            (r#"{"name":"A","metadata":{"a":1}}"#, "number into Go struct field StreamConfigRequest.StreamConfig.metadata of type string"),
            (r#"{"name":"A","max_msg_size":10000000000}"#, "number 10000000000 into Go struct field StreamConfigRequest.StreamConfig.max_msg_size of type int32"),
            (r#"{"name":"A","max_msgs":1.5}"#, "number 1.5 into Go struct field StreamConfigRequest.StreamConfig.max_msgs of type int64"),
            (r#"{"name":"A","max_msgs":1e3}"#, "number 1e3 into Go struct field StreamConfigRequest.StreamConfig.max_msgs of type int64"),
            (r#"{"name":"A","max_msgs":99999999999999999999}"#, "number 99999999999999999999 into Go struct field StreamConfigRequest.StreamConfig.max_msgs of type int64"),
            (r#"{"name":"A","first_seq":-0}"#, "number -0 into Go struct field StreamConfigRequest.StreamConfig.first_seq of type uint64"),
            (r#"{"name":"A","max_age":"1s"}"#, "string into Go struct field StreamConfigRequest.StreamConfig.max_age of type time.Duration"),
            (r#"{"name":"A","max_msgs":true}"#, "bool into Go struct field StreamConfigRequest.StreamConfig.max_msgs of type int64"),
            (r#"{"name":"A","max_msgs":{}}"#, "object into Go struct field StreamConfigRequest.StreamConfig.max_msgs of type int64"),
            (r#"{"name":"A","retention":"foo"}"#, r#"can not unmarshal "\"foo\"""#),
            (r#"{"name":"A","retention":5}"#, r#"can not unmarshal "5""#),
            (r#"{"name":"A","retention":null}"#, r#"can not unmarshal "null""#),
            (r#"{"name":"A","storage":"foo"}"#, r#"can not unmarshal "\"foo\"""#),
            (r#"{"name":"A","discard":"foo"}"#, r#"can not unmarshal "\"foo\"""#),
            (r#"{"name":"A","persist_mode":null}"#, r#"can not unmarshal "null""#),
            (r#"{"name":"A","compression":"foo"}"#, "unknown compression algorithm"),
            (r#"{"name":"A","compression":null}"#, "unknown compression algorithm"),
            (r#"{"name":"A","compression":5}"#, "number into Go struct field StreamConfigRequest.StreamConfig.compression of type string"),
            (r#"{"name":"A","pedantic":"x"}"#, "string into Go struct field StreamConfigRequest.pedantic of type bool"),
            (r#"{"name":"A","mirror":{"name":"B","opt_start_time":"yesterday"}}"#, r#"parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006""#),
            (r#"{"name":"A","mirror":{"name":"B","opt_start_time":5}}"#, "Time.UnmarshalJSON: input is not a JSON string"),
            ("[]", "array into Go value of type server.StreamConfigRequest"),
            (r#""x""#, "string into Go value of type server.StreamConfigRequest"),
            (r#"{"name":"A","foo":1,"max_msgs":"x"}"#, r#"json: unknown field "foo""#),
            (r#"{"max_msgs":"x","name":5}"#, "string into Go struct field StreamConfigRequest.StreamConfig.max_msgs of type int64"),
            (r#"{"foo":1,"retention":"x"}"#, r#"can not unmarshal "\"x\"""#),
            (r#"{"name":"A","subject_transform":{"src":"a","dst":"b"}}"#, r#"json: unknown field "dst""#),
            (r#"{"name":"A","consumer_limits":{"inactive_threshold":"x"}}"#, "string into Go struct field StreamConsumerLimits.StreamConfig.consumer_limits.inactive_threshold of type time.Duration"),
            (r#"{"name":"A","sources":[{"name":"B","subject_transforms":[{"src":1}]}]}"#, "number into Go struct field SubjectTransformConfig.StreamConfig.sources.subject_transforms.src of type string"),
            (r#"{"name":"A","sources":{"name":"B"}}"#, "object into Go struct field StreamConfigRequest.StreamConfig.sources of type []*server.StreamSource"),
            (r#"{"name":"A","sources":[5]}"#, "number into Go struct field StreamConfigRequest.StreamConfig.sources of type server.StreamSource"),
            (r#"{"name":"A","sources":[{"name":"B","subject_transforms":{}}]}"#, "object into Go struct field StreamSource.StreamConfig.sources.subject_transforms of type []server.SubjectTransformConfig"),
            (r#"{"name":"A","placement":"x"}"#, "string into Go struct field StreamConfigRequest.StreamConfig.placement of type server.Placement"),
            (r#"{"name":"A","mirror":"x"}"#, "string into Go struct field StreamConfigRequest.StreamConfig.mirror of type server.StreamSource"),
            (r#"{"name":"A","metadata":[]}"#, "array into Go struct field StreamConfigRequest.StreamConfig.metadata of type map[string]string"),
            (r#"{"name":"A","name":7}"#, "number into Go struct field StreamConfigRequest.StreamConfig.name of type string"),
        ];
        for (body, want) in cases {
            let got = create_err(body);
            let want = if want.starts_with("json:") || !want.contains(" into Go ") {
                want.to_string()
            } else {
                format!("{sf} {want}")
            };
            assert_eq!(got, format!("invalid JSON: {want}"), "{body}");
        }
    }

    #[test]
    fn accepted_bodies() {
        let (c, p) = decode_stream_create(br#"{"NAME":"A","Subjects":["q"],"pedantic":true}"#).unwrap();
        assert_eq!(
            (c.name.as_str(), c.subjects.clone(), p),
            ("A", vec!["q".to_string()], true)
        );
        let (c, p) = decode_stream_create(br#"{"name":"A"} {"subjects":["z"]}"#).unwrap();
        assert_eq!((c.name.as_str(), c.subjects, p), ("A", vec!["z".to_string()], false));
        let (c, _) =
            decode_stream_create(br#"{"name":null,"subjects":null,"max_msgs":null,"persist_mode":""}"#).unwrap();
        assert_eq!(c, StreamConfig::default());
        let (c, _) = decode_stream_create(b"  ").unwrap();
        assert_eq!(c, StreamConfig::default());
        let (c, _) =
            decode_stream_create(br#"{"placement":{"cluster":"a"},"placement":{"tags":["t"]},"max_msgs":-1}"#).unwrap();
        let pl = c.placement.unwrap();
        assert_eq!((pl.cluster.as_str(), pl.tags.len(), c.max_msgs), ("a", 1, -1));
        let c = decode_stream_config(br#"{"name":"S","retention":"workqueue","compression":"s2"}"#).unwrap();
        assert_eq!(c.compression, super::super::config::Compression::S2);
        assert_eq!(
            decode_stream_config(br#"{"name":"S","pedantic":true}"#)
                .unwrap_err()
                .description,
            r#"invalid JSON: json: unknown field "pedantic""#
        );
    }
}
