//! One destination token of a transform, read the way nats-server 2.14 reads it: `$N`, a
//! `{{function(args)}}` call, or a literal.
//!
//! The reference recognises functions with unanchored regular expressions of the shape
//! `{{\s*Name\s*\((.*)\)\s*}}` (only the first letter of each word of the name may be
//! upper case: `splitFromLeft`, `SplitFromLeft`, `splitfromleft`, but not `SPLIT`), tries
//! them in a fixed order, and splits the captured arguments on `,\s*`. The matcher below
//! reproduces that leftmost, greedy behaviour by hand (no regex engine), so odd tokens such
//! as `{{x}}{{wildcard(1)}}` read as the reference reads them. Integers are read like Go's
//! `strconv.Atoi`/`ParseInt` after trimming spaces.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::error::{DestErrorKind, TransformError};

/// A function a destination token can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Func {
    Wildcard,
    Partition,
    SplitFromLeft,
    SplitFromRight,
    SliceFromLeft,
    SliceFromRight,
    Split,
    Left,
    Right,
    Random,
}

impl Func {
    /// The words of the function name; the first letter of each may be either case.
    const fn words(self) -> &'static [&'static str] {
        match self {
            Func::Wildcard => &["wildcard"],
            Func::Partition => &["partition"],
            Func::SplitFromLeft => &["split", "from", "left"],
            Func::SplitFromRight => &["split", "from", "right"],
            Func::SliceFromLeft => &["slice", "from", "left"],
            Func::SliceFromRight => &["slice", "from", "right"],
            Func::Split => &["split"],
            Func::Left => &["left"],
            Func::Right => &["right"],
            Func::Random => &["random"],
        }
    }
}

/// The order in which the reference tries the functions on a `{{...}}` token.
const PARSE_ORDER: [Func; 10] = [
    Func::Wildcard,
    Func::Partition,
    Func::SplitFromLeft,
    Func::SplitFromRight,
    Func::SliceFromLeft,
    Func::SliceFromRight,
    Func::Right,
    Func::Left,
    Func::Split,
    Func::Random,
];

/// The functions account mappings accept (`ValidateMapping` in 2.14 does not list `left`
/// and `right`, so a mapping using them fails with "unknown function").
pub(super) const MAPPING_FUNCS: [Func; 8] = [
    Func::Partition,
    Func::Wildcard,
    Func::SplitFromLeft,
    Func::SplitFromRight,
    Func::SliceFromLeft,
    Func::SliceFromRight,
    Func::Split,
    Func::Random,
];

/// A destination token, with wildcard numbers as written (1-based, not yet resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Placeholder<'a> {
    /// Copied as is (also `$x`, `$` and anything that is not a call).
    Literal,
    /// `$N` or `{{wildcard(N)}}`.
    Wildcard(i64),
    /// `{{partition(n, i, ...)}}`; no indexes means "the whole subject".
    Partition { buckets: i32, indexes: Vec<i64> },
    /// `splitFromLeft`, `splitFromRight`, `sliceFromLeft`, `sliceFromRight`, `left`, `right`.
    IndexInt { func: Func, index: i64, arg: i32 },
    /// `{{split(i, delimiter)}}`.
    Split { index: i64, delim: &'a str },
    /// `{{random(n)}}`.
    Random(i32),
}

/// Go's `\s` (RE2 Perl class): `[\t\n\f\r ]`.
const fn is_go_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0c | b'\r' | b' ')
}

fn skip_space(t: &[u8], mut i: usize) -> usize {
    while t.get(i).is_some_and(|&b| is_go_space(b)) {
        i += 1;
    }
    i
}

/// Position after `words` at `i`, if the name is there.
fn match_name(t: &[u8], mut i: usize, words: &[&str]) -> Option<usize> {
    for w in words {
        let w = w.as_bytes();
        let (first, rest) = w.split_first()?;
        let c = *t.get(i)?;
        if c != *first && c != first.to_ascii_uppercase() {
            return None;
        }
        let end = i + w.len();
        if t.get(i + 1..end)? != rest {
            return None;
        }
        i = end;
    }
    Some(i)
}

