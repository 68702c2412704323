//! The consumer APIs (`$JS.API.CONSUMER.*`): create (every subject form), info, names,
//! list, delete, pause, unpin, reset. Each runs on the stream's shard.

use super::{envelope, fail, on_stream, respond, Request};
use crate::core::shard::ShardCore;
use crate::jetstream::api::config::ConsumerConfig;
use crate::jetstream::api::consumer_check::{self as cc, ConsumerCtx, CreateSubject};
use crate::jetstream::api::consumer_info::{
    ConsumerAction, ConsumerInfo, ConsumerPauseRequest, ConsumerResetRequest, ConsumerUnpinRequest,
    CreateConsumerRequest, PriorityGroupState, SequenceInfo,
};
use crate::jetstream::api::errors_table as e;
use crate::jetstream::api::GoTime;
use crate::jetstream::consumer::Consumer;
use crate::jetstream::consumers::{with_consumer, Env};
use crate::jetstream::shard::StreamKey;
use crate::jetstream::JetStream;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

const NAMES_LIMIT: usize = 1024;
const LIST_LIMIT: usize = 256;
/// The reference's default `inactive_threshold` of ephemeral consumers (5 s).
const EPHEMERAL_INACTIVE_THRESHOLD: i64 = 5_000_000_000;

/// Dispatch one consumer request.
pub fn handle(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, now: Instant) {
    let Some(suffix) = super::streams::type_suffix(&req.api) else {
        return;
    };
    let api = req.api.clone();
    let t: Vec<&str> = api.split('.').collect();
    match t.as_slice() {
        ["CONSUMER", "CREATE", ..] | ["CONSUMER", "DURABLE", "CREATE", _, _] => create(core, js, req, now),
        ["CONSUMER", "INFO", s, c] => info(core, js, req, s, c, now),
        ["CONSUMER", "NAMES", s] => names(core, js, req, s, false, now),
        ["CONSUMER", "LIST", s] => names(core, js, req, s, true, now),
        ["CONSUMER", "DELETE", s, c] => delete(core, js, req, s, c, now),
        ["CONSUMER", "PAUSE", s, c] => pause(core, js, req, s, c, now),
        ["CONSUMER", "UNPIN", s, c] => unpin(core, js, req, s, c, now),
        ["CONSUMER", "RESET", s, c] => reset(core, js, req, s, c, now),
        ["CONSUMER", "LEADER", "STEPDOWN", _, _] => fail(core, &req, suffix, &e::JS_CLUSTER_REQUIRED_ERR.err(), now),
        _ => fail(core, &req, suffix, &e::JS_BAD_REQUEST_ERR.err(), now),
    }
}

/// A consumer's info.
pub fn consumer_info(_js: &JetStream, stream: &str, c: &mut Consumer, env: &mut Env<'_>) -> ConsumerInfo {
    let s = c.stats(env);
    let seq = |x: crate::jetstream::consumer::SequenceInfo| SequenceInfo {
        consumer_seq: x.consumer_seq,
        stream_seq: x.stream_seq,
        last_active: x.last_active,
    };
    ConsumerInfo {
        stream_name: stream.to_string(),
        name: c.name().to_string(),
        created: c.created(),
        config: Some(cc::with_dynamic_metadata(c.config())),
        delivered: seq(s.delivered),
        ack_floor: seq(s.ack_floor),
        num_ack_pending: s.num_ack_pending as i64,
        num_redelivered: s.num_redelivered as i64,
        num_waiting: s.num_waiting as i64,
        num_pending: s.num_pending,
        cluster: None,
        push_bound: s.push_bound,
        paused: s.paused,
        pause_remaining: s.pause_remaining,
        ts: GoTime::now(),
        priority_groups: s
            .priority_groups
            .into_iter()
            .map(|g| PriorityGroupState {
                group: g.group,
                pinned_client_id: g.pinned_client_id,
                pinned_ts: g.pinned_ts.unwrap_or(GoTime::ZERO),
            })
            .collect(),
    }
}

fn info_value(info: &ConsumerInfo) -> Value {
    serde_json::to_value(info).unwrap_or_default()
}

