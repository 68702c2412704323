//! The top-level `jetstream` key: `enabled`/`disabled`, a boolean, or a block of the
//! server's JetStream options (nats-server's `parseJetStream`, `parseJetStreamLimits`,
//! `parseJetStreamTPM`), into [`crate::server::jetstream_opts::JetStreamOptions`].
//!
//! As in the reference, some bad values end the block (the rest of it is not read):
//! those whose check returns an error, and those whose type the reference asserts (the
//! error then names the `jetstream` key's position, where the reference recovers).
//! Unknown keys and bad durations are reported and the block goes on. Keys are read in
//! file order (the reference's order is a Go map's, which varies).

use super::{go_value, Cx};
use crate::proto::reply::go_quote;
use crate::server::jetstream_opts::{JetStreamOptions, StoreCipher, DEFAULT_SYNC_INTERVAL};
use crate::server::options::Options;
use conf::{Entry, Map, Value, ValueKind};
use std::time::Duration;

/// The block stops here (the error is already reported).
struct Stop;

type Step = Result<(), Stop>;

/// The top-level `jetstream` entry.
pub(super) fn jetstream(cx: &mut Cx, o: &mut Options, e: &Entry) {
    match &e.value.kind {
        ValueKind::Bool(b) => o.jetstream.enabled = *b,
        ValueKind::String(s) => match s.to_lowercase().as_str() {
            "enabled" | "enable" => o.jetstream.enabled = true,
            "disabled" | "disable" => o.jetstream.enabled = false,
            _ => cx.error(
                &e.key_pos,
                format!("Expected 'enabled' or 'disabled' for string value, got '{s}'"),
            ),
        },
        ValueKind::Map(m) => {
            let mut enable = true;
            if block(cx, o, e, m, &mut enable).is_ok() {
                o.jetstream.enabled = enable;
            }
        }
        _ => cx.error(
            &e.key_pos,
            format!(
                "Expected map, bool or string to define JetStream, got {}",
                e.value.go_type_name()
            ),
        ),
    }
}

/// A failed type assertion: reported at the top-level key, and the block stops.
fn assert_failed(cx: &mut Cx, top: &Entry, v: &Value, want: &str) -> Stop {
    cx.conversion_at(&top.key_pos, v, want);
    Stop
}

fn string<'a>(cx: &mut Cx, top: &Entry, v: &'a Value) -> Result<&'a str, Stop> {
    v.as_str().ok_or_else(|| assert_failed(cx, top, v, "string"))
}

fn int(cx: &mut Cx, top: &Entry, v: &Value) -> Result<i64, Stop> {
    v.as_i64().ok_or_else(|| assert_failed(cx, top, v, "int64"))
}

fn boolean(cx: &mut Cx, top: &Entry, v: &Value) -> Result<bool, Stop> {
    v.as_bool().ok_or_else(|| assert_failed(cx, top, v, "bool"))
}

/// An error that ends the block, at the inner key.
fn fail(cx: &mut Cx, e: &Entry, msg: impl std::fmt::Display) -> Stop {
    cx.error(&e.key_pos, msg);
    Stop
}

fn block(cx: &mut Cx, o: &mut Options, top: &Entry, m: &Map, enable: &mut bool) -> Step {
    for (key, e) in m.iter() {
        let lower = key.to_ascii_lowercase();
        let js = &mut o.jetstream;
        let v = &e.value;
        match lower.as_str() {
            "strict" => match v.as_bool() {
                Some(b) => js.strict = b,
                None => {
                    return Err(fail(
                        cx,
                        e,
                        format!("Expected 'true' or 'false' for bool value, got '{}'", go_s_verb(v)),
                    ))
                }
            },
            "store" | "store_dir" | "storedir" => {
                if !js.store_dir.is_empty() {
                    return Err(fail(cx, e, "Duplicate 'store_dir' configuration"));
                }
                js.store_dir = string(cx, top, v)?.to_string();
            }
            "sync" | "sync_interval" => sync(cx, js, top, key, e)?,
            "max_memory_store" | "max_mem_store" | "max_mem" => js.max_memory = size(cx, e, "max_mem_store")?,
            "max_file_store" | "max_file" => js.max_store = size(cx, e, "max_file_store")?,
            "domain" => js.domain = string(cx, top, v)?.to_string(),
            "enable" | "enabled" => *enable = boolean(cx, top, v)?,
            "key" | "ek" | "encryption_key" => js.key = string(cx, top, v)?.to_string(),
            "prev_key" | "prev_ek" | "prev_encryption_key" => js.prev_key = string(cx, top, v)?.to_string(),
            "cipher" => js.cipher = cipher(cx, top, e)?,
            "extension_hint" => js.extension_hint = string(cx, top, v)?.to_string(),
            "limits" => limits(cx, js, top, e)?,
            "tpm" => tpm(cx, js, top, e)?,
            "unique_tag" => js.unique_tag = string(cx, top, v)?.trim().to_lowercase(),
            "max_outstanding_catchup" => js.max_outstanding_catchup = size(cx, e, &lower)?,
            "max_buffered_size" => js.max_buffered_size = size(cx, e, &lower)?,
            "max_buffered_msgs" => js.max_buffered_msgs = parseable_int(cx, key, e)?,
            "request_queue_limit" => js.request_queue_limit = parseable_int(cx, key, e)?,
            "info_queue_limit" => js.info_queue_limit = parseable_int(cx, key, e)?,
            "meta_compact" => match v.as_i64() {
                Some(n) if n >= 0 => js.meta_compact = n as u64,
                _ => return Err(fail(cx, e, absolute(key, v))),
            },
            "meta_compact_size" => {
                let n = size(cx, e, &lower)?;
                if n < 0 {
                    return Err(fail(cx, e, absolute(key, v)));
                }
                js.meta_compact_size = n as u64;
            }
            "meta_compact_sync" => js.meta_compact_sync = boolean(cx, top, v)?,
            _ => cx.unknown(key, e),
        }
    }
    Ok(())
}

