//! Creating the consumer of a mirror or source on its origin, through the JetStream API
//! as the reference does (so imports and domains route it): an ephemeral, direct push
//! consumer, `ack_policy: none`, `max_deliver: 1`, flow control, 1 s idle heartbeats,
//! 10 s inactive threshold, delivering to a fresh `$JS.M.<rand>` (mirror) or
//! `$JS.S.<rand>` (source) subject, or under `external.deliver` when set.
//!
//! The reference names the consumer `JS_MIRROR_<hash>`/`JS_SRC_<hash>` and marks it
//! `sourcing` so that the origin replaces it in place; rnats's consumers do not have that
//! replace-in-place behaviour, so the name takes a random suffix (what the reference does
//! with an origin that does not know `sourcing`) and the previous consumer is deleted.
//!
//! The deliver subject is subscribed before the request goes out: the origin may start
//! delivering (on its own shard) before its answer reaches this shard.

use super::{inbound, schedule_retry, Link, LinkId, CREATE_WAIT, HEALTH_CHECK, HEALTH_HB, RETRY_THRESHOLD};
use crate::core::accounts::AccountId;
use crate::core::shard::internal::{Handler, InternalMsg, ReplyHandler};
use crate::core::shard::ShardCore;
use crate::jetstream::api::config::StreamConfig;
use crate::jetstream::api::{ApiError, GoTime};
use crate::jetstream::shard::{wall_ns, with_js, ShardJs, StreamKey};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The ack wait of sourcing consumers (unused with `ack_policy: none`, but sent).
const ACK_WAIT_NS: i64 = 22 * 3600 * 1_000_000_000;

/// `$JS.API` replaced by the external API prefix, `..` collapsed.
fn api_subject(subject: &str, api_prefix: Option<&str>) -> String {
    match api_prefix {
        Some(p) => subject.replacen("$JS.API", p, 1).replace("..", "."),
        None => subject.to_string(),
    }
}

/// The deliver subject of a new consumer of this link.
fn deliver_subject(l: &Link, mirror: bool) -> String {
    let kind = if mirror { "M" } else { "S" };
    let rand = crate::jetstream::api::consumer_check::ephemeral_name();
    match l.cfg.external.as_ref().filter(|e| !e.deliver.is_empty()) {
        Some(e) => format!("{}.{kind}.{rand}", e.deliver).replace("..", "."),
        None => format!("$JS.{kind}.{rand}"),
    }
}

/// The stable part of the consumer name (`getHash("<stream> <account>[ <domain>]")`),
/// and for a stream sourcing the same origin more than once, its index name too.
fn consumer_hash(cfg: &StreamConfig, account: &str, domain: &str, l: &Link, mirror: bool) -> String {
    let mut id = format!("{} {account}", cfg.name);
    if !domain.is_empty() {
        id = format!("{id} {domain}");
    }
    if !mirror && cfg.sources.iter().filter(|s| s.name == l.cfg.name).count() > 1 {
        id = format!("{id} {}", l.iname);
    }
    crate::system::server_reqs::server_hash(&id)
}

