//! Fuzz target `transform`: subject transforms and account mappings
//! (`rnats::core::transform`) built from arbitrary (source, destination) strings and applied
//! to arbitrary subjects.
//!
//! Checks, beyond "never panics" (and the output-size bound `render` debug-asserts):
//! - a subject maps exactly when it is a valid literal subject matching the source
//!   (or always, for the `>` to `>` passthrough);
//! - the three ways of applying a transform agree: `match_and_transform`,
//!   `transform_subject` and `transform` on the split tokens;
//! - an identity destination (`tokenize(src)`) gives back the subject;
//! - the strict constructor accepts only what the plain one accepts; a destination
//!   `validate_mapping` accepts on a valid source makes a `Mapping`; `MappingSet::apply`
//!   maps exactly the subjects the source matches (or equals, for a literal source);
//! - `reverse`, `tokenize`, `untokenize` and every error's text do not panic.
//!
//! Input layout: [0] flags (1: strict constructor; 2: cluster-scoped second destination;
//! 4: draw the weight roll from the subject's first byte; 8: first destination at 40%
//! instead of 100%), then NUL-separated parts:
//! source, destination, then up to 8 subjects (raw bytes). Source and destination are
//! read as UTF-8 with replacement.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::core::subject::{has_wildcard, is_valid_literal_subject, is_valid_subject};
use rnats::core::transform::{tokenize, untokenize, validate_mapping, MapDest, Mapping, MappingSet, SubjectTransform};

/// A reproducible stream of draws.
fn draws(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        s
    }
}

fn check_transform(tr: &SubjectTransform, src: &str, dest: &str, subject: &[u8]) {
    let passthrough = tr.source() == ">" && tr.destination() == ">";
    let out = tr.match_and_transform(subject, &mut draws(7));
    let should = passthrough || (is_valid_literal_subject(subject) && tr.source_matches(subject));
    assert_eq!(out.is_some(), should, "{src:?} -> {dest:?} on {subject:?}");
    let Some(out) = out else { return };
    if !passthrough {
        assert_eq!(out, tr.transform_subject(subject, &mut draws(7)));
        let toks: Vec<&[u8]> = subject.split(|&b| b == b'.').collect();
        assert_eq!(out, tr.transform(&toks, &mut draws(7)));
    }
    // Only for plain sources: a source token like `*x` (matches any token) or `$1` (a
    // reference once it lands in the destination) makes the "identity" something else.
    let plain = tr
        .source()
        .split('.')
        .all(|t| t == "*" || t == ">" || t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
    if plain && tr.destination() == tokenize(tr.source()) {
        assert_eq!(out, subject, "identity {src:?} -> {dest:?}");
    }
    if let Some(rev) = tr.reverse() {
        let _ = rev.match_and_transform(&out, &mut draws(9));
    }
}

fuzz_target!(|data: &[u8]| {
    let (&flags, rest) = data.split_first().unwrap_or((&0, &[]));
    let mut parts = rest.split(|&b| b == 0);
    let src = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let dest = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let subjects: Vec<&[u8]> = parts.take(8).collect();

    let _ = (tokenize(&src), untokenize(&dest), tokenize(&dest), untokenize(&src));
    let built = SubjectTransform::new_with_strict(&src, &dest, flags & 1 != 0);
    match &built {
        Ok(tr) => subjects.iter().for_each(|s| check_transform(tr, &src, &dest, s)),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    if flags & 1 != 0 && built.is_ok() {
        assert!(
            SubjectTransform::new(&src, &dest).is_ok(),
            "strict accepts less than non-strict"
        );
    }

    let validated = validate_mapping(&src, &dest);
    // Weight 100 unless flag 8: a share left over goes to the source itself, whose own
    // identity transform may fail (`a.$1` refers to a wildcard it does not have).
    let full = flags & 8 == 0;
    let mut dests = vec![MapDest::new(dest.clone(), if full { 100 } else { 40 })];
    if flags & 2 != 0 {
        dests.push(MapDest::in_cluster(format!("{dest}.c"), 30, "c1"));
    }
    let mapping = Mapping::new(&src, &dests);
    if validated.is_ok() && is_valid_subject(src.as_bytes()) && flags & 2 == 0 && full {
        assert!(mapping.is_ok(), "{src:?} -> {dest:?}: {mapping:?}");
    }
    let mapping = match mapping {
        Ok(m) => m,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let Ok(probe) = SubjectTransform::new(&src, &dest) else {
        panic!("{src:?} -> {dest:?} made a mapping but no transform");
    };
    let mut set = MappingSet::new();
    set.insert(mapping);
    for (i, s) in subjects.iter().enumerate() {
        let roll = if flags & 4 != 0 {
            u64::from(s.first().copied().unwrap_or(0)) << 56
        } else {
            i as u64
        };
        let want = (!has_wildcard(src.as_bytes()) && src.as_bytes() == *s) || probe.source_matches(s);
        for cluster in [None, Some("c1")] {
            assert_eq!(
                set.apply(s, roll.wrapping_mul(0x9e37_79b9_7f4a_7c15), cluster)
                    .is_some(),
                want
            );
        }
    }
});
