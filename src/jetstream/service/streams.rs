//! The stream APIs (`$JS.API.STREAM.*`) and `$JS.API.INFO`, and the recovery of the
//! streams found under the store directory at startup.

use super::{envelope, error_envelope, fail, on_stream, on_stream_shard, respond, respond_error, Request};
use crate::core::accounts::AccountId;
use crate::core::shard::ShardCore;
use crate::jetstream::api::config::{StorageType, StreamConfig};
use crate::jetstream::api::errors_table as e;
use crate::jetstream::api::{ApiError, GoTime};
use crate::jetstream::registry::Entry;
use crate::jetstream::shard::{ShardJs, StreamKey};
use crate::jetstream::stream::Stream;
use crate::jetstream::JetStream;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// Page sizes of the reference.
const NAMES_LIMIT: usize = 1024;
const LIST_LIMIT: usize = 256;
/// Subjects per page of a stream info with `subjects_filter`.
const SUBJECTS_LIMIT: usize = 100_000;

/// The response type of an API subject (`None`: no such API, which gets no answer).
pub fn type_suffix(api: &str) -> Option<&'static str> {
    let t: Vec<&str> = api.split('.').collect();
    Some(match t.as_slice() {
        ["INFO"] => "account_info_response",
        ["STREAM", "CREATE", _] => "stream_create_response",
        ["STREAM", "UPDATE", _] => "stream_update_response",
        ["STREAM", "INFO", _] => "stream_info_response",
        ["STREAM", "NAMES"] => "stream_names_response",
        ["STREAM", "LIST"] => "stream_list_response",
        ["STREAM", "DELETE", _] => "stream_delete_response",
        ["STREAM", "PURGE", _] => "stream_purge_response",
        ["STREAM", "MSG", "GET", _] => "stream_msg_get_response",
        ["STREAM", "MSG", "DELETE", _] => "stream_msg_delete_response",
        ["STREAM", "SNAPSHOT", _] => "stream_snapshot_response",
        ["STREAM", "RESTORE", _] => "stream_restore_response",
        ["STREAM", "LEADER", "STEPDOWN", _] => "stream_leader_stepdown_response",
        ["STREAM", "PEER", "REMOVE", _] => "stream_remove_peer_response",
        ["CONSUMER", "CREATE", ..] | ["CONSUMER", "DURABLE", "CREATE", _, _] => "consumer_create_response",
        ["CONSUMER", "INFO", _, _] => "consumer_info_response",
        ["CONSUMER", "NAMES", _] => "consumer_names_response",
        ["CONSUMER", "LIST", _] => "consumer_list_response",
        ["CONSUMER", "DELETE", _, _] => "consumer_delete_response",
        ["CONSUMER", "PAUSE", _, _] => "consumer_pause_response",
        ["CONSUMER", "UNPIN", _, _] => "consumer_unpin_response",
        ["CONSUMER", "RESET", _, _] => "consumer_reset_response",
        ["CONSUMER", "LEADER", "STEPDOWN", _, _] => "consumer_leader_stepdown_response",
        _ => return None,
    })
}

/// Dispatch one request.
pub fn handle(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, now: Instant) {
    let Some(suffix) = type_suffix(&req.api) else { return };
    let api = req.api.clone();
    let t: Vec<&str> = api.split('.').collect();
    match t.as_slice() {
        ["INFO"] => account_info(core, js, req, now),
        ["STREAM", "CREATE", name] => create(core, js, req, name, false, now),
        ["STREAM", "UPDATE", name] => create(core, js, req, name, true, now),
        ["STREAM", "INFO", name] => info(core, js, req, name, now),
        ["STREAM", "NAMES"] => names(core, js, req, false, now),
        ["STREAM", "LIST"] => names(core, js, req, true, now),
        ["STREAM", "DELETE", name] => delete(core, js, req, name, now),
        ["STREAM", "PURGE", name] => purge(core, js, req, name, now),
        ["STREAM", "MSG", "GET", name] => msg_get(core, js, req, name, now),
        ["STREAM", "MSG", "DELETE", name] => msg_delete(core, js, req, name, now),
        ["STREAM", "SNAPSHOT", name] => super::snapshot::handle(core, js, req, name, now),
        ["STREAM", "RESTORE", name] => super::restore::handle(core, js, req, name, now),
        ["STREAM", "LEADER", "STEPDOWN", _] | ["STREAM", "PEER", "REMOVE", _] => {
            fail(core, &req, suffix, &e::JS_CLUSTER_REQUIRED_ERR.err(), now)
        }
        ["CONSUMER", ..] => super::consumers::handle(core, js, req, now),
        _ => fail(core, &req, suffix, &e::JS_BAD_REQUEST_ERR.err(), now),
    }
}