fn absolute(key: &str, v: &Value) -> String {
    format!(
        "Expected an absolute size for {}, got {}",
        go_quote(key.as_bytes()),
        go_value(v)
    )
}

fn parseable_int(cx: &mut Cx, key: &str, e: &Entry) -> Result<i64, Stop> {
    e.value.as_i64().ok_or_else(|| {
        fail(
            cx,
            e,
            format!(
                "Expected a parseable size for {}, got {}",
                go_quote(key.as_bytes()),
                go_value(&e.value)
            ),
        )
    })
}

/// A size (nats-server's `getStorageSize`), the error prefixed by `what`.
fn size(cx: &mut Cx, e: &Entry, what: &str) -> Result<i64, Stop> {
    storage_size(&e.value).map_err(|err| fail(cx, e, format!("{what} {err}")))
}

/// nats-server's `getStorageSize`: an integer, or a string of digits ending in `K`, `M`,
/// `G` or `T` (powers of 1024; the empty string is 0).
pub(crate) fn storage_size(v: &Value) -> Result<i64, String> {
    let s = match &v.kind {
        ValueKind::Integer(n) => return Ok(*n),
        ValueKind::String(s) => s.as_bytes(),
        _ => return Err("must be int64 or string".into()),
    };
    let Some((&suffix, prefix)) = s.split_last() else {
        return Ok(0);
    };
    let num = go_parse_int(prefix)?;
    let shift = match suffix {
        b'K' => 10,
        b'M' => 20,
        b'G' => 30,
        b'T' => 40,
        _ => return Err("sizes defined as strings must end in K, M, G, T".into()),
    };
    // Go's multiplication wraps.
    Ok(num.wrapping_mul(1i64 << shift))
}

/// Go's `strconv.ParseInt(s, 10, 64)` with its error text.
fn go_parse_int(b: &[u8]) -> Result<i64, String> {
    let quoted = go_quote(b);
    let text = std::str::from_utf8(b).map_err(|_| format!("strconv.ParseInt: parsing {quoted}: invalid syntax"))?;
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!("strconv.ParseInt: parsing {quoted}: invalid syntax"));
    }
    text.parse::<i64>()
        .map_err(|_| format!("strconv.ParseInt: parsing {quoted}: value out of range"))
}

/// `sync`/`sync_interval`: `always`, a duration, or (with a warning) seconds.
fn sync(cx: &mut Cx, js: &mut JetStreamOptions, top: &Entry, key: &str, e: &Entry) -> Step {
    match &e.value.kind {
        ValueKind::String(s) if s.eq_ignore_ascii_case("always") => {
            js.sync_interval = Some(DEFAULT_SYNC_INTERVAL);
            js.sync_always = true;
        }
        ValueKind::String(s) => match conf::parse_duration_nanos(s) {
            Ok(n) => js.sync_interval = Some(Duration::from_nanos(n.max(0) as u64)),
            Err(err) => {
                cx.error(&e.key_pos, format!("error parsing {key}: {err}"));
                js.sync_interval = Some(Duration::ZERO);
            }
        },
        _ => {
            cx.warn_field(key, &e.key_pos, &format!("{key} should be converted to a duration"));
            let secs = int(cx, top, &e.value)?;
            js.sync_interval = Some(Duration::from_secs(secs.max(0) as u64));
        }
    }
    Ok(())
}

