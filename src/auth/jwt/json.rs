//! JSON the way Go's `encoding/json` writes and reads it, as far as tokens depend on it.
//!
//! - Writing: compact, struct fields in declaration order, map keys sorted (the claim
//!   structs use `BTreeMap`), and strings escaped like Go: `<`, `>`, `&`, U+2028 and U+2029
//!   become `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029`; the rest is serde_json's
//!   escaping, which is Go's (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u00xx`). The `jti`
//!   hash is taken over these bytes, so the same claims give the same token as jwt v2.
//! - Reading: Go ignores a JSON `null` for any field; [`strip_nulls`] removes `null` object
//!   members before the typed structs (all `#[serde(default)]`) see them.
//! - [`go_quote`]: Go's `%q` for the error texts that quote input.

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;
use serde_json::Value;

/// serde_json's compact formatter plus Go's HTML-safe escaping.
struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let esc: &[u8] = match c {
                '<' => b"\\u003c",
                '>' => b"\\u003e",
                '&' => b"\\u0026",
                '\u{2028}' => b"\\u2028",
                '\u{2029}' => b"\\u2029",
                _ => continue,
            };
            writer.write_all(fragment.get(start..i).unwrap_or_default().as_bytes())?;
            writer.write_all(esc)?;
            start = i + c.len_utf8();
        }
        writer.write_all(fragment.get(start..).unwrap_or_default().as_bytes())
    }
}

/// Serializes `value` to the bytes Go's `json.Marshal` would produce for the same data.
pub(crate) fn go_marshal<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
    value.serialize(&mut ser)?;
    Ok(out)
}

/// The JSON text jwt v2 writes for `value` (claims or any part of them).
pub fn to_go_json<T: Serialize + ?Sized>(value: &T) -> Result<String, super::JwtError> {
    let bytes = go_marshal(value)?;
    String::from_utf8(bytes).map_err(|e| super::JwtError::Json(e.to_string()))
}

/// Removes every `null` member of every object, recursively (also inside arrays), so that a
/// `null` reads as "absent" like it does for Go. `null` array elements stay.
pub(crate) fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Go's `%q`/`strconv.Quote`: double quotes, `\"` and `\\`, the short escapes, `\xNN` for
/// other ASCII controls and `\uNNNN` for other non-printable characters.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' || c == '\u{feff}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `skip_serializing_if` helper: Go's `omitempty` for numbers and other `Default` values.
pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// `skip_serializing_if` helper for `bool` (`omitempty` drops `false`).
pub(crate) fn is_false(v: &bool) -> bool {
    !*v
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_go() {
        let cases = [
            ("plain", r#""plain""#),
            ("a<b>&c", r#""a\u003cb\u003e\u0026c""#),
            ("line\u{2028}sep\u{2029}", r#""line\u2028sep\u2029""#),
            ("q\"\\\n\r\t\u{8}\u{c}\u{1}", r#""q\"\\\n\r\t\b\f\u0001""#),
            ("é☃", "\"é☃\""),
        ];
        for (input, want) in cases {
            let got = String::from_utf8(go_marshal(input).unwrap()).unwrap();
            assert_eq!(got, want, "{input:?}");
        }
    }

    #[test]
    fn nulls_are_stripped_in_objects_only() {
        let mut v: Value = serde_json::from_str(r#"{"a":null,"b":{"c":null,"d":1},"e":[null,{"f":null}]}"#).unwrap();
        strip_nulls(&mut v);
        assert_eq!(v.to_string(), r#"{"b":{"d":1},"e":[null,{}]}"#);
    }

    #[test]
    fn quotes_like_go() {
        assert_eq!(go_quote("JwT"), r#""JwT""#);
        assert_eq!(go_quote("a\"b\\"), r#""a\"b\\""#);
        assert_eq!(go_quote("\n\u{1}\u{7f}"), r#""\n\x01\x7f""#);
        assert_eq!(go_quote("\u{85}"), r#""\u0085""#);
    }
}
