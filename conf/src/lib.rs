//! The nats-server configuration file format: lexer, parser, typed tree and printer.
//!
//! Module map:
//! - `value`    — the tree: [`Map`] (keys as written, in order), [`Value`] / [`ValueKind`],
//!   [`Position`] (file, line, column of every key and value), [`DateTime`].
//! - `lexer`    — the hand-written lexer state machine (structural states; `lexer/scalar.rs`
//!   holds strings, numbers, dates and blocks).
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
//! Text is read as bytes: invalid UTF-8 in keys and strings becomes U+FFFD. Only ASCII
//! digits start numbers (the reference also treats other Unicode decimal digits as digits,
//! then fails to parse them).
//!
//! Untrusted input never panics, recursion is bounded and sizes are capped ([`Limits`]).

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

pub use convert::suffix_multiplier;
pub use digest::{config_digest, to_go_json};
pub use duration::{format_duration_nanos, parse_duration, parse_duration_nanos, DurationError};
pub use error::{Error, ErrorKind};
pub use parser::{Limits, Parser};
pub use printer::{to_config_string, value_to_config_string, PrintError};
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