/// The consumer create request of a link and the subject to send it on.
fn create_request(
    cfg: &StreamConfig,
    st_state: &storage::StreamState,
    account: &str,
    domain: &str,
    l: &Link,
    mirror: bool,
    deliver: &str,
) -> (String, Vec<u8>) {
    let prefix = if mirror { "JS_MIRROR" } else { "JS_SRC" };
    let name = format!(
        "{prefix}_{}_{}",
        consumer_hash(cfg, account, domain, l, mirror),
        crate::jetstream::api::consumer_check::ephemeral_name()
    );
    let meta_key = if mirror { "_nats.mirror" } else { "_nats.src" };
    let mut metadata = serde_json::Map::new();
    metadata.insert(format!("{meta_key}.stream"), json!(cfg.name));
    metadata.insert(format!("{meta_key}.acc"), json!(account));
    if !domain.is_empty() {
        metadata.insert(format!("{meta_key}.domain"), json!(domain));
    }
    let mut c = serde_json::Map::new();
    c.insert("name".into(), json!(name));
    c.insert("deliver_subject".into(), json!(deliver));
    let (policy, start_seq, start_time) = start_position(st_state, l, mirror);
    c.insert("deliver_policy".into(), json!(policy));
    if start_seq > 0 {
        c.insert("opt_start_seq".into(), json!(start_seq));
    }
    if let Some(t) = start_time {
        c.insert("opt_start_time".into(), json!(t));
    }
    c.insert("ack_policy".into(), json!("none"));
    c.insert("ack_wait".into(), json!(ACK_WAIT_NS));
    c.insert("max_deliver".into(), json!(1));
    let filters: Vec<String> = if !l.cfg.filter_subject.is_empty() {
        vec![l.cfg.filter_subject.clone()]
    } else {
        l.cfg.subject_transforms.iter().map(|t| t.src.clone()).collect()
    };
    let mut subject = format!("$JS.API.CONSUMER.CREATE.{}", l.cfg.name);
    match filters.as_slice() {
        [] => {}
        [one] => {
            c.insert("filter_subject".into(), json!(one));
            subject = format!("$JS.API.CONSUMER.CREATE.{}.{name}.{one}", l.cfg.name);
        }
        many => {
            c.insert("filter_subjects".into(), json!(many));
        }
    }
    c.insert("replay_policy".into(), json!("instant"));
    c.insert("idle_heartbeat".into(), json!(HEALTH_HB.as_nanos() as i64));
    c.insert("flow_control".into(), json!(true));
    c.insert("direct".into(), json!(true));
    c.insert("inactive_threshold".into(), json!(HEALTH_CHECK.as_nanos() as i64));
    c.insert("metadata".into(), Value::Object(metadata));
    let body = json!({ "stream_name": l.cfg.name, "config": Value::Object(c) });
    let api = l
        .cfg
        .external
        .as_ref()
        .map(|e| e.api.as_str())
        .filter(|a| !a.is_empty());
    (api_subject(&subject, api), crate::proto::gojson::to_vec(&body))
}

/// Where the new consumer starts: (deliver policy, opt_start_seq, opt_start_time).
fn start_position(state: &storage::StreamState, l: &Link, mirror: bool) -> (&'static str, u64, Option<GoTime>) {
    if mirror {
        if state.last_seq == 0 {
            if l.cfg.opt_start_seq > 0 {
                return ("by_start_sequence", l.cfg.opt_start_seq, None);
            }
            if let Some(t) = l.cfg.opt_start_time {
                return ("by_start_time", 0, Some(t));
            }
            return ("all", 0, None);
        }
        return ("by_start_sequence", state.last_seq + 1, None);
    }
    let seq = l.start_seq;
    if seq > 1 {
        return ("by_start_sequence", seq, None);
    }
    if l.cfg.opt_start_seq > 0 {
        return ("by_start_sequence", l.cfg.opt_start_seq, None);
    }
    let last = (state.last_ts > 0).then_some(GoTime(state.last_ts));
    if let Some(t) = l.cfg.opt_start_time {
        let from = match last {
            Some(lt) if t.0 < lt.0 => lt,
            _ => t,
        };
        return ("by_start_time", 0, Some(from));
    }
    if state.first_seq > 1 {
        if let Some(lt) = last {
            return ("by_start_time", 0, Some(lt));
        }
    }
    ("all", 0, None)
}