/// The stream's shard, or the "stream not found" answer.
fn locate(
    core: &mut ShardCore,
    js: &JetStream,
    req: &Request,
    name: &str,
    suffix: &str,
    now: Instant,
) -> Option<usize> {
    let shard = js.registry_to_read().get(req.account, name).map(|e| e.shard);
    if shard.is_none() {
        fail(core, req, suffix, &e::JS_STREAM_NOT_FOUND_ERR.err(), now);
    }
    shard
}

/// The state part of a stream's info.
pub fn state_json(st: &mut Stream, deleted_details: bool, subjects_filter: &str, consumers: usize) -> Value {
    let s = if deleted_details {
        st.store.state()
    } else {
        st.store.fast_state()
    };
    let mut m = serde_json::Map::new();
    m.insert("messages".into(), json!(s.msgs));
    m.insert("bytes".into(), json!(s.bytes));
    m.insert("first_seq".into(), json!(s.first_seq));
    m.insert("first_ts".into(), json!(GoTime::from_nanos_or_zero(s.first_ts)));
    m.insert("last_seq".into(), json!(s.last_seq));
    m.insert("last_ts".into(), json!(GoTime::from_nanos_or_zero(s.last_ts)));
    if s.num_subjects > 0 {
        m.insert("num_subjects".into(), json!(s.num_subjects));
    }
    if !subjects_filter.is_empty() {
        let subjects = st.store.subjects_totals(subjects_filter);
        if !subjects.is_empty() {
            m.insert("subjects".into(), json!(subjects));
        }
    }
    if s.num_deleted > 0 {
        m.insert("num_deleted".into(), json!(s.num_deleted));
    }
    if deleted_details && !s.deleted.is_empty() {
        m.insert("deleted".into(), json!(s.deleted));
    }
    m.insert("consumer_count".into(), json!(consumers));
    Value::Object(m)
}

/// Which answer a stream's info is part of: they differ in what the reference includes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum InfoKind {
    /// Create and update responses: no cluster part.
    Change,
    /// `STREAM.INFO`: the cluster part (a standalone server names itself leader).
    Info,
    /// `STREAM.LIST` entries: no cluster part, the stored metadata only.
    List,
}

/// A stream's info (config, created, state, cluster, ts).
pub fn stream_info(js: &JetStream, st: &mut Stream, consumers: usize, deleted_details: bool, filter: &str) -> Value {
    stream_info_as(js, st, consumers, deleted_details, filter, InfoKind::Info)
}

/// [`stream_info`] for the given answer.
pub fn stream_info_as(
    js: &JetStream,
    st: &mut Stream,
    consumers: usize,
    deleted_details: bool,
    filter: &str,
    kind: InfoKind,
) -> Value {
    let mut m = serde_json::Map::new();
    let shown = if kind == InfoKind::List {
        st.cfg.clone()
    } else {
        crate::jetstream::api::stream_check::with_dynamic_metadata(&st.cfg)
    };
    m.insert("config".into(), serde_json::to_value(&shown).unwrap_or_default());
    m.insert("created".into(), json!(st.created));
    m.insert("state".into(), state_json(st, deleted_details, filter, consumers));
    if !js.settings.domain.is_empty() {
        m.insert("domain".into(), json!(js.settings.domain));
    }
    if kind == InfoKind::Info {
        m.insert("cluster".into(), json!({ "leader": js.server_name }));
    }
    crate::jetstream::sourcing::report::add_to_info(&mut m, st);
    m.insert("ts".into(), json!(GoTime::now()));
    Value::Object(m)
}

