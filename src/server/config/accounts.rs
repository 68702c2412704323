//! `accounts { NAME { nkey, users, exports, imports, mappings, default_permissions,
//! limits, jetstream, msg_trace } }` and `accounts: [names]` (nats-server's
//! `parseAccounts` and the per-account parsers), then the checks across accounts in
//! `links`.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::exports::{exports, imports, PendingExport, PendingImport};
use super::mappings::mappings;
use super::users::is_public_key;
use super::{auth, go_value, links, permissions, subjects, users, Cx};
use crate::auth::config::{
    AccountConfig, AccountJetStream, AccountLimits, JetStreamAccountLimits, MsgTrace, GLOBAL_ACCOUNT,
};
use crate::server::options::Options;
use conf::{Entry, Map, ValueKind};
use nkeys::KeyPairType;

fn new_account(name: &str) -> AccountConfig {
    AccountConfig {
        name: name.to_string(),
        ..AccountConfig::default()
    }
}

/// The top-level `accounts` key.
pub(super) fn accounts(cx: &mut Cx, o: &mut Options, e: &Entry) {
    let mut pending_exports = Vec::new();
    let mut pending_imports = Vec::new();
    match &e.value.kind {
        ValueKind::Array(items) => {
            let mut seen = std::collections::HashSet::new();
            for item in items {
                // A name that is not a string ends the whole block in the reference.
                let Some(name) = cx.item_string(item) else { return };
                if name == GLOBAL_ACCOUNT {
                    cx.error(&item.pos, format!("{name:?} is a Reserved Account"));
                    continue;
                }
                if !seen.insert(name.to_string()) {
                    cx.error(&item.pos, format!("Duplicate Account Entry: {name}"));
                    continue;
                }
                o.security.accounts.push(new_account(name));
            }
        }
        ValueKind::Map(map) => {
            let mut taken = auth::taken(o);
            for (name, entry) in map.iter() {
                if entry.value.used_as_variable {
                    continue;
                }
                let Some(body) = entry.value.as_map() else {
                    cx.error(&entry.key_pos, "Expected map entries for accounts");
                    continue;
                };
                if name == GLOBAL_ACCOUNT {
                    cx.error(&entry.key_pos, format!("{name:?} is a Reserved Account"));
                    continue;
                }
                let Some(acc) = account(
                    cx,
                    o,
                    name,
                    body,
                    &mut taken,
                    &mut pending_exports,
                    &mut pending_imports,
                ) else {
                    return;
                };
                o.security.accounts.push(acc);
            }
        }
        // Anything else makes the reference's type switch fall through silently.
        _ => {}
    }
    if !cx.errors.is_empty() {
        return;
    }
    links::check(cx, o, &e.key_pos, &pending_exports, &pending_imports);
}

