//! The `$JS.API.>` services: every account's API subscription on shard 0, request
//! dispatch by subject, and the answers (the JSON envelope with its `type`).
//!
//! - [`streams`]: `STREAM.*` (create, update, info, names, list, delete, purge, message
//!   get and delete) and `INFO`.
//! - `served`: whether a direct get or pull request is served by a stream's or consumer's
//!   own subscription (remembered per shard while the registry does not change).
//!
//! Stream-scoped requests run as jobs on the stream's shard ([`on_stream_shard`]), which
//! answers the requester itself.

pub mod account_purge;
pub mod consumers;
pub mod queue;
pub mod restore;
mod served;
pub mod snapshot;
pub mod streams;

use super::api::{errors_table, ApiError};
use super::shard::{with_js, ShardJs, StreamKey};
use super::JetStream;
use crate::core::accounts::AccountId;
use crate::core::post::Job;
use crate::core::shard::internal::{Handler, InternalMsg, Skip};
use crate::core::shard::ShardCore;
use served::{has_own_subscription, served_elsewhere, ServedMemo};
use std::sync::Arc;
use std::time::Instant;

/// The queue group of the API's subscriptions (one per shard).
const API_QUEUE: &str = "_sys_js_api";

/// Type prefix of every API response.
pub const TYPE_PREFIX: &str = "io.nats.jetstream.api.v1.";

/// One API request, owned (it may travel to another shard).
#[derive(Clone)]
pub struct Request {
    /// JetStream (its audit advisory goes with every response).
    pub js: Arc<JetStream>,
    /// The shard the request arrived on: it has the requester's interest in the reply
    /// subject (a stream's shard may not have heard of a brand-new inbox yet).
    pub origin: usize,
    pub account: AccountId,
    /// The subject after `$JS.API.` (domain prefix removed).
    pub api: String,
    pub reply: Vec<u8>,
    pub header: Option<Vec<u8>>,
    pub body: Vec<u8>,
    /// The requester's client info (JSON) for the API audit advisory, taken where the
    /// request arrived when anyone listens to the audit.
    pub client: Option<String>,
}

/// Serialize `fields` (a JSON object) after `"type":"io.nats.jetstream.api.v1.<suffix>"`.
pub fn envelope(suffix: &str, fields: serde_json::Value) -> Vec<u8> {
    let mut m = serde_json::Map::new();
    m.insert(
        "type".into(),
        serde_json::Value::String(format!("{TYPE_PREFIX}{suffix}")),
    );
    if let serde_json::Value::Object(o) = fields {
        for (k, v) in o {
            m.insert(k, v);
        }
    }
    crate::proto::gojson::to_vec(&serde_json::Value::Object(m))
}

/// An error response: `{"type":...,"error":{...}}` plus `extra` fields (paged responses
/// keep `total/offset/limit`).
pub fn error_envelope(suffix: &str, err: &super::api::ApiError, extra: serde_json::Value) -> Vec<u8> {
    let mut m = serde_json::Map::new();
    m.insert("error".into(), serde_json::to_value(err).unwrap_or_default());
    if let serde_json::Value::Object(o) = extra {
        for (k, v) in o {
            m.insert(k, v);
        }
    }
    envelope(suffix, serde_json::Value::Object(m))
}

/// Publish a successful response to the requester (and the API audit advisory, when anyone
/// listens), from the shard the request arrived on; counted in the account's and the
/// server's API statistics.
pub fn respond(core: &mut ShardCore, req: &Request, body: &[u8], now: Instant) {
    req.js.count_request(req.account, false);
    send(core, req, body, now);
}

/// [`respond`] with an error body (counted as an API error).
pub fn respond_error(core: &mut ShardCore, req: &Request, body: &[u8], now: Instant) {
    req.js.count_request(req.account, true);
    send(core, req, body, now);
}