/// A stream's `max_bytes` is reserved from its account's and the server's limits for its
/// storage: refuse it when the reservations would exceed them (the reference's
/// `checkBytesLimits`).
pub(super) fn check_reservation(
    js: &JetStream,
    reg: &crate::jetstream::registry::Registry,
    acc: AccountId,
    cfg: &StreamConfig,
    limits: &crate::auth::config::JetStreamAccountLimits,
) -> Result<(), ApiError> {
    use crate::jetstream::api::config::StorageType;
    let (account_limit, server_limit, err) = match cfg.storage {
        StorageType::Memory => (
            limits.max_memory,
            js.settings.max_memory,
            e::JS_MEMORY_RESOURCES_EXCEEDED_ERR,
        ),
        StorageType::File => (
            limits.max_store,
            js.settings.max_store,
            e::JS_STORAGE_RESOURCES_EXCEEDED_ERR,
        ),
    };
    if cfg.max_bytes <= 0 {
        return Ok(());
    }
    let reserved = |entries: &mut dyn Iterator<Item = &crate::jetstream::registry::Entry>| -> i64 {
        entries
            .filter(|e| e.cfg.storage == cfg.storage && e.cfg.max_bytes > 0)
            .map(|e| e.cfg.max_bytes)
            .sum()
    };
    let mine = reserved(&mut reg.streams(acc).map(|(_, e)| e));
    if account_limit >= 0 && mine.saturating_add(cfg.max_bytes) > account_limit {
        return Err(err.err());
    }
    let all = reserved(&mut reg.all());
    if server_limit >= 0 && all.saturating_add(cfg.max_bytes) > server_limit {
        return Err(err.err());
    }
    Ok(())
}

/// The configurations of an account's streams, by name (for the checks' lookups).
fn account_configs(js: &JetStream, acc: AccountId) -> std::collections::HashMap<String, StreamConfig> {
    js.registry_to_read()
        .streams(acc)
        .map(|(n, e)| (n.clone(), e.cfg.clone()))
        .collect()
}

fn decode_config(req: &Request, name: &str, update: bool) -> Result<(StreamConfig, bool), ApiError> {
    crate::jetstream::api::prepare::stream_create_request(&req.body, name, update)
}

