//! An account's `exports = [ {stream|service, accounts, response_type, threshold,
//! latency, account_token_position, allow_trace} ]` and `imports = [ {stream|service:
//! {account, subject}, prefix, to, share, allow_trace} ]` (nats-server's
//! `parseAccountExports`/`Imports`, `parseExportStreamOrService`,
//! `parseImportStreamOrService`, `parseServiceLatency`).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::accounts::atoi;
use super::Cx;
use crate::auth::config::{
    Export, ExportKind, Import, Latency, LatencySampling, ResponseType, ServiceExport, ServiceImport, StreamImport,
    DEFAULT_SERVICE_LATENCY_SAMPLING,
};
use conf::{Entry, Map, Position, Value, ValueKind};
use std::time::Duration;

/// An export waiting for the checks across accounts.
pub(super) struct PendingExport {
    pub account: String,
    pub export: Export,
}

/// An import waiting for the checks across accounts.
pub(super) struct PendingImport {
    pub account: String,
    pub import: Import,
}

/// `exports = [...]`, in file order.
pub(super) fn exports(cx: &mut Cx, e: &Entry) -> Result<Vec<Export>, String> {
    let Some(items) = e.value.as_array() else {
        return Err(format!(
            "{}: Exports should be an array, got {}",
            e.key_pos,
            e.value.go_type_name()
        ));
    };
    let mut out = Vec::new();
    for item in items {
        match export(cx, item) {
            Ok(Some(x)) => out.push(x),
            Ok(None) => {}
            Err(msg) => cx.errors.push(msg),
        }
    }
    Ok(out)
}

enum Seen {
    Nothing,
    Stream(String),
    Service(String),
}

/// One export. `Ok(None)`: neither a stream nor a service (or the reference gave up on
/// the item after a failed type assertion).
fn export(cx: &mut Cx, item: &Value) -> Result<Option<Export>, String> {
    let Some(map) = item.as_map() else {
        return Err(format!(
            "{}: Export Items should be a map with type entry, got {}",
            item.pos,
            item.go_type_name()
        ));
    };
    let mut cur = Seen::Nothing;
    let mut accounts: Vec<String> = Vec::new();
    let mut svc = ServiceExport::default();
    let mut rt_pos: Option<&Position> = None;
    let mut lat_pos: Option<&Position> = None;
    let mut atrc_pos: Option<&Position> = None;
    let mut thresh_seen = false;
    let mut token_pos = 0u32;
    for (key, entry) in map.iter() {
        let pos = &entry.key_pos;
        let v = &entry.value;
        match key.to_ascii_lowercase().as_str() {
            "stream" => {
                if matches!(cur, Seen::Service(_)) {
                    cx.error(
                        pos,
                        format!("Detected stream {:?} but already saw a service", go_str(v)),
                    );
                    continue;
                }
                let directive = [
                    (rt_pos, "Detected response directive on non-service"),
                    (lat_pos, "Detected latency directive on non-service"),
                    (atrc_pos, "Detected allow_trace directive on non-service"),
                ];
                if let Some((p, msg)) = directive.iter().find_map(|(p, m)| p.map(|p| (p, *m))) {
                    cx.error(p, msg);
                    continue;
                }
                let Some(s) = v.as_str() else {
                    cx.error(
                        pos,
                        format!("Expected stream name to be string, got {}", v.go_type_name()),
                    );
                    continue;
                };
                cur = Seen::Stream(s.to_string());
            }
            "service" => {
                if matches!(cur, Seen::Stream(_)) {
                    cx.error(
                        pos,
                        format!("Detected service {:?} but already saw a stream", go_str(v)),
                    );
                    continue;
                }
                let Some(s) = v.as_str() else {
                    cx.error(
                        pos,
                        format!("Expected service name to be string, got {}", v.go_type_name()),
                    );
                    continue;
                };
                cur = Seen::Service(s.to_string());
            }
            "response" | "response_type" => {
                if rt_pos.is_some() {
                    cx.error(pos, "Duplicate response type definition");
                    continue;
                }
                rt_pos = Some(pos);
                let Some(s) = v.as_str() else {
                    cx.error(
                        pos,
                        format!("Expected response type to be string, got {}", v.go_type_name()),
                    );
                    continue;
                };
                svc.response_type = match s.to_ascii_lowercase().as_str() {
                    "single" | "singleton" => ResponseType::Singleton,
                    "stream" => ResponseType::Streamed,
                    "chunk" | "chunked" => ResponseType::Chunked,
                    _ => {
                        cx.error(pos, format!("Unknown response type: {s:?}"));
                        continue;
                    }
                };
                if matches!(cur, Seen::Stream(_)) {
                    cx.error(pos, "Detected response directive on non-service");
                }
            }
            "threshold" | "response_threshold" | "response_max_time" | "response_time" => {
                if thresh_seen {
                    cx.error(pos, "Duplicate response threshold detected");
                    continue;
                }
                thresh_seen = true;
                let Some(s) = v.as_str() else {
                    cx.error(
                        pos,
                        format!(
                            "Expected response threshold to be a parseable time duration, got {}",
                            v.go_type_name()
                        ),
                    );
                    continue;
                };
                match conf::parse_duration_nanos(s) {
                    Ok(n) => svc.response_threshold = Some(Duration::from_nanos(n.max(0) as u64)),
                    Err(_) => {
                        cx.error(
                            pos,
                            format!("Expected response threshold to be a parseable time duration, got {s:?}"),
                        );
                        continue;
                    }
                }
                if matches!(cur, Seen::Stream(_)) {
                    cx.error(pos, "Detected response directive on non-service");
                }
            }
            "accounts" => {
                let Some(list) = v.as_array() else {
                    cx.conversion_at(pos, v, "[]interface {}");
                    return Ok(None);
                };
                for a in list {
                    let Some(s) = a.as_str() else {
                        cx.conversion_at(&a.pos, a, "string");
                        return Ok(None);
                    };
                    accounts.push(s.to_string());
                }
            }
            "latency" => {
                lat_pos = Some(pos);
                match latency(pos, v) {
                    Ok(l) => {
                        if matches!(cur, Seen::Stream(_)) {
                            cx.error(pos, "Detected latency directive on non-service");
                            continue;
                        }
                        svc.latency = Some(l);
                    }
                    Err(msg) => cx.errors.push(msg),
                }
            }
            "account_token_position" => {
                let Some(n) = cx.int(entry) else { return Ok(None) };
                token_pos = n as u32;
            }
            "allow_trace" => {
                atrc_pos = Some(pos);
                let Some(b) = cx.bool(entry) else { return Ok(None) };
                if matches!(cur, Seen::Stream(_)) {
                    cx.error(pos, "Detected allow_trace directive on non-service");
                    continue;
                }
                svc.allow_trace = b;
            }
            _ => cx.unknown(key, entry),
        }
    }
    let accounts = (!accounts.is_empty()).then_some(accounts);
    Ok(match cur {
        Seen::Nothing => None,
        Seen::Stream(subject) => Some(Export {
            subject,
            accounts,
            account_token_position: token_pos,
            kind: ExportKind::Stream,
        }),
        Seen::Service(subject) => Some(Export {
            subject,
            accounts,
            account_token_position: token_pos,
            kind: ExportKind::Service(svc),
        }),
    })
}

