//! JetStream's advisories in the owning account (`$JS.EVENT.ADVISORY.>`): stream and
//! consumer actions and the API audit. Each is built only when someone listens.

use super::api::GoTime;
use super::JetStream;
use crate::core::accounts::AccountId;
use crate::core::shard::ShardCore;
use serde_json::{json, Map, Value};
use std::time::Instant;

fn typed(kind: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!(format!("io.nats.jetstream.advisory.v1.{kind}")));
    m.insert("id".into(), json!(crate::system::nuid::Nuid::new().next_id()));
    m.insert("timestamp".into(), json!(GoTime::now()));
    m
}

fn send(core: &mut ShardCore, acc: AccountId, subject: &str, body: Map<String, Value>, now: Instant) {
    let bytes = crate::proto::gojson::to_vec(&Value::Object(body));
    core.publish_jetstream(acc, subject.as_bytes(), b"", None, &bytes, now);
}

/// [`send`] as the server's own message (the reference sends the API audit and the queue
/// limit advisories from its system client: `MSG <subject> <sid>  <size>`).
fn send_system(core: &mut ShardCore, acc: AccountId, subject: &str, body: Map<String, Value>, now: Instant) {
    let bytes = crate::proto::gojson::to_vec(&Value::Object(body));
    core.publish_internal(acc, subject.as_bytes(), b"", None, &bytes, now);
}

/// The API audit advisory's subject.
pub const API_AUDIT: &str = "$JS.EVENT.ADVISORY.API";

/// `$JS.EVENT.ADVISORY.STREAM.CREATED|DELETED|UPDATED.<S>` (`action`: create, delete,
/// modify).
pub fn stream_action(core: &mut ShardCore, js: &JetStream, acc: AccountId, stream: &str, action: &str, now: Instant) {
    let what = match action {
        "create" => "CREATED",
        "delete" => "DELETED",
        _ => "UPDATED",
    };
    let subject = format!("$JS.EVENT.ADVISORY.STREAM.{what}.{stream}");
    if !core.has_interest(acc, subject.as_bytes()) {
        return;
    }
    let mut m = typed("stream_action");
    m.insert("stream".into(), json!(stream));
    m.insert("action".into(), json!(action));
    if !js.settings.domain.is_empty() {
        m.insert("domain".into(), json!(js.settings.domain));
    }
    send(core, acc, &subject, m, now);
}

/// `$JS.EVENT.ADVISORY.API`: one API call, its request and its response.
pub fn api_audit(
    core: &mut ShardCore,
    js: &JetStream,
    req: &super::service::Request,
    subject: &str,
    response: &[u8],
    now: Instant,
) {
    let acc = req.account;
    const SUBJECT: &str = API_AUDIT;
    if !core.has_interest(acc, SUBJECT.as_bytes()) {
        return;
    }
    let mut m = typed("api_audit");
    m.insert(
        "server".into(),
        json!(if js.server_name.is_empty() {
            &js.server_id
        } else {
            &js.server_name
        }),
    );
    let client = req
        .client
        .as_deref()
        .and_then(|c| serde_json::from_str::<Value>(c).ok())
        .unwrap_or_else(|| json!({ "acc": core.account_table().name(acc) }));
    m.insert("client".into(), client);
    m.insert("subject".into(), json!(subject));
    if !req.body.is_empty() {
        m.insert("request".into(), json!(String::from_utf8_lossy(&req.body)));
    }
    m.insert("response".into(), json!(String::from_utf8_lossy(response)));
    if !js.settings.domain.is_empty() {
        m.insert("domain".into(), json!(js.settings.domain));
    }
    send_system(core, acc, SUBJECT, m, now);
}

/// `$JS.EVENT.ADVISORY.API.LIMIT_REACHED` (in the system account `sys`): an API queue
/// reached its limit and `dropped` requests were discarded.
pub fn api_limit_reached(core: &mut ShardCore, js: &JetStream, sys: AccountId, dropped: i64, now: Instant) {
    const SUBJECT: &str = "$JS.EVENT.ADVISORY.API.LIMIT_REACHED";
    if !core.has_interest(sys, SUBJECT.as_bytes()) {
        return;
    }
    let mut m = typed("api_limit_reached");
    m.insert(
        "server".into(),
        json!(if js.server_name.is_empty() {
            &js.server_id
        } else {
            &js.server_name
        }),
    );
    if !js.settings.domain.is_empty() {
        m.insert("domain".into(), json!(js.settings.domain));
    }
    m.insert("dropped".into(), json!(dropped));
    send_system(core, sys, SUBJECT, m, now);
}

/// `$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.<S>`: an atomic batch was given up
/// (`reason`: `timeout`, `large`, `incomplete` or `unsupported`).
pub fn batch_abandoned(
    core: &mut ShardCore,
    js: &JetStream,
    acc: AccountId,
    stream: &str,
    batch: &str,
    reason: &str,
    now: Instant,
) {
    let subject = format!("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.{stream}");
    if !core.has_interest(acc, subject.as_bytes()) {
        return;
    }
    let mut m = typed("stream_batch_abandoned");
    m.insert("stream".into(), json!(stream));
    if !js.settings.domain.is_empty() {
        m.insert("domain".into(), json!(js.settings.domain));
    }
    m.insert("batch".into(), json!(batch));
    m.insert("reason".into(), json!(reason));
    send(core, acc, &subject, m, now);
}
