//! The parser: builds the [`Map`] tree from the lexer's tokens with an explicit stack of
//! open maps and arrays and a stack of pending keys (as the reference does, so that its
//! treatment of odd inputs carries over), resolves `$variables` and reads includes.
//!
//! [`Parser`] holds the options (limits, environment lookup); each file or string is
//! parsed by a `Doc`, and nested documents (includes, environment values) share one
//! `Session` that enforces the limits across all of them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::convert;
use crate::error::{Error, ErrorKind};
use crate::files;
use crate::lexer::{lossy_string, LexError, Lexer, Token, TokenKind};
use crate::value::{Map, Position, Value, ValueKind};

/// Bounds on untrusted input. The reference has none of these; the defaults are far above
/// what real configurations need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Maximum nesting of maps and arrays (and `{ }` around the whole config). Trees are
    /// dropped, compared and printed recursively, so keep this in the hundreds at most.
    pub max_depth: usize,
    /// Maximum nesting of `include`s.
    pub max_include_depth: usize,
    /// Maximum nesting of environment variables whose values refer to other variables.
    pub max_env_depth: usize,
    /// Approximate bytes that `$variable` references may copy in total.
    pub max_expansion: usize,
    /// Maximum size of one file.
    pub max_file_size: u64,
    /// Maximum number of `include`s in one parse (all levels together).
    pub max_includes: usize,
    /// Maximum bytes read from all files of one parse together.
    pub max_total_size: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_depth: 128,
            max_include_depth: 16,
            max_env_depth: 32,
            max_expansion: 256 << 20,
            max_file_size: 64 << 20,
            max_includes: 10_000,
            max_total_size: 256 << 20,
        }
    }
}

type EnvLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// A configured parser. [`crate::parse`] and [`crate::parse_file`] use the defaults.
pub struct Parser {
    limits: Limits,
    env: Box<EnvLookup>,
}

impl Default for Parser {
    fn default() -> Parser {
        Parser {
            limits: Limits::default(),
            env: Box::new(process_env),
        }
    }
}

impl std::fmt::Debug for Parser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parser")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

fn process_env(name: &str) -> Option<String> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return None;
    }
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

impl Parser {
    pub fn new() -> Parser {
        Parser::default()
    }

    pub fn with_limits(mut self, limits: Limits) -> Parser {
        self.limits = limits;
        self
    }

    /// Replaces the environment lookup used for `$NAME` references that no key defines.
    pub fn with_env(mut self, env: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Parser {
        self.env = Box::new(env);
        self
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Parses config text. Positions carry no file name; includes are relative to the
    /// current directory (as in the reference).
    pub fn parse_str(&self, text: &str) -> Result<Map, Error> {
        self.parse_bytes(text.as_bytes(), None)
    }

    /// Parses config bytes read from `file` (used for positions and to resolve includes).
    pub fn parse_bytes(&self, data: &[u8], file: Option<&Path>) -> Result<Map, Error> {
        let mut session = Session {
            parser: self,
            expansion_left: self.limits.max_expansion,
            includes_left: self.limits.max_includes,
            bytes_left: self.limits.max_total_size,
            includes: Vec::new(),
        };
        session.charge_bytes(data.len()).map_err(Error::without_position)?;
        let (file, base_dir) = match file {
            Some(p) => {
                if let Ok(c) = std::fs::canonicalize(p) {
                    session.includes.push(c);
                }
                (Some(Arc::from(p)), files::dir(&p.to_string_lossy()))
            }
            None => (None, ".".to_string()),
        };
        let mut env_refs = HashSet::new();
        parse_doc(&mut session, data, file, base_dir, &mut env_refs, Depths::default())
    }

    /// Reads and parses a config file.
    pub fn parse_file(&self, path: impl AsRef<Path>) -> Result<Map, Error> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let data = files::read_limited(path, &shown, self.limits.max_file_size).map_err(Error::without_position)?;
        self.parse_bytes(&data, Some(path))
    }
}

/// State shared by a document and the documents it includes or parses from the environment.
struct Session<'p> {
    parser: &'p Parser,
    expansion_left: usize,
    includes_left: usize,
    bytes_left: u64,
    /// Canonical paths of the files being parsed, outermost first.
    includes: Vec<PathBuf>,
}

