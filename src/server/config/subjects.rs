//! Subject checks the config loader makes (nats-server's `IsValidSubject`,
//! `IsValidPublishSubject`, `subjectIsLiteral`, `SubjectsCollide`, `subjectIsSubsetMatch`)
//! and [`check_mapping`], the one place where mapping destinations are validated.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use crate::core::subject;

pub(crate) fn is_valid_subject(s: &str) -> bool {
    subject::is_valid_subject(s.as_bytes())
}

/// A valid subject without wildcard tokens.
pub(crate) fn is_valid_publish_subject(s: &str) -> bool {
    is_valid_subject(s) && !has_wildcard(s)
}

/// Has a `*` or `>` token.
pub(crate) fn has_wildcard(s: &str) -> bool {
    subject::has_wildcard(s.as_bytes())
}

fn is_pwc(t: &str) -> bool {
    t == "*"
}

fn is_fwc(t: &str) -> bool {
    t == ">"
}

/// Is every subject matched by `subject` also matched by `test`? Both may have
/// wildcards (`foo.*` is a subset of `>`, `*.*` and `foo.*`, not of `foo.bar`).
pub(crate) fn is_subset_match(subject: &str, test: &str) -> bool {
    let tokens: Vec<&str> = subject.split('.').collect();
    let tests: Vec<&str> = test.split('.').collect();
    for (i, t2) in tests.iter().enumerate() {
        let Some(t1) = tokens.get(i) else { return false };
        if t2.is_empty() {
            return false;
        }
        if is_fwc(t2) {
            return true;
        }
        if t1.is_empty() || is_fwc(t1) {
            return false;
        }
        if is_pwc(t1) {
            if !is_pwc(t2) {
                return false;
            }
            continue;
        }
        if !t2.starts_with('*') && t1 != t2 {
            return false;
        }
    }
    tokens.len() == tests.len()
}

fn token_kinds(tokens: &[&str]) -> (bool, bool) {
    (tokens.iter().any(|t| is_pwc(t)), tokens.iter().any(|t| is_fwc(t)))
}

fn tokens_can_match(t1: &str, t2: &str) -> bool {
    match (t1.as_bytes().first(), t2.as_bytes().first()) {
        (Some(a), Some(b)) => matches!(a, b'*' | b'>') || matches!(b, b'*' | b'>') || t1 == t2,
        _ => false,
    }
}

/// Could some literal subject match both `a` and `b`?
pub(crate) fn subjects_collide(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let ta: Vec<&str> = a.split('.').collect();
    let tb: Vec<&str> = b.split('.').collect();
    let (pa, fa) = token_kinds(&ta);
    let (pb, fb) = token_kinds(&tb);
    let (la, lb) = (!(pa || fa), !(pb || fb));
    if la && lb {
        return false;
    }
    if la {
        return is_subset_match(a, b);
    }
    if lb {
        return is_subset_match(b, a);
    }
    if !fa && !fb && ta.len() != tb.len() {
        return false;
    }
    if (ta.len() < tb.len() && !fa) || (tb.len() < ta.len() && !fb) {
        return false;
    }
    ta.iter().zip(tb.iter()).all(|(x, y)| tokens_can_match(x, y))
}

/// Can `source` be mapped to `destination`? The error is the reference's text (as it
/// follows "Error adding mapping for ...: ").
///
/// Every subject mapping and every import that rewrites a subject goes through here.
/// nats-server's `ValidateMapping` followed by the build of the transform, which checks
/// the mapping functions (`{{wildcard(1)}}`, ...) and the wildcard references.
pub(crate) fn check_mapping(source: &str, destination: &str) -> Result<(), String> {
    if !is_valid_subject(source) {
        return Err("invalid subject".into());
    }
    crate::core::transform::validate_mapping(source, destination).map_err(|e| e.to_string())
}

/// The check of an import's subject rewrite: nats-server's strict transform (wildcard
/// references only).
pub(crate) fn check_import_rewrite(source: &str, destination: &str) -> Result<(), String> {
    if !is_valid_subject(source) {
        return Err("invalid subject".into());
    }
    crate::core::transform::SubjectTransform::new_strict(source, destination)
        .map(drop)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn subset_and_collide() {
        let subset = [
            ("foo.bar", "foo.*", true),
            ("foo.*", ">", true),
            ("foo.*", "*.*", true),
            ("foo.*", "foo.bar", false),
            ("foo.>", "foo.*", false),
            ("foo", "foo.bar", false),
        ];
        for (a, b, want) in subset {
            assert_eq!(is_subset_match(a, b), want, "{a} {b}");
        }
        let collide = [
            ("foo.bar", "foo.bar", true),
            ("foo.bar", "foo.baz", false),
            ("foo.*", "*.bar", true),
            ("foo.*", "foo.*.x", false),
            ("foo.>", "*.bar.baz", true),
            ("foo.bar", "foo.>", true),
        ];
        for (a, b, want) in collide {
            assert_eq!(subjects_collide(a, b), want, "{a} {b}");
        }
    }

    #[test]
    fn mapping_checks() {
        assert_eq!(check_mapping("foo.*", "bar.{{wildcard(1)}}"), Ok(()));
        assert_eq!(check_mapping("foo..", "bar"), Err("invalid subject".into()));
        assert!(check_mapping("foo", "bar..x").is_err());
        assert!(check_mapping("foo.>", "bar.>.x").is_err());
    }
}
