//! Stream configuration defaults and checks on create and update, in the reference's order
//! and with its texts (`checkStreamCfg`, `configUpdateCheck` and the create handler's own
//! checks), plus the `_nats.*` versioning metadata. Pure: what the checks need to know about
//! the server and the account's other streams comes in a [`StreamLimitsCtx`].
//!
//! Not here (the caller's, as they need the account): the subject overlap check against other
//! streams (10065, use [`subjects_overlap`]), account resource limits, `10058` name in use.

use super::config::{DiscardPolicy, PersistMode, Retention, StorageType, StreamConfig};
use super::errors::ApiError;
use super::errors_table as t;
use crate::core::subject::{is_valid_literal_subject, is_valid_subject, subjects_collide};
use crate::core::transform::{validate_mapping, SubjectTransform as Transform};

pub const MAX_NAME_LEN: usize = 255;
pub const MAX_DESCRIPTION_LEN: usize = 4 * 1024;
pub const MAX_METADATA_LEN: usize = 128 * 1024;
pub const MAX_REPLICAS: i64 = 5;
/// Two minutes, in nanoseconds.
pub const DEFAULT_DUPLICATE_WINDOW: i64 = 120_000_000_000;
const MS100: i64 = 100_000_000;
const SECOND: i64 = 1_000_000_000;
pub const SERVER_VERSION: &str = "2.14.0";
pub const API_LEVEL: u32 = 4;

/// What the checks need from the server and the account.
pub struct StreamLimitsCtx<'a> {
    /// The server's `limits.duplicate_window` (nanoseconds; 0: none).
    pub max_duplicate_window: i64,
    pub pedantic: bool,
    /// Whether the account's limits for this stream's tier require `max_bytes`.
    pub max_bytes_required: bool,
    /// The account's per-stream byte limit for this stream's storage (0: none).
    pub max_stream_bytes: i64,
    /// A standalone (not clustered) server: more than one replica is refused.
    pub standalone: bool,
    /// Another stream of the account by name, when it exists.
    pub lookup: &'a dyn Fn(&str) -> Option<StreamConfig>,
}

impl Default for StreamLimitsCtx<'_> {
    fn default() -> Self {
        StreamLimitsCtx {
            max_duplicate_window: 0,
            pedantic: false,
            max_bytes_required: false,
            max_stream_bytes: 0,
            standalone: true,
            lookup: &|_| None,
        }
    }
}

/// A valid stream (or consumer) name: not empty, none of ` \t\r\n\f.*>\/`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains([' ', '\t', '\r', '\n', '\x0c', '.', '*', '>', '\\', '/'])
}

/// Could some subject be in both lists (wildcards considered)?
pub fn subjects_overlap(a: &[String], b: &[String]) -> bool {
    a.iter().any(|x| b.iter().any(|y| subjects_collide(x, y)))
}

