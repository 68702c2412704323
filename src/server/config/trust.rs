//! Decentralized auth keys: `operator` (and its aliases), `trusted`, `resolver`,
//! `resolver_tls`, `resolver_preload`, `resolver_pinned_accounts` (nats-server's
//! `processConfigFileLine` cases for them).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::users::is_public_key;
use super::{jwt, Cx};
use crate::auth::config::{DeleteMode, DirResolver, ResolverConfig};
use crate::server::options::Options;
use conf::{Entry, ValueKind};
use nkeys::KeyPairType;
use std::time::Duration;

/// `operator`: a file name, an inline JWT, or a list of them.
pub(super) fn operators(cx: &mut Cx, o: &mut Options, e: &Entry) {
    let pos = &e.key_pos;
    let mut sources = Vec::new();
    match &e.value.kind {
        ValueKind::String(s) => sources.push(s.clone()),
        ValueKind::Array(items) => {
            for item in items {
                match item.as_str() {
                    Some(s) => sources.push(s.to_string()),
                    None => {
                        cx.error(
                            pos,
                            "error parsing operators: unsupported type *conf.token where string is expected",
                        );
                        break;
                    }
                }
            }
        }
        _ => cx.error(
            pos,
            format!("error parsing operators: unsupported type {}", e.value.go_type_name()),
        ),
    }
    let sec = &mut o.security;
    sec.operators.clear();
    for source in sources {
        match jwt::read_operator(&source) {
            Ok(op) => sec.operators.push(op),
            Err(err) => cx.error(pos, format!("error parsing operator JWT: {err}")),
        }
    }
    if let [op] = sec.operators.as_slice() {
        if sec.resolver.is_none() && parse_url(&op.account_server_url).is_ok() {
            // nsc pushes accounts under `/accounts`.
            sec.resolver = Some(ResolverConfig::Url(with_slash(&format!(
                "{}/accounts",
                op.account_server_url
            ))));
        }
        if sec.system_account.is_empty() {
            sec.system_account = op.system_account.clone();
        }
    }
}

fn with_slash(url: &str) -> String {
    if url.ends_with('/') {
        url.to_string()
    } else {
        format!("{url}/")
    }
}

