//! A JSON reader that fails the way Go's `encoding/json` `Decoder` does: the same syntax
//! error texts (`invalid character 'x' after object key:value pair`), byte offsets counted
//! as Go counts them (the offending byte's index + 1), `unexpected EOF` for input that stops
//! inside a value, and a stream of top-level values (`{..} {..}`) as the reference's request
//! decoder reads them. Numbers keep their literal text (Go reports it in range errors);
//! strings are unescaped with invalid UTF-8 and lone surrogates replaced by U+FFFD, as Go does.
//!
//! Nesting is bounded ([`MAX_DEPTH`]) so hostile input cannot exhaust the stack.

/// A parsed JSON value; objects keep their members in order, duplicates included.
#[derive(Clone, Debug, PartialEq)]
pub enum JVal {
    Null,
    Bool(bool),
    /// The number's literal text.
    Num(String),
    Str(String),
    Arr(Vec<JVal>),
    Obj(Vec<(String, JVal)>),
}

impl JVal {
    /// Go's name of the JSON kind in `cannot unmarshal <kind> into ...`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            JVal::Null => "null",
            JVal::Bool(_) => "bool",
            JVal::Num(_) => "number",
            JVal::Str(_) => "string",
            JVal::Arr(_) => "array",
            JVal::Obj(_) => "object",
        }
    }
}

/// Deeper nesting than this is refused (Go's own limit is 10000; requests never nest).
pub const MAX_DEPTH: usize = 512;

/// Why the input is not a stream of JSON values, as Go words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanError {
    /// `invalid character 'x' <context> at offset N` (the JetStream decoder appends the offset).
    Syntax { msg: String, offset: usize },
    /// The input ended inside a value.
    UnexpectedEof,
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::Syntax { msg, offset } => write!(f, "{msg} at offset {offset}"),
            ScanError::UnexpectedEof => f.write_str("unexpected EOF"),
        }
    }
}

