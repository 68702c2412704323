//! Value states of the lexer: the start of a value, strings (quoted, bare, `( ... )`
//! blocks, escapes), numbers with size suffixes, floats, IP-like strings and dates.

use super::{escape_special, is_blank, is_digit, is_nl, is_number_suffix, Lexer, State, Step, TokenKind, EOF};

impl Lexer<'_> {
    /// Start of a value anywhere one is expected (blanks allowed before it, newlines not).
    pub(super) fn value(&mut self) -> Step {
        let r = self.next();
        if is_blank(r) {
            self.ignore();
            return Ok(State::Value);
        }
        match r {
            '[' => {
                self.ignore();
                self.emit_at(TokenKind::ArrayStart, self.pos.saturating_sub(1));
                Ok(State::ArrayValue)
            }
            '{' => {
                self.ignore();
                self.emit_at(TokenKind::MapStart, self.pos.saturating_sub(1));
                Ok(State::MapKeyStart)
            }
            '\'' => {
                self.ignore();
                Ok(State::QuotedString)
            }
            '"' => {
                self.ignore();
                self.string_state = State::DubQuotedString;
                Ok(State::DubQuotedString)
            }
            '-' => Ok(State::NegNumberStart),
            '(' => {
                self.ignore();
                Ok(State::Block)
            }
            '.' => self.error("Floats must start with a digit".to_string()),
            _ if is_digit(r) => {
                self.backup();
                Ok(State::NumberStart)
            }
            _ if is_nl(r) => self.error("Expected value but found new line".to_string()),
            _ => {
                self.backup();
                self.string_state = State::String;
                Ok(State::String)
            }
        }
    }

    /// Inside '...': no escapes, may span lines.
    pub(super) fn quoted_string(&mut self) -> Step {
        let r = self.next();
        if r == '\'' {
            return self.emit_closed(TokenKind::String);
        }
        if r == EOF {
            return self.eof_or_error();
        }
        Ok(State::QuotedString)
    }

    /// Inside "...": escapes, may span lines.
    pub(super) fn dub_quoted_string(&mut self) -> Step {
        let r = self.next();
        match r {
            '\\' => {
                self.add_current_part(1);
                Ok(State::StringEscape)
            }
            '"' => self.emit_closed(TokenKind::String),
            EOF => self.eof_or_error(),
            _ => Ok(State::DubQuotedString),
        }
    }

    /// A bare string, which may turn out to be a boolean or a `$variable`.
    pub(super) fn string(&mut self) -> Step {
        let r = self.next();
        if r == '\\' {
            self.add_current_part(1);
            return Ok(State::StringEscape);
        }
        if is_nl(r) || r == EOF || r == ';' || r == ',' || r == ']' || r == '}' || is_blank(r) {
            self.backup();
            if !self.parts.is_empty() {
                self.emit(TokenKind::String);
            } else if is_bool_word(self.pending_text()) {
                self.emit(TokenKind::Bool);
            } else if self.input.get(self.start) == Some(&b'$') {
                // The token keeps the `$` position; its text is the name after it.
                let at = self.item_start;
                self.start += 1;
                self.emit_at(TokenKind::Variable, at);
            } else {
                self.emit(TokenKind::String);
            }
            return self.pop();
        }
        if r == '\'' {
            return self.emit_closed(TokenKind::String);
        }
        Ok(State::String)
    }

    /// Inside `( ... )`: raw text up to a `)` alone on its line.
    pub(super) fn block(&mut self) -> Step {
        let r = self.next();
        if r == ')' {
            // Look at the character before the ')' (stepping back twice by its width, as
            // the reference does).
            self.backup();
            self.backup();
            if self.next() != '\n' {
                self.next();
                return Ok(State::Block);
            }
            self.next();
            let after = self.next();
            if after == '\n' || after == EOF {
                // At a real end of input the width is 0, so these keep the ')' in the text,
                // as in the reference.
                self.backup();
                return self.emit_closed(TokenKind::String);
            }
            self.backup();
            return Ok(State::Block);
        }
        if r == EOF {
            return self.error("Unexpected EOF processing block.".to_string());
        }
        Ok(State::Block)
    }

    /// After a backslash in a double-quoted or bare string.
    pub(super) fn string_escape(&mut self) -> Step {
        let r = self.next();
        let add: &[u8] = match r {
            'x' => return Ok(State::StringBinary),
            't' => b"\t",
            'n' => b"\n",
            'r' => b"\r",
            '"' => b"\"",
            '\\' => b"\\",
            _ => {
                return self.error(format!(
                    "Invalid escape character '{}'. Only the following escape characters are allowed: \
                     \\xXX, \\t, \\n, \\r, \\\", \\\\.",
                    escape_special(r)
                ))
            }
        };
        Ok(self.add_part(add))
    }

    /// After `\x`: two hexadecimal digits.
    pub(super) fn string_binary(&mut self) -> Step {
        const EOL: &str = "Expected two hexadecimal digits after '\\x', but hit end of line";
        if is_nl(self.next()) {
            return self.error(EOL.to_string());
        }
        if is_nl(self.next()) {
            return self.error(EOL.to_string());
        }
        let digits = self.input.get(self.pos.saturating_sub(2)..self.pos).unwrap_or_default();
        match (
            digits.first().and_then(|&b| hex_value(b)),
            digits.get(1).and_then(|&b| hex_value(b)),
        ) {
            (Some(hi), Some(lo)) if digits.len() == 2 => Ok(self.add_part(&[hi << 4 | lo])),
            _ => self.error(format!(
                "Expected two hexadecimal digits after '\\x', but got '{}'",
                super::lossy_string(digits)
            )),
        }
    }

    fn add_current_part(&mut self, skip: usize) {
        let end = self.pos.saturating_sub(skip).max(self.start);
        self.parts
            .extend_from_slice(self.input.get(self.start..end).unwrap_or_default());
        self.start = self.pos;
    }

    fn add_part(&mut self, bytes: &[u8]) -> State {
        self.parts.extend_from_slice(bytes);
        self.start = self.pos;
        self.string_state
    }

    // ---- numbers ----------------------------------------------------------------------

    pub(super) fn number_start(&mut self) -> Step {
        let r = self.next();
        if !is_digit(r) {
            return self.digit_expected(r);
        }
        Ok(State::Number)
    }

    fn digit_expected(&mut self, r: char) -> Step {
        if r == '.' {
            return self.error("Floats must start with a digit, not '.'.".to_string());
        }
        self.error(format!("Expected a digit but got '{}'.", escape_special(r)))
    }

    /// Digits so far: an integer, a float, a date, an IP address or a string that starts
    /// with digits.
    pub(super) fn number(&mut self) -> Step {
        let r = self.next();
        if r == '-' {
            if self.pos.saturating_sub(self.start) != 5 {
                return self.error("All ISO8601 dates must be in full Zulu form.".to_string());
            }
            return Ok(State::DateAfterYear);
        }
        if is_digit(r) {
            return Ok(State::Number);
        }
        if r == '.' {
            return Ok(State::FloatStart);
        }
        if is_number_suffix(r) {
            return Ok(State::ConvenientNumber);
        }
        if !ends_number(r) {
            self.string_state = State::String;
            return Ok(State::String);
        }
        self.backup();
        self.emit(TokenKind::Integer);
        self.pop()
    }

    /// After a size suffix letter (`1k`, `1Mb`, `2GiB`, ...).
    pub(super) fn convenient_number(&mut self) -> Step {
        let r = self.next();
        if matches!(r, 'b' | 'B' | 'i' | 'I') {
            return Ok(State::ConvenientNumber);
        }
        self.backup();
        if ends_number(r) {
            self.emit(TokenKind::Integer);
            return self.pop();
        }
        self.string_state = State::String;
        Ok(State::String)
    }

    /// After `YYYY-`: the rest of `MM-DDTHH:MM:SSZ`.
    pub(super) fn date_after_year(&mut self) -> Step {
        for f in "00-00T00:00:00Z".chars() {
            let r = self.next();
            if f == '0' {
                if !is_digit(r) {
                    return self.error(format!(
                        "Expected digit in ISO8601 datetime, but found '{}' instead.",
                        escape_special(r)
                    ));
                }
            } else if f != r {
                return self.error(format!(
                    "Expected '{f}' in ISO8601 datetime, but found '{}' instead.",
                    escape_special(r)
                ));
            }
        }
        self.emit(TokenKind::DateTime);
        self.pop()
    }

    pub(super) fn neg_number_start(&mut self) -> Step {
        let r = self.next();
        if !is_digit(r) {
            return self.digit_expected(r);
        }
        Ok(State::NegNumber)
    }

    pub(super) fn neg_number(&mut self) -> Step {
        let r = self.next();
        if is_digit(r) {
            return Ok(State::NegNumber);
        }
        if r == '.' {
            return Ok(State::FloatStart);
        }
        if is_number_suffix(r) {
            return Ok(State::ConvenientNumber);
        }
        self.backup();
        self.emit(TokenKind::Integer);
        self.pop()
    }

    pub(super) fn float_start(&mut self) -> Step {
        let r = self.next();
        if !is_digit(r) {
            return self.error(format!(
                "Floats must have a digit after the '.', but got '{}' instead.",
                escape_special(r)
            ));
        }
        Ok(State::Float)
    }

    pub(super) fn float(&mut self) -> Step {
        let r = self.next();
        if is_digit(r) {
            return Ok(State::Float);
        }
        if r == '.' {
            // A second '.': not a float after all but something like an IP address.
            return Ok(State::IpAddr);
        }
        self.backup();
        self.emit(TokenKind::Float);
        self.pop()
    }

    pub(super) fn ip_addr(&mut self) -> Step {
        let r = self.next();
        if is_digit(r) || r == '.' || r == ':' || r == '-' {
            return Ok(State::IpAddr);
        }
        self.backup();
        self.emit(TokenKind::String);
        self.pop()
    }
}

/// Characters that end a number (note: not `]`, as in the reference).
fn ends_number(r: char) -> bool {
    is_nl(r) || r == EOF || r == '}' || r == ';' || r == ',' || is_blank(r) || is_digit(r)
}

fn is_bool_word(text: &[u8]) -> bool {
    ["true", "false", "on", "off", "yes", "no"]
        .iter()
        .any(|w| text.eq_ignore_ascii_case(w.as_bytes()))
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}
