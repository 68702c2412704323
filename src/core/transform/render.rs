//! Applying a transform on the publish path: match a subject against the source pattern,
//! then write the destination into one exactly-sized `Vec`.
//!
//! Matching follows the reference's subset match (`isSubsetMatch`), quirks included: a
//! source token that merely *starts* with `*` (`*x`) matches any token, and a published
//! `*` only matches a source `*`. Subject tokens are recorded as offsets in a stack array
//! (past `INLINE` tokens they are found again by scanning), so a subject that does not
//! match costs no allocation, and one that does costs the output `Vec` only.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::placeholder::Func;
use super::subject_transform::{Part, SubjectTransform};
use super::TransformError;
use crate::core::subject::{is_valid_literal_subject, TSEP};

/// Token offsets kept on the stack.
const INLINE: usize = 32;

/// A compiled source pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pattern {
    tokens: Box<[Box<[u8]>]>,
}

impl Pattern {
    pub(super) fn new(src: &str) -> Self {
        Pattern {
            tokens: src.as_bytes().split(|&b| b == TSEP).map(Into::into).collect(),
        }
    }

    /// Subset-match `subject` (any bytes, wildcards taken as written).
    pub(super) fn match_subject<'s>(&self, subject: &'s [u8]) -> Option<SubjectTokens<'s>> {
        let mut toks = SubjectTokens::new(subject);
        self.match_into(&mut toks).then_some(toks)
    }

    /// Subset-match the subject of `toks`, recording its tokens there (from scratch).
    pub(super) fn match_into(&self, toks: &mut SubjectTokens<'_>) -> bool {
        toks.n = 0;
        let subject = toks.subject;
        self.walk(subject, toks).is_some()
    }

    fn walk(&self, subject: &[u8], toks: &mut SubjectTokens<'_>) -> Option<()> {
        let mut at = Some(0);
        for pt in self.tokens.iter() {
            let start = at?;
            let end = memchr::memchr(TSEP, subject.get(start..)?).map_or(subject.len(), |n| start + n);
            at = (end < subject.len()).then_some(end + 1);
            toks.push(start, end);
            if **pt == *b">" {
                return Some(());
            }
            let t = subject.get(start..end)?;
            if t.is_empty() || t == b">" {
                return None;
            }
            if t == b"*" {
                if **pt != *b"*" {
                    return None;
                }
                continue;
            }
            if pt.first() != Some(&b'*') && **pt != *t {
                return None;
            }
        }
        // Same number of tokens.
        at.is_none().then_some(())
    }
}

/// Where the tokens of a subject being transformed come from.
pub(super) trait Tokens {
    /// The token at `i`; empty when there is none.
    fn token(&self, i: usize) -> &[u8];
    /// FNV-1a state after hashing all tokens joined with `.`.
    fn hash_all(&self, h: u32) -> u32;
    /// Append tokens `from..` joined with `.`.
    fn tail(&self, from: usize, out: &mut Vec<u8>);
    /// Bytes `tail` would append.
    fn tail_len(&self, from: usize) -> usize;
}

/// Tokens of a subject as offsets.
pub(super) struct SubjectTokens<'s> {
    subject: &'s [u8],
    spans: [(usize, usize); INLINE],
    n: usize,
}

impl<'s> SubjectTokens<'s> {
    pub(super) fn new(subject: &'s [u8]) -> Self {
        SubjectTokens {
            subject,
            spans: [(0, 0); INLINE],
            n: 0,
        }
    }

    /// All tokens of `subject`.
    pub(super) fn scan(subject: &'s [u8]) -> Self {
        let mut toks = Self::new(subject);
        let mut start = 0;
        for end in memchr::memchr_iter(TSEP, subject).chain(std::iter::once(subject.len())) {
            if toks.n == INLINE {
                break;
            }
            toks.push(start, end);
            start = end + 1;
        }
        toks
    }

    fn push(&mut self, start: usize, end: usize) {
        if let Some(slot) = self.spans.get_mut(self.n) {
            *slot = (start, end);
            self.n += 1;
        }
    }

    fn span(&self, i: usize) -> Option<(usize, usize)> {
        if let Some(&s) = self.spans.get(..self.n).and_then(|s| s.get(i)) {
            return Some(s);
        }
        // Past the recorded ones (only for patterns longer than `INLINE`): scan.
        let mut start = 0;
        for (k, end) in memchr::memchr_iter(TSEP, self.subject)
            .chain(std::iter::once(self.subject.len()))
            .enumerate()
        {
            if k == i {
                return Some((start, end));
            }
            start = end + 1;
        }
        None
    }
}

