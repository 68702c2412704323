//! `tls { }` (nats-server's `parseTLS`, then `GenTLSConfig`: certificates and CAs are
//! loaded when the file is read, so `-t` reports unreadable ones), `ocsp`, `ocsp_peer`,
//! `ocsp_cache` and `allow_non_tls`.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::Cx;
use crate::server::options::{OcspConfig, OcspMode, Options};
use crate::transport::tls::config::{go_cipher, CertPair, OcspPeer, TlsVersion, DEFAULT_FALLBACK_DELAY, GO_CURVES};
use crate::transport::tls::{build_server_config, TlsOptions};
use conf::{Entry, Map, Value, ValueKind};
use std::collections::BTreeSet;
use std::time::Duration;

/// Why `parse` stopped: the error is recorded in `cx`.
struct Failed;

type Res<T> = Result<T, Failed>;

fn err(cx: &mut Cx, e: &Entry, msg: impl std::fmt::Display) -> Failed {
    cx.error(&e.key_pos, msg);
    Failed
}

fn want_str<'a>(cx: &mut Cx, e: &'a Entry, what: &str) -> Res<&'a str> {
    e.value.as_str().ok_or_else(|| {
        err(
            cx,
            e,
            format!("error parsing tls config, expected '{what}' to be filename"),
        )
    })
}

fn want_bool(cx: &mut Cx, e: &Entry, what: &str) -> Res<bool> {
    e.value.as_bool().ok_or_else(|| {
        err(
            cx,
            e,
            format!("error parsing tls config, expected '{what}' to be a boolean"),
        )
    })
}

/// A failed type assertion (the reference's recovered panic), at `pos`.
fn conversion(cx: &mut Cx, v: &Value, want: &str) -> Failed {
    cx.conversion_at(&v.pos, v, want);
    Failed
}

/// Seconds from an integer, a float or a Go duration string.
fn seconds(v: &Value) -> Option<Result<f64, String>> {
    match &v.kind {
        ValueKind::Integer(n) => Some(Ok(*n as f64)),
        ValueKind::Float(f) => Some(Ok(*f)),
        ValueKind::String(s) => Some(
            conf::parse_duration_nanos(s)
                .map(|n| n as f64 / 1e9)
                .map_err(|e| e.to_string()),
        ),
        _ => None,
    }
}

fn parse_version(cx: &mut Cx, e: &Entry) -> Res<TlsVersion> {
    let text = match e.value.as_str() {
        Some(s) => s,
        None => {
            let shown = super::go_value(&e.value);
            return Err(err(
                cx,
                e,
                format!("error parsing tls config: 'min_version' wrong type: {shown}"),
            ));
        }
    };
    match text {
        "1.2" => Ok(TlsVersion::V1_2),
        "1.3" => Ok(TlsVersion::V1_3),
        "1.0" | "1.1" => Err(err(
            cx,
            e,
            format!("error parsing tls config: unsupported TLS version: TLS {text}"),
        )),
        other => Err(err(
            cx,
            e,
            format!("error parsing tls config: unknown version: {other}"),
        )),
    }
}

fn handshake_first(cx: &mut Cx, key: &str, e: &Entry, t: &mut TlsOptions) -> Res<()> {
    match &e.value.kind {
        ValueKind::Bool(b) => t.handshake_first = *b,
        ValueKind::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "on" => t.handshake_first = true,
            "false" | "off" => t.handshake_first = false,
            "auto" | "auto_fallback" => {
                t.handshake_first = true;
                t.fallback_delay = DEFAULT_FALLBACK_DELAY;
            }
            _ => match conf::parse_duration_nanos(s) {
                Ok(n) => {
                    t.handshake_first = true;
                    t.fallback_delay = Duration::from_nanos(n.max(0) as u64);
                }
                Err(_) => return Err(err(cx, e, format!("field {key:?}'s value {s:?} is invalid"))),
            },
        },
        _ => {
            let ty = e.value.go_type_name();
            return Err(err(
                cx,
                e,
                format!("field {key:?} should be a boolean or a string, got {ty}"),
            ));
        }
    }
    Ok(())
}

