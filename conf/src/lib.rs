//! The nats-server configuration file format: lexer, parser, typed tree and printer.
//!
//! Module map:
//! - `value`    — the tree: [`Map`] (keys as written, in order), [`Value`] / [`ValueKind`],
//!   [`Position`] (file, line, column of every key and value), [`DateTime`].
//! - `lexer`    — the hand-written lexer state machine: tokens and machinery; its states in
//!   `lexer/keys.rs` (top level, keys, includes), `lexer/containers.rs` (arrays, maps,
//!   comments) and `lexer/scalar.rs` (strings, numbers, dates, blocks).
//! - `convert`  — token text to integers (size suffixes), floats, booleans, dates.
//! - `parser`   — [`Parser`] and [`Limits`]: builds the tree, resolves `$variables`
//!   (block-scoped keys, then the environment) and `include`s.
//! - `files`    — reading files with a size cap; Go's path join rules for includes.
//! - `error`    — [`Error`] / [`ErrorKind`], worded as nats-server words them.
//! - `printer`  — [`to_config_string`]: a tree back to config text.
//! - `duration` — Go duration strings ([`parse_duration`], [`parse_duration_nanos`]).
//! - `digest`   — [`config_digest`]: the `sha256:` digest nats-server reports.
//!
//! The format (see nats-server's `conf` package, which this follows closely):
//! `key = value`, `key: value` or `key value`; `{}` maps and `[]` arrays; `#` and `//`
//! comments; `,` or `;` or newlines between entries; quoted (`"..."` with escapes,
//! `'...'` raw) and bare strings; integers with size suffixes (`1k` = 1000,
//! `1kb`/`1ki`/`1kib` = 1024, likewise `m g t p e`); floats; booleans
//! (`true/false/yes/no/on/off`, any case); ISO 8601 Zulu dates; `( ... )` raw blocks
//! closed by a `)` alone on a line; `$name` variables; `include file`.
//!
//! The grammar, its corner cases and the error texts are the reference's (differential
//! tests compare them with nats-server 2.14.0), for instance: `[1]` reads `1]` as a string
//! (a number must be followed by `,`, a blank or a newline); a size suffix followed by an
//! unknown run of `b`/`i` (`1kbb`) sets no value; `8eb` wraps to `i64::MIN`; an include path
//! is always joined to the including file's directory, even one starting with `/`; a
//! `( ... )` block ending at the very end of the input keeps its `)`.
//!
//! Where this crate differs from the reference:
//! - [`Error`]'s `Display` is `file:line:column: message`; [`Error::reference_text`] gives
//!   the reference's exact text (which for syntax errors names only the line).
//! - Text is read as bytes: invalid UTF-8 in keys and strings becomes U+FFFD (one per bad
//!   byte, as Go's JSON encoding of the reference's strings shows them).
//! - Only ASCII digits start numbers (the reference also takes other Unicode decimal digits
//!   for digits, then fails to parse them).
//! - A quoted key spanning lines is placed where it starts (the reference names the line
//!   where it ends). Maps and arrays inside arrays are placed at their opening bracket.
//! - [`Limits`]: nesting depth, include depth and count, include cycles (the reference
//!   recurses until its stack overflows), copies made by variables, and file sizes are
//!   bounded.
//!
//! Untrusted input never panics, recursion is bounded and sizes are capped.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

mod convert;
mod digest;
mod duration;
mod error;
mod files;
mod lexer;
mod parser;
mod printer;
mod value;

pub use digest::{config_digest, to_go_json};
pub use duration::{format_duration_nanos, parse_duration, parse_duration_nanos, DurationError};
pub use error::{Error, ErrorKind};
pub use files::go_os_error;
pub use parser::{Limits, Parser};
pub use printer::{to_config_string, PrintError};
pub use value::{DateTime, Entry, Map, Position, Value, ValueKind};

use std::path::Path;

/// Parses config text with the default [`Parser`] (includes relative to the current
/// directory, `$NAME` falling back to the process environment).
pub fn parse(text: &str) -> Result<Map, Error> {
    Parser::new().parse_str(text)
}

/// Reads and parses a config file with the default [`Parser`].
pub fn parse_file(path: impl AsRef<Path>) -> Result<Map, Error> {
    Parser::new().parse_file(path)
}