/// nats-server's `setJetStreamEkCipher`.
fn cipher(cx: &mut Cx, top: &Entry, e: &Entry) -> Result<StoreCipher, Stop> {
    let s = string(cx, top, &e.value)?;
    match s.to_lowercase().as_str() {
        "chacha" | "chachapoly" => Ok(StoreCipher::ChaCha),
        "aes" => Ok(StoreCipher::Aes),
        _ => Err(fail(cx, e, format!("Unknown cipher type: {}", go_quote(s.as_bytes())))),
    }
}

/// A duration of the `limits` block: a bad one is reported without a position, as the
/// reference does.
fn limit_duration(cx: &mut Cx, top: &Entry, v: &Value) -> Result<Duration, Stop> {
    let s = string(cx, top, v)?;
    Ok(match conf::parse_duration_nanos(s) {
        Ok(n) => Duration::from_nanos(n.max(0) as u64),
        Err(err) => {
            cx.error_bare(err);
            Duration::ZERO
        }
    })
}

fn limits(cx: &mut Cx, js: &mut JetStreamOptions, top: &Entry, e: &Entry) -> Step {
    js.limits = Default::default();
    let Some(m) = e.value.as_map() else {
        let got = e.value.go_type_name();
        return Err(fail(
            cx,
            e,
            format!("Expected a map to define JetStreamLimits, got {got}"),
        ));
    };
    for (key, e) in m.iter() {
        let l = &mut js.limits;
        match key.to_ascii_lowercase().as_str() {
            "max_ack_pending" => l.max_ack_pending = int(cx, top, &e.value)?,
            "max_ha_assets" => l.max_ha_assets = int(cx, top, &e.value)?,
            "max_request_batch" => l.max_request_batch = int(cx, top, &e.value)?,
            "duplicate_window" => l.duplicate_window = limit_duration(cx, top, &e.value)?,
            "batch" => {
                let Some(b) = e.value.as_map() else {
                    let got = e.value.go_type_name();
                    return Err(fail(cx, e, format!("Expected a map to define batch limits, got {got}")));
                };
                for (key, e) in b.iter() {
                    match key.to_ascii_lowercase().as_str() {
                        "max_inflight_per_stream" => l.max_batch_inflight_per_stream = int(cx, top, &e.value)?,
                        "max_inflight_total" => l.max_batch_inflight_total = int(cx, top, &e.value)?,
                        "max_msgs" => l.max_batch_size = int(cx, top, &e.value)?,
                        "timeout" => l.max_batch_timeout = limit_duration(cx, top, &e.value)?,
                        _ => cx.unknown(key, e),
                    }
                }
            }
            _ => cx.unknown(key, e),
        }
    }
    Ok(())
}

fn tpm(cx: &mut Cx, js: &mut JetStreamOptions, top: &Entry, e: &Entry) -> Step {
    js.tpm = Default::default();
    let Some(m) = e.value.as_map() else {
        let got = e.value.go_type_name();
        return Err(fail(
            cx,
            e,
            format!("Expected a map to define JetStreamLimits, got {got}"),
        ));
    };
    for (key, e) in m.iter() {
        match key.to_ascii_lowercase().as_str() {
            "keys_file" => js.tpm.keys_file = string(cx, top, &e.value)?.to_string(),
            "encryption_password" => js.tpm.encryption_password = string(cx, top, &e.value)?.to_string(),
            "srk_password" => js.tpm.srk_password = string(cx, top, &e.value)?.to_string(),
            "pcr" => js.tpm.pcr = int(cx, top, &e.value)?,
            "cipher" => js.cipher = cipher(cx, top, e)?,
            _ => cx.unknown(key, e),
        }
    }
    Ok(())
}

/// Go's `%s` of a config value (`%!s(int64=1)` for what is not a string).
fn go_s_verb(v: &Value) -> String {
    match &v.kind {
        ValueKind::String(s) => s.clone(),
        ValueKind::Integer(n) => format!("%!s(int64={n})"),
        ValueKind::Float(_) => format!("%!s(float64={})", go_value(v)),
        ValueKind::Bool(b) => format!("%!s(bool={b})"),
        ValueKind::DateTime(_) => go_value(v),
        ValueKind::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_s_verb).collect();
            format!("[{}]", parts.join(" "))
        }
        ValueKind::Map(m) => {
            let mut parts: Vec<String> = m.iter().map(|(k, e)| format!("{k}:{}", go_s_verb(&e.value))).collect();
            parts.sort();
            format!("map[{}]", parts.join(" "))
        }
    }
}