fn create(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, now: Instant) {
    let suffix = "consumer_create_response";
    let full = format!("$JS.API.{}", req.api);
    let Some(subject) = cc::parse_create_subject(&full) else {
        return fail(core, &req, suffix, &e::JS_BAD_REQUEST_ERR.err(), now);
    };
    if req.body.is_empty() {
        return fail(core, &req, suffix, &e::JS_BAD_REQUEST_ERR.err(), now);
    }
    let mut creq = match CreateConsumerRequest::decode(&req.body) {
        Ok(r) => r,
        Err(err) => return fail(core, &req, suffix, &err, now),
    };
    let mut name = match cc::resolve_create(&subject, &mut creq) {
        Ok(n) => n,
        Err(err) => return fail(core, &req, suffix, &err, now),
    };
    let stream = match &subject {
        CreateSubject::Legacy { stream }
        | CreateSubject::Durable { stream, .. }
        | CreateSubject::Named { stream, .. } => stream.clone(),
    };
    let account_name = core.account_table().name(req.account).to_string();
    let limits = js.account_limits(&account_name);
    let js2 = js.clone();
    on_stream(
        core,
        js,
        req,
        &stream,
        suffix,
        move |sjs, core, key, req, now| {
            let Some(st) = sjs.streams.get(key) else { return };
            let scfg = st.cfg.clone();
            let mut cfg: ConsumerConfig = creq.config.clone();
            if name.is_empty() {
                name = if cfg.name.is_empty() {
                    cc::ephemeral_name()
                } else {
                    cfg.name.clone()
                };
            }
            if cfg.name.is_empty() {
                cfg.name = name.clone();
            }
            let ctx = ConsumerCtx {
                stream: &scfg,
                pedantic: creq.pedantic,
                account_max_ack_pending: limits.max_ack_pending,
                server_max_ack_pending: js2.settings.max_ack_pending,
                server_max_request_batch: js2.settings.max_request_batch,
            };
            cc::set_static_metadata(&mut cfg);
            if let Err(err) = cc::apply_defaults(&mut cfg, &ctx).and_then(|_| cc::check(&cfg, &ctx, false)) {
                return fail(core, &req, suffix, &err, now);
            }
            // Ephemerals go away after 5 s without interest unless told otherwise.
            if cfg.durable_name.is_empty() && cfg.inactive_threshold == 0 {
                cfg.inactive_threshold = EPHEMERAL_INACTIVE_THRESHOLD;
            }
            let existing = st.consumers.get(&name).map(|s| s.c.config().clone());
            if let Some(old) = existing {
                let mut cmp = cfg.clone();
                cc::copy_metadata(&mut cmp, &old);
                if cmp != old {
                    if creq.action == ConsumerAction::Create {
                        return fail(core, &req, suffix, &e::JS_CONSUMER_ALREADY_EXISTS.err(), now);
                    }
                    if let Err(err) = cc::check_update(&old, &cfg) {
                        return fail(core, &req, suffix, &err, now);
                    }
                    with_consumer(sjs, core, key, &name, now, |c, env| {
                        c.update_config(cfg.clone(), env, now)
                    });
                    if let Some(d) = sjs
                        .streams
                        .get(key)
                        .and_then(|s| s.consumers.get(&name))
                        .and_then(|s| s.dir.clone())
                    {
                        let created = sjs
                            .streams
                            .get(key)
                            .and_then(|s| s.consumers.get(&name))
                            .map(|s| s.c.created());
                        let _ = crate::jetstream::stream::persist::write_consumer_meta(
                            &d,
                            &name,
                            &cfg,
                            created.unwrap_or_else(GoTime::now),
                        );
                    }
                }
                sjs.touch();
                let info = with_consumer(sjs, core, key, &name, now, |c, env| consumer_info(&js2, &key.1, c, env));
                if let Some(info) = info {
                    respond(core, &req, &envelope(suffix, info_value(&info)), now);
                }
                return;
            }
            if creq.action == ConsumerAction::Update {
                return fail(core, &req, suffix, &e::JS_CONSUMER_DOES_NOT_EXIST.err(), now);
            }
            let others: Vec<(String, ConsumerConfig)> = st
                .consumers
                .iter()
                .map(|(n, s)| (n.clone(), s.c.config().clone()))
                .collect();
            if let Err(err) = cc::check_work_queue(&cfg, &name, &scfg, others.iter().map(|(n, c)| (n.as_str(), c))) {
                return fail(core, &req, suffix, &err, now);
            }
            // Direct (mirror and source) consumers do not count against the limit.
            let count = st.consumers.values().filter(|s| !s.c.config().direct).count() as i64;
            if !cfg.direct && scfg.max_consumers > 0 && count >= scfg.max_consumers {
                return fail(core, &req, suffix, &e::JS_MAXIMUM_CONSUMERS_LIMIT_ERR.err(), now);
            }
            if !cfg.direct && limits.max_consumers >= 0 {
                let total: usize = js2
                    .registry_to_read()
                    .streams(key.0)
                    .map(|(_, e)| e.consumers.len())
                    .sum();
                if total as i64 >= limits.max_consumers {
                    return fail(core, &req, suffix, &e::JS_MAXIMUM_CONSUMERS_LIMIT_ERR.err(), now);
                }
            }
            if let Err(err) = sjs.add_consumer(core, key.0, &key.1, &name, cfg, GoTime::now(), None, now) {
                return fail(core, &req, suffix, &err, now);
            }
            if let Some(en) = js2.registry().get_mut(key.0, &key.1) {
                en.consumers.insert(name.clone());
            }
            let info = with_consumer(sjs, core, key, &name, now, |c, env| consumer_info(&js2, &key.1, c, env));
            if let Some(info) = info {
                respond(core, &req, &envelope(suffix, info_value(&info)), now);
            }
            advisory(core, &js2, key, &name, "create", now);
        },
        now,
    );
}

