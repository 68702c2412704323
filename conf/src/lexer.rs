//! The lexer: a hand-written state machine over the raw bytes of a file, pulled one token
//! at a time by the parser.
//!
//! The states follow the reference lexer's grammar closely, including its corner cases
//! (a NUL byte acts as end of input, `[1]` lexes `1]` as a string, a bare `}` at the top
//! level is a key, ...), because configs accepted by nats-server must be accepted here
//! with the same meaning. Nothing recurses: nesting lives on an explicit, bounded stack.
//! This file holds the token types and the machinery; the states are in `lexer/keys.rs`
//! (top level, braces, keys, includes), `lexer/containers.rs` (arrays, maps, comments) and
//! `lexer/scalar.rs` (values).

mod containers;
mod keys;
mod scalar;

use std::collections::VecDeque;

/// Stands for end of input; a NUL byte in the input reads the same (as in the reference).
pub(crate) const EOF: char = '\0';

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenKind {
    Key,
    String,
    Bool,
    Integer,
    Float,
    DateTime,
    ArrayStart,
    ArrayEnd,
    MapStart,
    MapEnd,
    Variable,
    Include,
    Eof,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: TokenKind,
    /// The token's text after escapes (raw bytes: `\xNN` escapes may make it invalid UTF-8).
    pub text: Vec<u8>,
    /// Byte offset in the input where the token starts.
    pub offset: usize,
}

/// A lexical error: the reference's message and the byte offset it reports it at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LexError {
    pub message: String,
    pub offset: usize,
    /// The stack limit was hit (reported as a nesting error, not a syntax error).
    pub too_deep: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Top,
    TopValueEnd,
    BlockStart,
    BlockValueEnd,
    BlockEnd,
    KeyStart,
    DubQuotedKey,
    QuotedKey,
    Key,
    KeyEnd,
    IncludeStart,
    Include,
    IncludeQuotedString,
    IncludeDubQuotedString,
    IncludeString,
    Value,
    ArrayValue,
    ArrayValueEnd,
    ArrayEnd,
    MapKeyStart,
    MapQuotedKey,
    MapDubQuotedKey,
    MapKey,
    MapKeyEnd,
    MapValue,
    MapValueEnd,
    MapEnd,
    QuotedString,
    DubQuotedString,
    String,
    Block,
    StringEscape,
    StringBinary,
    NumberStart,
    Number,
    ConvenientNumber,
    DateAfterYear,
    NegNumberStart,
    NegNumber,
    FloatStart,
    Float,
    IpAddr,
    CommentStart,
    Comment,
    Done,
}

type Step = Result<State, LexError>;

pub(crate) struct Lexer<'a> {
    input: &'a [u8],
    /// Start of the text not yet emitted or skipped.
    start: usize,
    /// Current read position.
    pos: usize,
    /// Byte width of the last character read (0 at end of input).
    width: usize,
    /// Where the token being read began (`start` moves past escape sequences; this does not).
    item_start: usize,
    state: State,
    stack: Vec<State>,
    max_stack: usize,
    /// Text gathered so far for a string with escape sequences.
    parts: Vec<u8>,
    /// The string state an escape sequence returns to.
    string_state: State,
    pending: VecDeque<Token>,
}

