//! `users = [ ... ]` of the authorization block and of accounts (nats-server's
//! `parseUsers`, `parseAllowedConnectionTypes`), and `auth_callout { ... }`
//! (`parseAuthCallout`).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::{go_value, permissions, Cx};
use crate::auth::config::{AuthCallout, NkeyUser, User, GLOBAL_ACCOUNT};
use conf::{Entry, ValueKind};
use nkeys::KeyPairType;

/// The connection types a user may be restricted to.
const CONNECTION_TYPES: &[&str] = &[
    "STANDARD",
    "WEBSOCKET",
    "LEAFNODE",
    "LEAFNODE_WS",
    "MQTT",
    "MQTT_WS",
    "IN_PROCESS",
];

/// Is `key` a public nkey of this type?
pub(crate) fn is_public_key(key: &str, kind: KeyPairType) -> bool {
    nkeys::KeyPair::from_public_key(key).is_ok_and(|kp| kp.key_pair_type() == kind)
}

/// Is `key` a public curve (`X...`) key?
pub(crate) fn is_public_curve_key(key: &str) -> bool {
    nkeys::XKey::from_public_key(key).is_ok()
}

/// The nkey users and the named users of a list.
pub(super) type UserLists = (Vec<NkeyUser>, Vec<User>);

/// The users of a `users` entry: `Ok(None)` when the reference gives up on the whole
/// list (a failed type assertion, recorded in `cx`); `Err` for an error to report.
/// `positioned`: whether the reference still knows where the list is (it does not for
/// the users of an account).
pub(super) fn users(cx: &mut Cx, e: &Entry, positioned: bool) -> Result<Option<UserLists>, String> {
    let Some(items) = e.value.as_array() else {
        let msg = format!("Expected users field to be an array, got {}", go_value(&e.value));
        return Err(if positioned {
            format!("{}: {msg}", e.key_pos)
        } else {
            msg
        });
    };
    let mut keys = Vec::new();
    let mut named = Vec::new();
    for item in items {
        let Some(map) = item.as_map() else {
            cx.error(
                &item.pos,
                format!("Expected user entry to be a map/struct, got {}", go_value(item)),
            );
            continue;
        };
        let mut user = User::default();
        let mut nkey = String::new();
        let mut perms = None;
        let mut types = None;
        let mut proxy_required = false;
        // The reference reports the checks below at the last field it looked at.
        let mut last = &item.pos;
        for (key, entry) in map.iter() {
            last = &entry.key_pos;
            match key.to_ascii_lowercase().as_str() {
                "nkey" => match cx.string(entry) {
                    Some(v) => nkey = v.into(),
                    None => return Ok(None),
                },
                "user" | "username" => match cx.string(entry) {
                    Some(v) => user.username = v.into(),
                    None => return Ok(None),
                },
                "pass" | "password" => match cx.string(entry) {
                    Some(v) => user.password = v.into(),
                    None => return Ok(None),
                },
                "permission" | "permissions" | "authorization" => match permissions::permissions(cx, entry) {
                    Ok(p) => perms = Some(p),
                    Err(msg) => cx.errors.push(msg),
                },
                "allowed_connection_types" | "connection_types" | "clients" => {
                    types = connection_types(cx, entry);
                }
                "proxy_required" => match cx.bool(entry) {
                    Some(v) => proxy_required = v,
                    None => return Ok(None),
                },
                _ => cx.unknown(key, entry),
            }
        }
        if nkey.is_empty() && user.username.is_empty() {
            return Err(format!("{last}: User entry requires a user"));
        }
        if !nkey.is_empty() {
            if !is_public_key(&nkey, KeyPairType::User) {
                return Err(format!("{last}: Not a valid public nkey for a user"));
            }
            if !user.username.is_empty() || !user.password.is_empty() {
                return Err(format!("{last}: Nkey users do not take usernames or passwords"));
            }
            keys.push(NkeyUser {
                nkey,
                permissions: perms,
                account: None,
                allowed_connection_types: types,
                proxy_required,
            });
        } else {
            user.permissions = perms;
            user.allowed_connection_types = types;
            user.proxy_required = proxy_required;
            named.push(user);
        }
    }
    Ok(Some((keys, named)))
}

