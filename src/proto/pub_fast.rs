//! The commonest client frame recognised in one pass: `PUB <subject> [<reply>] <size>\r\n`
//! followed by its payload and CR LF, all in the buffer, with single spaces between the
//! arguments. Anything else (tabs, extra blanks, a missing or long line, a bad or too large
//! size, a split frame) is left to the parser's general path, which reaches the same event
//! or error; a property test checks that both agree.
//!
//! Ownership: a pure function over the connection's read buffer.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::parser::{Event, Limits};

/// The index of the first byte at or after `from` that is a blank or a control character
/// (`<= 0x20`), eight bytes at a time: a byte below 0x21 is the only one whose subtraction
/// of 0x21 borrows without its top bit set, and the lowest such byte is found exactly
/// (a borrow only disturbs the bytes above it).
#[inline(always)]
fn delimiter(line: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOPS: u64 = 0x8080_8080_8080_8080;
    let mut k = from;
    while let Some(chunk) = line.get(k..k + 8) {
        let w = u64::from_le_bytes(chunk.try_into().ok()?);
        let m = w.wrapping_sub(ONES * 0x21) & !w & TOPS;
        if m != 0 {
            return Some(k + (m.trailing_zeros() / 8) as usize);
        }
        k += 8;
    }
    line.get(k..)?.iter().position(|&c| c <= 0x20).map(|j| k + j)
}

/// The end of one argument starting at `from`: the space or CR after it. `None` on an
/// empty argument, on any other blank or control byte (a tab, an LF: the general path
/// handles those), or when the line is not complete.
#[inline(always)]
fn token(line: &[u8], from: usize) -> Option<usize> {
    let k = delimiter(line, from)?;
    match line.get(k) {
        Some(b' ' | b'\r') if k > from => Some(k),
        _ => None,
    }
}

/// A size field of 1 to 9 digits.
#[inline(always)]
fn size(d: &[u8]) -> Option<usize> {
    if d.is_empty() || d.len() > 9 {
        return None;
    }
    let mut n = 0usize;
    for &c in d {
        let v = c.wrapping_sub(b'0');
        if v > 9 {
            return None;
        }
        n = n * 10 + usize::from(v);
    }
    Some(n)
}

/// A whole plain PUB frame at `i`: where it ends and its message event.
#[inline]
pub(super) fn whole_plain_pub<'a>(buf: &'a [u8], i: usize, lim: &Limits) -> Option<(usize, Event<'a>)> {
    let b = buf.get(i..)?;
    let [p, u, bb, b' ', ..] = *b else { return None };
    if p | 0x20 != b'p' || u | 0x20 != b'u' || bb | 0x20 != b'b' {
        return None;
    }
    let line = b.get(4..)?;
    let e0 = token(line, 0)?;
    if line.get(e0) != Some(&b' ') {
        return None;
    }
    let e1 = token(line, e0 + 1)?;
    let (reply, size_at, end) = match line.get(e1) {
        Some(b'\r') => (None, e0 + 1, e1),
        Some(b' ') => {
            let e2 = token(line, e1 + 1)?;
            if line.get(e2) != Some(&b'\r') {
                return None;
            }
            (Some(line.get(e0 + 1..e1)?), e1 + 1, e2)
        }
        _ => return None,
    };
    if end > lim.max_control_line || line.get(end + 1) != Some(&b'\n') {
        return None;
    }
    let size_text = line.get(size_at..end)?;
    let n = size(size_text)?;
    if lim.max_payload >= 0 && n as i64 > lim.max_payload {
        return None;
    }
    let start = end + 2;
    let data = line.get(start..start + n)?;
    if line.get(start + n..start + n + 2) != Some(&b"\r\n"[..]) {
        return None;
    }
    let ev = Event::Msg {
        subject: line.get(..e0)?,
        reply,
        header_len: None,
        data,
        size_text,
        hdr_text: None,
    };
    Some((i + 4 + start + n + 2, ev))
}
