//! Subject rules (nats-server 2.14).
//!
//! Subjects are `.`-separated tokens. A token that is exactly `*` matches one token; a last
//! token that is exactly `>` matches one or more. A `*` or `>` inside a longer token is a
//! literal character (`fo*o`). Matching works on raw bytes.

/// `a == b` for byte strings, without a library call for the short ones (subjects and
/// their tokens): compared as two overlapping words. On the publish path a `memcmp` call
/// per comparison was a quarter of a shard's time (the sublist's last-lookup memo and the
/// import gates compare each message's subject).
#[inline(always)]
pub fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    fn ends<const K: usize>(x: &[u8]) -> ([u8; K], [u8; K]) {
        match (x.first_chunk::<K>(), x.last_chunk::<K>()) {
            (Some(f), Some(l)) => (*f, *l),
            _ => ([0; K], [0; K]),
        }
    }
    match a.len() {
        0 => true,
        1..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        4..=7 => ends::<4>(a) == ends::<4>(b),
        8..=16 => ends::<8>(a) == ends::<8>(b),
        _ => a == b,
    }
}

/// Token separator.
pub const TSEP: u8 = b'.';
/// Single-token wildcard.
pub const PWC: u8 = b'*';
/// Full (tail) wildcard.
pub const FWC: u8 = b'>';

/// A valid subject for subscribing: non-empty tokens, `>` only as the last token, no
/// whitespace (the rules of nats-server's `IsValidSubject`).
pub fn is_valid_subject(s: &[u8]) -> bool {
    if s.is_empty() {
        return false;
    }
    let mut seen_fwc = false;
    for t in s.split(|&b| b == TSEP) {
        if t.is_empty() || seen_fwc {
            return false;
        }
        if t.len() > 1 {
            if t.iter().any(|b| matches!(b, b'\t' | b'\n' | 0x0c | b'\r' | b' ')) {
                return false;
            }
            continue;
        }
        match t[0] {
            FWC => seen_fwc = true,
            b' ' | b'\t' | b'\n' | b'\r' | 0x0c => return false,
            _ => {}
        }
    }
    true
}

/// The check a subscription interest tree applies on insert: no empty token and `>` only
/// last. (Whitespace cannot reach it: protocol arguments are split on it.)
pub fn is_valid_sub_pattern(s: &[u8]) -> bool {
    if s.is_empty() {
        return false;
    }
    let mut seen_fwc = false;
    for t in s.split(|&b| b == TSEP) {
        if t.is_empty() || seen_fwc {
            return false;
        }
        if t == [FWC] {
            seen_fwc = true;
        }
    }
    true
}

/// A valid literal subject: no empty tokens and no wildcard tokens (`IsValidLiteralSubject`).
/// This is what pedantic mode requires of a publish subject.
pub fn is_valid_literal_subject(s: &[u8]) -> bool {
    s.split(|&b| b == TSEP)
        .all(|t| !t.is_empty() && t != [PWC] && t != [FWC])
}

/// True if the subject has a wildcard token.
pub fn has_wildcard(s: &[u8]) -> bool {
    s.split(|&b| b == TSEP).any(|t| t == [PWC] || t == [FWC])
}