/// Publish a response without counting it.
fn send(core: &mut ShardCore, req: &Request, body: &[u8], now: Instant) {
    if req.origin != core.index() && core.shards() > 1 {
        if let Some(post) = core.post().cloned() {
            let origin = req.origin;
            let req = req.clone();
            let body = body.to_vec();
            let job: Job = Box::new(move |core: &mut ShardCore, now: Instant| respond_here(core, &req, &body, now));
            // What this shard staged for the mesh (the interest of a stream just created)
            // goes first: the requester may publish as soon as it has the answer.
            core.flush_mesh(now);
            post.post(origin, job);
            return;
        }
    }
    respond_here(core, req, body, now);
}

fn respond_here(core: &mut ShardCore, req: &Request, body: &[u8], now: Instant) {
    if !req.reply.is_empty() {
        core.publish_jetstream(req.account, &req.reply, b"", None, body, now);
    }
    let subject = format!("$JS.API.{}", req.api);
    super::advisory::api_audit(core, &req.js, req, &subject, body, now);
}

/// Answer a request with an API error. Stream info and purge answers keep their extra
/// fields when they fail, as the reference's do.
pub fn fail(core: &mut ShardCore, req: &Request, suffix: &str, err: &ApiError, now: Instant) {
    let extra = match suffix {
        "stream_info_response" => serde_json::json!({"total": 0, "offset": 0, "limit": 0}),
        "stream_purge_response" => serde_json::json!({"purged": 0}),
        _ => serde_json::json!({}),
    };
    respond_error(core, req, &error_envelope(suffix, err, extra), now);
}

/// Run `f` on the shard of the stream `stream` (with its key), or answer "stream not
/// found" when the registry or that shard does not have it.
pub fn on_stream(
    core: &mut ShardCore,
    js: &Arc<JetStream>,
    req: Request,
    stream: &str,
    suffix: &'static str,
    f: impl FnOnce(&mut ShardJs, &mut ShardCore, &StreamKey, Request, Instant) + Send + 'static,
    now: Instant,
) {
    let shard = js.registry_to_read().get(req.account, stream).map(|e| e.shard);
    let Some(shard) = shard else {
        return fail(core, &req, suffix, &errors_table::JS_STREAM_NOT_FOUND_ERR.err(), now);
    };
    let key: StreamKey = (req.account, stream.to_string());
    on_stream_shard(
        core,
        shard,
        move |sjs: &mut ShardJs, core: &mut ShardCore, now: Instant| {
            if !sjs.streams.contains_key(&key) {
                return fail(core, &req, suffix, &errors_table::JS_STREAM_NOT_FOUND_ERR.err(), now);
            }
            f(sjs, core, &key, req, now)
        },
        now,
    );
}

/// Run `f` with JetStream's state on `shard` (posting a job there unless it is this one).
/// A posted request stays in its API queue until the job runs (see [`queue`]); a job
/// whose queue was dropped meanwhile does nothing.
pub fn on_stream_shard(
    core: &mut ShardCore,
    shard: usize,
    f: impl FnOnce(&mut ShardJs, &mut ShardCore, Instant) + Send + 'static,
    now: Instant,
) {
    if shard == core.index() || core.shards() <= 1 {
        // The state may be borrowed further up (a request handled while a timer or a job
        // of JetStream publishes): then it runs as a job of this shard, not never.
        let mut f = Some(f);
        let ran = with_js(core, |js, core| {
            if let Some(f) = f.take() {
                f(js, core, now);
            }
        })
        .is_some();
        if let (false, Some(f), Some(post)) = (ran, f, core.post().cloned()) {
            let job: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
                with_js(core, |js, core| f(js, core, now));
            });
            post.post(core.index(), job);
        }
        return;
    }
    let Some(post) = core.post().cloned() else { return };
    let held = queue::take_current();
    let job: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
        if held.as_ref().is_none_or(|(js, t)| js.queues.start(*t)) {
            with_js(core, |js, core| f(js, core, now));
        }
    });
    post.post(shard, job);
}