/// Go's `url.Parse` for what the resolver needs: only the scheme is checked.
fn parse_url(u: &str) -> Result<(), ()> {
    let s = u.trim();
    if s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(());
    }
    if let Some(i) = s.find(':') {
        let scheme = s.get(..i).unwrap_or_default();
        if scheme.is_empty() {
            return Err(());
        }
        let valid = scheme.bytes().enumerate().all(|(k, b)| {
            b.is_ascii_alphabetic() || (k > 0 && (b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.')))
        });
        // An invalid scheme makes Go take the whole text for a path, which is only an
        // error when a colon sits in the first segment.
        if !valid && !s.get(..i).unwrap_or_default().contains('/') {
            return Err(());
        }
    }
    Ok(())
}

/// The URL inside `URL(...)` (the reference's regular expression), or `None`.
fn url_resolver(v: &str) -> Option<String> {
    let lower = v.to_ascii_lowercase();
    let at = lower.find("url")?;
    let rest = v.get(at + 3..).unwrap_or_default();
    let inner = (|| {
        let r = rest.strip_prefix('(')?.trim_start();
        let r = r.strip_prefix('"').unwrap_or(r);
        let end = r
            .find(|c: char| c.is_whitespace() || c == '"' || c == ')')
            .unwrap_or(r.len());
        let (url, after) = r.split_at(end);
        let after = after.strip_prefix('"').unwrap_or(after).trim_start();
        after.starts_with(')').then(|| url.to_string())
    })();
    Some(inner.unwrap_or_default())
}

/// `resolver`: `MEMORY`, `URL(...)` or a map.
pub(super) fn resolver(cx: &mut Cx, o: &mut Options, e: &Entry) {
    let pos = &e.key_pos;
    let sec = &mut o.security;
    match &e.value.kind {
        ValueKind::String(v) => {
            sec.resolver = None;
            let lower = v.to_ascii_lowercase();
            if lower.contains("mem") {
                sec.resolver = Some(ResolverConfig::Memory);
            } else if let Some(url) = url_resolver(v) {
                if parse_url(&url).is_err() {
                    cx.error(pos, format!("error parsing account resolver url [{:?}]", url.trim()));
                    return;
                }
                sec.resolver = Some(ResolverConfig::Url(with_slash(&url)));
            }
        }
        ValueKind::Map(m) => {
            let Some(res) = dir_resolver(cx, e, m) else { return };
            o.security.resolver = res;
        }
        _ => {
            cx.error(
                pos,
                format!("error parsing operator resolver, wrong type {}", e.value.go_type_name()),
            );
            return;
        }
    }
    if o.security.resolver.is_none() {
        cx.error(
            pos,
            "error parsing account resolver, should be MEM or  URL(\"url\") or a map containing dir and type state=[FULL|CACHE])",
        );
    }
}

/// The map form of `resolver`. Outer `None`: stop (errors recorded); inner `None`: no
/// resolver type recognized.
fn dir_resolver(cx: &mut Cx, e: &Entry, m: &conf::Map) -> Option<Option<ResolverConfig>> {
    let pos = &e.key_pos;
    let mut r = DirResolver::default();
    // The reference looks these up by their exact (lower-case) names.
    let get = |k: &str| m.get_entry(k);
    if let Some(x) = get("dir") {
        r.dir = cx.string(x)?.to_string();
    }
    let mut kind = String::new();
    if let Some(x) = get("type") {
        kind = cx.string(x)?.to_string();
    }
    let mut allow_delete = false;
    if let Some(x) = get("allow_delete") {
        allow_delete = cx.bool(x)?;
    }
    let mut hard = None;
    if let Some(x) = get("hard_delete") {
        hard = Some(cx.bool(x)?);
    }
    if let Some(x) = get("limit") {
        r.limit = cx.int(x)?;
    }
    let mut duration = |k: &str| -> Option<Result<Option<Duration>, String>> {
        let Some(x) = get(k) else { return Some(Ok(None)) };
        let s = cx.string(x)?;
        Some(
            conf::parse_duration_nanos(s)
                .map(|n| Some(Duration::from_nanos(n.max(0) as u64)))
                .map_err(|err| err.to_string()),
        )
    };
    let timings = (|| -> Option<Result<(), String>> {
        match duration("ttl")? {
            Ok(d) => r.ttl = d.unwrap_or_default(),
            Err(err) => return Some(Err(err)),
        }
        match duration("interval")? {
            Ok(d) => r.interval = d.unwrap_or_default(),
            Err(err) => return Some(Err(err)),
        }
        match duration("timeout")? {
            Ok(d) => r.timeout = d,
            Err(err) => return Some(Err(err)),
        }
        Some(Ok(()))
    })()?;
    if let Err(err) = timings {
        cx.error(pos, err);
        return None;
    }
    let check_dir = |cx: &mut Cx, dir: &str| {
        if dir.is_empty() {
            cx.error(pos, "dir has no value and needs to point to a directory");
            return;
        }
        if let Ok(md) = std::fs::metadata(dir) {
            use std::os::unix::fs::PermissionsExt;
            if !md.is_dir() || md.permissions().mode() & 0o200 == 0 {
                cx.error(pos, "dir needs to point to an accessible directory");
            }
        }
    };
    let res = match kind.to_ascii_uppercase().as_str() {
        "CACHE" => {
            check_dir(cx, &r.dir);
            if !r.interval.is_zero() {
                cx.error(pos, "CACHE does not accept sync");
            }
            if allow_delete {
                cx.error(pos, "CACHE does not accept allow_delete");
            }
            if hard.is_some() {
                cx.error(pos, "CACHE does not accept hard_delete");
            }
            make_dir(cx, pos, &r.dir)?;
            Some(ResolverConfig::Cache(r))
        }
        "FULL" => {
            check_dir(cx, &r.dir);
            if !r.ttl.is_zero() {
                cx.error(pos, "FULL does not accept ttl");
            }
            if hard.is_some() && !allow_delete {
                cx.error(pos, "hard_delete has no effect without delete");
            }
            r.delete = match (allow_delete, hard.unwrap_or(false)) {
                (false, _) => DeleteMode::NoDelete,
                (true, true) => DeleteMode::Hard,
                (true, false) => DeleteMode::Rename,
            };
            make_dir(cx, pos, &r.dir)?;
            Some(ResolverConfig::Full(r))
        }
        "MEM" | "MEMORY" => Some(ResolverConfig::Memory),
        _ => None,
    };
    Some(res)
}

/// The reference creates the resolver's directory when it reads the config (`-t` too).
fn make_dir(cx: &mut Cx, pos: &conf::Position, dir: &str) -> Option<()> {
    let path = std::path::Path::new(dir);
    if path.is_dir() {
        return Some(());
    }
    if dir.is_empty() || path.exists() {
        let why = if dir.is_empty() {
            "no such file or directory"
        } else {
            "not a directory"
        };
        cx.error(pos, format!("mkdir {dir}: {why}"));
        return None;
    }
    use std::os::unix::fs::DirBuilderExt;
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true).mode(0o700);
    if let Err(e) = b.create(dir) {
        // Go names the first directory it failed to make.
        let mut failed = std::path::Path::new(dir);
        while let Some(parent) = failed.parent() {
            if parent.as_os_str().is_empty() || parent.exists() {
                break;
            }
            failed = parent;
        }
        cx.error(pos, format!("mkdir {}: {}", failed.display(), conf::go_os_error(&e)));
        return None;
    }
    Some(())
}