/// The argument text of the leftmost `{{\s*name\s*\((.*)\)\s*}}` in `token`, if any.
pub(super) fn call_args(token: &str, func: Func) -> Option<&str> {
    let t = token.as_bytes();
    let mut from = 0;
    while let Some(off) = memchr::memmem::find(t.get(from..)?, b"{{") {
        let start = from + off;
        from = start + 1;
        let Some(i) = match_name(t, skip_space(t, start + 2), func.words()) else {
            continue;
        };
        let i = skip_space(t, i);
        if t.get(i) != Some(&b'(') {
            continue;
        }
        let body = i + 1;
        // `.` does not cross a newline: the closing `)` lies before the first one.
        let limit = t
            .get(body..)
            .map_or(body, |r| memchr::memchr(b'\n', r).map_or(t.len(), |n| body + n));
        // Greedy `(.*)`: the last `)` that is followed by `\s*}}`.
        let mut end = limit;
        while end > body {
            end -= 1;
            if t.get(end) == Some(&b')') {
                let after = skip_space(t, end + 1);
                if t.get(after..after + 2) == Some(b"}}".as_slice()) {
                    return token.get(body..end);
                }
            }
        }
    }
    None
}

/// Split arguments on `,\s*` (Go's `regexp.Split(s, -1)`: an empty text is one empty argument).
fn split_args(args: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (n, piece) in args.split(',').enumerate() {
        out.push(if n == 0 {
            piece
        } else {
            piece.trim_start_matches(|c: char| c.is_ascii() && is_go_space(c as u8))
        });
    }
    out
}

/// `strconv.Atoi(strings.Trim(s, " "))`.
fn atoi(s: &str) -> Option<i64> {
    s.trim_matches(' ').parse().ok()
}

/// `strconv.ParseInt(strings.Trim(s, " "), 10, 32)`.
fn parse_i32(s: &str) -> Option<i32> {
    s.trim_matches(' ').parse().ok()
}

/// An `int` argument that must not exceed `math.MaxInt32`, then narrowed like Go's `int32()`.
fn atoi_max_i32(s: &str) -> Option<i32> {
    let v = atoi(s)?;
    // Only the upper bound is checked by the reference; lower values wrap as Go's conversion does.
    (v <= i64::from(i32::MAX)).then_some(v as i32)
}

fn err(kind: DestErrorKind, token: &str) -> TransformError {
    TransformError::dest(kind, token)
}

/// Read one destination token (`indexPlaceHolders` in the reference).
pub(super) fn parse(token: &str) -> Result<Placeholder<'_>, TransformError> {
    use DestErrorKind::{InvalidArg, NotEnoughArgs, TooManyArgs, UnknownFunction};
    let b = token.as_bytes();
    if b.len() <= 1 {
        return Ok(Placeholder::Literal);
    }
    if let Some(num) = token.strip_prefix('$') {
        // Other features use `$`-prefixed tokens, so a non-number stays literal.
        return Ok(num.parse().map_or(Placeholder::Literal, Placeholder::Wildcard));
    }
    if !(b.len() > 4 && b.starts_with(b"{{") && b.ends_with(b"}}")) {
        return Ok(Placeholder::Literal);
    }
    for func in PARSE_ORDER {
        let Some(raw) = call_args(token, func) else {
            continue;
        };
        let args = split_args(raw);
        let first = args.first().copied().unwrap_or("");
        return match func {
            Func::Wildcard => match args.len() {
                1 if first.is_empty() => Err(err(NotEnoughArgs, token)),
                1 => atoi(first)
                    .map(Placeholder::Wildcard)
                    .ok_or_else(|| err(InvalidArg, token)),
                _ => Err(err(TooManyArgs, token)),
            },
            Func::Partition => {
                let buckets = atoi_max_i32(first).ok_or_else(|| err(InvalidArg, token))?;
                let indexes = args
                    .iter()
                    .skip(1)
                    .map(|a| atoi(a).ok_or_else(|| err(InvalidArg, token)))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Placeholder::Partition { buckets, indexes })
            }
            Func::Split => {
                let [index, delim] = two_args(&args, token)?;
                let index = atoi(index).ok_or_else(|| err(InvalidArg, token))?;
                if delim.contains([' ', '.']) {
                    return Err(err(InvalidArg, token));
                }
                Ok(Placeholder::Split { index, delim })
            }
            Func::Random => {
                if args.len() != 1 {
                    // The reference reports too many arguments as "not enough" here.
                    return Err(err(NotEnoughArgs, token));
                }
                atoi_max_i32(first)
                    .map(Placeholder::Random)
                    .ok_or_else(|| err(InvalidArg, token))
            }
            _ => {
                let [index, arg] = two_args(&args, token)?;
                let index = atoi(index).ok_or_else(|| err(InvalidArg, token))?;
                let arg = parse_i32(arg).ok_or_else(|| err(InvalidArg, token))?;
                Ok(Placeholder::IndexInt { func, index, arg })
            }
        };
    }
    Err(err(UnknownFunction, token))
}