/// A scheduled setup of a link is due: send its consumer create (or wait more).
pub fn run(sjs: &mut ShardJs, core: &mut ShardCore, key: &StreamKey, id: &LinkId, now: Instant) {
    let domain = sjs.js.settings.domain.clone();
    let account = core.account_table().name(key.0).to_string();
    let Some(st) = sjs.streams.get_mut(key) else { return };
    let state = st.store.fast_state();
    let cfg = st.cfg.clone();
    let acc = st.account;
    let Some(l) = st.sourcing.as_mut().and_then(|sc| sc.link_mut(id)) else {
        return;
    };
    l.retry_at = None;
    if l.pending.is_some() {
        return;
    }
    if l.lreq
        .is_some_and(|t| now.saturating_duration_since(t) < RETRY_THRESHOLD)
    {
        schedule_retry(l, now);
        return;
    }
    let mirror = *id == LinkId::Mirror;
    if mirror {
        l.sseq = state.last_seq;
        l.start_seq = l.sseq + 1;
    }
    super::cancel(core, l);
    let durable = l.cfg.consumer.clone();
    // The link's earlier consumers go (they would expire after their inactive
    // threshold anyway).
    if durable.is_none() {
        for old in std::mem::take(&mut l.created) {
            delete_consumer(core, acc, l, &old, now);
        }
    }
    l.lreq = Some(now);
    l.attempt += 1;
    let attempt = l.attempt;
    let (deliver, subject, body) = match &durable {
        // A consumer of the origin's own (2.14 durable sourcing): reset it, take its
        // deliver subject.
        Some(dc) => {
            l.cname = dc.name.clone();
            let api = l
                .cfg
                .external
                .as_ref()
                .map(|e| e.api.as_str())
                .filter(|a| !a.is_empty());
            let subject = api_subject(&format!("$JS.API.CONSUMER.RESET.{}.{}", l.cfg.name, dc.name), api);
            (dc.deliver_subject.clone(), subject, Vec::new())
        }
        None => {
            let deliver = deliver_subject(l, mirror);
            let (subject, body) = create_request(&cfg, &state, &account, &domain, l, mirror, &deliver);
            (deliver, subject, body)
        }
    };
    l.dseq = 0;
    l.err = None;
    l.pending = Some(attempt);
    l.deliver = deliver.clone();
    l.inbox = super::Inbox::default();
    let inbox = l.inbox.clone();
    let posted = Arc::new(AtomicBool::new(false));
    let k = key.clone();
    let lid = id.clone();
    let h: Handler = Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
        let m = m.take();
        inbox.lock().unwrap_or_else(|p| p.into_inner()).push_back(m);
        drain_or_defer(core, &k, &lid, attempt, &posted, false, now);
    });
    l.sub = core.subscribe_internal(acc, &deliver, None, false, h, now);
    let k = key.clone();
    let lid = id.clone();
    super::later(core, move |core: &mut ShardCore, now: Instant| {
        send_create(core, acc, subject, body, k, lid, attempt, mirror, now);
    });
}

/// Handle the deliveries waiting in a link's inbox, or (the stream's state is borrowed
/// further up) once as a job of this shard.
fn drain_or_defer(
    core: &mut ShardCore,
    key: &StreamKey,
    id: &LinkId,
    attempt: u64,
    posted: &Arc<AtomicBool>,
    from_job: bool,
    now: Instant,
) {
    match with_js(core, |sjs, core| inbound::drain(sjs, core, key, id, attempt, now)) {
        Some(out) => {
            for (to, hdr) in out {
                core.publish_jetstream(key.0, &to, b"", hdr.as_deref(), b"", now);
            }
        }
        None if !from_job && !posted.swap(true, Ordering::AcqRel) => {
            let (k, lid, posted) = (key.clone(), id.clone(), posted.clone());
            super::later(core, move |core: &mut ShardCore, now: Instant| {
                posted.store(false, Ordering::Release);
                drain_or_defer(core, &k, &lid, attempt, &posted, true, now);
            });
        }
        None => {}
    }
}

/// Send the consumer create of a link (a job of the stream's shard).
#[allow(clippy::too_many_arguments)]
fn send_create(
    core: &mut ShardCore,
    acc: AccountId,
    subject: String,
    body: Vec<u8>,
    key: StreamKey,
    id: LinkId,
    attempt: u64,
    mirror: bool,
    now: Instant,
) {
    let (k, lid) = (key.clone(), id.clone());
    let on_reply: ReplyHandler = Box::new(move |core: &mut ShardCore, m: Option<InternalMsg>, now: Instant| {
        if with_js(core, |sjs, core| {
            on_created(sjs, core, &k, &lid, attempt, m.clone(), now)
        })
        .is_none()
        {
            super::later(core, move |core: &mut ShardCore, now: Instant| {
                with_js(core, |sjs, core| on_created(sjs, core, &k, &lid, attempt, m, now));
            });
        }
    });
    if core.request_internal(acc, subject.as_bytes(), None, &body, CREATE_WAIT, on_reply, now) {
        return;
    }
    // Nobody serves that API (yet): try again after the threshold.
    with_js(core, |sjs, core| {
        let Some(l) = sjs
            .streams
            .get_mut(&key)
            .and_then(|s| s.sourcing.as_mut())
            .and_then(|sc| sc.link_mut(&id))
        else {
            return;
        };
        if l.pending != Some(attempt) {
            return;
        }
        // As the reference's wait for an answer that never comes: no error shown.
        super::cancel(core, l);
        let _ = mirror;
        schedule_retry(l, now);
        super::reschedule(sjs, now);
    });
}