fn ocsp_peer(cx: &mut Cx, e: &Entry) -> Res<OcspPeer> {
    let mut p = OcspPeer::default();
    match &e.value.kind {
        ValueKind::Bool(b) => {
            p.verify = *b;
            return Ok(p);
        }
        ValueKind::Map(m) => {
            for (k, v) in m.iter() {
                let lower = k.to_ascii_lowercase();
                // The reference reports the field's error at `ocsp_peer`, with the field's
                // own position inside the message.
                let inner = |cx: &mut Cx, msg: String| err(cx, e, format!("{}: {msg}", v.key_pos));
                let generic = |cx: &mut Cx| inner(cx, format!("error parsing tls peer config, unknown field [{k:?}]"));
                match lower.as_str() {
                    "verify" => p.verify = v.value.as_bool().ok_or_else(|| generic(cx))?,
                    "warn_only" => p.warn_only = v.value.as_bool().ok_or_else(|| generic(cx))?,
                    "unknown_is_good" => p.unknown_is_good = v.value.as_bool().ok_or_else(|| generic(cx))?,
                    "allow_when_ca_unreachable" => {
                        p.allow_when_ca_unreachable = v.value.as_bool().ok_or_else(|| generic(cx))?
                    }
                    "allowed_clockskew" | "ca_timeout" | "cache_ttl_when_next_update_unset" => {
                        let secs = match seconds(&v.value) {
                            Some(Ok(s)) => s,
                            Some(Err(e)) if lower != "allowed_clockskew" => {
                                return Err(inner(
                                    cx,
                                    format!("error parsing tls peer config, conversion error: {e}"),
                                ))
                            }
                            _ => {
                                return Err(inner(
                                    cx,
                                    "error parsing tls peer config, conversion error: unexpected type".into(),
                                ))
                            }
                        };
                        if secs >= 0.0 {
                            match lower.as_str() {
                                "allowed_clockskew" => p.clock_skew = secs,
                                "ca_timeout" => p.timeout = secs,
                                _ => p.ttl_unset_next_update = secs,
                            }
                        }
                    }
                    _ => return Err(generic(cx)),
                }
            }
        }
        _ => {
            // The reference names the type of the whole `tls` block here.
            return Err(err(
                cx,
                e,
                "error parsing ocsp peer config: unsupported type map[string]interface {}",
            ));
        }
    }
    Ok(p)
}

fn string_list<'a>(cx: &mut Cx, e: &'a Entry, what: &str) -> Res<Vec<(&'a str, &'a Value)>> {
    let items = e
        .value
        .as_array()
        .ok_or_else(|| conversion(cx, &e.value, "[]interface {}"))?;
    if items.is_empty() {
        return Err(err(
            cx,
            e,
            format!("error parsing tls config, '{what}' cannot be empty"),
        ));
    }
    let mut out = Vec::new();
    for v in items {
        let s = v.as_str().ok_or_else(|| conversion(cx, v, "string"))?;
        out.push((s, v));
    }
    Ok(out)
}

fn certs(cx: &mut Cx, e: &Entry) -> Res<Vec<CertPair>> {
    let ty = e.value.go_type_name();
    let items = e.value.as_array().ok_or_else(|| {
        err(
            cx,
            e,
            format!("error parsing certificates config: unsupported type {ty}"),
        )
    })?;
    let mut out = Vec::new();
    for item in items {
        let Some(m) = item.as_map() else {
            let ty = item.go_type_name();
            cx.error(
                &item.pos,
                format!("error parsing certificates config: unsupported type {ty}"),
            );
            return Err(Failed);
        };
        let mut pair = CertPair::default();
        for (k, v) in m.iter() {
            let Some(file) = v.value.as_str() else {
                let ty = v.value.go_type_name();
                return Err(err(
                    cx,
                    v,
                    format!("error parsing certificates config: unsupported type {ty}"),
                ));
            };
            match k {
                "cert_file" => pair.cert_file = file.to_string(),
                "key_file" => pair.key_file = file.to_string(),
                _ => {
                    return Err(err(
                        cx,
                        v,
                        format!("error parsing tls certs config, unknown field {k:?}"),
                    ))
                }
            }
        }
        if pair.cert_file.is_empty() || pair.key_file.is_empty() {
            cx.error(
                &item.pos,
                "error parsing certificates config: both 'cert_file' and 'cert_key' options are required",
            );
            return Err(Failed);
        }
        out.push(pair);
    }
    Ok(out)
}