/// One account's map. `None` when the reference gives up on the whole `accounts` block.
fn account(
    cx: &mut Cx,
    o: &mut Options,
    name: &str,
    body: &Map,
    taken: &mut std::collections::HashSet<String>,
    pending_exports: &mut Vec<PendingExport>,
    pending_imports: &mut Vec<PendingImport>,
) -> Option<AccountConfig> {
    let mut acc = new_account(name);
    let mut nkey_users = Vec::new();
    let mut named = Vec::new();
    let mut users_pos = None;
    for (key, entry) in body.iter() {
        match key.to_ascii_lowercase().as_str() {
            "nkey" => match entry.value.as_str() {
                Some(nk) if is_public_key(nk, KeyPairType::Account) => acc.nkey = Some(nk.to_string()),
                _ => cx.error(
                    &entry.key_pos,
                    format!("Not a valid public nkey for an account: {:?}", go_value(&entry.value)),
                ),
            },
            "imports" => match imports(cx, entry) {
                Ok(list) => pending_imports.extend(list.into_iter().map(|import| {
                    acc.imports.push(import.clone());
                    PendingImport {
                        account: name.to_string(),
                        import,
                    }
                })),
                Err(msg) => cx.errors.push(msg),
            },
            "exports" => match exports(cx, entry) {
                Ok(list) => pending_exports.extend(list.into_iter().map(|export| {
                    acc.exports.push(export.clone());
                    PendingExport {
                        account: name.to_string(),
                        export,
                    }
                })),
                Err(msg) => cx.errors.push(msg),
            },
            "jetstream" => match jetstream(cx, entry) {
                Ok(js) => acc.jetstream = js,
                Err(msg) => cx.errors.push(msg),
            },
            "users" => {
                users_pos = Some(entry.key_pos.clone());
                match users::users(cx, entry, false) {
                    Ok(Some((k, n))) => {
                        nkey_users = k;
                        named = n;
                    }
                    Ok(None) => {
                        nkey_users = Vec::new();
                        named = Vec::new();
                    }
                    Err(msg) => cx.errors.push(msg),
                }
            }
            "default_permissions" => match permissions::permissions(cx, entry) {
                Ok(p) => acc.default_permissions = Some(p),
                Err(msg) => cx.errors.push(msg),
            },
            "mappings" | "maps" => {
                if let Some(m) = mappings(cx, entry) {
                    acc.mappings.extend(m);
                }
            }
            "limits" => match limits(cx, entry, &mut acc.limits) {
                Ok(()) => {}
                Err(msg) => cx.errors.push(msg),
            },
            "msg_trace" | "trace_dest" => {
                let mut trace = acc.msg_trace.take().unwrap_or(MsgTrace {
                    dest: String::new(),
                    sampling: 0,
                });
                match msg_trace(key, entry, &mut trace) {
                    Ok(()) => {
                        if !trace.dest.is_empty() && trace.sampling == 0 {
                            trace.sampling = 100;
                        } else if trace.sampling > 0 && trace.dest.is_empty() {
                            cx.warning(
                                &entry.key_pos,
                                "Trace destination sampling ignored since no destination was set",
                            );
                            trace.sampling = 0;
                        }
                    }
                    Err(msg) => cx.errors.push(msg),
                }
                acc.msg_trace = Some(trace);
            }
            _ => cx.unknown(key, entry),
        }
    }
    let users_pos = users_pos.unwrap_or_default();
    if !nkey_users.is_empty() || !named.is_empty() {
        if !o.username.is_empty() {
            cx.error(&users_pos, "Can not have a single user/pass and accounts");
            return Some(acc);
        }
        if !o.authorization.is_empty() {
            cx.error(&users_pos, "Can not have a token and accounts");
            return Some(acc);
        }
    }
    if let Some(p) = &acc.default_permissions {
        for u in &mut named {
            u.permissions.get_or_insert_with(|| p.clone());
        }
        for u in &mut nkey_users {
            u.permissions.get_or_insert_with(|| p.clone());
        }
    }
    for mut u in nkey_users {
        if !taken.insert(u.nkey.clone()) {
            cx.error(&users_pos, format!("Duplicate nkey {:?} detected", u.nkey));
            continue;
        }
        u.account = Some(name.to_string());
        o.security.nkeys.push(u);
    }
    for mut u in named {
        if !taken.insert(u.username.clone()) {
            cx.error(&users_pos, format!("Duplicate user {:?} detected", u.username));
            continue;
        }
        u.account = Some(name.to_string());
        o.security.users.push(u);
    }
    Some(acc)
}

/// `limits { max_connections, max_subscriptions, max_payload, max_leafnodes }`.
fn limits(cx: &mut Cx, e: &Entry, l: &mut AccountLimits) -> Result<(), String> {
    let Some(map) = e.value.as_map() else {
        return Err(format!(
            "{}: Expected account limits to be a map/struct, got {}",
            e.key_pos,
            go_value(&e.value)
        ));
    };
    for (key, entry) in map.iter() {
        let slot = match key.to_ascii_lowercase().as_str() {
            "max_connections" | "max_conn" => &mut l.max_connections,
            "max_subscriptions" | "max_subs" => &mut l.max_subscriptions,
            "max_payload" | "max_pay" => &mut l.max_payload,
            "max_leafnodes" | "max_leafs" => &mut l.max_leafnodes,
            _ => {
                if !entry.value.used_as_variable {
                    cx.error(&entry.key_pos, format!("Unknown field {key:?} parsing account limits"));
                }
                continue;
            }
        };
        // The reference keeps the low 32 bits.
        let Some(n) = cx.int(entry) else { return Ok(()) };
        *slot = n as i32;
    }
    Ok(())
}

/// Go's `strconv.Atoi`, with its error text.
pub(super) fn atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {s:?}: invalid syntax"));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {s:?}: value out of range"))
}