/// Go's `quoteChar`: how a byte is shown in a syntax error.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        _ => {
            let ch = char::from(c);
            let inner = match c {
                0x07 => "\\a".to_string(),
                0x08 => "\\b".to_string(),
                0x0c => "\\f".to_string(),
                b'\n' => "\\n".to_string(),
                b'\r' => "\\r".to_string(),
                b'\t' => "\\t".to_string(),
                0x0b => "\\v".to_string(),
                b'\\' => "\\\\".to_string(),
                0..=0x1f | 0x7f => format!("\\x{c:02x}"),
                // Latin-1 controls, no-break space and soft hyphen are not printable in Go.
                0x80..=0xa0 | 0xad => format!("\\u{:04x}", u32::from(c)),
                _ => ch.to_string(),
            };
            format!("'{inner}'")
        }
    }
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, context: &str) -> ScanError {
        match self.b.get(self.i) {
            None => ScanError::UnexpectedEof,
            Some(&c) => ScanError::Syntax {
                msg: format!("invalid character {} {context}", quote_char(c)),
                offset: self.i + 1,
            },
        }
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn value(&mut self, depth: usize) -> Result<JVal, ScanError> {
        self.skip_ws();
        match self.peek() {
            None => Err(ScanError::UnexpectedEof),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(JVal::Str(self.string()?)),
            Some(b't') => self.literal(b"true", JVal::Bool(true)),
            Some(b'f') => self.literal(b"false", JVal::Bool(false)),
            Some(b'n') => self.literal(b"null", JVal::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("looking for beginning of value")),
        }
    }

    fn nest(&self, depth: usize) -> Result<usize, ScanError> {
        if depth >= MAX_DEPTH {
            return Err(ScanError::Syntax {
                msg: "exceeded max depth".to_string(),
                offset: self.i + 1,
            });
        }
        Ok(depth + 1)
    }

    fn object(&mut self, depth: usize) -> Result<JVal, ScanError> {
        let depth = self.nest(depth)?;
        self.i += 1;
        let mut members = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(JVal::Obj(members));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("looking for beginning of object key string"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.err("after object key"));
            }
            self.i += 1;
            let v = self.value(depth)?;
            members.push((key, v));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(JVal::Obj(members));
                }
                _ => return Err(self.err("after object key:value pair")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<JVal, ScanError> {
        let depth = self.nest(depth)?;
        self.i += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(JVal::Arr(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(JVal::Arr(items));
                }
                _ => return Err(self.err("after array element")),
            }
        }
    }

    fn literal(&mut self, word: &'static [u8], v: JVal) -> Result<JVal, ScanError> {
        let name = std::str::from_utf8(word).unwrap_or("");
        for &want in word {
            if self.peek() != Some(want) {
                return Err(self.err(&format!("in literal {name} (expecting {})", quote_char(want))));
            }
            self.i += 1;
        }
        Ok(v)
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    fn number(&mut self) -> Result<JVal, ScanError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
            match self.peek() {
                Some(b'0'..=b'9') => {}
                _ => return Err(self.err("in numeric literal")),
            }
        }
        if self.peek() == Some(b'0') {
            self.i += 1;
        } else {
            self.digits();
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            match self.peek() {
                Some(b'0'..=b'9') => self.digits(),
                _ => return Err(self.err("after decimal point in numeric literal")),
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            match self.peek() {
                Some(b'0'..=b'9') => self.digits(),
                _ => return Err(self.err("in exponent of numeric literal")),
            }
        }
        let text = self.b.get(start..self.i).unwrap_or_default();
        Ok(JVal::Num(String::from_utf8_lossy(text).into_owned()))
    }

    fn hex4(&mut self) -> Result<u32, ScanError> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return Err(self.err("in \\u hexadecimal character escape")),
            };
            v = v * 16 + u32::from(d);
            self.i += 1;
        }
        Ok(v)
    }

    /// A string literal at `self.i` (which is `"`), unescaped.
    fn string(&mut self) -> Result<String, ScanError> {
        self.i += 1;
        let mut raw: Vec<u8> = Vec::new();
        loop {
            match self.peek() {
                None => return Err(ScanError::UnexpectedEof),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(String::from_utf8_lossy(&raw).into_owned());
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = match self.peek() {
                        None => return Err(ScanError::UnexpectedEof),
                        Some(c) => c,
                    };
                    let simple = match c {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0c),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        b'u' => None,
                        _ => return Err(self.err("in string escape code")),
                    };
                    self.i += 1;
                    if let Some(s) = simple {
                        raw.push(s);
                        continue;
                    }
                    let hi = self.hex4()?;
                    let ch = if (0xd800..0xdc00).contains(&hi) && self.b.get(self.i..self.i + 2) == Some(b"\\u") {
                        // A surrogate pair, if the next escape completes it.
                        let save = self.i;
                        self.i += 2;
                        let lo = self.hex4()?;
                        if (0xdc00..0xe000).contains(&lo) {
                            char::from_u32(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00))
                        } else {
                            // Not a pair: the first is replaced, the second read on its own.
                            self.i = save;
                            None
                        }
                    } else {
                        char::from_u32(hi)
                    };
                    let mut buf = [0u8; 4];
                    raw.extend_from_slice(ch.unwrap_or('\u{fffd}').encode_utf8(&mut buf).as_bytes());
                }
                Some(c) if c < 0x20 => return Err(self.err("in string literal")),
                Some(c) => {
                    raw.push(c);
                    self.i += 1;
                }
            }
        }
    }
}

/// Read every top-level value of `input` (whitespace between them optional where Go's
/// decoder does not need it). Empty or all-whitespace input gives no values.
pub fn parse_stream(input: &[u8]) -> Result<Vec<JVal>, ScanError> {
    let mut p = Parser { b: input, i: 0 };
    let mut out = Vec::new();
    loop {
        p.skip_ws();
        if p.i >= input.len() {
            return Ok(out);
        }
        out.push(p.value(0)?);
    }
}

