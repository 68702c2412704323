//! Structural states of the lexer, part 1: the top level, `{ ... }` around the whole
//! config, keys (bare and quoted, and the `include` keyword) and include paths.

use super::{
    escape_special, is_blank, is_digit, is_include_keyword, is_key_separator, is_nl, Lexer, State, Step, TokenKind, EOF,
};

impl Lexer<'_> {
    // ---- top level and `{ ... }` around the whole config --------------------------------

    pub(super) fn top(&mut self) -> Step {
        let r = self.next();
        if r.is_whitespace() {
            self.ignore();
            return Ok(State::Top);
        }
        match r {
            '{' => {
                self.push(State::Top)?;
                self.ignore();
                Ok(State::BlockStart)
            }
            '#' => {
                self.push(State::Top)?;
                Ok(State::CommentStart)
            }
            '/' => match self.slash_comment(State::Top)? {
                Some(s) => Ok(s),
                None => self.eof_or_error(),
            },
            EOF => self.eof_or_error(),
            _ => {
                self.backup();
                self.push(State::TopValueEnd)?;
                Ok(State::KeyStart)
            }
        }
    }

    pub(super) fn top_value_end(&mut self) -> Step {
        let r = self.next();
        match r {
            '#' => {
                self.push(State::Top)?;
                Ok(State::CommentStart)
            }
            '/' => Ok(self.slash_comment(State::Top)?.unwrap_or(State::TopValueEnd)),
            _ if is_blank(r) => Ok(State::TopValueEnd),
            _ if is_nl(r) || r == EOF || r == ';' || r == ',' || r == '}' => {
                self.ignore();
                Ok(State::Top)
            }
            _ => self.error(format!(
                "Expected a top-level value to end with a new line, comment or EOF, but got '{}' instead.",
                escape_special(r)
            )),
        }
    }

    pub(super) fn block_start(&mut self) -> Step {
        let r = self.next();
        if r.is_whitespace() {
            self.ignore();
            return Ok(State::BlockStart);
        }
        match r {
            '{' => {
                self.push(State::BlockEnd)?;
                self.ignore();
                Ok(State::BlockStart)
            }
            '}' => {
                self.ignore();
                self.pop()
            }
            '#' => {
                self.push(State::BlockStart)?;
                Ok(State::CommentStart)
            }
            '/' => match self.slash_comment(State::BlockStart)? {
                Some(s) => Ok(s),
                None => self.eof_or_error(),
            },
            EOF => self.eof_or_error(),
            _ => {
                self.backup();
                self.push(State::BlockValueEnd)?;
                Ok(State::KeyStart)
            }
        }
    }

    pub(super) fn block_value_end(&mut self) -> Step {
        let r = self.next();
        match r {
            '#' => {
                self.push(State::BlockValueEnd)?;
                Ok(State::CommentStart)
            }
            '/' => Ok(self
                .slash_comment(State::BlockValueEnd)?
                .unwrap_or(State::BlockValueEnd)),
            _ if is_blank(r) => Ok(State::BlockValueEnd),
            _ if is_nl(r) || r == ';' || r == ',' => {
                self.ignore();
                Ok(State::BlockStart)
            }
            '}' => {
                self.backup();
                Ok(State::BlockEnd)
            }
            _ => self.error(format!(
                "Expected a block-level value to end with a new line, comment or EOF, but got '{}' instead.",
                escape_special(r)
            )),
        }
    }

    pub(super) fn block_end(&mut self) -> Step {
        let r = self.next();
        match r {
            '#' => {
                self.push(State::BlockStart)?;
                Ok(State::CommentStart)
            }
            '/' => Ok(self.slash_comment(State::BlockStart)?.unwrap_or(State::BlockEnd)),
            _ if is_nl(r) || is_blank(r) => Ok(State::BlockEnd),
            ';' | ',' => {
                self.ignore();
                Ok(State::BlockStart)
            }
            '}' => {
                self.ignore();
                self.pop()
            }
            _ => self.error(format!(
                "Expected a block-level to end with a '}}', but got '{}' instead.",
                escape_special(r)
            )),
        }
    }

    // ---- keys and includes ------------------------------------------------------------

    pub(super) fn key_start(&mut self) -> Step {
        let r = self.peek();
        match r {
            '=' | ':' => self.error(format!("Unexpected key separator '{r}'")),
            _ if r.is_whitespace() => {
                self.next();
                self.ignore();
                Ok(State::KeyStart)
            }
            '"' => {
                self.next();
                self.ignore();
                Ok(State::DubQuotedKey)
            }
            '\'' => {
                self.next();
                self.ignore();
                Ok(State::QuotedKey)
            }
            _ => {
                self.ignore();
                self.next();
                Ok(State::Key)
            }
        }
    }

    /// A quoted key (no escapes). `eof_message` is the map states' error at end of input;
    /// the top-level states instead end quietly when nothing is pending.
    pub(super) fn quoted_key(&mut self, quote: u8, then: State, eof_message: Option<&str>) -> Step {
        let r = self.peek();
        if r == char::from(quote) {
            self.emit(TokenKind::Key);
            self.next();
            self.ignore();
            return Ok(then);
        }
        if r == EOF {
            return match eof_message {
                Some(m) => self.error(m.to_string()),
                None => self.eof_or_error(),
            };
        }
        self.next();
        // Still inside the key: stay in the state that called.
        Ok(self.state)
    }

    pub(super) fn key(&mut self) -> Step {
        let r = self.peek();
        if r.is_whitespace() {
            return self.keyword_or_key(State::KeyEnd, None);
        }
        if is_key_separator(r) || r == EOF {
            self.emit(TokenKind::Key);
            return Ok(State::KeyEnd);
        }
        self.next();
        Ok(State::Key)
    }

    /// A bare key followed by whitespace may be the `include` keyword.
    pub(super) fn keyword_or_key(&mut self, then: State, after_include: Option<State>) -> Step {
        if is_include_keyword(self.pending_text()) {
            self.ignore();
            if let Some(s) = after_include {
                self.push(s)?;
            }
            return Ok(State::IncludeStart);
        }
        self.emit(TokenKind::Key);
        Ok(then)
    }

    pub(super) fn key_end(&mut self) -> Step {
        let r = self.next();
        if r.is_whitespace() {
            self.ignore();
            return Ok(State::KeyEnd);
        }
        if is_key_separator(r) {
            self.ignore();
            return Ok(State::Value);
        }
        if r == EOF {
            self.emit(TokenKind::Eof);
            return Ok(State::Done);
        }
        self.backup();
        Ok(State::Value)
    }

    pub(super) fn include_start(&mut self) -> Step {
        let r = self.next();
        if is_blank(r) {
            self.ignore();
            return Ok(State::IncludeStart);
        }
        self.backup();
        Ok(State::Include)
    }

    pub(super) fn include(&mut self) -> Step {
        let r = self.next();
        let what = match r {
            '\'' => {
                self.ignore();
                return Ok(State::IncludeQuotedString);
            }
            '"' => {
                self.ignore();
                return Ok(State::IncludeDubQuotedString);
            }
            '[' => "start of an array",
            '{' => "start of a map",
            '(' => "start of a block",
            '-' => "start of a number",
            '\\' => "escape sequence",
            _ if is_digit(r) => "start of a number",
            _ if is_nl(r) => "new line",
            _ => {
                self.backup();
                return Ok(State::IncludeString);
            }
        };
        self.error(format!("Expected include value but found {what}"))
    }

    pub(super) fn include_quoted(&mut self, quote: char, eof_message: &str) -> Step {
        let r = self.next();
        if r == quote {
            return self.emit_closed(TokenKind::Include);
        }
        if r == EOF {
            return self.error(eof_message.to_string());
        }
        Ok(self.state)
    }

    pub(super) fn include_string(&mut self) -> Step {
        let r = self.next();
        if is_nl(r) || r == EOF || r == ';' || r == '}' || is_blank(r) {
            self.backup();
            self.emit(TokenKind::Include);
            return self.pop();
        }
        if r == '\'' {
            return self.emit_closed(TokenKind::Include);
        }
        Ok(State::IncludeString)
    }
}