impl Session<'_> {
    /// Counts `len` bytes of input against [`Limits::max_total_size`].
    fn charge_bytes(&mut self, len: usize) -> Result<(), ErrorKind> {
        let len = len as u64;
        if len > self.bytes_left {
            return Err(ErrorKind::TotalSizeTooLarge(self.parser.limits.max_total_size));
        }
        self.bytes_left -= len;
        Ok(())
    }
}

#[derive(Clone, Copy, Default)]
struct Depths {
    include: usize,
    env: usize,
}

/// An open map or array and where it started.
enum Ctx {
    Map(Map, Position),
    Array(Vec<Value>, Position),
}

impl Ctx {
    fn into_value(self) -> Value {
        match self {
            Ctx::Map(m, pos) => Value::new(ValueKind::Map(m), pos),
            Ctx::Array(a, pos) => Value::new(ValueKind::Array(a), pos),
        }
    }
}

/// Line starts of a document, to turn byte offsets into positions.
struct Lines {
    starts: Vec<usize>,
    file: Option<Arc<Path>>,
}

impl Lines {
    fn new(data: &[u8], file: Option<Arc<Path>>) -> Lines {
        let mut starts = vec![0];
        starts.extend(data.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i + 1));
        Lines { starts, file }
    }

    fn position(&self, offset: usize) -> Position {
        let idx = self.starts.partition_point(|&s| s <= offset).saturating_sub(1);
        let line_start = self.starts.get(idx).copied().unwrap_or(0);
        Position {
            file: self.file.clone(),
            line: idx + 1,
            column: offset.saturating_sub(line_start) + 1,
        }
    }
}

fn parse_doc(
    session: &mut Session<'_>,
    data: &[u8],
    file: Option<Arc<Path>>,
    base_dir: String,
    env_refs: &mut HashSet<String>,
    depths: Depths,
) -> Result<Map, Error> {
    let parser = session.parser;
    let limits = &parser.limits;
    let mut doc = Doc {
        lexer: Lexer::new(data, limits.max_depth.saturating_add(8)),
        lines: Lines::new(data, file),
        base_dir,
        ctxs: vec![Ctx::Map(Map::new(), Position::default())],
        keys: Vec::new(),
        depths,
        max_depth: limits.max_depth,
    };
    doc.run(session, env_refs)
}

struct Doc<'a> {
    lexer: Lexer<'a>,
    lines: Lines,
    /// Directory includes are joined to.
    base_dir: String,
    /// Open maps and arrays; the document's own map is at the bottom.
    ctxs: Vec<Ctx>,
    /// Keys waiting for their values.
    keys: Vec<(String, Position)>,
    depths: Depths,
    max_depth: usize,
}