fn create(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, name: &str, update: bool, now: Instant) {
    let suffix = if update {
        "stream_update_response"
    } else {
        "stream_create_response"
    };
    let (mut cfg, pedantic) = match decode_config(&req, name, update) {
        Ok(c) => c,
        Err(err) => return fail(core, &req, suffix, &err, now),
    };
    let acc = req.account;
    let account_name = core.account_table().name(acc).to_string();
    let limits = js.account_limits(&account_name);
    let existing = js.registry().get(acc, &cfg.name).cloned();
    if update {
        let Some(old) = existing else {
            return fail(core, &req, suffix, &e::JS_STREAM_NOT_FOUND_ERR.err(), now);
        };
        let others = account_configs(js, acc);
        let lookup = |n: &str| others.get(n).cloned();
        if let Err(err) =
            crate::jetstream::api::prepare::stream_update(&old.cfg, &mut cfg, js, pedantic, &limits, &lookup)
        {
            return fail(core, &req, suffix, &err, now);
        }
        if let Some(other) = js.registry().overlapping(acc, &cfg.name, &cfg.subjects) {
            let _ = other;
            return fail(core, &req, suffix, &e::JS_STREAM_SUBJECT_OVERLAP_ERR.err(), now);
        }
        if let Some(en) = js.registry().get_mut(acc, &cfg.name) {
            en.cfg = cfg.clone();
        }
        let js2 = js.clone();
        on_stream_shard(
            core,
            old.shard,
            move |sjs: &mut ShardJs, core: &mut ShardCore, now: Instant| {
                let key = (acc, cfg.name.clone());
                let Some(st) = sjs.streams.get_mut(&key) else { return };
                if st.cfg.consumer_limits != cfg.consumer_limits {
                    let l = &cfg.consumer_limits;
                    let violating: Vec<String> = st
                        .consumers
                        .iter()
                        .filter(|(_, s)| {
                            let c = s.c.config();
                            (l.inactive_threshold > 0
                                && (c.inactive_threshold == 0 || c.inactive_threshold > l.inactive_threshold))
                                || (l.max_ack_pending > 0
                                    && (c.max_ack_pending == 0 || c.max_ack_pending > l.max_ack_pending))
                        })
                        .map(|(n, _)| n.clone())
                        .collect();
                    if !violating.is_empty() {
                        if let Some(en) = js2.registry().get_mut(acc, &cfg.name) {
                            en.cfg = st.cfg.clone();
                        }
                        let why = format!("change to limits violates consumers: {}", violating.join(", "));
                        return fail(core, &req, suffix, &e::JS_STREAM_UPDATE_ERR_F.err_with(why), now);
                    }
                }
                // The stream's subscriptions: its subjects, and direct get when allowed.
                let subjects_changed = st.cfg.subjects != cfg.subjects || st.cfg.allow_direct != cfg.allow_direct;
                if let Err(err) = st.store.update_config(crate::jetstream::stream::store_config(&cfg)) {
                    return fail(core, &req, suffix, &e::JS_STREAM_UPDATE_ERR_F.err_with(err), now);
                }
                st.cfg = cfg.clone();
                st.config_changed();
                if let Some(d) = st.dir.clone() {
                    let _ = crate::jetstream::stream::persist::write_stream_meta(&d, &st.cfg, st.created);
                }
                if subjects_changed {
                    sjs.resubscribe(core, acc, &cfg.name, now);
                }
                crate::jetstream::sourcing::reconfigure(sjs, core, &key, now);
                let consumers = sjs.consumer_count(acc, &cfg.name);
                let Some(st) = sjs.streams.get_mut(&key) else { return };
                let body = envelope(suffix, stream_info_as(&js2, st, consumers, false, "", InfoKind::Change));
                respond(core, &req, &body, now);
                crate::jetstream::advisory::stream_action(core, &js2, acc, &cfg.name, "modify", now);
            },
            now,
        );
        return;
    }
    let others = account_configs(js, acc);
    let lookup = |n: &str| others.get(n).cloned();
    if let Err(err) = crate::jetstream::api::prepare::stream_create(&mut cfg, js, pedantic, &limits, &lookup) {
        return fail(core, &req, suffix, &err, now);
    }
    if let Some(old) = existing {
        let mut cmp = cfg.clone();
        crate::jetstream::api::stream_check::copy_metadata_from(&mut cmp, &old.cfg);
        if old.cfg != cmp {
            return fail(core, &req, suffix, &e::JS_STREAM_NAME_EXIST_ERR.err(), now);
        }
        // The same configuration again: the existing stream's info.
        let js2 = js.clone();
        on_stream_shard(
            core,
            old.shard,
            move |sjs: &mut ShardJs, core: &mut ShardCore, now: Instant| {
                let consumers = sjs.consumer_count(acc, &cfg.name);
                let Some(st) = sjs.streams.get_mut(&(acc, cfg.name.clone())) else {
                    return;
                };
                let mut v = stream_info_as(&js2, st, consumers, false, "", InfoKind::Change);
                if let Value::Object(m) = &mut v {
                    m.insert("did_create".into(), json!(true));
                }
                respond(core, &req, &envelope(suffix, v), now);
            },
            now,
        );
        return;
    }
    let shard = {
        let mut reg = js.registry();
        if limits.max_streams >= 0 && reg.count(acc) as i64 >= limits.max_streams {
            drop(reg);
            return fail(core, &req, suffix, &e::JS_MAXIMUM_STREAMS_LIMIT_ERR.err(), now);
        }
        if let Err(err) = check_reservation(js, &reg, acc, &cfg, &limits) {
            drop(reg);
            return fail(core, &req, suffix, &err, now);
        }
        if reg.overlapping(acc, &cfg.name, &cfg.subjects).is_some() {
            drop(reg);
            return fail(core, &req, suffix, &e::JS_STREAM_SUBJECT_OVERLAP_ERR.err(), now);
        }
        let shard = reg.pick_shard() % core.shards().max(1);
        reg.insert(
            acc,
            Entry {
                shard,
                cfg: cfg.clone(),
                created: GoTime::now(),
                consumers: Default::default(),
            },
        );
        shard
    };
    let js2 = js.clone();
    on_stream_shard(
        core,
        shard,
        move |sjs: &mut ShardJs, core: &mut ShardCore, now: Instant| {
            let created = js2
                .registry()
                .get(acc, &cfg.name)
                .map_or_else(GoTime::now, |e| e.created);
            if let Err(err) = sjs.open_stream(core, acc, cfg.clone(), created, now) {
                js2.registry().remove(acc, &cfg.name);
                return fail(core, &req, suffix, &err, now);
            }
            let Some(st) = sjs.streams.get_mut(&(acc, cfg.name.clone())) else {
                return;
            };
            let mut v = stream_info_as(&js2, st, 0, false, "", InfoKind::Change);
            if let Value::Object(m) = &mut v {
                m.insert("did_create".into(), json!(true));
            }
            respond(core, &req, &envelope(suffix, v), now);
            crate::jetstream::advisory::stream_action(core, &js2, acc, &cfg.name, "create", now);
        },
        now,
    );
}

