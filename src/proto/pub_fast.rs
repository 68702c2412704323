//! The commonest client frames recognised in one pass: `PUB <subject> [<reply>] <size>\r\n`
//! or `HPUB <subject> [<reply>] <header size> <size>\r\n`, followed by the payload and
//! CR LF, all in the buffer, with single spaces between the arguments. Anything else (tabs,
//! extra blanks, a missing or long line, a bad or too large size, a split frame, HPUB
//! without headers negotiated) is left to the parser's general path, which reaches the
//! same event or error; a property test checks that both agree.
//!
//! The line's blanks are found in one of two ways that must agree (a test compares them):
//! from a bit mask of the first 16 bytes of the line, which covers the usual short subject
//! with one compare, or, when the line is longer or ends near the end of the buffer, by
//! scanning eight bytes at a time.
//!
//! Ownership: a pure function over the connection's read buffer.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::parser::{Event, Limits};

/// Where the arguments of a plain PUB or HPUB line end, as offsets into the line (the
/// bytes after the op name and its space): `ends[k]` is the space after argument `k`, or,
/// for the last of the `n` arguments, the CR (the LF is checked by the caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    ends: [usize; 4],
    n: usize,
}

/// The most arguments either op takes (HPUB with a reply).
const MAX_ARGS: usize = 4;

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

/// The line's shape found by scanning token by token: works for a line of any length.
/// Out of line: it is the rarer case, and keeps the inlined fast path small.
#[inline(never)]
pub(super) fn scan_shape(line: &[u8]) -> Option<Shape> {
    let mut ends = [0; MAX_ARGS];
    let mut from = 0;
    for (k, e) in ends.iter_mut().enumerate() {
        let d = token(line, from)?;
        *e = d;
        if line.get(d) == Some(&b'\r') {
            return Some(Shape { ends, n: k + 1 });
        }
        from = d + 1;
    }
    None
}

/// One bit per byte of `w`, set for a blank or control byte (`<= 0x20`): bit `j` for `w[j]`.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn blanks16(w: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_set1_epi8};
    // SAFETY: SSE2 is enabled for this build (the cfg above; it is part of every x86_64
    // target), and the unaligned load reads exactly the 16 bytes `w` borrows.
    let m = unsafe {
        let v = _mm_loadu_si128(w.as_ptr().cast());
        // An unsigned byte is at most 0x20 exactly when min(byte, 0x20) is the byte itself.
        _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x20)), v))
    };
    m as u32
}

