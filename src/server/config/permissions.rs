//! `permissions { publish, subscribe, allow_responses }` of users, accounts and the
//! authorization block (nats-server's `parseUserPermissions` and the helpers it calls):
//! the old style (a subject or a list) and the new style (`{ allow, deny }`).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::subjects::is_valid_subject;
use super::{go_value, Cx};
use crate::auth::config::{Permissions, ResponsePermission, SubjectPermission};
use conf::{Entry, Position, Value, ValueKind};

/// `permissions` (also `default_permissions`): a map of publish, subscribe and
/// allow_responses. `Err` carries the reference's error to report (already positioned);
/// problems inside the map are recorded in `cx` and leave their part out.
pub(super) fn permissions(cx: &mut Cx, e: &Entry) -> Result<Permissions, String> {
    let Some(map) = e.value.as_map() else {
        return Err(format!(
            "{}: Expected permissions to be a map/struct, got {}",
            e.key_pos,
            go_value(&e.value)
        ));
    };
    let mut p = Permissions::default();
    for (key, entry) in map.iter() {
        match key.to_ascii_lowercase().as_str() {
            "pub" | "publish" | "import" => match variable(cx, entry) {
                Ok(sp) => p.publish = sp,
                Err(msg) => cx.errors.push(msg),
            },
            "sub" | "subscribe" | "export" => match variable(cx, entry) {
                Ok(sp) => p.subscribe = sp,
                Err(msg) => cx.errors.push(msg),
            },
            "publish_allow_responses" | "allow_responses" => {
                p.response = match entry.value.as_bool() {
                    Some(true) => Some(ResponsePermission::default()),
                    Some(false) => None,
                    None => allow_responses(cx, entry),
                };
                if p.response.is_some() {
                    // Responses only: no blanket publish permission.
                    let publish = p.publish.get_or_insert_with(SubjectPermission::default);
                    publish.allow.get_or_insert_with(Vec::new);
                }
            }
            _ => {
                if !entry.value.used_as_variable {
                    cx.error(&entry.key_pos, format!("Unknown field {key:?} parsing permissions"));
                }
            }
        }
    }
    Ok(p)
}

/// A publish or subscribe permission: `{ allow, deny }` or, in the old style, the allowed
/// subjects. `Ok(None)` for an empty map.
fn variable(cx: &mut Cx, e: &Entry) -> Result<Option<SubjectPermission>, String> {
    match &e.value.kind {
        ValueKind::Map(m) => {
            if m.is_empty() {
                return Ok(None);
            }
            let mut sp = SubjectPermission::default();
            for (key, entry) in m.iter() {
                match key.to_ascii_lowercase().as_str() {
                    "allow" => match subjects(&entry.value, Some(&entry.key_pos)) {
                        Ok(s) => sp.allow = Some(s),
                        Err(msg) => cx.errors.push(msg),
                    },
                    "deny" => match subjects(&entry.value, Some(&entry.key_pos)) {
                        Ok(s) => sp.deny = Some(s),
                        Err(msg) => cx.errors.push(msg),
                    },
                    _ => {
                        if !entry.value.used_as_variable {
                            cx.error(
                                &entry.key_pos,
                                format!(
                                    "Unknown field name {key:?} parsing subject permissions, only 'allow' or 'deny' are permitted"
                                ),
                            );
                        }
                    }
                }
            }
            Ok(Some(sp))
        }
        // The old style: the reference passes the bare value on, so its errors have no
        // position (except those about an array item).
        _ => subjects(&e.value, None).map(|allow| {
            Some(SubjectPermission {
                allow: Some(allow),
                deny: None,
            })
        }),
    }
}

fn at(pos: Option<&Position>, msg: String) -> String {
    match pos {
        Some(p) => format!("{p}: {msg}"),
        None => msg,
    }
}

/// A subject or a list of subjects, validated (`parsePermSubjects`).
fn subjects(v: &Value, pos: Option<&Position>) -> Result<Vec<String>, String> {
    let list = match &v.kind {
        ValueKind::String(s) => vec![s.clone()],
        ValueKind::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item.as_str() {
                    Some(s) => out.push(s.to_string()),
                    None => {
                        return Err(format!(
                            "{}: Subject in permissions array cannot be cast to string",
                            item.pos
                        ))
                    }
                }
            }
            out
        }
        _ => {
            return Err(at(
                pos,
                format!(
                    "Expected subject permissions to be a subject, or array of subjects, got {}",
                    v.go_type_name()
                ),
            ))
        }
    };
    check_subjects(&list).map_err(|msg| at(pos, msg))?;
    Ok(list)
}

/// nats-server 2.14.0's `checkPermSubjectArray`: valid subjects, or `"subject queue"`
/// (accepted for publish too, and the queue name is not checked).
pub(crate) fn check_subjects(list: &[String]) -> Result<(), String> {
    for s in list {
        if is_valid_subject(s) {
            continue;
        }
        let parts: Vec<&str> = s.split_ascii_whitespace().collect();
        let [subject, _queue] = parts.as_slice() else {
            return Err(format!("subject {s:?} is not a valid subject"));
        };
        if !is_valid_subject(subject) {
            return Err(format!("subject {subject:?} is not a valid subject"));
        }
    }
    Ok(())
}

/// `allow_responses { max, expires }` (`parseAllowResponses`). `None` after an error.
fn allow_responses(cx: &mut Cx, e: &Entry) -> Option<ResponsePermission> {
    let Some(map) = e.value.as_map() else {
        cx.error(
            &e.key_pos,
            "error parsing response permissions, expected a boolean or a map",
        );
        return None;
    };
    let mut rp = ResponsePermission::default();
    for (key, entry) in map.iter() {
        match key.to_ascii_lowercase().as_str() {
            "max" | "max_msgs" | "max_messages" | "max_responses" => {
                // Negative means unlimited; 0 keeps the default.
                let n = cx.int(entry)?;
                if n != 0 {
                    rp.max_msgs = n;
                }
            }
            "expires" | "expiration" | "ttl" => {
                let Some(s) = entry.value.as_str() else {
                    cx.error(&entry.key_pos, "error parsing expires, not a duration string");
                    return None;
                };
                match conf::parse_duration_nanos(s) {
                    Ok(0) => {}
                    Ok(n) => rp.expires_nanos = n,
                    Err(err) => {
                        cx.error(&entry.key_pos, format!("error parsing expires: {err}"));
                        return None;
                    }
                }
            }
            _ => {
                if !entry.value.used_as_variable {
                    cx.error(&entry.key_pos, format!("Unknown field {key:?} parsing permissions"));
                }
            }
        }
    }
    Some(rp)
}