/// `resolver_preload { ACCOUNT_KEY: account JWT, ... }`.
pub(super) fn preload(cx: &mut Cx, o: &mut Options, e: &Entry) {
    let Some(m) = e.value.as_map() else {
        cx.error(&e.key_pos, "preload should be a map of account_public_key:account_jwt");
        return;
    };
    o.security.resolver_preload.clear();
    for (key, entry) in m.iter() {
        let Some(token) = entry.value.as_str() else {
            cx.error(&entry.key_pos, "preload map value should be a string JWT");
            continue;
        };
        if !jwt::is_account_jwt(token) {
            cx.error(&entry.key_pos, "invalid account JWT");
            continue;
        }
        o.security.resolver_preload.push((key.to_string(), token.to_string()));
    }
}

/// A string or a list of strings (`trusted`, `resolver_pinned_accounts`); items that are
/// not strings are errors named after `what`.
fn string_list(cx: &mut Cx, e: &Entry, what: &str) -> Option<Vec<String>> {
    match &e.value.kind {
        ValueKind::String(s) => Some(vec![s.clone()]),
        ValueKind::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                match item.as_str() {
                    Some(s) => out.push(s.to_string()),
                    None => cx.error(
                        &item.pos,
                        format!(
                            "error parsing {what}: unsupported type in array {}",
                            item.go_type_name()
                        ),
                    ),
                }
            }
            Some(out)
        }
        _ => {
            cx.error(
                &e.key_pos,
                format!("error parsing {what}: unsupported type {}", e.value.go_type_name()),
            );
            None
        }
    }
}

/// `resolver_pinned_accounts`.
pub(super) fn pinned(cx: &mut Cx, o: &mut Options, e: &Entry) {
    if let Some(list) = string_list(cx, e, "resolver_pinned_accounts") {
        let mut out: Vec<String> = Vec::new();
        for k in list {
            if !out.contains(&k) {
                out.push(k);
            }
        }
        o.security.resolver_pinned_accounts = out;
    }
}

/// `trusted`/`trusted_keys`: public operator keys.
pub(super) fn trusted(cx: &mut Cx, o: &mut Options, e: &Entry) {
    if let Some(list) = string_list(cx, e, "trusted") {
        o.security.trusted_keys = list;
    }
    for key in &o.security.trusted_keys {
        if !is_public_key(key, KeyPairType::Operator) {
            cx.error(
                &e.key_pos,
                format!("trust key {key:?} required to be a valid public operator nkey"),
            );
        }
    }
}