/// Read exactly one value (Go's `json.Unmarshal`): trailing bytes other than whitespace fail.
pub fn parse_one(input: &[u8]) -> Result<JVal, ScanError> {
    let mut p = Parser { b: input, i: 0 };
    p.skip_ws();
    if p.i >= input.len() {
        return Err(ScanError::UnexpectedEof);
    }
    let v = p.value(0)?;
    p.skip_ws();
    if p.i < input.len() {
        return Err(p.err("after top-level value"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts observed from the reference's JetStream request decoder (without the
    /// `invalid JSON: ` prefix).
    #[test]
    fn syntax_errors_match_the_reference() {
        let cases: &[(&str, &str)] = &[
            (r#"{"name":"A""#, "unexpected EOF"),
            (
                "xyz",
                "invalid character 'x' looking for beginning of value at offset 1",
            ),
            (
                r#"{"name":"A","max_msgs":"x" x"#,
                "invalid character 'x' after object key:value pair at offset 28",
            ),
            (
                r#"{"name":"A"} x"#,
                "invalid character 'x' looking for beginning of value at offset 14",
            ),
            (
                r#"{"name":"A",}"#,
                "invalid character '}' looking for beginning of object key string at offset 13",
            ),
            (
                r#"{"name":"A" "x"}"#,
                "invalid character '\"' after object key:value pair at offset 13",
            ),
            (
                r#"{"name":tru}"#,
                "invalid character '}' in literal true (expecting 'e') at offset 12",
            ),
            (
                r#"{"name":"A\q"}"#,
                "invalid character 'q' in string escape code at offset 12",
            ),
            (
                r#"{"name":01}"#,
                "invalid character '1' after object key:value pair at offset 10",
            ),
            (r#"{"name":-}"#, "invalid character '}' in numeric literal at offset 10"),
            (
                r#"{"name":1.}"#,
                "invalid character '}' after decimal point in numeric literal at offset 11",
            ),
            (
                r#"{"name":1e}"#,
                "invalid character '}' in exponent of numeric literal at offset 11",
            ),
            (
                r#"{"name":[1,]}"#,
                "invalid character ']' looking for beginning of value at offset 12",
            ),
            (
                r#"{"name":[1 2]}"#,
                "invalid character '2' after array element at offset 12",
            ),
            (
                "{1:2}",
                "invalid character '1' looking for beginning of object key string at offset 2",
            ),
            (r#"{"name":"A"} {"#, "unexpected EOF"),
        ];
        for (input, want) in cases {
            let got = parse_stream(input.as_bytes()).map(|_| ()).unwrap_err().to_string();
            assert_eq!(&got, want, "input {input}");
        }
    }

    #[test]
    fn values_and_streams() {
        assert_eq!(parse_stream(b"  \n").unwrap(), Vec::<JVal>::new());
        let v = parse_stream(br#"{"a":[1,-0.5e+3,true,null],"b":"\u00e9\ud83d\ude00\ud800x"}{}"#).unwrap();
        assert_eq!(v.len(), 2);
        let JVal::Obj(m) = &v[0] else { panic!("object") };
        assert_eq!(
            m[0].1,
            JVal::Arr(vec![
                JVal::Num("1".into()),
                JVal::Num("-0.5e+3".into()),
                JVal::Bool(true),
                JVal::Null
            ])
        );
        assert_eq!(m[1].1, JVal::Str("é😀\u{fffd}x".into()));
        assert_eq!(parse_stream(b"\"\xff\"").unwrap(), vec![JVal::Str("\u{fffd}".into())]);
        assert_eq!(
            parse_one(b"{} x").unwrap_err().to_string(),
            "invalid character 'x' after top-level value at offset 4"
        );
        assert_eq!(
            parse_one(b"\"a\x01\"").unwrap_err().to_string(),
            "invalid character '\\x01' in string literal at offset 3"
        );
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert!(matches!(parse_one(deep.as_bytes()), Err(ScanError::Syntax { .. })));
    }
}