/// Go's `%q` of a value that may not be a string.
fn go_str(v: &Value) -> String {
    v.as_str().map_or_else(|| super::go_value(v), str::to_string)
}

/// `latency: subject` or `latency { sampling, subject }`.
fn latency(root: &Position, v: &Value) -> Result<Latency, String> {
    if let Some(subject) = v.as_str() {
        return Ok(Latency {
            sampling: LatencySampling::Percent(DEFAULT_SERVICE_LATENCY_SAMPLING),
            subject: subject.to_string(),
        });
    }
    let Some(map) = v.as_map() else {
        return Err(format!(
            "{root}: Expected latency entry to be a map/struct or string, got {}",
            v.go_type_name()
        ));
    };
    let mut sampling = LatencySampling::Percent(DEFAULT_SERVICE_LATENCY_SAMPLING);
    if let Some(e) = map.get_entry("sampling") {
        let p = &e.key_pos;
        let n = match &e.value.kind {
            ValueKind::Integer(n) => *n,
            ValueKind::String(s) if s.trim().eq_ignore_ascii_case("headers") => {
                sampling = LatencySampling::Headers;
                -1
            }
            ValueKind::String(s) => atoi(s.strip_suffix('%').unwrap_or(s))
                .map_err(|err| format!("{p}: Failed to parse latency sample: {err}"))?,
            _ => {
                return Err(format!(
                    "{p}: Expected latency sample to be a string or map/struct, got {}",
                    e.value.go_type_name()
                ))
            }
        };
        if n != -1 || sampling != LatencySampling::Headers {
            if !(1..=100).contains(&n) {
                return Err(format!("{p}: bad sampling percentage, should be 1-100"));
            }
            sampling = LatencySampling::Percent(n as u8);
        }
    }
    let Some(e) = map.get_entry("subject") else {
        return Err(format!("{root}: Latency subject required, but missing"));
    };
    let Some(subject) = e.value.as_str() else {
        return Err(format!(
            "{}: Expected latency subject to be a string, got string",
            e.key_pos
        ));
    };
    Ok(Latency {
        sampling,
        subject: subject.to_string(),
    })
}

/// `imports = [...]`, in file order, with the reference's check for a service imported
/// twice to the same subject from the same account.
pub(super) fn imports(cx: &mut Cx, e: &Entry) -> Result<Vec<Import>, String> {
    let Some(items) = e.value.as_array() else {
        return Err(format!(
            "{}: Imports should be an array, got {}",
            e.key_pos,
            e.value.go_type_name()
        ));
    };
    let mut out: Vec<Import> = Vec::new();
    for item in items {
        match import(cx, item) {
            Ok(Some(Import::Service(s))) => {
                let dup = out.iter().find_map(|i| match i {
                    Import::Service(d) if d.to == s.to && d.account == s.account => Some(d),
                    _ => None,
                });
                if let Some(d) = dup {
                    cx.error(
                        &item.pos,
                        format!(
                            "Duplicate service import subject {:?}, previously used in import for account {:?}, subject {:?}",
                            s.to, d.account, d.subject
                        ),
                    );
                    continue;
                }
                out.push(Import::Service(s));
            }
            Ok(Some(i)) => out.push(i),
            Ok(None) => {}
            Err(msg) => cx.errors.push(msg),
        }
    }
    Ok(out)
}