impl<'a> Lexer<'a> {
    /// A lexer over `input` whose state stack may hold at most `max_stack` entries.
    pub(crate) fn new(input: &'a [u8], max_stack: usize) -> Lexer<'a> {
        Lexer {
            input,
            start: 0,
            pos: 0,
            width: 0,
            item_start: 0,
            state: State::Top,
            stack: Vec::new(),
            max_stack,
            parts: Vec::new(),
            string_state: State::String,
            pending: VecDeque::new(),
        }
    }

    /// The next token; after [`TokenKind::Eof`] or an error, keeps returning `Eof`.
    pub(crate) fn next_token(&mut self) -> Result<Token, LexError> {
        loop {
            if let Some(tok) = self.pending.pop_front() {
                return Ok(tok);
            }
            if self.state == State::Done {
                return Ok(Token {
                    kind: TokenKind::Eof,
                    text: Vec::new(),
                    offset: self.pos,
                });
            }
            match self.step(self.state) {
                Ok(next) => self.state = next,
                Err(e) => {
                    self.state = State::Done;
                    return Err(e);
                }
            }
        }
    }

    fn step(&mut self, state: State) -> Step {
        match state {
            State::Top => self.top(),
            State::TopValueEnd => self.top_value_end(),
            State::BlockStart => self.block_start(),
            State::BlockValueEnd => self.block_value_end(),
            State::BlockEnd => self.block_end(),
            State::KeyStart => self.key_start(),
            State::DubQuotedKey => self.quoted_key(b'"', State::KeyEnd, None),
            State::QuotedKey => self.quoted_key(b'\'', State::KeyEnd, None),
            State::Key => self.key(),
            State::KeyEnd => self.key_end(),
            State::IncludeStart => self.include_start(),
            State::Include => self.include(),
            State::IncludeQuotedString => self.include_quoted('\'', "Unexpected EOF in quoted include"),
            State::IncludeDubQuotedString => self.include_quoted('"', "Unexpected EOF in double quoted include"),
            State::IncludeString => self.include_string(),
            State::Value => self.value(),
            State::ArrayValue => self.array_value(),
            State::ArrayValueEnd => self.array_value_end(),
            State::ArrayEnd => self.container_end(TokenKind::ArrayEnd),
            State::MapKeyStart => self.map_key_start(),
            State::MapQuotedKey => self.quoted_key(
                b'\'',
                State::MapKeyEnd,
                Some("Unexpected EOF processing quoted map key."),
            ),
            State::MapDubQuotedKey => self.quoted_key(
                b'"',
                State::MapKeyEnd,
                Some("Unexpected EOF processing double quoted map key."),
            ),
            State::MapKey => self.map_key(),
            State::MapKeyEnd => self.map_key_end(),
            State::MapValue => self.map_value(),
            State::MapValueEnd => self.map_value_end(),
            State::MapEnd => self.container_end(TokenKind::MapEnd),
            State::QuotedString => self.quoted_string(),
            State::DubQuotedString => self.dub_quoted_string(),
            State::String => self.string(),
            State::Block => self.block(),
            State::StringEscape => self.string_escape(),
            State::StringBinary => self.string_binary(),
            State::NumberStart => self.number_start(),
            State::Number => self.number(),
            State::ConvenientNumber => self.convenient_number(),
            State::DateAfterYear => self.date_after_year(),
            State::NegNumberStart => self.neg_number_start(),
            State::NegNumber => self.neg_number(),
            State::FloatStart => self.float_start(),
            State::Float => self.float(),
            State::IpAddr => self.ip_addr(),
            State::CommentStart => {
                self.ignore();
                Ok(State::Comment)
            }
            State::Comment => self.comment(),
            State::Done => Ok(State::Done),
        }
    }

    // ---- machinery -------------------------------------------------------------------

    /// Reads one character; invalid UTF-8 reads as U+FFFD of width 1, end of input as
    /// [`EOF`] of width 0.
    fn next(&mut self) -> char {
        let rest = self.input.get(self.pos..).unwrap_or_default();
        if rest.is_empty() {
            self.width = 0;
            return EOF;
        }
        let (c, w) = decode_char(rest);
        self.width = w;
        self.pos += w;
        c
    }

    /// Steps back over the last character read (once per `next`, except where the
    /// reference deliberately steps back twice by the same width).
    fn backup(&mut self) {
        self.pos = self.pos.saturating_sub(self.width);
    }

    fn peek(&mut self) -> char {
        let c = self.next();
        self.backup();
        c
    }

    /// Drops the text read so far.
    fn ignore(&mut self) {
        self.start = self.pos;
        self.item_start = self.pos;
    }

    fn take_text(&mut self) -> Vec<u8> {
        let mut text = std::mem::take(&mut self.parts);
        text.extend_from_slice(self.input.get(self.start..self.pos).unwrap_or_default());
        text
    }

    fn emit(&mut self, kind: TokenKind) {
        let offset = if kind == TokenKind::Eof {
            // Where the pending text (a NUL read as end of input, say) starts, as the
            // reference reports it.
            self.pos
                .saturating_sub(self.parts.len() + self.pos.saturating_sub(self.start))
        } else {
            self.item_start
        };
        self.emit_at(kind, offset);
    }

    fn emit_at(&mut self, kind: TokenKind, offset: usize) {
        let text = self.take_text();
        self.pending.push_back(Token { kind, text, offset });
        self.start = self.pos;
        self.item_start = self.pos;
    }

    fn push(&mut self, state: State) -> Result<(), LexError> {
        if self.stack.len() >= self.max_stack {
            return Err(LexError {
                message: String::new(),
                offset: self.pos,
                too_deep: true,
            });
        }
        self.stack.push(state);
        Ok(())
    }

    /// The closing quote was just read: emit the token before it, skip the quote, and
    /// return to the enclosing state.
    fn emit_closed(&mut self, kind: TokenKind) -> Step {
        self.backup();
        self.emit(kind);
        self.next();
        self.ignore();
        self.pop()
    }

    fn pop(&mut self) -> Step {
        match self.stack.pop() {
            Some(s) => Ok(s),
            None => self.error("BUG in lexer: no states to pop.".to_string()),
        }
    }

    fn error(&self, message: String) -> Step {
        Err(LexError {
            message,
            offset: self.pos,
            too_deep: false,
        })
    }

    /// The text since `start`, for keyword and boolean checks.
    fn pending_text(&self) -> &[u8] {
        self.input.get(self.start..self.pos).unwrap_or_default()
    }

    /// Shared end-of-input handling of the top-level and block states: fine when nothing
    /// is pending, else "Unexpected EOF.".
    fn eof_or_error(&mut self) -> Step {
        if self.pos > self.start {
            return self.error("Unexpected EOF.".to_string());
        }
        self.emit(TokenKind::Eof);
        Ok(State::Done)
    }

    /// After a `/` was read: `//` starts a comment (returning to `ret`); otherwise the
    /// second character is put back and `None` returned.
    fn slash_comment(&mut self, ret: State) -> Result<Option<State>, LexError> {
        if self.next() == '/' {
            self.push(ret)?;
            return Ok(Some(State::CommentStart));
        }
        self.backup();
        Ok(None)
    }
}

/// Decodes the first character of `bytes` (non-empty) the way Go does: an invalid or
/// truncated sequence reads as U+FFFD of width 1.
pub(crate) fn decode_char(bytes: &[u8]) -> (char, usize) {
    let Some(&b0) = bytes.first() else {
        return (EOF, 0);
    };
    if b0 < 0x80 {
        return (char::from(b0), 1);
    }
    let head = bytes.get(..bytes.len().min(4)).unwrap_or_default();
    let valid = match std::str::from_utf8(head) {
        Ok(s) => s,
        Err(e) => head
            .get(..e.valid_up_to())
            .and_then(|v| std::str::from_utf8(v).ok())
            .unwrap_or_default(),
    };
    match valid.chars().next() {
        Some(c) => (c, c.len_utf8()),
        None => (char::REPLACEMENT_CHARACTER, 1),
    }
}

/// Converts token bytes to a `String` the way Go's range-over-string sees them: each byte
/// of an invalid sequence becomes one U+FFFD.
pub(crate) fn lossy_string(mut bytes: &[u8]) -> String {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return s.to_string();
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    while !bytes.is_empty() {
        let (c, w) = decode_char(bytes);
        out.push(c);
        bytes = bytes.get(w.max(1)..).unwrap_or_default();
    }
    out
}

/// Go's `unicode.IsDigit`, restricted to ASCII digits (non-ASCII decimal digits are read
/// as ordinary characters here; see the crate docs).
pub(crate) fn is_digit(r: char) -> bool {
    r.is_ascii_digit()
}

/// Space or tab: the in-line whitespace of the format.
fn is_blank(r: char) -> bool {
    r == ' ' || r == '\t'
}

fn is_nl(r: char) -> bool {
    r == '\n' || r == '\r'
}

fn is_key_separator(r: char) -> bool {
    r == '=' || r == ':'
}

fn is_number_suffix(r: char) -> bool {
    matches!(r, 'k' | 'K' | 'm' | 'M' | 'g' | 'G' | 't' | 'T' | 'p' | 'P' | 'e' | 'E')
}

/// How the reference shows a character in a message: a newline as `\n`, everything else
/// (even NUL) as itself.
fn escape_special(r: char) -> String {
    if r == '\n' {
        "\\n".to_string()
    } else {
        r.to_string()
    }
}

/// `include`, compared with Go's simple lower-casing (where `İ` lowers to `i`).
pub(crate) fn is_include_keyword(text: &[u8]) -> bool {
    if text.eq_ignore_ascii_case(b"include") {
        return true;
    }
    let Ok(s) = std::str::from_utf8(text) else {
        return false;
    };
    let lowered: Option<String> = s
        .chars()
        .map(|c| match c {
            '\u{130}' => Some('i'),
            c if c.is_ascii() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect();
    lowered.as_deref() == Some("include")
}

#[cfg(test)]
mod tests;