impl Doc<'_> {
    fn run(&mut self, session: &mut Session<'_>, env_refs: &mut HashSet<String>) -> Result<Map, Error> {
        // Whether the last token was a key other than "}" (a bare "}" at the end is the
        // closing brace of a JSON-like file and is allowed).
        let mut dangling_key = false;
        loop {
            let tok = self.lexer.next_token().map_err(|e| self.lex_error(e))?;
            if tok.kind == TokenKind::Eof {
                if dangling_key {
                    return Err(Error::new(ErrorKind::MissingValue, self.lines.position(tok.offset)));
                }
                break;
            }
            dangling_key = tok.kind == TokenKind::Key && tok.text != b"}";
            self.token(tok, session, env_refs)?;
        }
        match self.ctxs.swap_remove(0) {
            Ctx::Map(map, _) => Ok(map),
            Ctx::Array(..) => Err(Error::without_position(ErrorKind::Internal("document is not a map"))),
        }
    }

    fn lex_error(&self, e: LexError) -> Error {
        let kind = if e.too_deep {
            ErrorKind::TooDeep(self.max_depth)
        } else {
            ErrorKind::Syntax(e.message)
        };
        Error::new(kind, self.lines.position(e.offset))
    }

    fn token(&mut self, tok: Token, session: &mut Session<'_>, env_refs: &mut HashSet<String>) -> Result<(), Error> {
        let pos = self.lines.position(tok.offset);
        let text = || lossy_string(&tok.text);
        let scalar = |kind: Result<ValueKind, ErrorKind>| kind.map_err(|k| Error::new(k, pos.clone()));
        let kind = match tok.kind {
            TokenKind::Key => {
                self.keys.push((text(), pos));
                return Ok(());
            }
            TokenKind::MapStart | TokenKind::ArrayStart => {
                if self.ctxs.len() > self.max_depth {
                    return Err(Error::new(ErrorKind::TooDeep(self.max_depth), pos));
                }
                self.ctxs.push(if tok.kind == TokenKind::MapStart {
                    Ctx::Map(Map::new(), pos)
                } else {
                    Ctx::Array(Vec::new(), pos)
                });
                return Ok(());
            }
            TokenKind::MapEnd | TokenKind::ArrayEnd => {
                if self.ctxs.len() < 2 {
                    return Err(Error::new(ErrorKind::Internal("container end without start"), pos));
                }
                let value = match self.ctxs.pop() {
                    Some(ctx) => ctx.into_value(),
                    None => return Err(Error::new(ErrorKind::Internal("context stack empty"), pos)),
                };
                return self.set_value(value);
            }
            TokenKind::String => ValueKind::String(text()),
            TokenKind::Integer => match convert::integer(&text()) {
                Ok(Some(i)) => ValueKind::Integer(i),
                // An unknown suffix sets nothing (the key stays pending), as in the reference.
                Ok(None) => return Ok(()),
                Err(k) => return Err(Error::new(k, pos)),
            },
            TokenKind::Float => scalar(convert::float(&text()).map(ValueKind::Float))?,
            TokenKind::Bool => scalar(convert::boolean(&text()).map(ValueKind::Bool))?,
            TokenKind::DateTime => scalar(convert::datetime(&text()).map(ValueKind::DateTime))?,
            TokenKind::Variable => {
                let value = self.variable(&text(), &pos, session, env_refs)?;
                return self.set_value(value);
            }
            TokenKind::Include => return self.include(&text(), pos, session),
            TokenKind::Eof => return Ok(()),
        };
        self.set_value(Value::new(kind, pos))
    }

    /// Puts a finished value into the innermost open array, or into the innermost open map
    /// under the latest pending key.
    fn set_value(&mut self, value: Value) -> Result<(), Error> {
        match self.ctxs.last_mut() {
            Some(Ctx::Array(items, _)) => {
                items.push(value);
                Ok(())
            }
            Some(Ctx::Map(map, _)) => match self.keys.pop() {
                Some((key, key_pos)) => {
                    map.insert(key, key_pos, value);
                    Ok(())
                }
                None => Err(Error::new(ErrorKind::Internal("value without a key"), value.pos)),
            },
            None => Err(Error::new(ErrorKind::Internal("no open map or array"), value.pos)),
        }
    }

    /// Open maps and arrays around the current point (0 at the top level).
    fn open_depth(&self) -> usize {
        self.ctxs.len().saturating_sub(1)
    }

    /// Checks that `value` fits under the current nesting and in the expansion budget, and
    /// charges the budget for copying it.
    fn admit(&self, value: &Value, session: &mut Session<'_>, charge: bool) -> Result<(), ErrorKind> {
        let (depth, cost) = value.measure();
        if self.open_depth().saturating_add(depth) > self.max_depth {
            return Err(ErrorKind::TooDeep(self.max_depth));
        }
        if charge {
            if cost > session.expansion_left {
                return Err(ErrorKind::ExpansionTooLarge(session.parser.limits.max_expansion));
            }
            session.expansion_left -= cost;
        }
        Ok(())
    }

    /// Resolves `$name`: an unquoted bcrypt hash (`$2a$...`) is itself; then keys of the
    /// open maps, innermost first; then the environment, whose value is parsed as a value.
    fn variable(
        &mut self,
        name: &str,
        pos: &Position,
        session: &mut Session<'_>,
        env_refs: &mut HashSet<String>,
    ) -> Result<Value, Error> {
        if name.starts_with("2a$") {
            return Ok(Value::new(ValueKind::String(format!("${name}")), pos.clone()));
        }
        let wrap = |inner: Error| {
            Error::new(
                ErrorKind::VariableParse {
                    name: name.to_string(),
                    inner: Box::new(inner),
                },
                pos.clone(),
            )
        };
        let found = self.ctxs.iter_mut().rev().find_map(|ctx| match ctx {
            Ctx::Map(map, _) => map.get_entry_mut(name),
            Ctx::Array(..) => None,
        });
        let mut value = match found {
            Some(entry) => {
                entry.value.used_as_variable = true;
                let found = entry.value.clone();
                self.admit(&found, session, true)
                    .map_err(|k| Error::new(k, pos.clone()))?;
                found
            }
            None => match self.env_variable(name, pos, session, env_refs).map_err(wrap)? {
                Some(v) => v,
                None => {
                    return Err(Error::new(
                        ErrorKind::VariableNotFound { name: name.to_string() },
                        pos.clone(),
                    ))
                }
            },
        };
        value.pos = pos.clone();
        value.used_as_variable = false;
        Ok(value)
    }

    fn env_variable(
        &mut self,
        name: &str,
        pos: &Position,
        session: &mut Session<'_>,
        env_refs: &mut HashSet<String>,
    ) -> Result<Option<Value>, Error> {
        if env_refs.contains(name) {
            return Err(Error::new(ErrorKind::VariableCycle(name.to_string()), pos.clone()));
        }
        let Some(text) = (session.parser.env)(name) else {
            return Ok(None);
        };
        let max_env = session.parser.limits.max_env_depth;
        if self.depths.env >= max_env {
            return Err(Error::new(ErrorKind::EnvTooDeep(max_env), pos.clone()));
        }
        // Each use parses the value again: count the text as copied.
        if text.len() > session.expansion_left {
            let max = session.parser.limits.max_expansion;
            return Err(Error::new(ErrorKind::ExpansionTooLarge(max), pos.clone()));
        }
        session.expansion_left -= text.len();
        // The value is parsed as the value of a key, so `22` is an integer and `{a: 1}` a map.
        let data = format!("pk={text}");
        env_refs.insert(name.to_string());
        let depths = Depths {
            env: self.depths.env + 1,
            ..self.depths
        };
        let parsed = parse_doc(session, data.as_bytes(), None, ".".to_string(), env_refs, depths);
        env_refs.remove(name);
        let Some(entry) = parsed?.remove("pk") else {
            return Ok(None);
        };
        let mut value = entry.value;
        value.set_positions(pos);
        self.admit(&value, session, true)
            .map_err(|k| Error::new(k, pos.clone()))?;
        Ok(Some(value))
    }

    /// `include name`: parses the file (joined to this file's directory) on its own (its
    /// variables see only its own keys and the environment) and sets its keys here.
    fn include(&mut self, name: &str, pos: Position, session: &mut Session<'_>) -> Result<(), Error> {
        let parser = session.parser;
        let limits = &parser.limits;
        if self.depths.include >= limits.max_include_depth {
            return Err(Error::new(ErrorKind::IncludeTooDeep(limits.max_include_depth), pos));
        }
        let wrap = |inner: Error| {
            Error::new(
                ErrorKind::Include {
                    name: name.to_string(),
                    inner: Box::new(inner),
                },
                pos.clone(),
            )
        };
        if session.includes_left == 0 {
            return Err(Error::new(ErrorKind::TooManyIncludes(limits.max_includes), pos));
        }
        session.includes_left -= 1;
        let path = files::join(&self.base_dir, name);
        let data = files::read_limited(Path::new(&path), &path, limits.max_file_size)
            .map_err(|k| wrap(Error::without_position(k)))?;
        session
            .charge_bytes(data.len())
            .map_err(|k| Error::new(k, pos.clone()))?;
        let canonical = std::fs::canonicalize(&path).ok();
        if let Some(c) = &canonical {
            if session.includes.contains(c) {
                return Err(wrap(Error::without_position(ErrorKind::IncludeCycle(path))));
            }
            session.includes.push(c.clone());
        }
        let file: Arc<Path> = Arc::from(Path::new(&path));
        let depths = Depths {
            include: self.depths.include + 1,
            ..self.depths
        };
        let mut env_refs = HashSet::new();
        let parsed = parse_doc(session, &data, Some(file), files::dir(&path), &mut env_refs, depths);
        if canonical.is_some() {
            session.includes.pop();
        }
        for (key, entry) in parsed.map_err(wrap)? {
            self.admit(&entry.value, session, false)
                .map_err(|k| Error::new(k, pos.clone()))?;
            self.keys.push((key, entry.key_pos));
            self.set_value(entry.value)?;
        }
        Ok(())
    }
}