/// Portable form of the above: two words, each byte tested exactly (no borrows between
/// bytes), the top bits then gathered into one byte by a multiply. Built on x86_64 too for
/// the test that compares it with the SSE2 form.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
#[inline(always)]
fn blanks16_swar(w: &[u8; 16]) -> u32 {
    fn eight(w: u64) -> u32 {
        const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
        const TOPS: u64 = 0x8080_8080_8080_8080;
        // The low seven bits plus 0x5f reach the top bit exactly when they are >= 0x21
        // (and never carry into the next byte); a set top bit in the byte itself also
        // means "not a blank".
        let big = ((w & LOW7) + 0x5f5f_5f5f_5f5f_5f5f) | w;
        let m = (!big & TOPS) >> 7;
        // Bit 8j moves to bit 56 + j; the partial products never share a bit, so nothing
        // carries into the top byte.
        (m.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32
    }
    let (lo, hi) = w.split_at(8);
    let word = |h: &[u8]| h.try_into().map_or(0, u64::from_le_bytes);
    eight(word(lo)) | (eight(word(hi)) << 8)
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline(always)]
fn blanks16(w: &[u8; 16]) -> u32 {
    blanks16_swar(w)
}

/// The position of the lowest set bit of `m`, which is then cleared. `None` when empty.
#[inline(always)]
fn pop(m: &mut u32) -> Option<usize> {
    if *m == 0 {
        return None;
    }
    let k = m.trailing_zeros() as usize;
    *m &= *m - 1;
    Some(k)
}

/// The next delimiter in the window mask `m`, the first after the previous one (at
/// `from - 1`), so an argument is empty exactly when its delimiter is where it starts.
/// `true` for the CR; `None` for any other blank or control byte, or none left.
#[inline(always)]
fn next_delim(line: &[u8], m: &mut u32, from: usize) -> Option<(usize, bool)> {
    let d = pop(m)?;
    if d == from {
        return None;
    }
    match line.get(d) {
        Some(b'\r') => Some((d, true)),
        Some(b' ') => Some((d, false)),
        _ => None,
    }
}

/// The line's shape when all its delimiters up to the CR are among its first 16 bytes:
/// the same answer as [`scan_shape`] whenever this is `Some`. `None` says nothing (the
/// caller then scans).
///
/// Written out argument by argument rather than as a loop over `Shape::ends`, so that the
/// positions stay in registers when inlined.
#[inline(always)]
pub(super) fn window_shape(line: &[u8]) -> Option<Shape> {
    let mut m = blanks16(line.first_chunk::<16>()?);
    let (e0, cr) = next_delim(line, &mut m, 0)?;
    if cr {
        return Some(Shape {
            ends: [e0, 0, 0, 0],
            n: 1,
        });
    }
    let (e1, cr) = next_delim(line, &mut m, e0 + 1)?;
    if cr {
        return Some(Shape {
            ends: [e0, e1, 0, 0],
            n: 2,
        });
    }
    let (e2, cr) = next_delim(line, &mut m, e1 + 1)?;
    if cr {
        return Some(Shape {
            ends: [e0, e1, e2, 0],
            n: 3,
        });
    }
    match next_delim(line, &mut m, e2 + 1)? {
        (e3, true) => Some(Shape {
            ends: [e0, e1, e2, e3],
            n: 4,
        }),
        _ => None,
    }
}

/// A size field of 1 to 9 digits. The first digit is taken as it is, not added to zero
/// times ten: the size is on the path from one frame to the next, so each step counts.
#[inline(always)]
fn size(d: &[u8]) -> Option<usize> {
    let digit = |c: u8| {
        let v = c.wrapping_sub(b'0');
        (v <= 9).then_some(usize::from(v))
    };
    let (&first, rest) = d.split_first()?;
    if rest.len() > 8 {
        return None;
    }
    let mut n = digit(first)?;
    for &c in rest {
        n = n * 10 + digit(c)?;
    }
    Some(n)
}

/// A message from a whole plain frame: the parts of [`Event::Msg`], as a plain struct
/// (no reply and no header size text are empty slices). The shard takes it apart where
/// the parser returns it: wrapped in `Result<Option<Event>>`, the same parts were written
/// out and read back once more per publish (about 20 instructions of 750).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainPub<'a> {
    pub subject: &'a [u8],
    pub reply: &'a [u8],
    /// `Some` for HPUB.
    pub header_len: Option<usize>,
    /// Header block and payload, without the trailing CRLF.
    pub data: &'a [u8],
    /// The sizes as written by the client.
    pub size_text: &'a [u8],
    pub hdr_text: &'a [u8],
}

impl<'a> PlainPub<'a> {
    /// The same message as the parser's general path reports it.
    pub fn into_event(self) -> Event<'a> {
        Event::Msg {
            subject: self.subject,
            reply: (!self.reply.is_empty()).then_some(self.reply),
            header_len: self.header_len,
            data: self.data,
            size_text: self.size_text,
            hdr_text: self.header_len.map(|_| self.hdr_text),
        }
    }
}