/// The answer to a consumer create (or `None`: it timed out or nobody serves the API).
fn on_created(
    sjs: &mut ShardJs,
    core: &mut ShardCore,
    key: &StreamKey,
    id: &LinkId,
    attempt: u64,
    m: Option<InternalMsg>,
    now: Instant,
) {
    let name = key.1.clone();
    let Some(st) = sjs.streams.get_mut(key) else { return };
    let mirror = *id == LinkId::Mirror;
    let Some(l) = st.sourcing.as_mut().and_then(|sc| sc.link_mut(id)) else {
        return;
    };
    if l.pending != Some(attempt) {
        return;
    }
    l.pending = None;
    let resp: Option<Value> = m.and_then(|m| serde_json::from_slice(&m.payload).ok());
    let failure = match &resp {
        None => Some(None),
        Some(v) => v
            .get("error")
            .map(|e| serde_json::from_value::<ApiError>(e.clone()).ok()),
    };
    if let Some(err) = failure {
        if let Some(e) = &err {
            tracing::warn!(
                "JetStream error response for stream {name} create {} consumer {}: {}",
                if mirror { "mirror" } else { "source" },
                l.cfg.name,
                e.description
            );
        }
        l.err = err;
        l.fails = l.fails.saturating_add(1);
        super::cancel(core, l);
        l.start_seq = if mirror { l.sseq + 1 } else { l.start_seq };
        schedule_retry(l, now);
        super::reschedule(sjs, now);
        return;
    }
    let resp = resp.unwrap_or_default();
    let ack_policy = resp.pointer("/config/ack_policy").and_then(Value::as_str);
    if l.cfg.consumer.is_some() && ack_policy != Some("flow_control") {
        l.err = Some(if mirror {
            crate::jetstream::api::errors_table::JS_MIRROR_CONSUMER_REQUIRES_ACK_FC_ERR.err()
        } else {
            crate::jetstream::api::errors_table::JS_SOURCE_CONSUMER_REQUIRES_ACK_FC_ERR.err()
        });
        l.fails = l.fails.saturating_add(1);
        super::cancel(core, l);
        schedule_retry(l, now);
        super::reschedule(sjs, now);
        return;
    }
    let cname = resp.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let delivered = resp
        .pointer("/delivered/stream_seq")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    l.fails = 0;
    l.err = None;
    if !cname.is_empty() {
        if l.cfg.consumer.is_none() {
            l.created.retain(|c| c != &cname);
            l.created.push(cname.clone());
        }
        l.cname = cname;
    }
    if l.last == 0 || l.dseq == 0 {
        l.last = wall_ns();
    }
    l.check_at = Some(now + HEALTH_CHECK);
    if l.dseq == 0 {
        if mirror {
            let state = st.store.fast_state();
            if state.last_seq < delivered {
                if state.msgs == 0 {
                    let _ = st.store.compact(delivered + 1);
                } else {
                    let _ = st.store.skip_msgs(state.last_seq + 1, delivered - state.last_seq);
                }
                st.dirty = true;
            }
            if let Some(l) = st.sourcing.as_mut().and_then(|sc| sc.link_mut(id)) {
                l.sseq = delivered.max(state.last_seq);
            }
        } else if l.sseq < delivered {
            l.sseq = delivered;
        }
    }
    super::reschedule(sjs, now);
}

/// Ask the origin to delete one consumer of this link (best effort, no answer awaited).
pub fn delete_consumer(core: &mut ShardCore, acc: AccountId, l: &Link, cname: &str, _now: Instant) {
    let subject = format!("$JS.API.CONSUMER.DELETE.{}.{cname}", l.cfg.name);
    let api = l
        .cfg
        .external
        .as_ref()
        .map(|e| e.api.as_str())
        .filter(|a| !a.is_empty());
    let subject = api_subject(&subject, api);
    super::later(core, move |core: &mut ShardCore, now: Instant| {
        let on_reply: ReplyHandler = Box::new(|_: &mut ShardCore, _: Option<InternalMsg>, _: Instant| {});
        core.request_internal(
            acc,
            subject.as_bytes(),
            None,
            b"",
            std::time::Duration::from_secs(5),
            on_reply,
            now,
        );
    });
}