/// An API queue reached its limit and `dropped` requests were discarded: the warning and
/// `$JS.EVENT.ADVISORY.API.LIMIT_REACHED` in the system account.
fn limit_reached(core: &mut ShardCore, js: &JetStream, kind: queue::QueueKind, dropped: i64, now: Instant) {
    tracing::warn!("{} limit reached, dropping {dropped} requests", kind.name());
    let Some(sys) = core.account_table().system() else {
        return;
    };
    super::advisory::api_limit_reached(core, js, sys, dropped, now);
}

/// Before the shards close their clients: every shard tells the pull requests waiting on
/// its consumers that the server shuts down, then every shard applies what the others sent
/// it (the requesters may be anywhere), so the statuses leave before the connections close.
pub fn shutdown(post: &dyn crate::core::post::Post) {
    crate::system::on_every_shard(post, |core: &mut ShardCore, now: Instant| {
        with_js(core, |sjs, core| sjs.shutdown_consumers(core, now));
        core.flush_mesh(now);
    });
    crate::system::on_every_shard(post, |core: &mut ShardCore, now: Instant| {
        core.poll_mesh(now);
    });
}

/// Subscribe `$JS.API.>` in every account of the table on this shard (shard 0) not in
/// `seen` yet (accounts appear later with reloads and resolvers).
pub fn subscribe_accounts(
    core: &mut ShardCore,
    js: &Arc<JetStream>,
    seen: &mut std::collections::HashSet<AccountId>,
    now: Instant,
) {
    let sys = core.account_table().system();
    let accounts: Vec<(AccountId, String)> = core.account_table().iter().map(|a| (a.id, a.name.clone())).collect();
    for (acc, name) in accounts {
        if !seen.insert(acc) {
            continue;
        }
        if Some(acc) == sys {
            account_purge::subscribe(core, js, acc, now);
            continue;
        }
        let mut subjects = vec!["$JS.API.>".to_string()];
        if !js.settings.domain.is_empty() {
            subjects.push(format!("$JS.{}.API.>", js.settings.domain));
        }
        for subject in subjects {
            let js_api = js.clone();
            let name = name.clone();
            let h: Handler = Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
                let m = m.take();
                // Asked per request: a JWT update can turn JetStream on or off.
                let enabled = js_api.enabled_for(&name, false);
                dispatch(core, &js_api, enabled, m, now);
            });
            // One member per shard in a queue group: each request is handled once, on the
            // shard that learns of a new account first (operator mode installs accounts
            // where their first client connects).
            if let Some(id) = core.subscribe_internal(acc, &subject, Some(API_QUEUE), false, h, now) {
                // Direct gets and pull requests that a stream or consumer serves are theirs:
                // not copied for the API's handler, which would drop them (see `dispatch`).
                let js = js.clone();
                let memo = ServedMemo::default();
                let skip: Skip = Box::new(move |acc: AccountId, subject: &[u8]| {
                    let Ok(subject) = std::str::from_utf8(subject) else {
                        return false;
                    };
                    let Some(api) = api_part(subject, &js.settings.domain) else {
                        return false;
                    };
                    if !has_own_subscription(api) {
                        return false;
                    }
                    // Never waits: routing may run under the registry's lock (then the
                    // handler decides, as without this test).
                    memo.served(&js, acc, api).unwrap_or(false)
                });
                core.skip_internal(id, skip);
            }
        }
    }
}

/// The part of `subject` after `$JS.API.` or `$JS.<domain>.API.`.
fn api_part<'a>(subject: &'a str, domain: &str) -> Option<&'a str> {
    if let Some(rest) = subject.strip_prefix("$JS.API.") {
        return Some(rest);
    }
    if domain.is_empty() {
        return None;
    }
    subject
        .strip_prefix("$JS.")?
        .strip_prefix(domain)?
        .strip_prefix(".API.")
}

