//! Scoped signing key templates: the permission subjects of a `user_scope` template may
//! contain `{{...}}` operations that the server fills in for each user it signs:
//!
//! - `{{name()}}`, `{{subject()}}`: the user JWT's name and subject,
//! - `{{account-name()}}`, `{{account-subject()}}`: the account JWT's name (possibly empty)
//!   and the user's `issuer_account`,
//! - `{{tag(key)}}`, `{{account-tag(key)}}`: every value `v` of the user's (or account's)
//!   tags of the form `key:v`; several values expand to several subjects (cartesian
//!   product over all tag operations in one subject, at most
//!   [`MAX_TEMPLATE_EXPANSIONS`] subjects per list).
//!
//! Operation names compare case-insensitively; an unknown operation is an error. Subjects
//! that come out invalid are dropped from allow lists and are an error in deny lists; a
//! missing tag is an error in deny lists and yields a dropped subject in allow lists. An
//! allow list that was not empty and ends up empty is compensated by denying `>`.
//! These are the rules of nats-server's `processUserPermissionsTemplate`.

use super::error::JwtError;
use super::user::{UserClaims, UserPermissionLimits};
use crate::core::subject::is_valid_subject;

/// Most subjects one list may expand to.
pub const MAX_TEMPLATE_EXPANSIONS: usize = 4096;

/// What the templates read from the account of the user.
#[derive(Debug, Clone, Copy, Default)]
pub struct TemplateAccount<'a> {
    /// The account JWT's `name` (may be empty).
    pub name: &'a str,
    /// The account JWT's tags.
    pub tags: &'a [String],
}

/// The template of a scoped signing key with its operations filled in for `user`.
pub fn apply_user_template(
    template: &UserPermissionLimits,
    user: &UserClaims,
    account: TemplateAccount<'_>,
) -> Result<UserPermissionLimits, JwtError> {
    let mut lim = template.clone();
    let ctx = Ctx { user, account };
    let p = &mut lim.permissions;
    let sub_allow_was_set = !p.subscribe.allow.is_empty();
    let pub_allow_was_set = !p.publish.allow.is_empty();
    p.subscribe.allow = ctx.apply(&p.subscribe.allow, false)?;
    p.subscribe.deny = ctx.apply(&p.subscribe.deny, true)?;
    p.publish.allow = ctx.apply(&p.publish.allow, false)?;
    p.publish.deny = ctx.apply(&p.publish.deny, true)?;
    for (was_set, perm) in [
        (sub_allow_was_set, &mut p.subscribe),
        (pub_allow_was_set, &mut p.publish),
    ] {
        if was_set && perm.allow.is_empty() && !perm.deny.iter().any(|d| d == ">") {
            perm.deny.push(">".to_string());
        }
    }
    Ok(lim)
}