/// Delete the consumers made for a link that is going away.
pub fn delete_consumers(core: &mut ShardCore, acc: AccountId, l: &Link, now: Instant) {
    // A durable consumer given in the configuration is the origin's, not ours.
    if l.cfg.consumer.is_some() {
        return;
    }
    let mut names = l.created.clone();
    if !l.cname.is_empty() && !names.contains(&l.cname) {
        names.push(l.cname.clone());
    }
    for c in names {
        delete_consumer(core, acc, l, &c, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::api::config::{ExternalStream, StreamSource};

    fn link(src: StreamSource) -> Link {
        let iname = super::super::index_name(&src);
        Link::new(src, iname)
    }

    #[test]
    fn subjects_and_start() {
        let cfg = StreamConfig {
            name: "M".into(),
            ..Default::default()
        };
        let state = storage::StreamState::default();
        let l = link(StreamSource {
            name: "O".into(),
            filter_subject: "foo.*".into(),
            external: Some(ExternalStream {
                api: "$JS.hub.API".into(),
                deliver: String::new(),
            }),
            ..Default::default()
        });
        let (subject, body) = create_request(&cfg, &state, "A", "", &l, true, "$JS.M.x");
        assert!(
            subject.starts_with("$JS.hub.API.CONSUMER.CREATE.O.JS_MIRROR_"),
            "{subject}"
        );
        assert!(subject.ends_with(".foo.*"), "{subject}");
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["stream_name"], "O");
        assert_eq!(v["config"]["deliver_policy"], "all");
        assert_eq!(v["config"]["deliver_subject"], "$JS.M.x");
        assert_eq!(v["config"]["filter_subject"], "foo.*");
        assert_eq!(v["config"]["flow_control"], true);
        assert_eq!(v["config"]["direct"], true);
        assert_eq!(v["config"]["ack_policy"], "none");
        assert_eq!(v["config"]["metadata"]["_nats.mirror.acc"], "A");

        let state = storage::StreamState {
            last_seq: 9,
            msgs: 9,
            first_seq: 1,
            ..Default::default()
        };
        assert_eq!(start_position(&state, &l, true), ("by_start_sequence", 10, None));
        let mut l = link(StreamSource {
            name: "O".into(),
            opt_start_seq: 5,
            ..Default::default()
        });
        l.start_seq = 1;
        assert_eq!(start_position(&state, &l, false), ("by_start_sequence", 5, None));
        l.start_seq = 42;
        assert_eq!(start_position(&state, &l, false), ("by_start_sequence", 42, None));
        // Several transforms: filter_subjects on the plain create subject.
        let l = link(StreamSource {
            name: "O".into(),
            subject_transforms: vec![
                crate::jetstream::api::config::SubjectTransform {
                    src: "a.>".into(),
                    dest: "x.>".into(),
                },
                crate::jetstream::api::config::SubjectTransform {
                    src: "b.>".into(),
                    dest: "y.>".into(),
                },
            ],
            ..Default::default()
        });
        let (subject, body) = create_request(&cfg, &state, "A", "hub", &l, false, "$JS.S.x");
        assert_eq!(subject, "$JS.API.CONSUMER.CREATE.O");
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["config"]["filter_subjects"], serde_json::json!(["a.>", "b.>"]));
        assert_eq!(v["config"]["metadata"]["_nats.src.domain"], "hub");
        assert!(v["config"]["name"].as_str().unwrap().starts_with("JS_SRC_"));
    }

    #[test]
    fn deliver_prefixes() {
        let l = link(StreamSource {
            name: "O".into(),
            external: Some(ExternalStream {
                api: "RI.JS.API".into(),
                deliver: "RI.DELIVER.SYNC.SOURCES".into(),
            }),
            ..Default::default()
        });
        assert!(deliver_subject(&l, false).starts_with("RI.DELIVER.SYNC.SOURCES.S."));
        let l = link(StreamSource::default());
        assert!(deliver_subject(&l, true).starts_with("$JS.M."));
    }

    #[test]
    fn backoff() {
        assert_eq!(super::super::retry_backoff(0), std::time::Duration::ZERO);
        assert_eq!(super::super::retry_backoff(1), std::time::Duration::from_secs(10));
        assert_eq!(super::super::retry_backoff(50), std::time::Duration::from_secs(120));
    }
}