fn dispatch(core: &mut ShardCore, js: &Arc<JetStream>, enabled: bool, m: InternalMsg, now: Instant) {
    let Ok(subject) = std::str::from_utf8(&m.subject) else {
        return;
    };
    let Some(api) = api_part(subject, &js.settings.domain) else {
        return;
    };
    // Served by the streams' and consumers' own subscriptions; where there is none, the
    // requester gets what no subscriber means (the API's own subscription does not count).
    if has_own_subscription(api) {
        // A requester on another shard is assumed to want it (clients that use JetStream
        // ask for no-responders statuses).
        let wants = m.sender.and_then(|k| core.wants_no_responders(k)).unwrap_or(true);
        if wants && !m.reply.is_empty() && enabled && !served_elsewhere(js, m.account, api) {
            let hdr = format!("NATS/1.0 503\r\nNats-Subject: {subject}\r\n\r\n");
            core.publish_jetstream(m.account, &m.reply, b"", Some(hdr.as_bytes()), b"", now);
        }
        return;
    }
    // Snapshots and restores name their client in their advisories.
    let advised = api.starts_with("STREAM.SNAPSHOT.") || api.starts_with("STREAM.RESTORE.");
    let client = if advised || core.has_interest(m.account, super::advisory::API_AUDIT.as_bytes()) {
        m.sender.and_then(|k| core.client_info(k, true)).map(|ci| ci.to_json())
    } else {
        None
    };
    let req = Request {
        js: js.clone(),
        origin: core.index(),
        account: m.account,
        api: api.to_string(),
        reply: m.reply,
        header: m.header,
        body: m.payload,
        client,
    };
    if !enabled {
        let suffix = streams::type_suffix(api);
        let Some(suffix) = suffix else { return };
        // Not counted: the account has no JetStream API statistics to count in.
        let body = error_envelope(
            suffix,
            &super::api::errors_table::JS_NOT_ENABLED_FOR_ACCOUNT_ERR.err(),
            serde_json::json!({}),
        );
        send(core, &req, &body, now);
        return;
    }
    if req.reply.is_empty() {
        return;
    }
    if let Some(level) = req
        .header
        .as_deref()
        .and_then(|h| crate::proto::headers::get(h, "Nats-Required-Api-Level"))
    {
        let too_new = std::str::from_utf8(level)
            .ok()
            .and_then(|v| v.trim().parse::<u32>().ok())
            .is_none_or(|v| v > super::api::consumer_check::API_LEVEL);
        if too_new {
            if let Some(suffix) = streams::type_suffix(api) {
                let err = super::api::errors_table::JS_REQUIRED_API_LEVEL_ERR.err();
                respond_error(core, &req, &error_envelope(suffix, &err, serde_json::json!({})), now);
            }
            return;
        }
    }
    let kind = queue::QueueKind::of(&req.api);
    let limit = match kind {
        queue::QueueKind::Requests => js.settings.request_queue_limit,
        queue::QueueKind::Info => js.settings.info_queue_limit,
    };
    match js.queues.admit(kind, limit) {
        Err(dropped) => limit_reached(core, js, kind, dropped, now),
        Ok(ticket) => {
            // Handled here, unless a job posted to the stream's shard takes the ticket.
            queue::set_current(js.clone(), ticket);
            streams::handle(core, js, req, now);
            if let Some((js, t)) = queue::take_current() {
                js.queues.start(t);
            }
        }
    }
}

/// Install JetStream on every shard (its extension) and the API services on shard 0,
/// then recover the streams found on disk. Waits until every shard has it.
pub fn install(post: Arc<dyn crate::core::post::Post>, js: Arc<JetStream>) {
    let n = post.shards();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    for shard in 0..n {
        let js = js.clone();
        let tx = tx.clone();
        let job: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
            core.set_ext(Some(Box::new(ShardJs::new(js.clone()))));
            with_js(core, |sjs, core| sjs.watch_accounts(core, now));
            let _ = tx.send(());
        });
        post.post(shard, job);
    }
    drop(tx);
    for _ in 0..n {
        if rx.recv_timeout(std::time::Duration::from_secs(10)).is_err() {
            tracing::warn!("JetStream not installed on every shard");
            return;
        }
    }
    streams::recover_all(post.as_ref(), &js);
}