/// `$JS.EVENT.ADVISORY.CONSUMER.CREATED|DELETED.<S>.<C>`.
fn advisory(core: &mut ShardCore, js: &JetStream, key: &StreamKey, name: &str, action: &str, now: Instant) {
    let what = if action == "delete" { "DELETED" } else { "CREATED" };
    let subject = format!("$JS.EVENT.ADVISORY.CONSUMER.{what}.{}.{name}", key.1);
    if !core.has_interest(key.0, subject.as_bytes()) {
        return;
    }
    let mut m = serde_json::Map::new();
    m.insert("type".into(), json!("io.nats.jetstream.advisory.v1.consumer_action"));
    m.insert("id".into(), json!(crate::system::nuid::Nuid::new().next_id()));
    m.insert("timestamp".into(), json!(GoTime::now()));
    m.insert("stream".into(), json!(key.1));
    m.insert("consumer".into(), json!(name));
    m.insert("action".into(), json!(action));
    if !js.settings.domain.is_empty() {
        m.insert("domain".into(), json!(js.settings.domain));
    }
    let body = crate::proto::gojson::to_vec(&Value::Object(m));
    core.publish_jetstream(key.0, subject.as_bytes(), b"", None, &body, now);
}

fn info(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, stream: &str, name: &str, now: Instant) {
    let suffix = "consumer_info_response";
    let js2 = js.clone();
    let name = name.to_string();
    on_stream(
        core,
        js,
        req,
        stream,
        suffix,
        move |sjs, core, key, req, now| match with_consumer(sjs, core, key, &name, now, |c, env| {
            consumer_info(&js2, &key.1, c, env)
        }) {
            Some(info) => {
                respond(core, &req, &envelope(suffix, info_value(&info)), now);
            }
            None => fail(core, &req, suffix, &e::JS_CONSUMER_NOT_FOUND_ERR.err(), now),
        },
        now,
    );
}

fn names(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, stream: &str, list: bool, now: Instant) {
    let (suffix, limit) = if list {
        ("consumer_list_response", LIST_LIMIT)
    } else {
        ("consumer_names_response", NAMES_LIMIT)
    };
    let offset = match crate::jetstream::api::prepare::names_opts(&req.body) {
        Ok((o, _)) => o,
        Err(err) => return fail(core, &req, suffix, &err, now),
    };
    let js2 = js.clone();
    on_stream(
        core,
        js,
        req,
        stream,
        suffix,
        move |sjs, core, key, req, now| {
            let names: Vec<String> = sjs
                .streams
                .get(key)
                .map(|s| {
                    s.consumers
                        .iter()
                        .filter(|(_, c)| !c.c.config().direct)
                        .map(|(n, _)| n.clone())
                        .collect()
                })
                .unwrap_or_default();
            let total = names.len();
            let page: Vec<String> = names.into_iter().skip(offset).take(limit).collect();
            let body = if list {
                let infos: Vec<Value> = page
                    .iter()
                    .filter_map(|n| with_consumer(sjs, core, key, n, now, |c, env| consumer_info(&js2, &key.1, c, env)))
                    .map(|i| info_value(&i))
                    .collect();
                json!({"total": total, "offset": offset, "limit": limit, "consumers": infos})
            } else {
                json!({"total": total, "offset": offset, "limit": limit, "consumers": page})
            };
            respond(core, &req, &envelope(suffix, body), now);
        },
        now,
    );
}

