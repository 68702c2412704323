//! JSON the way Go's encoding/json writes it: `<`, `>`, `&`, U+2028 and U+2029 inside
//! strings are escaped. Used for INFO and the monitoring endpoints, whose bytes clients
//! and tools compare.

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};
use std::io;

struct GoEscape<F>(F);

impl<F: Formatter> Formatter for GoEscape<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, w: &mut W, fragment: &str) -> io::Result<()> {
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
            w.write_all(&fragment.as_bytes()[start..i])?;
            w.write_all(esc)?;
            start = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[start..])
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        // Go prints integral floats without a fraction ("2", not "2.0").
        if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e21 {
            write!(w, "{}", value as i64)
        } else {
            self.0.write_f64(w, value)
        }
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// Compact JSON with Go's escaping.
pub fn to_vec<T: Serialize>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, GoEscape(CompactFormatter));
    // Serializing our own plain structs into a Vec cannot fail.
    let _ = v.serialize(&mut ser);
    out
}

/// Whether `s` goes into a JSON string as it is: printable ASCII with nothing Go escapes.
pub fn is_plain(s: &str) -> bool {
    s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && !matches!(b, b'"' | b'\\' | b'<' | b'>' | b'&'))
}

/// Append `s` as a JSON string with Go's escaping. Names and subjects (printable ASCII with
/// nothing to escape) are copied as they are; anything else goes through the serializer.
pub fn push_quoted(out: &mut Vec<u8>, s: &str) {
    if is_plain(s) {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        out.extend_from_slice(&to_vec(&s));
    }
}

/// Indented JSON (two spaces, as nats-server's monitoring endpoints) with Go's escaping.
pub fn to_vec_pretty<T: Serialize>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, GoEscape(PrettyFormatter::with_indent(b"  ")));
    let _ = v.serialize(&mut ser);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_strings_match_the_serializer() {
        for s in [
            "S0",
            "KV_bucket-1",
            "",
            "a\"b",
            "back\\slash",
            "<&>",
            "tab\there",
            "\u{2028}",
            "é",
            "~!@#$%^*()",
        ] {
            let mut out = Vec::new();
            push_quoted(&mut out, s);
            assert_eq!(out, to_vec(&s), "{s:?}");
        }
    }

    #[test]
    fn escapes_like_go() {
        let v = serde_json::json!({"a": "<b>&\u{2028}"});
        assert_eq!(to_vec(&v), br#"{"a":"\u003cb\u003e\u0026\u2028"}"#.to_vec());
        assert_eq!(to_vec(&serde_json::json!([2.0, 0.5])), b"[2,0.5]".to_vec());
    }
}
