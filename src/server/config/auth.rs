//! `authorization { user, password, token, timeout, users = [...] }` (nats-server's
//! `parseAuthorization` and `parseUsers`), for what rnats implements: a single user, a
//! token, or a list of users with (optionally bcrypt-hashed) passwords.

use super::{go_value, unsupported, Cx};
use crate::core::config::UserEntry;
use crate::server::options::Options;
use conf::{Entry, ValueKind};

#[derive(Default)]
struct Parsed {
    user: String,
    pass: String,
    token: String,
    timeout: f64,
    /// `Some` as soon as a `users` key is present, even empty.
    users: Option<Vec<UserEntry>>,
}

pub(super) fn authorization(cx: &mut Cx, o: &mut Options, e: &Entry) {
    let Some(map) = cx.map(e) else { return };
    let mut a = Parsed::default();
    for (key, entry) in map.iter() {
        let lower = key.to_ascii_lowercase();
        match lower.as_str() {
            "user" | "username" => {
                if let Some(v) = cx.string(entry) {
                    a.user = v.into();
                }
            }
            "pass" | "password" => {
                if let Some(v) = cx.string(entry) {
                    a.pass = v.into();
                }
            }
            "token" => {
                if let Some(v) = cx.string(entry) {
                    a.token = v.into();
                }
            }
            "timeout" => {
                let secs = match &entry.value.kind {
                    ValueKind::Integer(n) => *n as f64,
                    ValueKind::Float(f) => *f,
                    ValueKind::String(s) => match conf::parse_duration_nanos(s) {
                        Ok(n) => n as f64 / 1e9,
                        Err(err) => {
                            cx.error(
                                &entry.key_pos,
                                format!("error parsing authorization config, 'timeout' {err}"),
                            );
                            return;
                        }
                    },
                    _ => {
                        cx.error(
                            &entry.key_pos,
                            "error parsing authorization config, 'timeout' wrong type",
                        );
                        return;
                    }
                };
                if secs > 60.0 {
                    let reason = format!(
                        "timeout of {} ({secs:.6} seconds) is high, consider keeping it under 60 seconds. \
                         possibly caused by unquoted duration; use '1m' instead of 1m, for example",
                        go_value(&entry.value)
                    );
                    cx.warn_field(key, &entry.key_pos, &reason);
                }
                a.timeout = secs;
            }
            "users" => {
                if let Some(users) = users(cx, entry) {
                    a.users = Some(users);
                }
            }
            "default_permission"
            | "default_permissions"
            | "permissions"
            | "auth_callout"
            | "auth_hook"
            | "proxy_required" => unsupported::not_yet(cx, key, entry),
            _ => cx.unknown(key, entry),
        }
    }
    o.username = a.user.clone();
    o.password = a.pass.clone();
    o.authorization = a.token.clone();
    o.auth_timeout = a.timeout;
    if (!a.user.is_empty() || !a.pass.is_empty()) && !a.token.is_empty() {
        cx.error(&e.key_pos, "Cannot have a user/pass and token");
        return;
    }
    if let Some(users) = a.users {
        if !a.user.is_empty() {
            cx.error(&e.key_pos, "Can not have a single user/pass and a users array");
            return;
        }
        if !a.token.is_empty() {
            cx.error(&e.key_pos, "Can not have a token and a users array");
            return;
        }
        let mut seen = std::collections::HashSet::new();
        for u in &users {
            if !seen.insert(u.user.clone()) {
                cx.error(&e.key_pos, format!("Duplicate user {:?} detected", u.user));
                return;
            }
        }
        o.users = users;
    }
}

/// `users = [ {user, password}, ... ]`.
fn users(cx: &mut Cx, e: &Entry) -> Option<Vec<UserEntry>> {
    let Some(items) = e.value.as_array() else {
        cx.error(
            &e.key_pos,
            format!("Expected users field to be an array, got {}", go_value(&e.value)),
        );
        return None;
    };
    let mut out = Vec::new();
    for item in items {
        let Some(map) = item.as_map() else {
            cx.error(
                &item.pos,
                format!("Expected user entry to be a map/struct, got {}", go_value(item)),
            );
            continue;
        };
        let mut user = UserEntry {
            user: String::new(),
            pass: String::new(),
        };
        let mut nkey = false;
        for (key, entry) in map.iter() {
            let lower = key.to_ascii_lowercase();
            nkey |= lower == "nkey";
            match lower.as_str() {
                "user" | "username" => {
                    if let Some(v) = cx.string(entry) {
                        user.user = v.into();
                    }
                }
                "pass" | "password" => {
                    if let Some(v) = cx.string(entry) {
                        user.pass = v.into();
                    }
                }
                "nkey"
                | "permission"
                | "permissions"
                | "authorization"
                | "allowed_connection_types"
                | "connection_types"
                | "clients"
                | "proxy_required" => unsupported::not_yet(cx, key, entry),
                _ => cx.unknown(key, entry),
            }
        }
        if user.user.is_empty() && !nkey {
            // The reference names the last field it looked at.
            let pos = map.iter().last().map_or(&item.pos, |(_, e)| &e.key_pos);
            cx.error(pos, "User entry requires a user");
            return None;
        }
        if !nkey {
            out.push(user);
        }
    }
    Some(out)
}