/// Does the (possibly wildcard) `pattern` match the `subject`? Tokens of `subject` are taken
/// literally, so a published `foo.*` matches the pattern `foo.*` and `foo.>`. A subject with
/// an empty token matches nothing.
pub fn matches(pattern: &[u8], subject: &[u8]) -> bool {
    if subject.is_empty() {
        return false;
    }
    let mut st = subject.split(|&b| b == TSEP);
    let mut pt = pattern.split(|&b| b == TSEP).peekable();
    loop {
        match (pt.next(), st.next()) {
            (None, None) => return true,
            (Some(p), Some(s)) => {
                if s.is_empty() {
                    return false;
                }
                if p == [FWC] {
                    // `>` must be last in a valid pattern; it swallows the rest.
                    return pt.peek().is_none() && st.all(|t| !t.is_empty());
                }
                if p != [PWC] && p != s {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// Can some literal subject match both `a` and `b` (each a subject or a pattern)?
/// nats-server's `SubjectsCollide`: used to decide whether a wildcard subscription can
/// see subjects a deny entry covers.
pub fn subjects_collide(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let mut ta = a.split('.');
    let mut tb = b.split('.');
    loop {
        match (ta.next(), tb.next()) {
            (None, None) => return true,
            (Some(">"), Some(_)) | (Some(_), Some(">")) => return true,
            (Some(x), Some(y)) => {
                if x != "*" && y != "*" && x != y {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// Number of tokens.
pub fn num_tokens(s: &[u8]) -> usize {
    if s.is_empty() {
        0
    } else {
        memchr::memchr_iter(TSEP, s).count() + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_is_equality_at_every_length_and_difference() {
        let base: Vec<u8> = (b'a'..=b'z').chain(b'A'..=b'Z').collect();
        for n in 0..40 {
            let a = &base[..n];
            let copy = a.to_vec();
            assert!(same(a, a) && same(a, &copy), "{n} bytes");
            for at in 0..n {
                let mut b = a.to_vec();
                b[at] ^= 0x01;
                assert!(!same(a, &b), "{n} bytes, differing at {at}");
            }
            if n > 0 {
                assert!(!same(a, &base[..n - 1]), "{n} against {} bytes", n - 1);
            }
        }
    }

    #[test]
    fn collisions() {
        for (a, b, want) in [
            ("foo.bar", "foo.bar", true),
            ("foo.bar", "foo.baz", false),
            ("foo.*", "foo.bar", true),
            ("foo.*", "*.bar", true),
            ("foo.*", "foo.bar.baz", false),
            ("foo.>", "foo.bar.baz", true),
            ("foo.>", "foo", false),
            ("*.>", "a.b", true),
            (">", "a", true),
            ("a.*.c", "a.b.d", false),
            ("a.*", "b.>", false),
        ] {
            assert_eq!(subjects_collide(a, b), want, "{a} vs {b}");
            assert_eq!(subjects_collide(b, a), want, "{b} vs {a}");
        }
    }

    #[test]
    fn valid_subjects() {
        // Table from the protocol rules (spec/protocol.md §3.4, §9).
        for (s, ok) in [
            ("foo", true),
            ("foo.bar", true),
            ("foo.*", true),
            ("foo.>", true),
            (">", true),
            ("*", true),
            ("fo>o", true),
            ("fo*o.bar", true),
            ("foo..bar", false),
            (".foo", false),
            ("foo.", false),
            ("foo.>.bar", false),
            ("", false),
            ("foo bar", false),
            ("foo.\tbar", false),
        ] {
            assert_eq!(is_valid_subject(s.as_bytes()), ok, "{s:?}");
        }
    }

    #[test]
    fn literal_subjects() {
        for (s, ok) in [
            ("foo", true),
            ("foo.bar", true),
            ("fo*o", true),
            ("foo.*", false),
            ("foo.>", false),
            ("foo..bar", false),
            ("foo.", false),
            ("", false),
        ] {
            assert_eq!(is_valid_literal_subject(s.as_bytes()), ok, "{s:?}");
        }
    }

    #[test]
    fn matching() {
        for (p, s, ok) in [
            ("foo", "foo", true),
            ("foo", "bar", false),
            ("foo.*", "foo.bar", true),
            ("foo.*", "foo.bar.baz", false),
            ("foo.*", "foo", false),
            ("foo.>", "foo.bar.baz", true),
            ("foo.>", "foo", false),
            (">", "foo.bar", true),
            ("*.bar", "foo.bar", true),
            ("foo.*", "foo.*", true),
            ("foo.bar", "foo.*", false),
            (">", "foo..bar", false),
            ("foo.>", "foo.", false),
            ("fo*o", "fo*o", true),
            ("fo*o", "foxo", false),
        ] {
            assert_eq!(matches(p.as_bytes(), s.as_bytes()), ok, "{p:?} vs {s:?}");
        }
    }

    #[test]
    fn token_count() {
        assert_eq!(num_tokens(b""), 0);
        assert_eq!(num_tokens(b"a"), 1);
        assert_eq!(num_tokens(b"a.b.c"), 3);
    }
}