/// The block's keys (nats-server's `parseTLS`).
fn parse_block(cx: &mut Cx, block: &Entry, m: &Map, client_ctx: bool) -> Res<TlsOptions> {
    let mut t = TlsOptions::default();
    let mut insecure = Vec::new();
    for (key, e) in m.iter() {
        match key.to_ascii_lowercase().as_str() {
            "cert_file" => t.cert_file = want_str(cx, e, "cert_file")?.to_string(),
            "key_file" => t.key_file = want_str(cx, e, "key_file")?.to_string(),
            "ca_file" => t.ca_file = want_str(cx, e, "ca_file")?.to_string(),
            "insecure" => t.insecure = want_bool(cx, e, "insecure")?,
            "verify" => t.verify = want_bool(cx, e, "verify")?,
            "verify_and_map" => {
                let v = want_bool(cx, e, "verify_and_map")?;
                if v {
                    t.verify = true;
                }
                t.map = v;
            }
            "verify_cert_and_check_known_urls" => {
                let v = want_bool(cx, e, "verify_cert_and_check_known_urls")?;
                if v && client_ctx {
                    return Err(err(
                        cx,
                        e,
                        "verify_cert_and_check_known_urls not supported in this context",
                    ));
                }
                if v {
                    t.verify = true;
                }
                t.check_known_urls = v;
            }
            "allow_insecure_cipher_suites" => {
                t.allow_insecure_ciphers = want_bool(cx, e, "allow_insecure_cipher_suites")?;
            }
            "cipher_suites" => {
                let mut names = Vec::new();
                for (name, v) in string_list(cx, e, "cipher_suites")? {
                    match go_cipher(name) {
                        Some(is_insecure) => {
                            if is_insecure {
                                insecure.push(name.to_string());
                            }
                            names.push(name.to_string());
                        }
                        None => {
                            cx.error(&v.pos, format!("unrecognized cipher {name}"));
                            return Err(Failed);
                        }
                    }
                }
                t.cipher_suites = Some(names);
            }
            "curve_preferences" => {
                let mut names = Vec::new();
                for (name, v) in string_list(cx, e, "curve_preferences")? {
                    if !GO_CURVES.contains(&name) {
                        cx.error(&v.pos, format!("unrecognized curve preference {name}"));
                        return Err(Failed);
                    }
                    names.push(name.to_string());
                }
                t.curve_preferences = Some(names);
            }
            "timeout" => match seconds(&e.value) {
                Some(Ok(s)) => t.timeout = s,
                Some(Err(d)) => return Err(err(cx, e, format!("error parsing tls config, 'timeout' {d}"))),
                None => return Err(err(cx, e, "error parsing tls config, 'timeout' wrong type")),
            },
            "connection_rate_limit" => match e.value.as_i64() {
                Some(n) => t.rate_limit = n,
                None => {
                    return Err(err(
                        cx,
                        e,
                        "error parsing tls config, 'connection_rate_limit' wrong type",
                    ))
                }
            },
            "pinned_certs" => {
                let Some(items) = e.value.as_array() else {
                    return Err(err(cx, e, "error parsing tls config, expected 'pinned_certs' to be a list of hex-encoded sha256 of DER encoded SubjectPublicKeyInfo"));
                };
                if !items.is_empty() {
                    let mut set = BTreeSet::new();
                    for v in items {
                        let s = v
                            .as_str()
                            .ok_or_else(|| conversion(cx, v, "string"))?
                            .to_ascii_lowercase();
                        if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                            cx.error(&v.pos, format!("error parsing tls config, 'pinned_certs' key {s} does not look like hex-encoded sha256 of DER encoded SubjectPublicKeyInfo"));
                            return Err(Failed);
                        }
                        set.insert(s);
                    }
                    t.pinned_certs = Some(set);
                }
            }
            "cert_store" => {
                let s = e
                    .value
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| err(cx, e, "expected 'cert_store' to be a valid non-empty string"))?;
                let known = matches!(
                    s.to_ascii_lowercase().as_str(),
                    "windowscurrentuser" | "windowslocalmachine"
                );
                if !known {
                    return Err(err(cx, e, "cert store type not implemented"));
                }
                if !cfg!(windows) {
                    return Err(err(cx, e, "cert_store not compatible with current operating system"));
                }
                t.cert_store = s.to_string();
            }
            "cert_match_by" => {
                let s = e
                    .value
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| err(cx, e, "expected 'cert_match_by' to be a valid non-empty string"))?;
                if !matches!(s.to_ascii_lowercase().as_str(), "issuer" | "subject" | "thumbprint") {
                    return Err(err(cx, e, "cert match by type not implemented"));
                }
                t.cert_match_by = s.to_string();
            }
            "cert_match" => {
                let s = e
                    .value
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| err(cx, e, "expected 'cert_match' to be a valid non-empty string"))?;
                t.cert_match = s.to_string();
            }
            "cert_match_skip_invalid" => {
                t.cert_match_skip_invalid = e
                    .value
                    .as_bool()
                    .ok_or_else(|| err(cx, e, "expected 'cert_match_skip_invalid' to be a boolean"))?;
            }
            "ca_certs_match" => match &e.value.kind {
                ValueKind::String(s) => t.ca_certs_match = vec![s.clone()],
                ValueKind::Array(items) => {
                    let mut out = Vec::new();
                    for v in items {
                        match v.as_str() {
                            Some(s) => out.push(s.to_string()),
                            None => return Err(err(
                                cx,
                                e,
                                "error parsing ca_cert_match: unsupported type *conf.token where string is expected",
                            )),
                        }
                    }
                    t.ca_certs_match = out;
                }
                _ => {}
            },
            "handshake_first" | "first" | "immediate" => handshake_first(cx, key, e, &mut t)?,
            "ocsp_peer" => t.ocsp_peer = Some(ocsp_peer(cx, e)?),
            "certs" | "certificates" => t.certs = certs(cx, e)?,
            "min_version" => t.min_version = Some(parse_version(cx, e)?),
            _ => return Err(err(cx, e, format!("error parsing tls config, unknown field {key:?}"))),
        }
    }
    if !t.certs.is_empty() && !t.cert_file.is_empty() {
        return Err(err(
            cx,
            block,
            "error parsing tls config, cannot combine 'cert_file' option with 'certs' option",
        ));
    }
    if !t.allow_insecure_ciphers && !insecure.is_empty() {
        return Err(err(
            cx,
            block,
            format!(
                "insecure cipher suites configured without 'allow_insecure_cipher_suites' option set: {}",
                insecure.join(", ")
            ),
        ));
    }
    Ok(t)
}