/// `allowed_connection_types`: a string or a list, upper-cased; unknown types are errors
/// (the known ones are kept).
fn connection_types(cx: &mut Cx, e: &Entry) -> Option<Vec<String>> {
    let given: Vec<String> = match &e.value.kind {
        ValueKind::String(s) => vec![s.clone()],
        ValueKind::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                match item.as_str() {
                    Some(s) => out.push(s.to_string()),
                    None => cx.error(
                        &item.pos,
                        format!(
                            "error parsing allowed connection types: unsupported type in array {}",
                            item.go_type_name()
                        ),
                    ),
                }
            }
            out
        }
        _ => {
            cx.error(
                &e.key_pos,
                format!(
                    "error parsing allowed connection types: unsupported type {}",
                    e.value.go_type_name()
                ),
            );
            return None;
        }
    };
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for t in given {
        let upper = t.to_ascii_uppercase();
        if CONNECTION_TYPES.contains(&upper.as_str()) {
            if !known.contains(&upper) {
                known.push(upper);
            }
        } else {
            unknown.push(format!("{upper:?}"));
        }
    }
    if !unknown.is_empty() {
        cx.error(&e.key_pos, format!("invalid connection types [{}]", unknown.join(" ")));
    }
    Some(known)
}

/// A list of strings in an auth callout (`auth_users`, `allowed_accounts`).
fn callout_list(cx: &mut Cx, e: &Entry, what: &str) -> Result<Option<Vec<String>>, String> {
    let Some(items) = e.value.as_array() else {
        // The reference prints the type of its token wrapper here.
        return Err(format!(
            "{}: Expected {what} field to be an array, got *conf.token",
            e.key_pos
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match cx.item_string(item) {
            Some(s) => out.push(s.to_string()),
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

/// `auth_callout { issuer, account, auth_users, xkey, allowed_accounts }`. `Ok(None)`
/// when the reference gives up (a failed type assertion, recorded in `cx`).
pub(super) fn auth_callout(cx: &mut Cx, e: &Entry) -> Result<Option<AuthCallout>, String> {
    let Some(map) = e.value.as_map() else {
        return Err(format!(
            "{}: Expected authorization callout to be a map/struct, got {}",
            e.key_pos,
            go_value(&e.value)
        ));
    };
    let mut ac = AuthCallout::default();
    let mut last = &e.key_pos;
    for (key, entry) in map.iter() {
        last = &entry.key_pos;
        match key.to_ascii_lowercase().as_str() {
            "issuer" => {
                let Some(v) = cx.string(entry) else { return Ok(None) };
                ac.issuer = v.into();
                if !is_public_key(v, KeyPairType::Account) {
                    return Err(format!(
                        "{}: Expected callout user to be a valid public account nkey, got {v:?}",
                        entry.key_pos
                    ));
                }
            }
            "account" | "acc" => {
                let Some(v) = cx.string(entry) else { return Ok(None) };
                ac.account = v.into();
            }
            "auth_users" | "users" => match callout_list(cx, entry, "auth_users")? {
                Some(list) => ac.auth_users.extend(list),
                None => return Ok(None),
            },
            "xkey" | "key" => {
                let Some(v) = cx.string(entry) else { return Ok(None) };
                ac.xkey = v.into();
                if !is_public_curve_key(v) {
                    return Err(format!(
                        "{}: Expected callout xkey to be a valid public xkey, got {v:?}",
                        entry.key_pos
                    ));
                }
            }
            "allowed_accounts" => match callout_list(cx, entry, "allowed accounts")? {
                Some(list) => ac.allowed_accounts.extend(list),
                None => return Ok(None),
            },
            _ => {
                if !entry.value.used_as_variable {
                    cx.error(
                        &entry.key_pos,
                        format!("Unknown field {key:?} parsing authorization callout"),
                    );
                }
            }
        }
    }
    if ac.account.is_empty() {
        ac.account = GLOBAL_ACCOUNT.into();
    }
    if ac.issuer.is_empty() {
        return Err(format!(
            "{last}: Authorization callouts require an issuer to be specified"
        ));
    }
    if ac.auth_users.is_empty() {
        return Err(format!(
            "{last}: Authorization callouts require authorized users to be specified"
        ));
    }
    Ok(Some(ac))
}