/// `{ account, subject }` of an import (`parseAccount`): empty strings when the reference
/// gives up on it.
fn account_and_subject(cx: &mut Cx, m: &Map) -> (String, String) {
    let (mut account, mut subject) = (String::new(), String::new());
    for (key, entry) in m.iter() {
        match key.to_ascii_lowercase().as_str() {
            "account" => match cx.string(entry) {
                Some(v) => account = v.into(),
                None => return (String::new(), String::new()),
            },
            "subject" => match cx.string(entry) {
                Some(v) => subject = v.into(),
                None => return (String::new(), String::new()),
            },
            _ => cx.unknown(key, entry),
        }
    }
    (account, subject)
}

enum Cur {
    Nothing,
    Stream(StreamImport),
    Service(ServiceImport),
}

/// One import. `Ok(None)`: neither a stream nor a service, or the reference gave up.
fn import(cx: &mut Cx, item: &Value) -> Result<Option<Import>, String> {
    let Some(map) = item.as_map() else {
        return Err(format!(
            "{}: Import Items should be a map with type entry, got {}",
            item.pos,
            item.go_type_name()
        ));
    };
    let mut cur = Cur::Nothing;
    let (mut prefix, mut to, mut share) = (String::new(), String::new(), false);
    let mut atrc: Option<(bool, &Position)> = None;
    for (key, entry) in map.iter() {
        let pos = &entry.key_pos;
        let v = &entry.value;
        match key.to_ascii_lowercase().as_str() {
            "stream" => {
                if matches!(cur, Cur::Service(_)) {
                    cx.error(pos, "Detected stream but already saw a service");
                    continue;
                }
                let Some(m) = v.as_map() else {
                    cx.error(
                        pos,
                        format!("Stream entry should be an account map, got {}", v.go_type_name()),
                    );
                    continue;
                };
                let (account, subject) = account_and_subject(cx, m);
                if account.is_empty() || subject.is_empty() {
                    cx.error(pos, "Expect an account name and a subject");
                    continue;
                }
                cur = Cur::Stream(StreamImport {
                    account,
                    subject,
                    prefix: prefix.clone(),
                    to: to.clone(),
                    allow_trace: atrc.is_some_and(|(b, _)| b),
                });
            }
            "service" => {
                if matches!(cur, Cur::Stream(_)) {
                    cx.error(pos, "Detected service but already saw a stream");
                    continue;
                }
                if let Some((_, p)) = atrc {
                    cx.error(p, "Detected allow_trace directive on a non-stream");
                    continue;
                }
                let Some(m) = v.as_map() else {
                    cx.error(
                        pos,
                        format!("Service entry should be an account map, got {}", v.go_type_name()),
                    );
                    continue;
                };
                let (account, subject) = account_and_subject(cx, m);
                if account.is_empty() || subject.is_empty() {
                    cx.error(pos, "Expect an account name and a subject");
                    continue;
                }
                let to = if to.is_empty() { subject.clone() } else { to.clone() };
                cur = Cur::Service(ServiceImport {
                    account,
                    subject,
                    to,
                    share,
                });
            }
            "prefix" => {
                let Some(s) = cx.string(entry) else { return Ok(None) };
                prefix = s.to_string();
                if let Cur::Stream(st) = &mut cur {
                    st.prefix = prefix.clone();
                }
            }
            "to" => {
                let Some(s) = cx.string(entry) else { return Ok(None) };
                to = s.to_string();
                match &mut cur {
                    Cur::Service(sv) => sv.to = to.clone(),
                    Cur::Stream(st) => {
                        st.to = to.clone();
                        if !st.prefix.is_empty() {
                            cx.error(pos, "Stream import can not have a 'prefix' and a 'to' property");
                            continue;
                        }
                    }
                    Cur::Nothing => {}
                }
            }
            "share" => {
                let Some(b) = cx.bool(entry) else { return Ok(None) };
                share = b;
                if let Cur::Service(sv) = &mut cur {
                    sv.share = b;
                }
            }
            "allow_trace" => {
                if matches!(cur, Cur::Service(_)) {
                    cx.error(pos, "Detected allow_trace directive on a non-stream");
                    continue;
                }
                let Some(b) = cx.bool(entry) else { return Ok(None) };
                atrc = Some((b, pos));
                if let Cur::Stream(st) = &mut cur {
                    st.allow_trace = b;
                }
            }
            _ => cx.unknown(key, entry),
        }
    }
    Ok(match cur {
        Cur::Nothing => None,
        Cur::Stream(s) => Some(Import::Stream(s)),
        Cur::Service(s) => Some(Import::Service(s)),
    })
}