fn info(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, name: &str, now: Instant) {
    let suffix = "stream_info_response";
    let opts: crate::jetstream::api::prepare::StreamInfoOpts =
        match crate::jetstream::api::prepare::info_opts(&req.body) {
            Ok(o) => o,
            Err(err) => return fail(core, &req, suffix, &err, now),
        };
    let Some(shard) = locate(core, js, &req, name, suffix, now) else {
        return;
    };
    let js2 = js.clone();
    let name = name.to_string();
    on_stream_shard(
        core,
        shard,
        move |sjs: &mut ShardJs, core: &mut ShardCore, now: Instant| {
            let acc = req.account;
            let consumers = sjs.consumer_count(acc, &name);
            let Some(st) = sjs.streams.get_mut(&(acc, name.clone())) else {
                return fail(core, &req, suffix, &e::JS_STREAM_NOT_FOUND_ERR.err(), now);
            };
            let mut info = stream_info(&js2, st, consumers, opts.deleted_details, "");
            // The paging fields come first (0 without a subjects filter or a match); the
            // subjects are paged 100 000 at a time, in subject order.
            let (mut total, mut offset, mut limit) = (0usize, 0usize, 0usize);
            if !opts.subjects_filter.is_empty() {
                let all = st.store.subjects_totals(&opts.subjects_filter);
                if !all.is_empty() {
                    total = all.len();
                    offset = usize::try_from(opts.offset.max(0)).unwrap_or(0);
                    limit = SUBJECTS_LIMIT;
                    let page: serde_json::Map<String, Value> = all
                        .into_iter()
                        .skip(offset)
                        .take(limit)
                        .map(|(k, v)| (k, json!(v)))
                        .collect();
                    if !page.is_empty() {
                        if let Some(Value::Object(state)) = info.get_mut("state") {
                            // In the reference's field order: after `num_subjects`.
                            let rest = std::mem::take(state);
                            let mut page = Some(page);
                            for (k, v) in rest {
                                if matches!(k.as_str(), "num_deleted" | "deleted" | "lost" | "consumer_count") {
                                    if let Some(p) = page.take() {
                                        state.insert("subjects".into(), Value::Object(p));
                                    }
                                }
                                state.insert(k, v);
                            }
                            if let Some(p) = page {
                                state.insert("subjects".into(), Value::Object(p));
                            }
                        }
                    }
                }
            }
            let mut m = serde_json::Map::new();
            m.insert("total".into(), json!(total));
            m.insert("offset".into(), json!(offset));
            m.insert("limit".into(), json!(limit));
            if let Value::Object(o) = info {
                m.extend(o);
            }
            let v = Value::Object(m);
            respond(core, &req, &envelope(suffix, v), now);
        },
        now,
    );
}

