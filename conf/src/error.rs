//! Parse errors: [`Error`] (a position and an [`ErrorKind`]).
//!
//! `Display` gives `file:line:column: message` with the message worded as nats-server
//! words it. [`Error::reference_text`] gives the exact text nats-server prints for the
//! same failure (which for most syntax errors has only a line number).

use std::fmt;

use crate::value::Position;

/// What went wrong. Messages are nats-server's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A lexical or structural error, with the reference's message (e.g. `Unexpected EOF.`).
    #[error("{0}")]
    Syntax(String),
    /// A key without a value at the end of the input.
    #[error("config is invalid")]
    MissingValue,
    #[error("integer '{0}' is out of the range")]
    IntegerRange(String),
    #[error("expected integer, but got '{0}'")]
    Integer(String),
    #[error("float '{0}' is out of the range")]
    FloatRange(String),
    #[error("expected float, but got '{0}'")]
    Float(String),
    #[error("expected boolean value, but got '{0}'")]
    Bool(String),
    #[error("expected Zulu formatted DateTime, but got '{0}'")]
    DateTime(String),
    /// `$name` is neither an earlier key in scope nor an environment variable.
    #[error("variable reference for '{name}' can not be found")]
    VariableNotFound { name: String },
    /// The environment value of `$name` could not be parsed (or referred back to itself).
    #[error("variable reference for '{name}' could not be parsed: {inner}")]
    VariableParse { name: String, inner: Box<Error> },
    #[error("variable reference cycle for '{0}'")]
    VariableCycle(String),
    /// An included file failed to read or parse.
    #[error("error parsing include file '{name}', {inner}")]
    Include { name: String, inner: Box<Error> },
    /// Reading a file failed; the message is worded like Go's (`open x.conf: no such file or directory`).
    #[error("{0}")]
    Io(String),
    /// More nested maps, arrays or braces than [`crate::Limits::max_depth`].
    #[error("exceeded the maximum nesting depth of {0}")]
    TooDeep(usize),
    /// Includes nested deeper than [`crate::Limits::max_include_depth`].
    #[error("exceeded the maximum include depth of {0}")]
    IncludeTooDeep(usize),
    /// More `include`s in one parse than [`crate::Limits::max_includes`].
    #[error("more than {0} includes")]
    TooManyIncludes(usize),
    /// The files of one parse add up to more than [`crate::Limits::max_total_size`].
    #[error("the configuration files add up to more than {0} bytes")]
    TotalSizeTooLarge(u64),
    /// A file includes itself, directly or through others.
    #[error("include cycle: '{0}' is already being parsed")]
    IncludeCycle(String),
    /// Environment variables refer to each other more deeply than
    /// [`crate::Limits::max_env_depth`].
    #[error("exceeded the maximum depth of {0} nested environment variable references")]
    EnvTooDeep(usize),
    /// Variable references copy more data than [`crate::Limits::max_expansion`] allows.
    #[error("variable references expand the configuration beyond {0} bytes")]
    ExpansionTooLarge(usize),
    /// A file is larger than [`crate::Limits::max_file_size`].
    #[error("file '{path}' is larger than {max} bytes")]
    FileTooLarge { path: String, max: u64 },
    /// An inconsistency in the parser's own state (a bug; never a panic).
    #[error("internal parser error: {0}")]
    Internal(&'static str),
}

/// A parse error: what and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    pos: Option<Position>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, pos: Position) -> Error {
        Error { kind, pos: Some(pos) }
    }

    pub(crate) fn without_position(kind: ErrorKind) -> Error {
        Error { kind, pos: None }
    }

    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// Where the error is, when it has a place in a file.
    pub fn position(&self) -> Option<&Position> {
        self.pos.as_ref()
    }

    /// The text nats-server 2.14 prints for the same error (after its `nats-server: `
    /// prefix), e.g. `Parse error on line 3: 'Unexpected EOF.'`.
    pub fn reference_text(&self) -> String {
        let line = self.pos.as_ref().map_or(0, |p| p.line);
        match &self.kind {
            ErrorKind::Syntax(msg) => format!("Parse error on line {line}: '{msg}'"),
            ErrorKind::MissingValue => {
                let pos = self.pos.as_ref().map(ToString::to_string).unwrap_or_default();
                format!("config is invalid ({pos})")
            }
            ErrorKind::VariableNotFound { name } => {
                format!("variable reference for '{name}' on line {line} can not be found")
            }
            ErrorKind::VariableParse { name, inner } => format!(
                "variable reference for '{name}' on line {line} could not be parsed: {}",
                inner.reference_text()
            ),
            ErrorKind::Include { name, inner } => {
                format!("error parsing include file '{name}', {}", inner.reference_text())
            }
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pos {
            Some(pos) => write!(f, "{pos}: {}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

impl std::error::Error for Error {}
