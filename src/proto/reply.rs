//! Bytes the server writes back: `+OK`, `PING`, `PONG`, `-ERR '<text>'`, and the texts
//! of every `-ERR` (protocol.md §7), plus Go-style quoting for the texts that embed a
//! subject (`%q`).

pub const OK: &[u8] = b"+OK\r\n";
pub const PING: &[u8] = b"PING\r\n";
pub const PONG: &[u8] = b"PONG\r\n";

pub const ERR_UNKNOWN_OP: &str = "Unknown Protocol Operation";
pub const ERR_MAX_CONTROL_LINE: &str = "maximum control line exceeded";
pub const ERR_MAX_PAYLOAD: &str = "Maximum Payload Violation";
pub const ERR_AUTH_VIOLATION: &str = "Authorization Violation";
pub const ERR_AUTH_TIMEOUT: &str = "Authentication Timeout";
pub const ERR_MAX_CONNECTIONS: &str = "maximum connections exceeded";
/// `connection_rate_limit` refused a TLS client.
pub const ERR_THROTTLED: &str = "Connection throttling is active. Please try again later.";
pub const ERR_BAD_PROTOCOL: &str = "invalid client protocol";
pub const ERR_NO_RESPONDERS_HEADERS: &str = "no responders requires headers support";
pub const ERR_STALE: &str = "Stale Connection";
pub const ERR_INVALID_PUB_SUBJECT: &str = "Invalid Publish Subject";
pub const ERR_INVALID_SUBJECT: &str = "Invalid Subject";
pub const ERR_MAX_SUBS: &str = "maximum subscriptions exceeded";

/// Append `-ERR '<text>'\r\n`.
pub fn err(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b"-ERR '");
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"'\r\n");
}

/// Go's `%q` of a byte string: double-quoted, with Go escapes for quotes, backslashes,
/// control characters and invalid UTF-8.
pub fn go_quote(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() + 2);
    s.push('"');
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                '\x07' => s.push_str("\\a"),
                '\x08' => s.push_str("\\b"),
                '\x0c' => s.push_str("\\f"),
                '\n' => s.push_str("\\n"),
                '\r' => s.push_str("\\r"),
                '\t' => s.push_str("\\t"),
                '\x0b' => s.push_str("\\v"),
                c if (c as u32) < 0x20 || c == '\x7f' => s.push_str(&format!("\\x{:02x}", c as u32)),
                c if c.is_control() => {
                    if (c as u32) < 0x10000 {
                        s.push_str(&format!("\\u{:04x}", c as u32));
                    } else {
                        s.push_str(&format!("\\U{:08x}", c as u32));
                    }
                }
                c => s.push(c),
            }
        }
        for byte in chunk.invalid() {
            s.push_str(&format!("\\x{byte:02x}"));
        }
    }
    s.push('"');
    s
}

/// `Permissions Violation for Publish to "<subject>"`.
pub fn pub_violation(subject: &[u8]) -> String {
    format!("Permissions Violation for Publish to {}", go_quote(subject))
}

/// `Permissions Violation for Publish with Reply of "<reply>"`.
pub fn reply_violation(reply: &[u8]) -> String {
    format!("Permissions Violation for Publish with Reply of {}", go_quote(reply))
}

/// `Permissions Violation for Subscription to "<subject>"[ using queue "<queue>"]`.
pub fn sub_violation(subject: &[u8], queue: Option<&[u8]>) -> String {
    match queue {
        Some(q) => format!(
            "Permissions Violation for Subscription to {} using queue {}",
            go_quote(subject),
            go_quote(q)
        ),
        None => format!("Permissions Violation for Subscription to {}", go_quote(subject)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_like_go() {
        assert_eq!(go_quote(b"foo.bar"), "\"foo.bar\"");
        assert_eq!(go_quote(b"a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(go_quote(b"t\x00\n\xff"), "\"t\\x00\\n\\xff\"");
        assert_eq!(go_quote("ü".as_bytes()), "\"ü\"");
    }

    #[test]
    fn err_line() {
        let mut v = Vec::new();
        err(&mut v, ERR_UNKNOWN_OP);
        assert_eq!(v, b"-ERR 'Unknown Protocol Operation'\r\n");
    }
}