fn names(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, list: bool, now: Instant) {
    let (suffix, limit) = if list {
        ("stream_list_response", LIST_LIMIT)
    } else {
        ("stream_names_response", NAMES_LIMIT)
    };
    let (offset, filter) = match crate::jetstream::api::prepare::names_opts(&req.body) {
        Ok(o) => o,
        Err(err) => {
            let body = error_envelope(suffix, &err, json!({"total": 0, "offset": 0, "limit": 0}));
            return respond_error(core, &req, &body, now);
        }
    };
    let acc = req.account;
    let all: Vec<(String, usize)> = js
        .registry()
        .streams(acc)
        .filter(|(_, e)| {
            filter.is_empty()
                || e.cfg
                    .subjects
                    .iter()
                    .any(|s| crate::core::subject::subjects_collide(s, &filter))
        })
        .map(|(n, e)| (n.clone(), e.shard))
        .collect();
    let total = all.len();
    let page: Vec<(String, usize)> = all.into_iter().skip(offset).take(limit).collect();
    if !list {
        let names: Vec<&String> = page.iter().map(|(n, _)| n).collect();
        let body = envelope(
            suffix,
            // The reference's list of names starts as nil: `null` when there is none.
            json!({"total": total, "offset": offset, "limit": limit, "streams": (!names.is_empty()).then_some(names)}),
        );
        return respond(core, &req, &body, now);
    }
    // The infos come from each stream's shard.
    let page = Arc::new(page);
    let part_page = page.clone();
    let part_js = js.clone();
    let part: crate::core::shard::internal::PartFn<Vec<(String, Value)>> =
        Arc::new(move |core: &mut ShardCore, _now: Instant| {
            let idx = core.index();
            let mine: Vec<String> = part_page
                .iter()
                .filter(|(_, s)| *s == idx)
                .map(|(n, _)| n.clone())
                .collect();
            crate::jetstream::shard::with_js(core, |sjs, _core| {
                mine.iter()
                    .filter_map(|n| {
                        let consumers = sjs.consumer_count(acc, n);
                        let st = sjs.streams.get_mut(&(acc, n.clone()))?;
                        Some((
                            n.clone(),
                            stream_info_as(&part_js, st, consumers, false, "", InfoKind::List),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default()
        });
    let done: crate::core::shard::internal::DoneFn<Vec<(String, Value)>> = Box::new(
        move |core: &mut ShardCore, parts: Vec<Vec<(String, Value)>>, now: Instant| {
            let mut infos: Vec<(String, Value)> = parts.into_iter().flatten().collect();
            infos.sort_by(|a, b| a.0.cmp(&b.0));
            let values: Vec<Value> = infos.into_iter().map(|(_, v)| v).collect();
            let body = envelope(
                suffix,
                json!({"total": total, "offset": offset, "limit": limit, "streams": values}),
            );
            respond(core, &req, &body, now);
        },
    );
    core.gather(part, done, now);
}

fn delete(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, name: &str, now: Instant) {
    let suffix = "stream_delete_response";
    let Some(shard) = locate(core, js, &req, name, suffix, now) else {
        return;
    };
    let js2 = js.clone();
    let name = name.to_string();
    on_stream_shard(
        core,
        shard,
        move |sjs: &mut ShardJs, core: &mut ShardCore, now: Instant| {
            let acc = req.account;
            sjs.delete_consumers(core, acc, &name, now);
            if sjs.close_stream(core, acc, &name, true).is_none() {
                return fail(core, &req, suffix, &e::JS_STREAM_NOT_FOUND_ERR.err(), now);
            }
            js2.registry().remove(acc, &name);
            respond(core, &req, &envelope(suffix, json!({"success": true})), now);
            crate::jetstream::advisory::stream_action(core, &js2, acc, &name, "delete", now);
        },
        now,
    );
}

fn purge(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, name: &str, now: Instant) {
    let suffix = "stream_purge_response";
    let p = match crate::jetstream::api::prepare::purge_opts(&req.body) {
        Ok(p) => p,
        Err(err) => return fail(core, &req, suffix, &err, now),
    };
    on_stream(
        core,
        js,
        req,
        name,
        suffix,
        move |sjs: &mut ShardJs, core: &mut ShardCore, key: &StreamKey, req: Request, now: Instant| {
            let (acc, name) = (key.0, key.1.clone());
            let Some(st) = sjs.streams.get_mut(key) else {
                return;
            };
            if st.cfg.sealed {
                return fail(core, &req, suffix, &e::JS_STREAM_SEALED_ERR.err(), now);
            }
            if st.cfg.deny_purge {
                let body = error_envelope(
                    suffix,
                    &e::JS_STREAM_PURGE_FAILED_F.err_with("stream purge not permitted"),
                    json!({"purged": 0}),
                );
                return respond_error(core, &req, &body, now);
            }
            let res = if p.filter.is_empty() && p.seq == 0 && p.keep == 0 {
                st.store.purge()
            } else {
                st.store.purge_ex(&p.filter, p.seq, p.keep)
            };
            st.dirty = true;
            match res {
                Ok(n) => {
                    sjs.after_removal(core, acc, &name, now);
                    respond(
                        core,
                        &req,
                        &envelope(suffix, json!({"success": true, "purged": n})),
                        now,
                    );
                }
                Err(err) => fail(core, &req, suffix, &e::JS_STREAM_PURGE_FAILED_F.err_with(err), now),
            }
        },
        now,
    );
}

fn msg_get(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, name: &str, now: Instant) {
    let suffix = "stream_msg_get_response";
    let q = match crate::jetstream::api::prepare::msg_get_opts(&req.body) {
        Ok(q) => q,
        Err(err) => return fail(core, &req, suffix, &err, now),
    };
    on_stream(
        core,
        js,
        req,
        name,
        suffix,
        move |sjs: &mut ShardJs, core: &mut ShardCore, key: &StreamKey, req: Request, now: Instant| {
            let Some(st) = sjs.streams.get_mut(key) else {
                return;
            };
            match crate::jetstream::api::prepare::load_for_get(st.store.as_mut(), &q) {
                Ok(m) => {
                    let mut msg = serde_json::Map::new();
                    msg.insert("subject".into(), json!(m.subject));
                    msg.insert("seq".into(), json!(m.seq));
                    use base64::Engine;
                    if !m.headers.is_empty() {
                        msg.insert(
                            "hdrs".into(),
                            json!(base64::engine::general_purpose::STANDARD.encode(&m.headers)),
                        );
                    }
                    if !m.payload.is_empty() {
                        msg.insert(
                            "data".into(),
                            json!(base64::engine::general_purpose::STANDARD.encode(&m.payload)),
                        );
                    }
                    msg.insert("time".into(), json!(GoTime(m.ts)));
                    respond(
                        core,
                        &req,
                        &envelope(suffix, json!({ "message": Value::Object(msg) })),
                        now,
                    );
                }
                Err(err) => fail(core, &req, suffix, &err, now),
            }
        },
        now,
    );
}

/// The reference's answer to deleting a message that is not there, which its stores
/// decide: a memory store says only "not removed" (10043); a file store says the same
/// for a sequence inside its blocks' range, "no message found" below it (or for 0) and
/// "stream store EOF" past the last sequence (10057).
fn missing_msg_error(st: &Stream, seq: u64) -> ApiError {
    let not_found = || e::JS_SEQUENCE_NOT_FOUND_ERR_F.with(&[("seq", &seq.to_string())]);
    if st.cfg.storage == StorageType::Memory {
        return not_found();
    }
    let s = st.store.fast_state();
    if seq > s.last_seq {
        e::JS_STREAM_MSG_DELETE_FAILED_F.err_with("stream store EOF")
    } else if seq == 0 || s.msgs == 0 || seq < s.first_seq {
        e::JS_STREAM_MSG_DELETE_FAILED_F.err_with("no message found")
    } else {
        not_found()
    }
}

fn msg_delete(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, name: &str, now: Instant) {
    let suffix = "stream_msg_delete_response";
    let d = match crate::jetstream::api::prepare::msg_delete_opts(&req.body) {
        Ok(d) => d,
        Err(err) => return fail(core, &req, suffix, &err, now),
    };
    on_stream(
        core,
        js,
        req,
        name,
        suffix,
        move |sjs: &mut ShardJs, core: &mut ShardCore, key: &StreamKey, req: Request, now: Instant| {
            let (acc, name) = (key.0, key.1.clone());
            let Some(st) = sjs.streams.get_mut(key) else {
                return;
            };
            if st.cfg.sealed {
                return fail(core, &req, suffix, &e::JS_STREAM_SEALED_ERR.err(), now);
            }
            if st.cfg.deny_delete {
                return fail(
                    core,
                    &req,
                    suffix,
                    &e::JS_STREAM_MSG_DELETE_FAILED_F.err_with("message delete not permitted"),
                    now,
                );
            }
            let res = if d.no_erase {
                st.store.remove_msg(d.seq)
            } else {
                st.store.erase_msg(d.seq)
            };
            st.dirty = true;
            match res {
                Ok(true) => {
                    sjs.after_removal(core, acc, &name, now);
                    respond(core, &req, &envelope(suffix, json!({"success": true})), now);
                }
                Ok(false) | Err(storage::StoreError::MsgNotFound) => {
                    let err = missing_msg_error(st, d.seq);
                    fail(core, &req, suffix, &err, now)
                }
                Err(err) => fail(core, &req, suffix, &e::JS_STREAM_MSG_DELETE_FAILED_F.err_with(err), now),
            }
        },
        now,
    );
}

/// `$JS.API.INFO`: the account's usage (gathered from every shard) and limits.
fn account_info(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, now: Instant) {
    let acc = req.account;
    let part: crate::core::shard::internal::PartFn<(u64, u64, usize, usize)> =
        Arc::new(move |core: &mut ShardCore, _now: Instant| {
            crate::jetstream::shard::with_js(core, |sjs, _| sjs.usage(acc)).unwrap_or_default()
        });
    let js2 = js.clone();
    let done: crate::core::shard::internal::DoneFn<(u64, u64, usize, usize)> = Box::new(
        move |core: &mut ShardCore, parts: Vec<(u64, u64, usize, usize)>, now: Instant| {
            let (mut mem, mut store, mut streams, mut consumers) = (0u64, 0u64, 0usize, 0usize);
            for (m, s, n, c) in parts {
                mem += m;
                store += s;
                streams += n;
                consumers += c;
            }
            let name = core.account_table().name(acc).to_string();
            let l = js2.account_limits(&name);
            let limits = json!({
                "max_memory": l.max_memory,
                "max_storage": l.max_store,
                "max_streams": l.max_streams,
                "max_consumers": l.max_consumers,
                "max_ack_pending": l.max_ack_pending,
                "memory_max_stream_bytes": l.memory_max_stream_bytes,
                "storage_max_stream_bytes": l.store_max_stream_bytes,
                "max_bytes_required": l.max_bytes_required,
            });

            let mut m = serde_json::Map::new();
            m.insert("memory".into(), json!(mem));
            m.insert("storage".into(), json!(store));
            m.insert("reserved_memory".into(), json!(0));
            m.insert("reserved_storage".into(), json!(0));
            m.insert("streams".into(), json!(streams));
            m.insert("consumers".into(), json!(consumers));
            m.insert("limits".into(), limits);
            if !js2.settings.domain.is_empty() {
                m.insert("domain".into(), json!(js2.settings.domain));
            }
            m.insert("api".into(), {
                let (total, errors) = js2.api.account(req.account);
                json!({"level": 4, "total": total, "errors": errors})
            });
            respond(core, &req, &envelope("account_info_response", Value::Object(m)), now);
        },
    );
    core.gather(part, done, now);
}

/// Open every stream found under the store directory for the accounts JetStream is
/// enabled for, spread over the shards. Waits until each is open.
pub fn recover_all(post: &dyn crate::core::post::Post, js: &Arc<JetStream>) {
    let root = js.settings.root.clone();
    let Ok(accounts) = std::fs::read_dir(&root) else { return };
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let mut waiting = 0;
    for acc_dir in accounts.flatten() {
        let account = acc_dir.file_name().to_string_lossy().to_string();
        let Ok(streams) = std::fs::read_dir(acc_dir.path().join("streams")) else {
            continue;
        };
        for sdir in streams.flatten() {
            let (cfg, created) = match crate::jetstream::stream::persist::read_stream_meta(&sdir.path()) {
                Ok(m) => m,
                Err(err) => {
                    tracing::warn!("JetStream: skipping stream directory {}: {err}", sdir.path().display());
                    continue;
                }
            };
            let js2 = js.clone();
            let account = account.clone();
            let tx = tx.clone();
            let shard = js.registry().pick_shard() % post.shards().max(1);
            // Reserve the place before the job runs so the next pick sees it.
            let job: crate::core::post::Job = Box::new(move |core: &mut ShardCore, now: Instant| {
                let acc: Option<AccountId> = core.account_table().by_name(&account).map(|a| a.id);
                if let Some(acc) = acc {
                    if js2.enabled_for(&account, core.account_table().system() == Some(acc)) {
                        recover_one(core, &js2, acc, cfg, created, now);
                    }
                }
                let _ = tx.send(());
            });
            js.registry().reserve(shard);
            if post.post(shard, job) {
                waiting += 1;
            }
        }
    }
    drop(tx);
    for _ in 0..waiting {
        if rx.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
            tracing::warn!("JetStream: stream recovery did not finish");
            break;
        }
    }
}

fn recover_one(
    core: &mut ShardCore,
    js: &Arc<JetStream>,
    acc: AccountId,
    cfg: StreamConfig,
    created: GoTime,
    now: Instant,
) {
    let name = cfg.name.clone();
    let shard = core.index();
    crate::jetstream::shard::with_js(core, |sjs, core| {
        js.registry().unreserve(shard);
        match sjs.open_stream(core, acc, cfg.clone(), created, now) {
            Ok(()) => {
                js.registry().insert(
                    acc,
                    Entry {
                        shard,
                        cfg,
                        created,
                        consumers: Default::default(),
                    },
                );
                if let Some(st) = sjs.streams.get_mut(&(acc, name.clone())) {
                    st.rebuild_dedupe(crate::jetstream::shard::wall_ns());
                }
                sjs.recover_consumers(core, acc, &name, now);
            }
            Err(err) => tracing::error!("JetStream: could not recover stream '{name}': {err}"),
        }
    });
}
