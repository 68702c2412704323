//! Argument splitting and size parsing for protocol control lines (nats-server rules).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use std::ops::Range;

/// Up to `N` arguments of a control line, borrowed from it.
pub struct Args<'a, const N: usize> {
    items: [&'a [u8]; N],
    len: usize,
}

impl<'a, const N: usize> Args<'a, N> {
    pub fn as_slice(&self) -> &[&'a [u8]] {
        self.items.get(..self.len).unwrap_or_default()
    }
}

fn split<'a, const N: usize>(arg: &'a [u8], is_sep: impl Fn(u8) -> bool) -> Option<Args<'a, N>> {
    let mut out = Args {
        items: [&[][..]; N],
        len: 0,
    };
    for tok in arg.split(|&b| is_sep(b)).filter(|t| !t.is_empty()) {
        *out.items.get_mut(out.len)? = tok;
        out.len += 1;
    }
    Some(out)
}

/// PUB/HPUB arguments: separated by spaces and tabs only. `None` if more than 4.
pub fn split_pub_args(arg: &[u8]) -> Option<Args<'_, 4>> {
    split(arg, |b| b == b' ' || b == b'\t')
}

/// SUB/UNSUB arguments: separated by spaces, tabs, CR and LF. `None` if more than `N`.
pub fn split_sub_args<const N: usize>(arg: &[u8]) -> Option<Args<'_, N>> {
    split(arg, |b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// A size field: 1 to 9 ASCII digits, else -1 (nats-server's `parseSize`).
pub fn parse_size(d: &[u8]) -> i64 {
    if d.is_empty() || d.len() > 9 {
        return -1;
    }
    let mut n: i64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return -1;
        }
        n = n * 10 + i64::from(c - b'0');
    }
    n
}

/// Where a message's parts are, as offsets into its control line.
#[derive(Clone, Debug, Default)]
pub struct PubArgs {
    pub subject: Range<usize>,
    pub reply: Option<Range<usize>>,
    /// Header length (HPUB).
    pub hdr: Option<usize>,
    /// Total size: header plus payload.
    pub size: usize,
    /// The size fields as the client wrote them (nats-server echoes them in MSG/HMSG).
    pub size_text: Range<usize>,
    pub hdr_text: Option<Range<usize>>,
    pub pedantic_violation: bool,
    /// Offsets are relative to the parser's stashed copy of the line.
    pub base_in_stash: bool,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size(b"0"), 0);
        assert_eq!(parse_size(b"123"), 123);
        assert_eq!(parse_size(b"999999999"), 999_999_999);
        assert_eq!(parse_size(b"1000000000"), -1, "more than 9 digits");
        assert_eq!(parse_size(b""), -1);
        assert_eq!(parse_size(b"-1"), -1);
        assert_eq!(parse_size(b"1a"), -1);
    }

    #[test]
    fn splitting() {
        let a = split_pub_args(b"foo \t bar  5").unwrap();
        assert_eq!(a.as_slice(), &[&b"foo"[..], b"bar", b"5"]);
        assert!(split_pub_args(b"a b c d e").is_none());
        let s = split_sub_args::<3>(b"foo\rq 1").unwrap();
        assert_eq!(s.as_slice(), &[&b"foo"[..], b"q", b"1"]);
        assert!(split_sub_args::<2>(b"a b c").is_none());
        assert_eq!(split_sub_args::<2>(b"").unwrap().as_slice().len(), 0);
    }
}
