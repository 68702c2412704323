//! The seam between the API handlers and the request decoders and checks: what a
//! handler calls to turn a request body into a checked configuration or query.

use super::config::StreamConfig;
use super::errors_table as e;
use super::ApiError;
use crate::jetstream::JetStream;
use serde::Deserialize;
use storage::{Filter, Store, StoredMsg};

fn invalid_json(err: serde_json::Error) -> ApiError {
    e::JS_INVALID_JSON_ERR.err_with(err)
}

fn decode_opt<T: for<'de> Deserialize<'de> + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(invalid_json)
}

/// A create or update request for the stream named `name` in the subject.
pub fn stream_create_request(body: &[u8], name: &str) -> Result<(StreamConfig, bool), ApiError> {
    if body.is_empty() {
        return Err(e::JS_BAD_REQUEST_ERR.err());
    }
    let mut v: serde_json::Value = serde_json::from_slice(body).map_err(invalid_json)?;
    let pedantic = v
        .as_object_mut()
        .and_then(|o| o.remove("pedantic"))
        .and_then(|p| p.as_bool())
        .unwrap_or(false);
    let cfg: StreamConfig = serde_json::from_value(v).map_err(invalid_json)?;
    if cfg.name != name {
        return Err(e::JS_STREAM_MISMATCH_ERR.err());
    }
    Ok((cfg, pedantic))
}

/// Defaults and checks for a new stream.
pub fn stream_create(cfg: &mut StreamConfig, js: &JetStream, _pedantic: bool) -> Result<(), ApiError> {
    if cfg.subjects.is_empty() && cfg.mirror.is_none() && cfg.sources.is_empty() {
        cfg.subjects = vec![cfg.name.clone()];
    }
    if cfg.max_consumers == 0 {
        cfg.max_consumers = -1;
    }
    if cfg.max_msgs == 0 {
        cfg.max_msgs = -1;
    }
    if cfg.max_bytes == 0 {
        cfg.max_bytes = -1;
    }
    if cfg.max_msgs_per_subject == 0 {
        cfg.max_msgs_per_subject = -1;
    }
    if cfg.max_msg_size == 0 {
        cfg.max_msg_size = -1;
    }
    if cfg.num_replicas == 0 {
        cfg.num_replicas = 1;
    }
    if cfg.duplicate_window == 0 && cfg.mirror.is_none() {
        let two_min = 120_000_000_000;
        cfg.duplicate_window = if cfg.max_age > 0 && cfg.max_age < two_min {
            cfg.max_age
        } else {
            two_min
        };
        if js.settings.max_duplicate_window > 0 && cfg.duplicate_window > js.settings.max_duplicate_window {
            cfg.duplicate_window = js.settings.max_duplicate_window;
        }
    }
    cfg.metadata.retain(|k, _| !k.starts_with("_nats."));
    cfg.metadata.insert("_nats.ver".into(), "2.14.0".into());
    cfg.metadata.insert("_nats.level".into(), "4".into());
    cfg.metadata.insert("_nats.req.level".into(), "0".into());
    Ok(())
}

/// Checks for an update of `old` to `new` (defaults applied to `new`).
pub fn stream_update(
    old: &StreamConfig,
    new: &mut StreamConfig,
    js: &JetStream,
    pedantic: bool,
) -> Result<(), ApiError> {
    stream_create(new, js, pedantic)?;
    if old.storage != new.storage {
        return Err(e::JS_STREAM_INVALID_CONFIG_F.err_with("stream configuration update can not change storage type"));
    }
    if old.retention != new.retention {
        return Err(
            e::JS_STREAM_INVALID_CONFIG_F.err_with("stream configuration update can not change retention policy")
        );
    }
    Ok(())
}

/// `STREAM.INFO` options.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamInfoOpts {
    #[serde(default)]
    pub offset: usize,
    #[serde(default)]
    pub deleted_details: bool,
    #[serde(default)]
    pub subjects_filter: String,
}

pub fn info_opts(body: &[u8]) -> Result<StreamInfoOpts, ApiError> {
    decode_opt(body)
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamesReq {
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    subject: String,
}

/// `STREAM.NAMES`/`LIST` options: offset and subject filter.
pub fn names_opts(body: &[u8]) -> Result<(usize, String), ApiError> {
    let r: NamesReq = decode_opt(body)?;
    Ok((r.offset, r.subject))
}

/// `STREAM.PURGE` options.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeOpts {
    #[serde(default)]
    pub filter: String,
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub keep: u64,
}

pub fn purge_opts(body: &[u8]) -> Result<PurgeOpts, ApiError> {
    let p: PurgeOpts = decode_opt(body)?;
    if p.seq > 0 && p.keep > 0 {
        return Err(e::JS_BAD_REQUEST_ERR.err());
    }
    Ok(p)
}

/// `STREAM.MSG.GET` query.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MsgGet {
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub last_by_subj: String,
    #[serde(default)]
    pub next_by_subj: String,
}

pub fn msg_get_opts(body: &[u8]) -> Result<MsgGet, ApiError> {
    let q: MsgGet = decode_opt(body)?;
    let set = usize::from(q.seq > 0 && q.next_by_subj.is_empty()) + usize::from(!q.last_by_subj.is_empty());
    if set > 1 || (!q.last_by_subj.is_empty() && !q.next_by_subj.is_empty()) {
        return Err(e::JS_BAD_REQUEST_ERR.err());
    }
    if q.seq == 0 && q.last_by_subj.is_empty() && q.next_by_subj.is_empty() {
        return Err(e::JS_BAD_REQUEST_ERR.err());
    }
    Ok(q)
}

/// Load what a `STREAM.MSG.GET` asks for.
pub fn load_for_get(store: &mut dyn Store, q: &MsgGet) -> Result<StoredMsg, ApiError> {
    let r = if !q.last_by_subj.is_empty() {
        store.load_last_msg(&q.last_by_subj)
    } else if !q.next_by_subj.is_empty() {
        store.load_next_msg(&Filter::new(&q.next_by_subj), q.seq)
    } else {
        store.load_msg(q.seq)
    };
    r.map_err(|_| e::JS_NO_MESSAGE_FOUND_ERR.err())
}

/// `STREAM.MSG.DELETE` request.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MsgDelete {
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub no_erase: bool,
}

pub fn msg_delete_opts(body: &[u8]) -> Result<MsgDelete, ApiError> {
    if body.is_empty() {
        return Err(e::JS_BAD_REQUEST_ERR.err());
    }
    decode_opt(body)
}
