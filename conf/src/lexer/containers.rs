//! Structural states of the lexer, part 2: arrays, maps and comments.

use super::{escape_special, is_blank, is_key_separator, is_nl, Lexer, State, Step, TokenKind, EOF};

impl Lexer<'_> {
    // ---- arrays -----------------------------------------------------------------------

    pub(super) fn array_value(&mut self) -> Step {
        let r = self.next();
        if r.is_whitespace() {
            self.ignore();
            return Ok(State::ArrayValue);
        }
        match r {
            '#' => {
                self.push(State::ArrayValue)?;
                Ok(State::CommentStart)
            }
            '/' => match self.slash_comment(State::ArrayValue)? {
                Some(s) => Ok(s),
                None => self.error("Unexpected array value terminator ','.".to_string()),
            },
            ',' => self.error("Unexpected array value terminator ','.".to_string()),
            ']' => Ok(State::ArrayEnd),
            _ => {
                self.backup();
                self.push(State::ArrayValueEnd)?;
                Ok(State::Value)
            }
        }
    }

    pub(super) fn array_value_end(&mut self) -> Step {
        let r = self.next();
        match r {
            _ if is_blank(r) => {
                self.ignore();
                Ok(State::ArrayValueEnd)
            }
            '#' => {
                self.push(State::ArrayValueEnd)?;
                Ok(State::CommentStart)
            }
            '/' => match self.slash_comment(State::ArrayValueEnd)? {
                Some(s) => Ok(s),
                None => {
                    self.ignore();
                    Ok(State::ArrayValue)
                }
            },
            _ if r == ',' || is_nl(r) => {
                self.ignore();
                Ok(State::ArrayValue)
            }
            ']' => Ok(State::ArrayEnd),
            _ => self.error(format!(
                "Expected an array value terminator \",\" or an array terminator \"]\", but got '{}' instead.",
                escape_special(r)
            )),
        }
    }

    pub(super) fn container_end(&mut self, kind: TokenKind) -> Step {
        self.ignore();
        self.emit(kind);
        self.pop()
    }

    // ---- maps -------------------------------------------------------------------------

    pub(super) fn map_key_start(&mut self) -> Step {
        let r = self.peek();
        match r {
            '=' | ':' => return self.error(format!("Unexpected key separator '{r}'.")),
            ']' => return self.error("Unexpected array end ']' processing map.".to_string()),
            _ if r.is_whitespace() => {
                self.next();
                self.ignore();
                return Ok(State::MapKeyStart);
            }
            '}' => {
                self.next();
                self.ignore();
                return Ok(State::MapEnd);
            }
            '#' => {
                self.next();
                self.push(State::MapKeyStart)?;
                return Ok(State::CommentStart);
            }
            '/' => {
                self.next();
                if let Some(s) = self.slash_comment(State::MapKeyStart)? {
                    return Ok(s);
                }
                // A lone '/' is dropped and the key starts after it (as in the reference).
            }
            '\'' => {
                self.next();
                self.ignore();
                return Ok(State::MapQuotedKey);
            }
            '"' => {
                self.next();
                self.ignore();
                return Ok(State::MapDubQuotedKey);
            }
            EOF => return self.error("Unexpected EOF processing map.".to_string()),
            _ => {}
        }
        self.ignore();
        self.next();
        Ok(State::MapKey)
    }

    pub(super) fn map_key(&mut self) -> Step {
        let r = self.peek();
        if r == EOF {
            return self.error("Unexpected EOF processing map key.".to_string());
        }
        if r.is_whitespace() {
            return self.keyword_or_key(State::MapKeyEnd, Some(State::MapValueEnd));
        }
        if is_key_separator(r) {
            self.emit(TokenKind::Key);
            return Ok(State::MapKeyEnd);
        }
        self.next();
        Ok(State::MapKey)
    }

    pub(super) fn map_key_end(&mut self) -> Step {
        let r = self.next();
        if r.is_whitespace() {
            self.ignore();
            return Ok(State::MapKeyEnd);
        }
        if is_key_separator(r) {
            self.ignore();
            return Ok(State::MapValue);
        }
        self.backup();
        Ok(State::MapValue)
    }

    pub(super) fn map_value(&mut self) -> Step {
        let r = self.next();
        if r.is_whitespace() {
            self.ignore();
            return Ok(State::MapValue);
        }
        match r {
            ',' => self.error("Unexpected map value terminator \",\".".to_string()),
            '}' => {
                self.ignore();
                Ok(State::MapEnd)
            }
            _ => {
                self.backup();
                self.push(State::MapValueEnd)?;
                Ok(State::Value)
            }
        }
    }

    pub(super) fn map_value_end(&mut self) -> Step {
        let r = self.next();
        match r {
            _ if is_blank(r) => {
                self.ignore();
                Ok(State::MapValueEnd)
            }
            '#' => {
                self.push(State::MapValueEnd)?;
                Ok(State::CommentStart)
            }
            '/' => match self.slash_comment(State::MapValueEnd)? {
                Some(s) => Ok(s),
                None => {
                    self.ignore();
                    Ok(State::MapKeyStart)
                }
            },
            _ if r == ';' || r == ',' || is_nl(r) => {
                self.ignore();
                Ok(State::MapKeyStart)
            }
            '}' => {
                self.ignore();
                Ok(State::MapEnd)
            }
            _ => self.error(format!(
                "Expected a map value terminator \",\" or a map terminator \"}}\", but got '{}' instead.",
                escape_special(r)
            )),
        }
    }

    // ---- comments ---------------------------------------------------------------------

    pub(super) fn comment(&mut self) -> Step {
        let r = self.peek();
        if is_nl(r) || r == EOF {
            self.ignore();
            return self.pop();
        }
        self.next();
        Ok(State::Comment)
    }
}