/// A whole plain PUB or HPUB frame at `i`: where it ends and its message.
#[inline(always)]
pub(super) fn whole_plain_frame<'a>(buf: &'a [u8], i: usize, lim: &Limits) -> Option<(usize, PlainPub<'a>)> {
    let b = buf.get(i..)?;
    // The op name in any case, in one compare: OR-ing 0x20 into a letter folds upper case
    // to lower (and only the two cases of that letter fold to it); the space is exact.
    let head = u32::from_le_bytes(*b.first_chunk::<4>()?);
    let (hpub, skip) = if head | 0x0020_2020 == u32::from_le_bytes(*b"pub ") {
        (false, 4)
    } else if head | 0x2020_2020 == u32::from_le_bytes(*b"hpub") && b.get(4) == Some(&b' ') && lim.headers {
        (true, 5)
    } else {
        return None;
    };
    let line = b.get(skip..)?;
    let shape = match window_shape(line) {
        Some(s) => s,
        None => scan_shape(line)?,
    };
    // PUB: subject [reply] size; HPUB: subject [reply] header-size size. Each argument
    // ends at `ends[k]` and the next starts just after it. Constant indices only: the
    // positions stay in registers.
    let [e0, e1, e2, e3] = shape.ends;
    let (reply_end, hdr_at, size_at, end) = match (hpub, shape.n) {
        (false, 2) => (None, None, e0 + 1, e1),
        (false, 3) => (Some(e1), None, e1 + 1, e2),
        (true, 3) => (None, Some(e0 + 1..e1), e1 + 1, e2),
        (true, 4) => (Some(e1), Some(e1 + 1..e2), e2 + 1, e3),
        _ => return None,
    };
    if end > lim.max_control_line || line.get(end + 1) != Some(&b'\n') {
        return None;
    }
    let size_text = line.get(size_at..end)?;
    let total = size(size_text)?;
    let (header_len, hdr_text) = match hdr_at {
        Some(at) => {
            let text = line.get(at)?;
            let h = size(text)?;
            // A header larger than the message is an error the general path reports.
            if h > total {
                return None;
            }
            (Some(h), text)
        }
        None => (None, &b""[..]),
    };
    if lim.max_payload >= 0 && total as i64 > lim.max_payload {
        return None;
    }
    let start = end + 2;
    let data = line.get(start..start + total)?;
    if line.get(start + total..start + total + 2) != Some(&b"\r\n"[..]) {
        return None;
    }
    let reply = match reply_end {
        Some(r) => line.get(e0 + 1..r)?,
        None => &b""[..],
    };
    let msg = PlainPub {
        subject: line.get(..e0)?,
        reply,
        header_len,
        data,
        size_text,
        hdr_text,
    };
    Some((i + skip + start + total + 2, msg))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bytes that matter to the line's shape, and some that do not.
    fn line_byte() -> impl Strategy<Value = u8> {
        prop_oneof![
            Just(b' '),
            Just(b'\r'),
            Just(b'\n'),
            Just(b'\t'),
            Just(0u8),
            Just(0x20 + 1),
            Just(0x7f),
            Just(0x80),
            Just(0xa0),
            b'0'..=b'9',
            b'a'..=b'z',
            any::<u8>(),
        ]
    }

    proptest! {
        #[test]
        fn both_blank_masks_agree(w in any::<[u8; 16]>()) {
            prop_assert_eq!(blanks16(&w), blanks16_swar(&w));
            let slow = w.iter().enumerate().fold(0u32, |m, (j, &c)| m | (u32::from(c <= 0x20) << j));
            prop_assert_eq!(blanks16(&w), slow);
        }

        /// Whenever the 16-byte window gives a shape, the scan gives the same one.
        #[test]
        fn window_agrees_with_scan(line in proptest::collection::vec(line_byte(), 0..40)) {
            if let Some(s) = window_shape(&line) {
                prop_assert_eq!(Some(s), scan_shape(&line));
            }
        }
    }

    #[test]
    fn window_finds_the_usual_lines() {
        let pad = |l: &[u8]| [l, &[b'x'; 16][..]].concat();
        let two = window_shape(&pad(b"foo.bar 16\r\n")).unwrap();
        assert_eq!(&two.ends[..two.n], &[7, 10]);
        let three = window_shape(&pad(b"a.b r 5\r\n")).unwrap();
        assert_eq!(&three.ends[..three.n], &[3, 5, 7]);
        let four = window_shape(&pad(b"a r 12 14\r\n")).unwrap();
        assert_eq!(&four.ends[..four.n], &[1, 3, 6, 9]);
        assert_eq!(window_shape(&pad(b"a b c d e\r\n")), None, "five arguments");
        assert_eq!(window_shape(&pad(b"a  5\r\n")), None);
        assert_eq!(window_shape(&pad(b"a\t5\r\n")), None);
        assert_eq!(window_shape(b"a 5\r\n"), None, "fewer than 16 bytes: scanned instead");
    }
}
