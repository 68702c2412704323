//! `authorization { ... }` (nats-server's `parseAuthorization`) and how the top level
//! merges it with the users of `accounts` (duplicates, a single user or a token next to
//! a users list).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::{go_value, permissions, users, Cx};
use crate::auth::config::{AuthCallout, NkeyUser, Permissions, User};
use crate::server::options::Options;
use conf::{Entry, ValueKind};
use std::collections::HashSet;

#[derive(Default)]
struct Parsed {
    user: String,
    pass: String,
    token: String,
    timeout: f64,
    /// `Some` as soon as a `users` list parsed, even empty or with nkeys only.
    users: Option<Vec<User>>,
    nkeys: Vec<NkeyUser>,
    default_permissions: Option<Permissions>,
    callout: Option<AuthCallout>,
    proxy_required: bool,
}

/// Why the block was not parsed.
enum Stop {
    /// An error the reference returns (recorded in `cx`).
    Error,
    /// A failed type assertion (recorded in `cx`): the reference then goes on with a
    /// block it does not have.
    Panic,
}

/// The block's own keys.
fn parse(cx: &mut Cx, e: &Entry) -> Result<Parsed, Stop> {
    let map = cx.map(e).ok_or(Stop::Panic)?;
    let mut a = Parsed::default();
    for (key, entry) in map.iter() {
        match key.to_ascii_lowercase().as_str() {
            "user" | "username" => a.user = cx.string(entry).ok_or(Stop::Panic)?.into(),
            "pass" | "password" => a.pass = cx.string(entry).ok_or(Stop::Panic)?.into(),
            "token" => a.token = cx.string(entry).ok_or(Stop::Panic)?.into(),
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
                            return Err(Stop::Error);
                        }
                    },
                    _ => {
                        cx.error(
                            &entry.key_pos,
                            "error parsing authorization config, 'timeout' wrong type",
                        );
                        return Err(Stop::Error);
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
            "users" => match users::users(cx, entry, true) {
                Ok(Some((nkeys, named))) => {
                    a.users = Some(named);
                    a.nkeys = nkeys;
                }
                Ok(None) => {
                    a.users = None;
                    a.nkeys = Vec::new();
                }
                Err(msg) => cx.errors.push(msg),
            },
            "default_permission" | "default_permissions" | "permissions" => match permissions::permissions(cx, entry) {
                Ok(p) => a.default_permissions = Some(p),
                Err(msg) => cx.errors.push(msg),
            },
            "auth_callout" | "auth_hook" => match users::auth_callout(cx, entry) {
                Ok(ac) => a.callout = ac,
                Err(msg) => cx.errors.push(msg),
            },
            "proxy_required" => a.proxy_required = cx.bool(entry).ok_or(Stop::Panic)?,
            _ => cx.unknown(key, entry),
        }
    }
    if let Some(p) = &a.default_permissions {
        for u in a.users.iter_mut().flatten() {
            u.permissions.get_or_insert_with(|| p.clone());
        }
        for u in &mut a.nkeys {
            u.permissions.get_or_insert_with(|| p.clone());
        }
    }
    Ok(a)
}

/// The names and nkeys already taken (by accounts parsed before this block).
pub(super) fn taken(o: &Options) -> HashSet<String> {
    let s = &o.security;
    s.users
        .iter()
        .map(|u| u.username.clone())
        .chain(s.nkeys.iter().map(|u| u.nkey.clone()))
        .collect()
}

/// The top-level `authorization` key.
pub(super) fn authorization(cx: &mut Cx, o: &mut Options, e: &Entry) {
    let a = match parse(cx, e) {
        Ok(a) => a,
        Err(Stop::Error) => return,
        Err(Stop::Panic) => {
            // The reference then dereferences the block it did not get.
            cx.error(
                &e.key_pos,
                "runtime error: invalid memory address or nil pointer dereference",
            );
            return;
        }
    };
    let sec = &mut o.security;
    sec.authorization_block = true;
    o.username = a.user.clone();
    o.password = a.pass.clone();
    sec.proxy_required = a.proxy_required;
    o.authorization = a.token.clone();
    o.auth_timeout = a.timeout;
    sec.auth_callout = a.callout;
    sec.default_permissions = a.default_permissions;
    if (!a.user.is_empty() || !a.pass.is_empty()) && !a.token.is_empty() {
        cx.error(&e.key_pos, "Cannot have a user/pass and token");
        return;
    }
    let mut names = taken(o);
    if a.users.is_some() || !names.is_empty() {
        if !a.user.is_empty() {
            cx.error(&e.key_pos, "Can not have a single user/pass and a users array");
            return;
        }
        if !a.token.is_empty() {
            cx.error(&e.key_pos, "Can not have a token and a users array");
            return;
        }
        let users = a.users.unwrap_or_default();
        for u in &users {
            if !names.insert(u.username.clone()) {
                cx.error(&e.key_pos, format!("Duplicate user {:?} detected", u.username));
                return;
            }
        }
        o.security.users.extend(users);
    }
    for u in &a.nkeys {
        if !names.insert(u.nkey.clone()) {
            cx.error(&e.key_pos, format!("Duplicate nkey {:?} detected", u.nkey));
            return;
        }
    }
    o.security.nkeys.extend(a.nkeys);
}