/// Is every subject `subset` matches also matched by `pattern`?
fn subset_match(subset: &str, pattern: &str) -> bool {
    let mut a = subset.split('.');
    let mut b = pattern.split('.');
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(_), Some(">")) => return true,
            (Some(x), Some(y)) => {
                if y != "*" && x != y || x == ">" && y != ">" {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

fn invalid(msg: impl std::fmt::Display) -> ApiError {
    t::JS_STREAM_INVALID_CONFIG_F.err_with(msg)
}

fn pedantic(msg: &str) -> ApiError {
    t::JS_PEDANTIC_ERR_F.err_with(msg)
}

fn valid_publish_subject(s: &str) -> bool {
    is_valid_subject(s.as_bytes()) && is_valid_literal_subject(s.as_bytes())
}

/// The create handler's checks before the config checks: name against the subject's name,
/// path separators, sealed, mirror direct without a mirror.
pub fn check_create_request(subject_name: &str, cfg: &StreamConfig) -> Result<(), ApiError> {
    if subject_name != cfg.name {
        return Err(t::JS_STREAM_MISMATCH_ERR.err());
    }
    if subject_name.contains(['\\', '/']) {
        return Err(t::JS_STREAM_NAME_CONTAINS_PATH_SEPARATORS_ERR.err());
    }
    if cfg.sealed {
        return Err(invalid("stream configuration for create can not be sealed"));
    }
    if cfg.mirror_direct && cfg.mirror.is_none() {
        return Err(invalid("stream has no mirror but does have mirror direct"));
    }
    Ok(())
}

/// Fill the defaults and check `cfg` as the reference's `checkStreamCfg` does (and refuse
/// replicas on a standalone server as stream creation does).
pub fn normalize_and_check(cfg: &mut StreamConfig, ctx: &StreamLimitsCtx<'_>) -> Result<(), ApiError> {
    check_cfg(cfg, ctx)?;
    if ctx.standalone && cfg.num_replicas > 1 {
        return Err(t::JS_STREAM_REPLICAS_NOT_SUPPORTED_ERR.err());
    }
    Ok(())
}

fn unlimited(v: &mut i64, name: &str, ped: bool) -> Result<(), ApiError> {
    if *v == 0 || *v < -1 {
        if ped && *v < -1 {
            return Err(pedantic(&format!("{name} must be set to -1")));
        }
        *v = -1;
    }
    Ok(())
}

fn check_cfg(cfg: &mut StreamConfig, ctx: &StreamLimitsCtx<'_>) -> Result<(), ApiError> {
    let ped = ctx.pedantic;
    if !valid_name(&cfg.name) {
        return Err(invalid(
            "stream name is required and can not contain '.', '*', '>', '\\', '/'",
        ));
    }
    if cfg.name.len() > MAX_NAME_LEN {
        return Err(invalid(format!(
            "stream name is too long, maximum allowed is {MAX_NAME_LEN}"
        )));
    }
    if cfg.description.len() > MAX_DESCRIPTION_LEN {
        return Err(invalid(format!(
            "stream description is too long, maximum allowed is {MAX_DESCRIPTION_LEN}"
        )));
    }
    let meta_len: usize = cfg.metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if meta_len > MAX_METADATA_LEN {
        return Err(invalid(format!(
            "stream metadata exceeds maximum size of {MAX_METADATA_LEN} bytes"
        )));
    }
    if cfg.num_replicas == 0 {
        cfg.num_replicas = 1;
    }
    if cfg.num_replicas > MAX_REPLICAS {
        return Err(invalid(format!("maximum replicas is {MAX_REPLICAS}")));
    }
    if cfg.num_replicas < 0 {
        return Err(t::JS_REPLICAS_COUNT_CANNOT_BE_NEGATIVE.err());
    }
    unlimited(&mut cfg.max_msgs, "max_msgs", ped)?;
    unlimited(&mut cfg.max_msgs_per_subject, "max_msgs_per_subject", ped)?;
    unlimited(&mut cfg.max_bytes, "max_bytes", ped)?;
    let mut mms = i64::from(cfg.max_msg_size);
    unlimited(&mut mms, "max_msg_size", ped)?;
    cfg.max_msg_size = i32::try_from(mms).unwrap_or(-1);
    unlimited(&mut cfg.max_consumers, "max_consumers", ped)?;
    if cfg.max_age < 0 {
        return Err(invalid("max age can not be negative"));
    }
    if cfg.max_age != 0 && cfg.max_age < MS100 {
        return Err(invalid("max age needs to be >= 100ms"));
    }
    let lim = ctx.max_duplicate_window;
    if cfg.duplicate_window == 0 && cfg.mirror.is_none() && cfg.sources.is_empty() {
        let mut window = DEFAULT_DUPLICATE_WINDOW;
        if lim > 0 && window > lim {
            if ped {
                return Err(pedantic("duplicate window limits are higher than current limits"));
            }
            window = lim;
        }
        if cfg.max_age != 0 && cfg.max_age < window {
            if ped {
                return Err(pedantic("duplicate window cannot be bigger than max age"));
            }
            cfg.duplicate_window = cfg.max_age;
        } else {
            cfg.duplicate_window = window;
        }
    }
    if cfg.duplicate_window < 0 {
        return Err(invalid("duplicates window can not be negative"));
    }
    if cfg.max_age != 0 && cfg.duplicate_window > cfg.max_age {
        return Err(invalid("duplicates window can not be larger then max age"));
    }
    if lim > 0 && cfg.duplicate_window > lim {
        return Err(invalid(format!(
            "duplicates window can not be larger then server limit of {}",
            go_duration(lim)
        )));
    }
    if cfg.duplicate_window > 0 && cfg.duplicate_window < MS100 {
        return Err(invalid("duplicates window needs to be >= 100ms"));
    }
    if cfg.deny_purge && cfg.allow_rollup_hdrs {
        return Err(invalid("roll-ups require the purge permission"));
    }
    if cfg.allow_msg_counter {
        if cfg.discard == DiscardPolicy::New {
            return Err(invalid("counter stream cannot use discard new"));
        }
        if cfg.allow_msg_ttl {
            return Err(invalid("counter stream cannot use message TTLs"));
        }
        if cfg.retention != Retention::Limits {
            return Err(invalid("counter stream can only use limits retention"));
        }
    }
    check_discard_new_per(cfg)?;
    if cfg.subject_delete_marker_ttl > 0 {
        if cfg.subject_delete_marker_ttl < SECOND {
            return Err(invalid("subject delete marker TTL must be at least 1 second"));
        }
        if !cfg.allow_msg_ttl {
            if ped {
                return Err(invalid(
                    "subject delete marker cannot be set if message TTLs are disabled",
                ));
            }
            cfg.allow_msg_ttl = true;
        }
        if !cfg.allow_rollup_hdrs {
            if ped {
                return Err(invalid("subject delete marker cannot be set if roll-ups are disabled"));
            }
            cfg.allow_rollup_hdrs = true;
            cfg.deny_purge = false;
        }
    } else if cfg.subject_delete_marker_ttl < 0 {
        return Err(invalid("subject delete marker TTL must not be negative"));
    }
    if cfg.allow_msg_schedules && !cfg.allow_rollup_hdrs {
        if ped {
            return Err(invalid("message scheduling cannot be set if roll-ups are disabled"));
        }
        cfg.allow_rollup_hdrs = true;
        cfg.deny_purge = false;
    }
    if cfg.persist_mode == PersistMode::Async {
        if cfg.storage != StorageType::File {
            return Err(invalid("async persist mode is only supported on file storage"));
        }
        if cfg.num_replicas > 1 {
            return Err(invalid("async persist mode is not supported on replicated streams"));
        }
        if cfg.allow_atomic {
            return Err(invalid("async persist mode is not supported with atomic batch publish"));
        }
    }
    super::stream_check_sources::check_mirror_and_sources(cfg, ctx)?;
    check_subjects(cfg)?;
    if ctx.max_bytes_required && cfg.max_bytes <= 0 {
        return Err(t::JS_STREAM_MAX_BYTES_REQUIRED.err());
    } else if ctx.max_stream_bytes > 0 && cfg.max_bytes > ctx.max_stream_bytes {
        return Err(t::JS_STREAM_MAX_STREAM_BYTES_EXCEEDED.err());
    }
    if let Some(tr) = &cfg.subject_transform {
        if !tr.src.is_empty() && !is_valid_subject(tr.src.as_bytes()) {
            return Err(t::JS_STREAM_TRANSFORM_INVALID_SOURCE.err_with(format!("invalid subject {}", tr.src)));
        }
        if let Err(e) = validate_mapping(&tr.src, &tr.dest) {
            return Err(t::JS_STREAM_TRANSFORM_INVALID_DESTINATION.err_with(e));
        }
    }
    check_republish(cfg, ped)?;
    if cfg.placement.as_ref().is_some_and(|p| *p == Default::default()) {
        cfg.placement = None;
    }
    if cfg.placement.as_ref().is_some_and(|p| !p.preferred.is_empty()) {
        return Err(invalid("preferred server not permitted in placement"));
    }
    Ok(())
}

fn check_discard_new_per(cfg: &StreamConfig) -> Result<(), ApiError> {
    if cfg.discard_new_per_subject {
        if cfg.discard != DiscardPolicy::New {
            return Err(invalid("discard new per subject requires discard new policy to be set"));
        }
        if cfg.max_msgs_per_subject <= 0 {
            return Err(invalid("discard new per subject requires max msgs per subject > 0"));
        }
    }
    Ok(())
}

fn check_subjects(cfg: &mut StreamConfig) -> Result<(), ApiError> {
    if cfg.subjects.is_empty() {
        if cfg.mirror.is_none() && cfg.sources.is_empty() {
            cfg.subjects.push(cfg.name.clone());
        }
    } else {
        if cfg.mirror.is_some() {
            return Err(t::JS_MIRROR_WITH_SUBJECTS_ERR.err());
        }
        for (i, subj) in cfg.subjects.iter().enumerate() {
            if !is_valid_subject(subj.as_bytes()) {
                return Err(invalid("invalid subject"));
            }
            if cfg.subjects.get(..i).unwrap_or_default().contains(subj) {
                return Err(invalid("duplicate subjects detected"));
            }
            if subj == ">" {
                if !cfg.no_ack {
                    return Err(invalid("capturing all subjects requires no-ack to be true"));
                }
                if cfg.num_replicas != 1 {
                    return Err(invalid("capturing all subjects requires replicas of 1"));
                }
            }
            if !cfg.no_ack {
                for ns in ["$JS.>", "$JSC.>", "$NRG.>"] {
                    if subjects_collide(subj, ns) && !subset_match(subj, "$JS.EVENT.>") {
                        return Err(invalid(
                            "subjects that overlap with jetstream api require no-ack to be true",
                        ));
                    }
                }
                if subjects_collide(subj, "$SYS.>") && !subset_match(subj, "$SYS.ACCOUNT.>") {
                    return Err(invalid(
                        "subjects that overlap with system api require no-ack to be true",
                    ));
                }
            }
            for other in cfg.subjects.get(i + 1..).unwrap_or_default() {
                if subjects_collide(other, subj) {
                    return Err(invalid(format!("subject {subj:?} overlaps with {other:?}")));
                }
            }
        }
    }
    if cfg.subjects.is_empty() && cfg.sources.is_empty() && cfg.mirror.is_none() {
        return Err(invalid(
            "stream needs at least one configured subject or be a source/mirror",
        ));
    }
    Ok(())
}

fn check_republish(cfg: &mut StreamConfig, ped: bool) -> Result<(), ApiError> {
    let Some(rp) = cfg.republish.as_mut() else {
        return Ok(());
    };
    if rp.src.is_empty() {
        if ped {
            return Err(pedantic("republish source can not be empty"));
        }
        rp.src = ">".into();
    }
    if let Some(tr) = &cfg.subject_transform {
        if rp.dest == ">" && rp.src == ">" && cfg.subjects.len() == 1 && cfg.subjects.first() == Some(&tr.src) {
            if ped {
                return Err(pedantic("implicit republish based on subject transform"));
            }
            rp.src = tr.dest.clone();
            rp.dest = tr.dest.clone();
        }
    }
    if cfg.subjects.iter().any(|s| subjects_collide(&rp.dest, s)) {
        return Err(invalid("stream configuration for republish destination forms a cycle"));
    }
    if Transform::new(&rp.src, &rp.dest).is_err() {
        return Err(invalid(format!(
            "stream configuration for republish with transform from '{}' to '{}' not valid",
            rp.src, rp.dest
        )));
    }
    Ok(())
}

/// Check an update of `old` to `new` (`new` is normalized as on create first), as the
/// reference's `configUpdateCheck`; a sealed stream gets its sealed settings. The caller
/// then checks subject overlap with the account's other streams and consumer limits.
pub fn check_update(old: &StreamConfig, new: &mut StreamConfig, ctx: &StreamLimitsCtx<'_>) -> Result<(), ApiError> {
    check_cfg(new, ctx)?;
    let cfg = new;
    if cfg.name != old.name {
        return Err(invalid("stream configuration name must match original"));
    }
    if cfg.storage != old.storage {
        return Err(invalid("stream configuration update can not change storage type"));
    }
    if cfg.retention != old.retention
        && (old.retention == Retention::WorkQueue || cfg.retention == Retention::WorkQueue)
    {
        return Err(invalid(
            "stream configuration update can not change retention policy to/from workqueue",
        ));
    }
    if !cfg.sealed && old.sealed {
        return Err(invalid("stream configuration update can not unseal a sealed stream"));
    }
    if !cfg.deny_delete && old.deny_delete {
        return Err(invalid(
            "stream configuration update can not cancel deny message deletes",
        ));
    }
    if !cfg.deny_purge && old.deny_purge {
        return Err(invalid("stream configuration update can not cancel deny purge"));
    }
    if cfg.mirror.is_some() && cfg.mirror != old.mirror {
        return Err(t::JS_STREAM_MIRROR_NOT_UPDATABLE_ERR.err());
    }
    check_discard_new_per(cfg)?;
    if old.allow_msg_ttl && !cfg.allow_msg_ttl {
        return Err(invalid("message TTL status can not be disabled"));
    }
    if cfg.allow_msg_counter != old.allow_msg_counter {
        return Err(invalid(
            "stream configuration update can not change message counter setting",
        ));
    }
    if old.allow_msg_schedules && !cfg.allow_msg_schedules {
        return Err(invalid("message schedules can not be disabled"));
    }
    if old.persist_mode != cfg.persist_mode {
        return Err(invalid("stream configuration update can not change persist mode"));
    }
    if cfg.sealed {
        cfg.max_age = 0;
        cfg.discard = DiscardPolicy::New;
        cfg.deny_delete = true;
        cfg.deny_purge = true;
        cfg.allow_rollup_hdrs = false;
    }
    if ctx.standalone && cfg.num_replicas > 1 {
        return Err(t::JS_STREAM_REPLICAS_NOT_SUPPORTED_ERR.err());
    }
    Ok(())
}

/// The metadata keys the server owns.
pub const META_REQ_LEVEL: &str = "_nats.req.level";
pub const META_VERSION: &str = "_nats.ver";
pub const META_LEVEL: &str = "_nats.level";

/// The API level a configuration needs (the features it uses).
pub fn required_api_level(cfg: &StreamConfig) -> u32 {
    let mut level = 0;
    if cfg.allow_msg_ttl || cfg.subject_delete_marker_ttl > 0 {
        level = level.max(1);
    }
    if cfg.allow_msg_counter || cfg.allow_atomic || cfg.allow_msg_schedules || cfg.persist_mode == PersistMode::Async {
        level = level.max(2);
    }
    if cfg.allow_batched {
        level = level.max(4);
    }
    level
}

/// Stored metadata: the dynamic keys (`_nats.ver`, `_nats.level`) dropped and
/// `_nats.req.level` set from the features used (a client's value is overwritten).
pub fn set_static_metadata(cfg: &mut StreamConfig) {
    cfg.metadata.remove(META_VERSION);
    cfg.metadata.remove(META_LEVEL);
    let level = required_api_level(cfg);
    cfg.metadata.insert(META_REQ_LEVEL.into(), level.to_string());
}

/// The configuration as responses show it: stored metadata plus `_nats.ver` and `_nats.level`.
pub fn with_dynamic_metadata(cfg: &StreamConfig) -> StreamConfig {
    let mut out = cfg.clone();
    out.metadata.insert(META_VERSION.into(), SERVER_VERSION.into());
    out.metadata.insert(META_LEVEL.into(), API_LEVEL.to_string());
    out
}

/// For comparing a re-create with the existing stream: the dynamic keys dropped and
/// `_nats.req.level` taken from the existing config (removed if it has none).
pub fn copy_metadata_from(cfg: &mut StreamConfig, prev: &StreamConfig) {
    cfg.metadata.remove(META_VERSION);
    cfg.metadata.remove(META_LEVEL);
    match prev.metadata.get(META_REQ_LEVEL) {
        Some(v) => {
            cfg.metadata.insert(META_REQ_LEVEL.into(), v.clone());
        }
        None => {
            cfg.metadata.remove(META_REQ_LEVEL);
        }
    }
}

/// Used by the mirror/source checks.
pub(crate) fn invalid_cfg(msg: impl std::fmt::Display) -> ApiError {
    invalid(msg)
}
pub(crate) fn pedantic_err(msg: &str) -> ApiError {
    pedantic(msg)
}
pub(crate) fn is_publish_subject(s: &str) -> bool {
    valid_publish_subject(s)
}
pub(crate) fn subject_subset(subset: &str, pattern: &str) -> bool {
    subset_match(subset, pattern)
}

/// Go's `time.Duration.String` (`2m0s`, `1.5s`, `100ms`).
pub fn go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let neg = ns < 0;
    let u = ns.unsigned_abs();
    let sign = if neg { "-" } else { "" };
    let frac = |v: u64, unit: u64| -> String {
        let whole = v / unit;
        let rest = v % unit;
        if rest == 0 {
            return whole.to_string();
        }
        let digits = unit.to_string().len() - 1;
        let f = format!("{rest:0digits$}");
        format!("{whole}.{}", f.trim_end_matches('0'))
    };
    if u < 1_000 {
        return format!("{sign}{u}ns");
    }
    if u < 1_000_000 {
        return format!("{sign}{}\u{b5}s", frac(u, 1_000));
    }
    if u < 1_000_000_000 {
        return format!("{sign}{}ms", frac(u, 1_000_000));
    }
    let secs = u / 1_000_000_000;
    let sub = u % 1_000_000_000;
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let s = frac(s * 1_000_000_000 + sub, 1_000_000_000);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}s")
    } else {
        format!("{sign}{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::api::decode::decode_stream_create;
    use serde_json::Value;

    /// One create request per line with the reference's answer (error object, or parts of the
    /// created config), captured from the 2.14.0 binary over raw `$JS.API.STREAM.CREATE`.
    const OBSERVED: &str = include_str!("testdata_stream_create.jsonl");

    fn create(body: &[u8]) -> Result<StreamConfig, ApiError> {
        let (mut cfg, pedantic) = decode_stream_create(body)?;
        set_static_metadata(&mut cfg);
        check_create_request(&cfg.name.clone(), &cfg)?;
        let ctx = StreamLimitsCtx {
            pedantic,
            ..Default::default()
        };
        normalize_and_check(&mut cfg, &ctx)?;
        Ok(with_dynamic_metadata(&cfg))
    }

    #[test]
    fn create_checks_match_the_reference() {
        for line in OBSERVED.lines().filter(|l| !l.trim().is_empty()) {
            let case: Value = serde_json::from_str(line).unwrap();
            let body = serde_json::to_vec(&case["req"]).unwrap();
            let got = create(&body);
            let res = &case["res"];
            if let Some(ok) = res.get("ok") {
                let cfg = serde_json::to_value(got.unwrap_or_else(|e| panic!("{line}: {e}"))).unwrap();
                for (k, v) in ok.as_object().unwrap() {
                    assert_eq!(&cfg[k.as_str()], v, "{line}: {k}");
                }
            } else {
                let e = got.err().unwrap_or_else(|| panic!("{line}: accepted"));
                let want: ApiError = serde_json::from_value(res.clone()).unwrap();
                assert_eq!(e, want, "{line}");
            }
        }
    }

    #[test]
    fn defaults_as_the_reference_fills_them() {
        let cfg = create(br#"{"name":"ORDERS","subjects":["orders.\u003e"]}"#).unwrap();
        let got = String::from_utf8(crate::proto::gojson::to_vec(&cfg)).unwrap();
        assert_eq!(
            got,
            r#"{"name":"ORDERS","subjects":["orders.\u003e"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":120000000000,"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"4","_nats.req.level":"0","_nats.ver":"2.14.0"}}"#
        );
        let c =
            create(br#"{"name":"T","allow_msg_ttl":true,"metadata":{"_nats.ver":"9","_nats.req.level":"7","k":"v"}}"#)
                .unwrap();
        assert_eq!(c.metadata.get(META_REQ_LEVEL).map(String::as_str), Some("1"));
        assert_eq!(c.metadata.get(META_VERSION).map(String::as_str), Some("2.14.0"));
        assert_eq!(c.metadata.get("k").map(String::as_str), Some("v"));
        let c = create(br#"{"name":"T","max_age":1000000000,"subject_delete_marker_ttl":1000000000}"#).unwrap();
        assert_eq!(
            (c.duplicate_window, c.allow_msg_ttl, c.allow_rollup_hdrs),
            (1_000_000_000, true, true)
        );
    }

    #[test]
    fn update_rules() {
        let old = create(br#"{"name":"U","deny_delete":true}"#).unwrap();
        let ctx = StreamLimitsCtx::default();
        let cases: &[(&str, Option<&str>)] = &[
            (r#"{"name":"U","deny_delete":true}"#, None),
            (
                r#"{"name":"U","storage":"memory","deny_delete":true}"#,
                Some("stream configuration update can not change storage type"),
            ),
            (
                r#"{"name":"U"}"#,
                Some("stream configuration update can not cancel deny message deletes"),
            ),
            (
                r#"{"name":"U","deny_delete":true,"retention":"workqueue"}"#,
                Some("stream configuration update can not change retention policy to/from workqueue"),
            ),
            (
                r#"{"name":"U","deny_delete":true,"allow_msg_counter":true}"#,
                Some("stream configuration update can not change message counter setting"),
            ),
            (
                r#"{"name":"U","deny_delete":true,"persist_mode":"async"}"#,
                Some("stream configuration update can not change persist mode"),
            ),
        ];
        for (body, want) in cases {
            let (mut new, _) = decode_stream_create(body.as_bytes()).unwrap();
            let got = check_update(&old, &mut new, &ctx);
            assert_eq!(got.err().map(|e| e.description), want.map(String::from), "{body}");
        }
        let (mut sealed, _) =
            decode_stream_create(br#"{"name":"U","deny_delete":true,"sealed":true,"max_age":5000000000}"#).unwrap();
        check_update(&old, &mut sealed, &ctx).unwrap();
        assert_eq!(
            (sealed.max_age, sealed.discard, sealed.deny_purge),
            (0, DiscardPolicy::New, true)
        );
    }

    #[test]
    fn names_overlap_and_durations() {
        for (n, ok) in [
            ("A", true),
            ("", false),
            ("a.b", false),
            ("a b", false),
            ("a/b", false),
            ("a>", false),
        ] {
            assert_eq!(valid_name(n), ok, "{n}");
        }
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(subjects_overlap(&s(&["a.*"]), &s(&["b", "a.x"])));
        assert!(!subjects_overlap(&s(&["a.*"]), &s(&["a.x.y"])));
        assert!(subjects_overlap(&s(&["a.>"]), &s(&["*.x.y"])));
        assert_eq!(go_duration(120_000_000_000), "2m0s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(100_000_000), "100ms");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
    }
}
