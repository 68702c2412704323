//! Writing a tree back out in the config format, such that parsing the output gives back
//! an equal tree (positions aside).
//!
//! Keys are bare when that is unambiguous and quoted otherwise; strings are always
//! double-quoted with escapes, so that none reads back as a number, boolean or variable;
//! every value ends its line (an integer followed by `]` would read back as a string).

use std::fmt::Write;

use crate::lexer::is_include_keyword;
use crate::value::{Map, Value, ValueKind};

/// Deepest tree the printer writes (it recurses; parsed trees are far shallower).
const MAX_PRINT_DEPTH: usize = 512;

/// A tree that cannot be written in the config format.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PrintError {
    /// Quoted keys have no escapes: a key holding NUL, or both `"` and `'`, has no spelling.
    #[error("key {0:?} cannot be written: it holds a NUL character or both kinds of quote")]
    Key(String),
    #[error("float {0} cannot be written: the format has no infinities or NaN")]
    NonFinite(f64),
    #[error("tree nested deeper than {MAX_PRINT_DEPTH} levels")]
    TooDeep,
}

/// Writes `map` as a config document (one `key = value` per line, two-space indents).
pub fn to_config_string(map: &Map) -> Result<String, PrintError> {
    let mut out = String::new();
    write_entries(&mut out, map, 0)?;
    Ok(out)
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write_entries(out: &mut String, map: &Map, level: usize) -> Result<(), PrintError> {
    for (key, entry) in map.iter() {
        indent(out, level);
        write_key(out, key)?;
        match entry.value.kind {
            // `key { ... }` and `key [ ... ]` need no separator.
            ValueKind::Map(_) | ValueKind::Array(_) => out.push(' '),
            _ => out.push_str(" = "),
        }
        write_value(out, &entry.value, level)?;
        out.push('\n');
    }
    Ok(())
}

fn write_value(out: &mut String, value: &Value, level: usize) -> Result<(), PrintError> {
    if level > MAX_PRINT_DEPTH {
        return Err(PrintError::TooDeep);
    }
    match &value.kind {
        ValueKind::String(s) => write_string(out, s),
        ValueKind::Integer(i) => {
            let _ = write!(out, "{i}");
        }
        ValueKind::Float(f) => write_float(out, *f)?,
        ValueKind::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        ValueKind::DateTime(d) => {
            let _ = write!(out, "{d}");
        }
        ValueKind::Map(m) if m.is_empty() => out.push_str("{}"),
        ValueKind::Map(m) => {
            out.push_str("{\n");
            write_entries(out, m, level + 1)?;
            indent(out, level);
            out.push('}');
        }
        ValueKind::Array(items) if items.is_empty() => out.push_str("[]"),
        ValueKind::Array(items) => {
            out.push_str("[\n");
            for item in items {
                indent(out, level + 1);
                write_value(out, item, level + 1)?;
                out.push('\n');
            }
            indent(out, level);
            out.push(']');
        }
    }
    Ok(())
}

fn write_key(out: &mut String, key: &str) -> Result<(), PrintError> {
    let mut chars = key.chars();
    let bare = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !is_include_keyword(key.as_bytes());
    if bare {
        out.push_str(key);
        return Ok(());
    }
    if key.contains('\0') {
        return Err(PrintError::Key(key.to_string()));
    }
    let quote = if !key.contains('"') {
        '"'
    } else if !key.contains('\'') {
        '\''
    } else {
        return Err(PrintError::Key(key.to_string()));
    };
    out.push(quote);
    out.push_str(key);
    out.push(quote);
    Ok(())
}

/// A double-quoted string with Go's escapes (`strconv.Quote` for these texts).
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_float(out: &mut String, f: f64) -> Result<(), PrintError> {
    if !f.is_finite() {
        return Err(PrintError::NonFinite(f));
    }
    // Display never uses an exponent and gives the shortest digits that read back exactly;
    // the format needs a '.' with digits on both sides.
    let text = f.to_string();
    out.push_str(&text);
    if !text.contains('.') {
        out.push_str(".0");
    }
    Ok(())
}