impl Tokens for SubjectTokens<'_> {
    fn token(&self, i: usize) -> &[u8] {
        self.span(i)
            .and_then(|(s, e)| self.subject.get(s..e))
            .unwrap_or_default()
    }

    fn hash_all(&self, h: u32) -> u32 {
        fnv1a(h, self.subject)
    }

    fn tail(&self, from: usize, out: &mut Vec<u8>) {
        if let Some(rest) = self.span(from).and_then(|(s, _)| self.subject.get(s..)) {
            out.extend_from_slice(rest);
        }
    }

    fn tail_len(&self, from: usize) -> usize {
        self.span(from).map_or(0, |(s, _)| self.subject.len() - s)
    }
}

impl Tokens for [&[u8]] {
    fn token(&self, i: usize) -> &[u8] {
        self.get(i).copied().unwrap_or_default()
    }

    fn hash_all(&self, mut h: u32) -> u32 {
        for (i, t) in self.iter().enumerate() {
            if i > 0 {
                h = fnv1a(h, b".");
            }
            h = fnv1a(h, t);
        }
        h
    }

    fn tail(&self, from: usize, out: &mut Vec<u8>) {
        for (i, t) in self.iter().enumerate().skip(from) {
            if i > from {
                out.push(TSEP);
            }
            out.extend_from_slice(t);
        }
    }

    fn tail_len(&self, from: usize) -> usize {
        self.iter()
            .skip(from)
            .map(|t| t.len() + 1)
            .sum::<usize>()
            .saturating_sub(1)
    }
}

const FNV_OFFSET: u32 = 2_166_136_261;
const FNV_PRIME: u32 = 16_777_619;

/// 32-bit FNV-1a (Go's `hash/fnv.New32a`), continued from `h`.
fn fnv1a(mut h: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        h = (h ^ u32::from(b)).wrapping_mul(FNV_PRIME);
    }
    h
}

/// Longest decimal of a partition or random number (`u32::MAX`).
const MAX_NUMBER: usize = 10;

fn push_number(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Length of the UTF-8 sequence at the start of `b`, or 1 for an invalid byte (Go's
/// `utf8.DecodeRune` size).
fn char_len(b: &[u8]) -> usize {
    let n = match b.first() {
        Some(0xc2..=0xdf) => 2,
        Some(0xe0..=0xef) => 3,
        Some(0xf0..=0xf4) => 4,
        _ => 1,
    };
    match b.get(..n) {
        Some(seq) if n > 1 && std::str::from_utf8(seq).is_ok() => n,
        _ => 1,
    }
}

/// The pieces of Go's `strings.Split(token, delim)` (an empty delimiter splits into
/// characters; an empty token then gives no pieces).
struct Pieces<'a> {
    rest: Option<&'a [u8]>,
    delim: &'a [u8],
}

impl<'a> Iterator for Pieces<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        if self.delim.is_empty() {
            let (piece, after) = rest.split_at_checked(char_len(rest))?;
            self.rest = (!after.is_empty()).then_some(after);
            return Some(piece);
        }
        match memchr::memmem::find(rest, self.delim) {
            Some(i) => {
                self.rest = rest.get(i + self.delim.len()..);
                rest.get(..i)
            }
            None => {
                self.rest = None;
                Some(rest)
            }
        }
    }
}

/// `split`: the non-empty pieces, with a `.` before each one that follows a piece other
/// than a leading empty one (so `--a` gives `.a`, as on the reference).
fn write_split(out: &mut Vec<u8>, tok: &[u8], delim: &[u8]) {
    let mut pieces = Pieces { rest: Some(tok), delim }.peekable();
    let mut first = true;
    while let Some(p) = pieces.next() {
        out.extend_from_slice(p);
        if pieces.peek().is_some_and(|next| !next.is_empty()) && !(first && p.is_empty()) {
            out.push(TSEP);
        }
        first = false;
    }
}

fn join_chunks<'a>(out: &mut Vec<u8>, chunks: impl Iterator<Item = &'a [u8]>) {
    for (i, c) in chunks.enumerate() {
        if i > 0 {
            out.push(TSEP);
        }
        out.extend_from_slice(c);
    }
}

/// The single-token functions; a size outside `1..len` leaves the token whole.
fn write_func(out: &mut Vec<u8>, func: Func, tok: &[u8], arg: i32) {
    let len = tok.len();
    let Some(n) = usize::try_from(arg).ok().filter(|&n| n > 0 && n < len) else {
        out.extend_from_slice(tok);
        return;
    };
    let (cut_left, cut_right) = (tok.split_at_checked(n), tok.split_at_checked(len - n));
    match (func, cut_left, cut_right) {
        (Func::SplitFromLeft, Some((a, b)), _) | (Func::SplitFromRight, _, Some((a, b))) => {
            out.extend_from_slice(a);
            out.push(TSEP);
            out.extend_from_slice(b);
        }
        (Func::SliceFromLeft, ..) => join_chunks(out, tok.chunks(n)),
        (Func::SliceFromRight, ..) => {
            let (head, body) = tok.split_at_checked(len % n).unwrap_or((&[], tok));
            join_chunks(
                out,
                std::iter::once(head).filter(|h| !h.is_empty()).chain(body.chunks(n)),
            );
        }
        (Func::Left, Some((a, _)), _) => out.extend_from_slice(a),
        (Func::Right, _, Some((_, b))) => out.extend_from_slice(b),
        _ => out.extend_from_slice(tok),
    }
}