/// The `{{...}}` operations of `s`, leftmost first, not overlapping (the server's
/// `{{2}([^}]+)}{2}`).
fn find_templates(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < b.len() {
        if b.get(i..i + 2) == Some(b"{{") {
            let body_start = i + 2;
            let close = b
                .get(body_start..)
                .and_then(|rest| rest.iter().position(|&c| c == b'}'));
            if let Some(n) = close {
                let end = body_start + n;
                if n > 0 && b.get(end..end + 2) == Some(b"}}") {
                    if let Some(m) = s.get(i..end + 2) {
                        out.push(m);
                    }
                    i = end + 2;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

/// Go's `strings.EqualFold` for the operation names.
fn eq_fold(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

/// `tag(key)` / `account-tag(key)` → `(is_account, key)`. The prefix is matched
/// case-insensitively but removed only when written in lower case, as the server does.
fn tag_op(op: &str) -> Option<(bool, &str)> {
    for (prefix, is_account) in [("tag(", false), ("account-tag(", true)] {
        if op.get(..prefix.len()).is_some_and(|p| eq_fold(p, prefix)) && op.ends_with(')') {
            let v = op.strip_prefix(prefix).unwrap_or(op);
            let v = v.strip_suffix(')').unwrap_or(v);
            return Some((is_account, v));
        }
    }
    None
}

struct Ctx<'a> {
    user: &'a UserClaims,
    account: TemplateAccount<'a>,
}

impl Ctx<'_> {
    fn apply(&self, list: &[String], fail_on_bad_subject: bool) -> Result<Vec<String>, JwtError> {
        if !list.iter().any(|s| !find_templates(s).is_empty()) {
            return Ok(list.to_vec());
        }
        let mut emitted: Vec<String> = Vec::with_capacity(list.len());
        for subject in list {
            let srcs = find_templates(subject);
            let mut values: Vec<Vec<String>> = Vec::with_capacity(srcs.len());
            let mut has_tags = false;
            for src in &srcs {
                let inner = src.strip_prefix("{{").unwrap_or(src);
                let op = inner.strip_suffix("}}").unwrap_or(inner).trim();
                let u = &self.user;
                let v = if eq_fold("name()", op) {
                    vec![u.claims.name.clone()]
                } else if eq_fold("subject()", op) {
                    vec![u.claims.subject.clone()]
                } else if eq_fold("account-name()", op) {
                    vec![self.account.name.to_string()]
                } else if eq_fold("account-subject()", op) {
                    vec![u.nats.issuer_account.clone()]
                } else if let Some((is_account, key)) = tag_op(op) {
                    has_tags = true;
                    let tags = if is_account {
                        self.account.tags
                    } else {
                        u.nats.generic.tags.as_slice()
                    };
                    let prefix = format!("{}:", key.to_lowercase());
                    let found: Vec<String> = tags
                        .iter()
                        .filter_map(|t| t.strip_prefix(prefix.as_str()))
                        .map(str::to_string)
                        .collect();
                    if !found.is_empty() {
                        found
                    } else if fail_on_bad_subject {
                        return Err(JwtError::TemplateTagUndefined {
                            subject: subject.clone(),
                            tag: key.to_string(),
                        });
                    } else {
                        vec![" ".to_string()]
                    }
                } else {
                    return Err(JwtError::TemplateUndefined {
                        subject: subject.clone(),
                        op: op.to_string(),
                    });
                };
                values.push(v);
            }
            if !has_tags {
                let mut s = subject.clone();
                for (src, v) in srcs.iter().zip(&values) {
                    s = s.replace(src, v.first().map(String::as_str).unwrap_or_default());
                }
                push_subject(&mut emitted, s, fail_on_bad_subject)?;
                continue;
            }
            let mut count = 1usize;
            for v in &values {
                if v.is_empty() {
                    count = 0;
                    break;
                }
                if count > MAX_TEMPLATE_EXPANSIONS / v.len() {
                    return Err(JwtError::TemplateExpansionLimit(MAX_TEMPLATE_EXPANSIONS));
                }
                count *= v.len();
            }
            if emitted.len() > MAX_TEMPLATE_EXPANSIONS.saturating_sub(count) {
                return Err(JwtError::TemplateExpansionLimit(MAX_TEMPLATE_EXPANSIONS));
            }
            // Odometer over the value lists, the last one turning fastest.
            let mut idx = vec![0usize; values.len()];
            for _ in 0..count {
                let mut s = subject.clone();
                for ((src, v), &k) in srcs.iter().zip(&values).zip(&idx) {
                    s = s.replace(src, v.get(k).map(String::as_str).unwrap_or_default());
                }
                push_subject(&mut emitted, s, fail_on_bad_subject)?;
                for (k, v) in idx.iter_mut().zip(&values).rev() {
                    *k += 1;
                    if *k < v.len() {
                        break;
                    }
                    *k = 0;
                }
            }
        }
        Ok(emitted)
    }
}

fn push_subject(out: &mut Vec<String>, s: String, fail_on_bad_subject: bool) -> Result<(), JwtError> {
    if is_valid_subject(s.as_bytes()) {
        out.push(s);
        Ok(())
    } else if fail_on_bad_subject {
        Err(JwtError::TemplateInvalidSubject)
    } else {
        Ok(())
    }
}
