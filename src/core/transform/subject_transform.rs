//! `SubjectTransform`: a compiled (source pattern, destination) pair, built with the rules
//! of nats-server 2.14 (`NewSubjectTransform`, its strict form for imports, `reverse`), plus
//! the two helpers imports use to move between `*` and `$N` forms.
//!
//! Building validates everything and resolves every wildcard number to a source token
//! position, so applying a transform (see `render`) only copies bytes.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::error::{DestErrorKind, TransformError};
use super::placeholder::{self, Func, Placeholder};
use super::render::Pattern;

/// One compiled destination token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Part {
    /// Copied as is.
    Literal(Box<[u8]>),
    /// The trailing `>`: the subject's tokens from this source position on (the source's `>`).
    Tail(usize),
    /// The subject token at this source position.
    Token(usize),
    /// FNV-1a of the tokens at these positions (none: of the whole subject), modulo `buckets`.
    Partition { buckets: i32, keys: Box<[usize]> },
    /// `splitFromLeft` .. `right` on the token at `tok`.
    Func { func: Func, tok: usize, arg: i32 },
    /// The token at `tok` split on `delim`.
    Split { tok: usize, delim: Box<[u8]> },
    /// A random number below the argument.
    Random(i32),
}

/// A subject transform (mapping, import/export rewrite, stream transform).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectTransform {
    pub(super) src: String,
    pub(super) dest: String,
    pub(super) pattern: Pattern,
    pub(super) parts: Box<[Part]>,
    /// Source and destination are both `>`: every subject maps to itself unchecked.
    pub(super) passthrough: bool,
}

/// `subjectInfo`: the tokens of a valid subject with its count of `*` tokens and whether it
/// ends in `>`; `None` for an empty subject, an empty token, or a token after `>`.
/// Whitespace is not checked here.
fn subject_info(s: &str) -> Option<(Vec<&str>, usize, bool)> {
    if s.is_empty() {
        return None;
    }
    let (mut pwcs, mut fwc) = (0, false);
    let tokens: Vec<&str> = s.split('.').collect();
    for t in &tokens {
        if t.is_empty() || fwc {
            return None;
        }
        match *t {
            ">" => fwc = true,
            "*" => pwcs += 1,
            _ => {}
        }
    }
    Some((tokens, pwcs, fwc))
}

impl SubjectTransform {
    /// A transform where every mapping function is allowed (`NewSubjectTransform`).
    ///
    /// An empty `src` means `>`. An empty `dest` — for which the reference returns no
    /// transform at all, whatever the source — gives the identity transform of `src`
    /// (see [`SubjectTransform::identity`]).
    pub fn new(src: &str, dest: &str) -> Result<Self, TransformError> {
        Self::new_with_strict(src, dest, false)
    }

    /// A transform for imports and exports (`NewSubjectTransformStrict`): only wildcard
    /// references, and every source `*` must be referenced (so it can be reversed).
    pub fn new_strict(src: &str, dest: &str) -> Result<Self, TransformError> {
        Self::new_with_strict(src, dest, true)
    }