impl SubjectTransform {
    /// An upper bound of the output length, so the output is allocated once.
    fn output_bound<T: Tokens + ?Sized>(&self, toks: &T) -> usize {
        let mut n = self.parts.len();
        for part in self.parts.iter() {
            n += match part {
                Part::Literal(b) => b.len(),
                Part::Tail(from) => toks.tail_len(*from),
                Part::Token(t) => toks.token(*t).len(),
                Part::Partition { .. } | Part::Random(_) => MAX_NUMBER,
                Part::Func { tok, .. } | Part::Split { tok, .. } => 2 * toks.token(*tok).len() + 1,
            };
        }
        n
    }

    /// Write the destination for `toks` (`TransformTokenizedSubject`).
    pub(super) fn render<T: Tokens + ?Sized>(&self, toks: &T, rand: &mut impl FnMut() -> u64) -> Vec<u8> {
        let bound = self.output_bound(toks);
        let mut out = Vec::with_capacity(bound);
        let last = self.parts.len().saturating_sub(1);
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Tail(from) => {
                    toks.tail(*from, &mut out);
                    break;
                }
                Part::Literal(b) => out.extend_from_slice(b),
                Part::Token(t) => out.extend_from_slice(toks.token(*t)),
                Part::Partition { buckets, keys } => {
                    let h = if keys.is_empty() {
                        toks.hash_all(FNV_OFFSET)
                    } else {
                        keys.iter().fold(FNV_OFFSET, |h, &k| fnv1a(h, toks.token(k)))
                    };
                    // Go converts the (possibly negative) bucket count to uint32.
                    let buckets = *buckets as u32;
                    push_number(&mut out, if buckets == 0 { 0 } else { u64::from(h % buckets) });
                }
                Part::Func { func, tok, arg } => write_func(&mut out, *func, toks.token(*tok), *arg),
                Part::Split { tok, delim } => write_split(&mut out, toks.token(*tok), delim),
                Part::Random(ceiling) => {
                    // Go: `rand.Int31() % ceiling`, which is never negative.
                    let r = (rand() >> 33) as i64;
                    let v = if *ceiling == 0 { 0 } else { r % i64::from(*ceiling) };
                    push_number(&mut out, v.unsigned_abs());
                }
            }
            if i < last {
                out.push(TSEP);
            }
        }
        debug_assert!(out.len() <= bound, "output {} past its bound {bound}", out.len());
        out
    }

    /// Map a published subject: `None` when it does not match the source or is not a
    /// valid literal subject. `rand` feeds `{{random(n)}}`.
    pub fn match_and_transform(&self, subject: &[u8], rand: &mut impl FnMut() -> u64) -> Option<Vec<u8>> {
        self.try_match(subject, rand).ok()
    }

    /// Go's `Match`: the mapped subject, `BadSubject` for a subject that is not a valid
    /// literal, `NoTransforms` when it does not match the source.
    pub fn try_match(&self, subject: &[u8], rand: &mut impl FnMut() -> u64) -> Result<Vec<u8>, TransformError> {
        if self.passthrough {
            return Ok(subject.to_vec());
        }
        if !is_valid_literal_subject(subject) {
            return Err(TransformError::BadSubject);
        }
        let toks = self
            .pattern
            .match_subject(subject)
            .ok_or(TransformError::NoTransforms)?;
        Ok(self.render(&toks, rand))
    }

    /// Does `subject` match the source (the reference's subset match, no validity check)?
    pub fn source_matches(&self, subject: &[u8]) -> bool {
        self.pattern.match_subject(subject).is_some()
    }

    /// Transform a subject already known to match, given as tokens (`TransformTokenizedSubject`).
    /// Missing tokens read as empty.
    pub fn transform(&self, tokens: &[&[u8]], rand: &mut impl FnMut() -> u64) -> Vec<u8> {
        self.render(tokens, rand)
    }

    /// Transform a subject already known to match (`TransformSubject`).
    pub fn transform_subject(&self, subject: &[u8], rand: &mut impl FnMut() -> u64) -> Vec<u8> {
        self.render(&SubjectTokens::scan(subject), rand)
    }
}