fn two_args<'a>(args: &[&'a str], token: &str) -> Result<[&'a str; 2], TransformError> {
    match *args {
        [a, b] => Ok([a, b]),
        [] | [_] => Err(err(DestErrorKind::NotEnoughArgs, token)),
        _ => Err(err(DestErrorKind::TooManyArgs, token)),
    }
}

/// Is `token` a wildcard reference for `transformUntokenize`: `$` and a digit 1-9, or a
/// `wildcard(...)` call with one non-empty argument?
pub(super) fn is_wildcard_ref(token: &str) -> bool {
    let b = token.as_bytes();
    if b.len() > 1 && b.first() == Some(&b'$') && b.get(1).is_some_and(|d| (b'1'..=b'9').contains(d)) {
        return true;
    }
    call_args(token, Func::Wildcard).is_some_and(|a| !a.is_empty() && !a.contains(','))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn call_args_like_the_reference_regex() {
        for (token, func, want) in [
            ("{{wildcard(1)}}", Func::Wildcard, Some("1")),
            ("{{ Wildcard ( 1 ) }}", Func::Wildcard, Some(" 1 ")),
            ("{{WILDCARD(1)}}", Func::Wildcard, None),
            ("{{wildCard(1)}}", Func::Wildcard, None),
            ("{{splitfromleft(1,2)}}", Func::SplitFromLeft, Some("1,2")),
            ("{{SplitFromLeft(1,2)}}", Func::SplitFromLeft, Some("1,2")),
            ("{{splitFromLeft(1,2)}}", Func::Split, None),
            ("{{x}}{{wildcard(1)}}", Func::Wildcard, Some("1")),
            ("{{{wildcard(1)}}", Func::Wildcard, Some("1")),
            ("{{wildcard(1),(2)}}", Func::Wildcard, Some("1),(2")),
            ("{{wildcard(1)}}x}}", Func::Wildcard, Some("1")),
            ("{{wildcard(1)  }}", Func::Wildcard, Some("1")),
            ("{{wildcard(1\n)}}", Func::Wildcard, None),
            ("{{wildcard(1)\n}}", Func::Wildcard, Some("1")),
            ("{{wildcard(1)}", Func::Wildcard, None),
            ("{{wildcard1)}}", Func::Wildcard, None),
        ] {
            assert_eq!(call_args(token, func), want, "{token:?} {func:?}");
        }
    }

    #[test]
    fn args_split_like_go() {
        assert_eq!(split_args(""), vec![""]);
        assert_eq!(split_args("1,  2,\t3"), vec!["1", "2", "3"]);
        assert_eq!(split_args(" 1 ,"), vec![" 1 ", ""]);
    }

    #[test]
    fn placeholders() {
        use Placeholder::*;
        for (token, want) in [
            ("foo", Literal),
            ("$", Literal),
            ("$x", Literal),
            ("$1x", Literal),
            ("$1", Wildcard(1)),
            ("$01", Wildcard(1)),
            ("$+2", Wildcard(2)),
            ("$-1", Wildcard(-1)),
            ("$0", Wildcard(0)),
            ("{{}}", Literal),
            ("{{wildcard(1)}", Literal),
            ("{{ wildcard( 2 ) }}", Wildcard(2)),
            (
                "{{partition(3)}}",
                Partition {
                    buckets: 3,
                    indexes: vec![],
                },
            ),
            (
                "{{partition(3, 1,2)}}",
                Partition {
                    buckets: 3,
                    indexes: vec![1, 2],
                },
            ),
            (
                "{{partition(-3,1)}}",
                Partition {
                    buckets: -3,
                    indexes: vec![1],
                },
            ),
            ("{{split(1,-)}}", Split { index: 1, delim: "-" }),
            ("{{split(1,)}}", Split { index: 1, delim: "" }),
            (
                "{{left(1, 2)}}",
                IndexInt {
                    func: Func::Left,
                    index: 1,
                    arg: 2,
                },
            ),
            ("{{random(5)}}", Random(5)),
            ("{{random(-1)}}", Random(-1)),
        ] {
            assert_eq!(parse(token).unwrap(), want, "{token:?}");
        }
    }

    #[test]
    fn untokenize_refs() {
        for (token, want) in [
            ("$1", true),
            ("$1x", true),
            ("$0", false),
            ("$x", false),
            ("{{wildcard(1)}}", true),
            ("{{wildcard()}}", false),
            ("{{wildcard(1,2)}}", false),
            ("x{{wildcard(a)}}y", true),
            ("foo", false),
        ] {
            assert_eq!(is_wildcard_ref(token), want, "{token:?}");
        }
    }
}