    /// `NewSubjectTransformWithStrict`.
    pub fn new_with_strict(src: &str, dest: &str, strict: bool) -> Result<Self, TransformError> {
        if dest.is_empty() {
            return Ok(Self::identity(src));
        }
        let src = if src.is_empty() { ">" } else { src };
        let (Some((stokens, npwcs, sfwc)), Some((dtokens, dpwcs, dfwc))) = (subject_info(src), subject_info(dest))
        else {
            return Err(TransformError::BadSubject);
        };
        if dpwcs > 0 || sfwc != dfwc {
            return Err(TransformError::BadSubject);
        }
        // Source position of the n-th `*` (1-based); other numbers resolve to position 0.
        let wildcard_pos: Vec<usize> = stokens
            .iter()
            .enumerate()
            .filter(|(_, t)| **t == "*")
            .map(|(i, _)| i)
            .collect();
        let resolve = |n: i64| -> usize {
            usize::try_from(n)
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|n| wildcard_pos.get(n))
                .copied()
                .unwrap_or(0)
        };
        let wildcard_source = npwcs > 0 || sfwc;
        let mut parts = Vec::with_capacity(dtokens.len());
        let mut refs = 0usize;
        for token in &dtokens {
            let ph = placeholder::parse(token)?;
            if !wildcard_source {
                // A literal source: only literals, random and (whole-subject) partitions.
                parts.push(match ph {
                    Placeholder::Literal => Part::Literal(token.as_bytes().into()),
                    Placeholder::Random(n) => Part::Random(n),
                    Placeholder::Partition { buckets, .. } => Part::Partition {
                        buckets,
                        keys: Box::new([]),
                    },
                    _ => return Err(TransformError::dest(DestErrorKind::IndexOutOfRange, token)),
                });
                continue;
            }
            if strict && !matches!(ph, Placeholder::Literal | Placeholder::Wildcard(_)) {
                return Err(TransformError::dest(DestErrorKind::NotSupportedForImport, token));
            }
            let indexes: &[i64] = match &ph {
                Placeholder::Literal | Placeholder::Random(_) => &[],
                Placeholder::Wildcard(i)
                | Placeholder::IndexInt { index: i, .. }
                | Placeholder::Split { index: i, .. } => std::slice::from_ref(i),
                Placeholder::Partition { indexes, .. } => indexes,
            };
            refs += indexes.len();
            let mut positions = Vec::with_capacity(indexes.len());
            for &i in indexes {
                if i > npwcs as i64 {
                    let named = format!("{token}: [{i}]");
                    return Err(TransformError::dest(DestErrorKind::IndexOutOfRange, &named));
                }
                positions.push(resolve(i));
            }
            let first = positions.first().copied().unwrap_or(0);
            parts.push(match ph {
                Placeholder::Literal if *token == ">" => Part::Tail(stokens.len().saturating_sub(1)),
                Placeholder::Literal => Part::Literal(token.as_bytes().into()),
                Placeholder::Random(n) => Part::Random(n),
                Placeholder::Wildcard(_) => Part::Token(first),
                Placeholder::Partition { buckets, .. } => Part::Partition {
                    buckets,
                    keys: positions.into(),
                },
                Placeholder::IndexInt { func, arg, .. } => Part::Func { func, tok: first, arg },
                Placeholder::Split { delim, .. } => Part::Split {
                    tok: first,
                    delim: delim.as_bytes().into(),
                },
            });
        }
        if strict && wildcard_source && refs < npwcs {
            return Err(TransformError::dest(DestErrorKind::NotUsingAllWildcards, dest));
        }
        Ok(SubjectTransform {
            src: src.to_owned(),
            dest: dest.to_owned(),
            pattern: Pattern::new(src),
            parts: parts.into(),
            passthrough: src == ">" && dest == ">",
        })
    }

    /// The transform that maps every subject matching `src` to itself. Built without
    /// reading `src`'s tokens as references (so `a.$1` is fine) and without validating it,
    /// as the reference accepts any source with an empty destination (a pattern with an
    /// empty token matches nothing; one with tokens after `>` matches at the `>`).
    pub fn identity(src: &str) -> Self {
        let src = if src.is_empty() { ">" } else { src };
        let parts = src
            .split('.')
            .enumerate()
            .map(|(i, t)| match t {
                "*" => Part::Token(i),
                ">" => Part::Tail(i),
                _ => Part::Literal(t.as_bytes().into()),
            })
            .collect();
        SubjectTransform {
            src: src.to_owned(),
            dest: tokenize(src),
            pattern: Pattern::new(src),
            parts,
            passthrough: src == ">",
        }
    }

    /// The source pattern (`>` when built with an empty one).
    pub fn source(&self) -> &str {
        &self.src
    }

    /// The destination as written.
    pub fn destination(&self) -> &str {
        &self.dest
    }

    /// The strict transform that undoes this one (`reverse`, used for the shadow
    /// subscriptions of stream imports with `to` and for service imports): the
    /// destination's wildcard references become `*` in the new source, and the source's
    /// `*` take those references in order. `None` when it cannot be built.
    pub fn reverse(&self) -> Option<SubjectTransform> {
        let (nsrc, refs) = untokenize(&self.dest);
        let mut refs = refs.into_iter();
        let mut ndest = Vec::new();
        for token in self.src.split('.') {
            ndest.push(if token == "*" { refs.next()? } else { token.to_owned() });
        }
        SubjectTransform::new_strict(&nsrc, &ndest.join(".")).ok()
    }
}

/// `transformTokenize`: number the `*` tokens, `foo.*.*` -> `foo.$1.$2`.
pub fn tokenize(subject: &str) -> String {
    let mut n = 0;
    let tokens: Vec<String> = subject
        .split('.')
        .map(|t| {
            if t == "*" {
                n += 1;
                format!("${n}")
            } else {
                t.to_owned()
            }
        })
        .collect();
    tokens.join(".")
}

/// `transformUntokenize`: turn wildcard references back into `*`, returning the pattern and
/// the references in order: `foo.$2.{{wildcard(1)}}` -> (`foo.*.*`, [`$2`, `{{wildcard(1)}}`]).
pub fn untokenize(subject: &str) -> (String, Vec<String>) {
    let mut refs = Vec::new();
    let tokens: Vec<&str> = subject
        .split('.')
        .map(|t| {
            if placeholder::is_wildcard_ref(t) {
                refs.push(t.to_owned());
                "*"
            } else {
                t
            }
        })
        .collect();
    (tokens.join("."), refs)
}