/// A `tls` block: parsed, then its certificates and CAs loaded (errors at the block).
/// `client_ctx` for client-facing blocks (top level, websocket).
pub(super) fn parse_tls(cx: &mut Cx, e: &Entry, client_ctx: bool) -> Option<TlsOptions> {
    let m = cx.map(e)?;
    let t = parse_block(cx, e, m, client_ctx).ok()?;
    if let Err(g) = build_server_config(&t) {
        cx.error(&e.key_pos, g.0);
        return None;
    }
    Some(t)
}

/// `ocsp: true|false` or `ocsp { mode, url, urls }`.
pub(super) fn ocsp(cx: &mut Cx, o: &mut Options, e: &Entry) {
    match &e.value.kind {
        ValueKind::Bool(b) => {
            o.ocsp = Some(OcspConfig {
                mode: if *b { OcspMode::Auto } else { OcspMode::Never },
                override_urls: Vec::new(),
            })
        }
        ValueKind::Map(m) => {
            let mut c = OcspConfig::default();
            for (k, v) in m.iter() {
                match k {
                    "mode" => {
                        let Some(mode) = v.value.as_str() else {
                            cx.conversion_at(&v.value.pos, &v.value, "string");
                            return;
                        };
                        c.mode = match mode.to_ascii_lowercase().as_str() {
                            "always" => OcspMode::Always,
                            "must" => OcspMode::Must,
                            "never" => OcspMode::Never,
                            "auto" => OcspMode::Auto,
                            _ => {
                                cx.error(&v.key_pos, "error parsing ocsp config: unsupported ocsp mode string");
                                continue;
                            }
                        };
                    }
                    "urls" => match v.value.as_array() {
                        Some(items) => {
                            c.override_urls = items.iter().filter_map(|i| i.as_str().map(str::to_string)).collect()
                        }
                        None => {
                            cx.conversion_at(&v.value.pos, &v.value, "[]string");
                            return;
                        }
                    },
                    "url" => match v.value.as_str() {
                        Some(u) => c.override_urls = vec![u.to_string()],
                        None => {
                            cx.conversion_at(&v.value.pos, &v.value, "string");
                            return;
                        }
                    },
                    _ => {
                        cx.error(&v.key_pos, "error parsing ocsp config: unsupported field string");
                        return;
                    }
                }
            }
            o.ocsp = Some(c);
        }
        _ => {
            let ty = e.value.go_type_name();
            cx.error(&e.key_pos, format!("error parsing ocsp config: unsupported type {ty}"));
        }
    }
}