fn delete(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, stream: &str, name: &str, now: Instant) {
    let suffix = "consumer_delete_response";
    let js2 = js.clone();
    let name = name.to_string();
    on_stream(
        core,
        js,
        req,
        stream,
        suffix,
        move |sjs, core, key, req, now| {
            if !sjs.remove_consumer(core, key, &name, true, now) {
                return fail(core, &req, suffix, &e::JS_CONSUMER_NOT_FOUND_ERR.err(), now);
            }
            if let Some(en) = js2.registry().get_mut(key.0, &key.1) {
                en.consumers.remove(&name);
            }
            respond(core, &req, &envelope(suffix, json!({"success": true})), now);
            advisory(core, &js2, key, &name, "delete", now);
        },
        now,
    );
}

fn pause(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, stream: &str, name: &str, now: Instant) {
    let suffix = "consumer_pause_response";
    let p = match ConsumerPauseRequest::decode(&req.body) {
        Ok(p) => p,
        Err(err) => return fail(core, &req, suffix, &err, now),
    };
    let name = name.to_string();
    on_stream(
        core,
        js,
        req,
        stream,
        suffix,
        move |sjs, core, key, req, now| {
            let until = p.pause_until.filter(|t| !t.is_zero() && t.0 > GoTime::now().0);
            let r = with_consumer(sjs, core, key, &name, now, |c, env| {
                c.pause(until, env, now);
                c.stats(env)
            });
            let Some(s) = r else {
                return fail(core, &req, suffix, &e::JS_CONSUMER_NOT_FOUND_ERR.err(), now);
            };
            sjs.touch();
            let resp = crate::jetstream::api::consumer_info::ConsumerPauseResponse {
                paused: s.paused,
                pause_until: until.unwrap_or(GoTime::ZERO),
                pause_remaining: s.pause_remaining,
            };
            respond(
                core,
                &req,
                &envelope(suffix, serde_json::to_value(resp).unwrap_or_default()),
                now,
            );
        },
        now,
    );
}

fn unpin(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, stream: &str, name: &str, now: Instant) {
    let suffix = "consumer_unpin_response";
    let u: ConsumerUnpinRequest = match crate::jetstream::api::consumer_info::decode_lenient(&req.body) {
        Ok(u) => u,
        Err(err) => return fail(core, &req, suffix, &err, now),
    };
    let name = name.to_string();
    on_stream(
        core,
        js,
        req,
        stream,
        suffix,
        move |sjs, core, key, req, now| match with_consumer(sjs, core, key, &name, now, |c, env| c.unpin(&u.group, env))
        {
            None => fail(core, &req, suffix, &e::JS_CONSUMER_NOT_FOUND_ERR.err(), now),
            Some(Err(err)) => fail(core, &req, suffix, &err, now),
            Some(Ok(())) => {
                sjs.touch();
                respond(core, &req, &envelope(suffix, json!({})), now);
            }
        },
        now,
    );
}

fn reset(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, stream: &str, name: &str, now: Instant) {
    let suffix = "consumer_reset_response";
    let r: ConsumerResetRequest = if req.body.trim_ascii().is_empty() {
        ConsumerResetRequest::default()
    } else {
        match crate::jetstream::api::consumer_info::decode_lenient(&req.body) {
            Ok(r) => r,
            Err(err) => return fail(core, &req, suffix, &err, now),
        }
    };
    let js2 = js.clone();
    let name = name.to_string();
    on_stream(
        core,
        js,
        req,
        stream,
        suffix,
        move |sjs, core, key, req, now| {
            let seq = (r.seq > 0).then_some(r.seq);
            let out = with_consumer(sjs, core, key, &name, now, |c, env| {
                c.reset(seq, env, now).map(|s| (s, consumer_info(&js2, &key.1, c, env)))
            });
            match out {
                None => fail(core, &req, suffix, &e::JS_CONSUMER_NOT_FOUND_ERR.err(), now),
                Some(Err(err)) => fail(core, &req, suffix, &err, now),
                Some(Ok((seq, info))) => {
                    sjs.touch();
                    let mut v = info_value(&info);
                    if let Value::Object(m) = &mut v {
                        m.insert("reset_seq".into(), json!(seq));
                    }
                    respond(core, &req, &envelope(suffix, v), now);
                }
            }
        },
        now,
    );
}