/// `msg_trace: subject` or `msg_trace { dest, sampling }`.
fn msg_trace(top_key: &str, e: &Entry, t: &mut MsgTrace) -> Result<(), String> {
    let pos = &e.key_pos;
    let dest = |t: &mut MsgTrace, pos: &conf::Position, key: &str, v: &conf::Value| -> Result<(), String> {
        let Some(d) = v.as_str() else {
            return Err(format!(
                "{pos}: Field {key:?} should be a string, got {}",
                v.go_type_name()
            ));
        };
        if !subjects::is_valid_publish_subject(d) {
            return Err(format!("{pos}: Trace destination {d:?} is not valid"));
        }
        t.dest = d.to_string();
        Ok(())
    };
    let sampling = |t: &mut MsgTrace, pos: &conf::Position, n: i64| -> Result<(), String> {
        if n <= 0 || n > 100 {
            return Err(format!(
                "{pos}: Ttrace destination sampling value {n} is invalid, needs to be [1..100]"
            ));
        }
        t.sampling = n as u8;
        Ok(())
    };
    match &e.value.kind {
        ValueKind::String(_) => dest(t, pos, top_key, &e.value),
        ValueKind::Map(map) => {
            for (key, entry) in map.iter() {
                let p = &entry.key_pos;
                match key.to_ascii_lowercase().as_str() {
                    "dest" => dest(t, p, key, &entry.value)?,
                    "sampling" => match &entry.value.kind {
                        ValueKind::Integer(n) => sampling(t, p, *n)?,
                        ValueKind::String(s) => {
                            let n = atoi(s.strip_suffix('%').unwrap_or(s))
                                .map_err(|_| format!("{p}: Invalid trace destination sampling value {s:?}"))?;
                            sampling(t, p, n)?;
                        }
                        _ => {
                            return Err(format!(
                                "{p}: Trace destination sampling field {key:?} should be an integer or a percentage, got {}",
                                entry.value.go_type_name()
                            ))
                        }
                    },
                    _ => {
                        if !entry.value.used_as_variable {
                            return Err(format!(
                                "{p}: Unknown field {key:?} parsing account message trace map/struct {top_key:?}"
                            ));
                        }
                    }
                }
            }
            Ok(())
        }
        _ => Err(format!(
            "{pos}: Expected account message trace {top_key:?} to be a string or a map/struct, got {}",
            e.value.go_type_name()
        )),
    }
}

/// An account's `jetstream`: a bool, `enabled`/`disabled`, or a map of limits
/// (`parseJetStreamForAccount`). The reference has lost the entry's position, so errors
/// about the value itself have none.
fn jetstream(cx: &mut Cx, e: &Entry) -> Result<AccountJetStream, String> {
    match &e.value.kind {
        ValueKind::Bool(true) => Ok(AccountJetStream::Enabled),
        ValueKind::Bool(false) => Ok(AccountJetStream::Disabled),
        ValueKind::String(s) => match s.to_ascii_lowercase().as_str() {
            "enabled" | "enable" => Ok(AccountJetStream::Enabled),
            "disabled" | "disable" => Ok(AccountJetStream::Disabled),
            _ => Err(format!("Expected 'enabled' or 'disabled' for string value, got '{s}'")),
        },
        ValueKind::Map(map) => {
            let mut l = JetStreamAccountLimits::default();
            for (key, entry) in map.iter() {
                let p = &entry.key_pos;
                let size = || {
                    entry.value.as_i64().ok_or_else(|| {
                        format!(
                            "{p}: Expected a parseable size for {key:?}, got {}",
                            go_value(&entry.value)
                        )
                    })
                };
                match key.to_ascii_lowercase().as_str() {
                    "max_memory" | "max_mem" | "mem" | "memory" => l.max_memory = size()?,
                    "max_store" | "max_file" | "max_disk" | "store" | "disk" => l.max_store = size()?,
                    "max_streams" | "streams" => l.max_streams = size()?,
                    "max_consumers" | "consumers" => l.max_consumers = size()?,
                    "max_bytes_required" | "max_stream_bytes" | "max_bytes" => {
                        l.max_bytes_required = entry.value.as_bool().ok_or_else(|| {
                            format!(
                                "{p}: Expected a parseable bool for {key:?}, got {}",
                                go_value(&entry.value)
                            )
                        })?
                    }
                    "mem_max_stream_bytes" | "memory_max_stream_bytes" => l.memory_max_stream_bytes = size()?,
                    "disk_max_stream_bytes" | "store_max_stream_bytes" => l.store_max_stream_bytes = size()?,
                    "max_ack_pending" => l.max_ack_pending = size()?,
                    "cluster_traffic" => {
                        let v = entry.value.as_str().ok_or_else(|| {
                            format!(
                                "{p}: Expected either 'system' or 'owner' string value for {key:?}, got {}",
                                go_value(&entry.value)
                            )
                        })?;
                        l.cluster_traffic_owner = match v {
                            "system" | "" => false,
                            "owner" => true,
                            _ => {
                                return Err(format!(
                                    "{p}: Expected 'system' or 'owner' string value for {key:?}, got {v}"
                                ))
                            }
                        };
                    }
                    _ => cx.unknown(key, entry),
                }
            }
            Ok(AccountJetStream::Limits(l))
        }
        _ => Err(format!(
            "Expected map, bool or string to define JetStream, got {}",
            e.value.go_type_name()
        )),
    }
}