/// `ocsp_cache: true|false` or `ocsp_cache { type, local_store, preserve_revoked,
/// save_interval }` (nats-server's `parseOCSPResponseCache`).
pub(super) fn ocsp_cache(cx: &mut Cx, o: &mut Options, e: &Entry) {
    use crate::transport::ocsp::cache::{CacheConfig, CacheType, MIN_SAVE_INTERVAL};
    match &e.value.kind {
        ValueKind::Bool(b) => {
            o.ocsp_cache = Some(CacheConfig {
                kind: if *b { CacheType::Local } else { CacheType::None },
                ..Default::default()
            })
        }
        ValueKind::Map(m) => {
            let mut c = CacheConfig::default();
            for (k, v) in m.iter() {
                let generic = format!("error parsing OCSP peer cache config, unknown field [{k:?}]");
                match k.to_ascii_lowercase().as_str() {
                    "type" => {
                        let Some(t) = v.value.as_str() else {
                            cx.error(&v.key_pos, generic);
                            return;
                        };
                        c.kind = match t.to_ascii_lowercase().as_str() {
                            "local" => CacheType::Local,
                            "none" => CacheType::None,
                            _ => {
                                cx.error(
                                    &v.key_pos,
                                    format!("error parsing OCSP peer cache config, unknown type [{t}]"),
                                );
                                return;
                            }
                        };
                    }
                    "local_store" => match v.value.as_str() {
                        Some(s) => c.local_store = s.to_string(),
                        None => {
                            cx.error(&v.key_pos, generic);
                            return;
                        }
                    },
                    "preserve_revoked" => match v.value.as_bool() {
                        Some(b) => c.preserve_revoked = b,
                        None => {
                            cx.error(&v.key_pos, generic);
                            return;
                        }
                    },
                    "save_interval" => {
                        let secs = match seconds(&v.value) {
                            Some(Ok(s)) => s,
                            Some(Err(e)) => {
                                cx.error(
                                    &v.key_pos,
                                    format!("error parsing tls peer config, conversion error: {e}"),
                                );
                                return;
                            }
                            None => {
                                cx.error(
                                    &v.key_pos,
                                    "error parsing OCSP peer cache config, conversion error: unexpected type",
                                );
                                return;
                            }
                        };
                        // Whole seconds, at least one (as the reference truncates them).
                        let whole = Duration::from_secs(secs.max(0.0).trunc() as u64);
                        c.save_interval = whole.max(MIN_SAVE_INTERVAL);
                    }
                    _ => {
                        cx.error(&v.key_pos, generic);
                        return;
                    }
                }
            }
            o.ocsp_cache = Some(c);
        }
        _ => {
            let ty = e.value.go_type_name();
            cx.error(&e.key_pos, format!("error parsing tags: unsupported type {ty}"));
        }
    }
}
