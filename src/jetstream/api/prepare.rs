//! The seam between the API handlers and the request decoders and checks: what a
//! handler calls to turn a request body into a checked configuration or query.

use super::config::StreamConfig;
use super::errors_table as e;
use super::ApiError;
use crate::jetstream::JetStream;
use storage::{Filter, Store, StoredMsg};

/// A create (or, with `update`, an update) request for the stream named `name` in the
/// subject. Only an update may seal a stream.
pub fn stream_create_request(body: &[u8], name: &str, update: bool) -> Result<(StreamConfig, bool), ApiError> {
    let (cfg, pedantic) = super::decode::decode_stream_create(body)?;
    if update {
        if name != cfg.name {
            return Err(e::JS_STREAM_MISMATCH_ERR.err());
        }
    } else {
        super::stream_check::check_create_request(name, &cfg)?;
    }
    Ok((cfg, pedantic))
}

fn limits_ctx<'a>(
    js: &JetStream,
    cfg: &StreamConfig,
    pedantic: bool,
    limits: &crate::auth::config::JetStreamAccountLimits,
    lookup: &'a dyn Fn(&str) -> Option<StreamConfig>,
) -> super::stream_check::StreamLimitsCtx<'a> {
    let max_stream_bytes = match cfg.storage {
        super::config::StorageType::Memory => limits.memory_max_stream_bytes,
        super::config::StorageType::File => limits.store_max_stream_bytes,
    };
    super::stream_check::StreamLimitsCtx {
        max_duplicate_window: js.settings.max_duplicate_window,
        pedantic,
        max_bytes_required: limits.max_bytes_required,
        max_stream_bytes: max_stream_bytes.max(0),
        standalone: true,
        lookup,
    }
}

/// Defaults and checks for a new stream; `lookup` finds the account's other streams.
pub fn stream_create(
    cfg: &mut StreamConfig,
    js: &JetStream,
    pedantic: bool,
    limits: &crate::auth::config::JetStreamAccountLimits,
    lookup: &dyn Fn(&str) -> Option<StreamConfig>,
) -> Result<(), ApiError> {
    let ctx = limits_ctx(js, cfg, pedantic, limits, lookup);
    super::stream_check::normalize_and_check(cfg, &ctx)?;
    super::stream_check::set_static_metadata(cfg);
    Ok(())
}

/// Checks for an update of `old` to `new` (defaults applied to `new`).
pub fn stream_update(
    old: &StreamConfig,
    new: &mut StreamConfig,
    js: &JetStream,
    pedantic: bool,
    limits: &crate::auth::config::JetStreamAccountLimits,
    lookup: &dyn Fn(&str) -> Option<StreamConfig>,
) -> Result<(), ApiError> {
    let ctx = limits_ctx(js, new, pedantic, limits, lookup);
    super::stream_check::check_update(old, new, &ctx)?;
    super::stream_check::set_static_metadata(new);
    Ok(())
}

/// `STREAM.INFO` options.
pub type StreamInfoOpts = super::requests::StreamInfoRequest;

pub fn info_opts(body: &[u8]) -> Result<StreamInfoOpts, ApiError> {
    super::decode::decode_optional(body)
}

/// `STREAM.NAMES`/`LIST` options: offset and subject filter.
pub fn names_opts(body: &[u8]) -> Result<(usize, String), ApiError> {
    let r: super::requests::NamesRequest = if body.iter().all(u8::is_ascii_whitespace) {
        Default::default()
    } else {
        super::decode::decode_as(body, &super::requests::STREAM_NAMES_REQUEST)?
    };
    Ok((usize::try_from(r.offset.max(0)).unwrap_or(0), r.subject))
}

/// `STREAM.PURGE` options.
pub type PurgeOpts = super::requests::PurgeRequest;

pub fn purge_opts(body: &[u8]) -> Result<PurgeOpts, ApiError> {
    let p: PurgeOpts = super::decode::decode_optional(body)?;
    if p.seq > 0 && p.keep > 0 {
        return Err(e::JS_BAD_REQUEST_ERR.err());
    }
    Ok(p)
}

/// `STREAM.MSG.GET` query.
pub type MsgGet = super::requests::MsgGetRequest;

pub fn msg_get_opts(body: &[u8]) -> Result<MsgGet, ApiError> {
    let q: MsgGet = super::decode::decode_optional(body)?;
    let set = usize::from(q.seq > 0 && q.next_by_subj.is_empty()) + usize::from(!q.last_by_subj.is_empty());
    if set > 1 || (!q.last_by_subj.is_empty() && !q.next_by_subj.is_empty()) {
        return Err(e::JS_BAD_REQUEST_ERR.err());
    }
    if q.seq == 0 && q.last_by_subj.is_empty() && q.next_by_subj.is_empty() && q.start_time.is_none() {
        return Err(e::JS_BAD_REQUEST_ERR.err());
    }
    Ok(q)
}

/// Load what a `STREAM.MSG.GET` asks for.
pub fn load_for_get(store: &mut dyn Store, q: &MsgGet) -> Result<StoredMsg, ApiError> {
    if let Some(t) = q.start_time.filter(|_| q.seq == 0 && q.last_by_subj.is_empty()) {
        let seq = store.seq_from_time(t.nanos());
        let filter = if q.next_by_subj.is_empty() {
            Filter::all()
        } else {
            Filter::new(&q.next_by_subj)
        };
        return store
            .load_next_msg(&filter, seq)
            .map_err(|_| e::JS_NO_MESSAGE_FOUND_ERR.err());
    }
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
pub type MsgDelete = super::requests::MsgDeleteRequest;

pub fn msg_delete_opts(body: &[u8]) -> Result<MsgDelete, ApiError> {
    if body.is_empty() {
        return Err(e::JS_BAD_REQUEST_ERR.err());
    }
    super::decode::decode(body)
}
