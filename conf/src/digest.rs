//! The config digest nats-server reports as `config_digest` (`sha256:<hex>`): the SHA-256
//! of the tree encoded as Go's `encoding/json` encodes it (keys sorted, HTML-safe string
//! escapes, Go's float formatting, a trailing newline).

use std::fmt::Write;

use sha2::{Digest, Sha256};

use crate::value::{Map, Value, ValueKind};

/// `sha256:<hex>` of [`to_go_json`] plus a newline, as `nats-server -t` prints it.
pub fn config_digest(map: &Map) -> String {
    let mut json = to_go_json(map);
    json.push('\n');
    let sum = Sha256::digest(json.as_bytes());
    let mut out = String::from("sha256:");
    for b in sum {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The tree as compact JSON, byte for byte as Go's `json.Marshal` writes the reference's
/// parse result.
pub fn to_go_json(map: &Map) -> String {
    let mut out = String::new();
    write_map(&mut out, map);
    out
}

fn write_map(out: &mut String, map: &Map) {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (i, (key, entry)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, key);
        out.push(':');
        write_value(out, &entry.value);
    }
    out.push('}');
}

fn write_value(out: &mut String, value: &Value) {
    match &value.kind {
        ValueKind::String(s) => write_string(out, s),
        ValueKind::Integer(i) => {
            let _ = write!(out, "{i}");
        }
        ValueKind::Float(f) => write_float(out, *f),
        ValueKind::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        ValueKind::DateTime(d) => {
            let _ = write!(out, "\"{d}\"");
        }
        ValueKind::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        ValueKind::Map(m) => write_map(out, m),
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Go's JSON float format: shortest digits, positional unless the magnitude is below 1e-6
/// or at least 1e21, then `1e-07` style exponents shortened to `1e-7`.
fn write_float(out: &mut String, f: f64) {
    if !f.is_finite() {
        // Go refuses to encode these; the parser never produces them.
        out.push_str("null");
        return;
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{f:e}");
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        // Go writes at least two exponent digits and then drops the 0 of "e-0N".
        if sign == '-' && digits.len() == 1 {
            let _ = write!(out, "{mantissa}e-{digits}");
        } else {
            let _ = write!(out, "{mantissa}e{sign}{digits:0>2}");
        }
    } else {
        let _ = write!(out, "{f}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float_json(f: f64) -> String {
        let mut s = String::new();
        write_float(&mut s, f);
        s
    }

    #[test]
    fn floats_like_go() {
        assert_eq!(float_json(2.2), "2.2");
        assert_eq!(float_json(1.0), "1");
        assert_eq!(float_json(0.5), "0.5");
        assert_eq!(float_json(-0.0), "-0");
        assert_eq!(float_json(1e21), "1e+21");
        assert_eq!(float_json(1.5e300), "1.5e+300");
        assert_eq!(float_json(1e-7), "1e-7");
        assert_eq!(float_json(1.25e-10), "1.25e-10");
        assert_eq!(float_json(123456789.0), "123456789");
        assert_eq!(float_json(1e20), "100000000000000000000");
    }

    #[test]
    fn strings_like_go() {
        let mut s = String::new();
        write_string(&mut s, "a<b>&\"\\\n\u{1}\u{8}\u{2028}é\u{7f}");
        assert_eq!(
            s,
            r#""a\u003cb\u003e\u0026\"\\\n\u0001\b\u2028é""#.replace('é', "é\u{7f}")
        );
    }
}
