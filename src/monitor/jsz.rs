//! `/jsz` (monitoring.md §10) and the `jetstream` section of `/varz`: JetStream's
//! configuration, its usage and API counters, and per account the streams with their
//! state, configuration and consumers, as nats-server's `JSInfo`, `AccountDetail` and
//! `StreamDetail`.
//!
//! Ownership: the list of streams comes from JetStream's registry; everything a stream
//! knows about itself (state, bytes, consumers) is asked of the shard that owns it with a
//! [`Plan`] over every shard's `ShardJs`, so the message path takes no lock.

use super::gather::{Done, Plan};
use super::query::Query;
use super::{json_time, Context, MonitorError};
use crate::core::accounts::AccountId;
use crate::core::shard::ShardCore;
use crate::jetstream::api::config::{StorageType, StreamConfig};
use crate::jetstream::api::consumer_info::ConsumerInfo;
use crate::jetstream::api::GoTime;
use crate::jetstream::JetStream;
use crate::server::jetstream_opts::JetStreamOptions;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

pub use super::jsz_types::*;

/// The JetStream API level the server implements.
pub const API_LEVEL: i64 = 4;
/// Accounts per page when no limit is asked for.
const DEFAULT_LIMIT: i64 = 1024;

/// nats-server's `JSzOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JszOptions {
    pub account: String,
    pub accounts: bool,
    pub streams: bool,
    pub consumer: bool,
    pub direct_consumer: bool,
    pub config: bool,
    pub leader_only: bool,
    pub offset: i64,
    pub limit: i64,
    pub raft: bool,
    pub stream_leader_only: bool,
}

impl JszOptions {
    /// From a `/jsz` query string (checked in nats-server's order).
    pub fn from_query(q: &Query) -> Result<JszOptions, MonitorError> {
        let accounts = q.bool("accounts")?;
        let streams = q.bool("streams")?;
        let consumer = q.bool("consumers")?;
        let direct_consumer = q.bool("direct-consumers")?;
        let config = q.bool("config")?;
        let offset = q.int("offset")?;
        let limit = q.int("limit")?;
        let leader_only = q.bool("leader-only")?;
        let raft = q.bool("raft")?;
        let stream_leader_only = q.bool("stream-leader-only")?;
        Ok(JszOptions {
            account: q.get("acc").to_string(),
            accounts,
            streams,
            consumer,
            direct_consumer,
            config,
            leader_only,
            offset,
            limit,
            raft,
            stream_leader_only,
        })
    }

    /// From the decoded JSON of a `$SYS` request (`JszEventOptions`).
    pub fn from_values(v: &super::disabled::Values) -> JszOptions {
        use super::optjson::Val;
        let mut o = JszOptions::default();
        for (name, val) in v {
            match (*name, val) {
                ("account", Val::Str(s)) => o.account = s.clone(),
                ("accounts", Val::Bool(b)) => o.accounts = *b,
                ("streams", Val::Bool(b)) => o.streams = *b,
                ("consumer", Val::Bool(b)) => o.consumer = *b,
                ("direct_consumer", Val::Bool(b)) => o.direct_consumer = *b,
                ("config", Val::Bool(b)) => o.config = *b,
                ("leader_only", Val::Bool(b)) => o.leader_only = *b,
                ("offset", Val::Int(n)) => o.offset = *n,
                ("limit", Val::Int(n)) => o.limit = *n,
                ("raft", Val::Bool(b)) => o.raft = *b,
                ("stream_leader_only", Val::Bool(b)) => o.stream_leader_only = *b,
                _ => {}
            }
        }
        o
    }

    /// The defaults nats-server fills in: offset at least 0, a page of 1024, consumers
    /// imply streams, streams without an account imply accounts.
    fn normalized(mut self) -> JszOptions {
        self.offset = self.offset.max(0);
        if self.limit == 0 {
            self.limit = DEFAULT_LIMIT;
        }
        if self.consumer {
            self.streams = true;
        }
        if self.streams && self.account.is_empty() {
            self.accounts = true;
        }
        self
    }
}

/// What a shard reports about one of its streams.
#[derive(Clone, Debug)]
pub struct StreamPart {
    pub account: AccountId,
    pub name: String,
    pub storage: StorageType,
    pub msgs: u64,
    pub bytes: u64,
    pub consumers: usize,
    /// The `state` object of the stream's info.
    pub state: serde_json::Value,
    pub created: GoTime,
    /// The stored configuration (with `config`).
    pub config: Option<StreamConfig>,
    /// Consumer infos by name (with `consumers`).
    pub consumer_detail: Vec<ConsumerInfo>,
    /// The consumers' names.
    pub consumer_names: Vec<String>,
}

/// What every stream part should carry.
#[derive(Clone, Copy, Debug, Default)]
pub struct PartWant {
    pub config: bool,
    pub consumers: bool,
}

/// The streams of this shard (run on the shard).
pub fn shard_streams(core: &mut ShardCore, want: PartWant, now: Instant) -> Vec<StreamPart> {
    crate::jetstream::shard::with_js(core, |sjs, core| {
        let js = sjs.js.clone();
        let mut out = Vec::new();
        for ((acc, name), st) in sjs.streams.iter_mut() {
            let fast = st.store.fast_state();
            let consumers = st.consumers.len();
            let state = crate::jetstream::service::streams::state_json(st, false, "", consumers);
            let consumer_names: Vec<String> = st.consumers.keys().cloned().collect();
            let mut consumer_detail = Vec::new();
            if want.consumers {
                let mut env = crate::jetstream::consumers::Env {
                    core: &mut *core,
                    store: st.store.as_mut(),
                    acc: *acc,
                    now,
                    wall: Default::default(),
                };
                for slot in st.consumers.values_mut() {
                    let mut info =
                        crate::jetstream::service::consumers::consumer_info(&js, name, &mut slot.c, &mut env);
                    // A standalone server's consumer infos have no cluster, and the
                    // configuration is the stored one (without the dynamic metadata).
                    info.cluster = None;
                    info.config = want.config.then(|| slot.c.config().clone());
                    consumer_detail.push(info);
                }
            }
            out.push(StreamPart {
                account: *acc,
                name: name.clone(),
                storage: st.cfg.storage,
                msgs: fast.msgs,
                bytes: fast.bytes,
                consumers,
                state,
                created: st.created,
                config: want.config.then(|| st.cfg.clone()),
                consumer_detail,
                consumer_names,
            });
        }
        out
    })
    .unwrap_or_default()
}

/// A registry entry as the merge needs it.
#[derive(Clone, Debug)]
struct Listed {
    account: AccountId,
    name: String,
    storage: StorageType,
    max_bytes: i64,
}

/// The accounts JetStream is enabled for, by name, and the registry's streams.
fn snapshot(ctx: &Context, js: &JetStream) -> (Vec<(AccountId, String)>, Vec<Listed>) {
    let table = ctx.state().shared.accounts.snapshot();
    let sys = table.system();
    let mut accounts: Vec<(AccountId, String)> = table
        .iter()
        .filter(|d| js.enabled_for(&d.name, Some(d.id) == sys))
        .map(|d| (d.id, d.name.clone()))
        .collect();
    accounts.sort_by(|a, b| a.1.cmp(&b.1));
    let reg = js.registry_to_read();
    let mut listed = Vec::new();
    for (acc, _) in &accounts {
        for (name, e) in reg.streams(*acc) {
            listed.push(Listed {
                account: *acc,
                name: name.clone(),
                storage: e.cfg.storage,
                max_bytes: e.cfg.max_bytes,
            });
        }
    }
    (accounts, listed)
}

/// JetStream's configuration as `/jsz` and `/varz` show it.
pub fn js_config(js: &JetStream, o: &JetStreamOptions, store_dir: bool) -> JetStreamConfig {
    JetStreamConfig {
        max_memory: js.settings.max_memory,
        max_storage: js.settings.max_store,
        store_dir: if store_dir {
            js.settings.root.to_string_lossy().into_owned()
        } else {
            String::new()
        },
        sync_interval: i64::try_from(o.sync_interval().as_nanos()).unwrap_or(i64::MAX),
        sync_always: o.sync_always,
        domain: js.settings.domain.clone(),
        compress_ok: o.max_memory > 0 && o.max_store > 0,
        unique_tag: o.unique_tag.clone(),
        strict: js.settings.strict,
    }
}

/// The server's `limits { }` (`JSLimitOpts`).
pub fn js_limits(o: &JetStreamOptions) -> JsLimits {
    let nanos = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    let l = &o.limits;
    JsLimits {
        max_request_batch: l.max_request_batch,
        max_ack_pending: l.max_ack_pending,
        max_ha_assets: l.max_ha_assets,
        max_duplicate_window: nanos(l.duplicate_window),
        max_batch_inflight_per_stream: l.max_batch_inflight_per_stream,
        max_batch_inflight_total: l.max_batch_inflight_total,
        max_batch_size: l.max_batch_size,
        max_batch_timeout: nanos(l.max_batch_timeout),
    }
}

/// The server-wide usage (`JetStreamStats`).
fn server_stats(
    js: &JetStream,
    accounts: usize,
    listed: &[Listed],
    parts: &HashMap<(AccountId, &str), &StreamPart>,
) -> JetStreamStats {
    let mut s = JetStreamStats {
        accounts,
        api: JsApi {
            level: API_LEVEL,
            total: js.api.total.load(Ordering::Relaxed),
            errors: js.api.errors.load(Ordering::Relaxed),
            inflight: js.queues.inflight(),
        },
        ..Default::default()
    };
    for l in listed {
        let reserved = u64::try_from(l.max_bytes).unwrap_or(0);
        let used = parts.get(&(l.account, l.name.as_str())).map_or(0, |p| p.bytes);
        match l.storage {
            StorageType::Memory => {
                s.reserved_memory += reserved;
                s.memory += used;
            }
            StorageType::File => {
                s.reserved_storage += reserved;
                s.storage += used;
            }
        }
    }
    s
}

/// Everything the merge needs besides the parts.
struct Inputs {
    js: Arc<JetStream>,
    opts: JszOptions,
    accounts: Vec<(AccountId, String)>,
    listed: Vec<Listed>,
    config: JetStreamConfig,
    limits: JsLimits,
    server_id: String,
}

/// One account's detail.
fn account_detail(
    inp: &Inputs,
    acc: AccountId,
    name: &str,
    parts: &HashMap<(AccountId, &str), &StreamPart>,
) -> AccountDetail {
    let o = &inp.opts;
    let limits = inp.js.account_limits(name);
    let mut d = AccountDetail {
        name: name.to_string(),
        id: name.to_string(),
        stats: JetStreamStats {
            // Go's unsigned conversion: no limit (-1) shows as the largest value.
            reserved_memory: limits.max_memory as u64,
            reserved_storage: limits.max_store as u64,
            api: {
                let (total, errors) = inp.js.api.account(acc);
                JsApi {
                    level: 0,
                    total,
                    errors,
                    inflight: 0,
                }
            },
            ..Default::default()
        },
        stream_detail: Vec::new(),
    };
    for l in inp.listed.iter().filter(|l| l.account == acc) {
        let Some(p) = parts.get(&(acc, l.name.as_str())) else {
            continue;
        };
        match p.storage {
            StorageType::Memory => d.stats.memory += p.bytes,
            StorageType::File => d.stats.storage += p.bytes,
        }
        if !o.streams {
            continue;
        }
        d.stream_detail.push(StreamDetail {
            name: p.name.clone(),
            created: p.created,
            cluster: Some(serde_json::json!({ "leader": inp.js.server_name })),
            config: if o.config { p.config.clone() } else { None },
            state: p.state.clone(),
            consumer_detail: if o.consumer {
                p.consumer_detail.clone()
            } else {
                Vec::new()
            },
        });
    }
    d
}

fn index(parts: &[Vec<StreamPart>]) -> HashMap<(AccountId, &str), &StreamPart> {
    parts
        .iter()
        .flatten()
        .map(|p| ((p.account, p.name.as_str()), p))
        .collect()
}

/// The `/jsz` answer from the shards' parts.
fn merge_jsz(inp: Inputs, parts: Vec<Vec<StreamPart>>) -> Jsz {
    let by_key = index(&parts);
    let o = &inp.opts;
    let mut j = Jsz {
        stats: server_stats(&inp.js, inp.accounts.len(), &inp.listed, &by_key),
        server_id: inp.server_id.clone(),
        now: json_time(SystemTime::now()),
        config: inp.config.clone(),
        limits: Some(inp.limits.clone()),
        total: inp.accounts.len(),
        ..Default::default()
    };
    for l in &inp.listed {
        j.streams += 1;
        if let Some(p) = by_key.get(&(l.account, l.name.as_str())) {
            j.messages += p.msgs;
            j.bytes += p.bytes;
            j.consumers += p.consumers;
            if o.raft {
                j.consumers_leader += p.consumer_names.len();
            }
        }
        if o.raft {
            j.streams_leader += 1;
        }
    }
    let chosen: Vec<&(AccountId, String)> = match inp.accounts.iter().find(|(_, n)| *n == o.account) {
        Some(a) => vec![a],
        None if o.accounts => {
            let all: Vec<&(AccountId, String)> = inp.accounts.iter().collect();
            if o.limit > 0 {
                let offset = usize::try_from(o.offset).unwrap_or(0).min(all.len());
                let limit = usize::try_from(o.limit).unwrap_or(usize::MAX);
                all.into_iter().skip(offset).take(limit).collect()
            } else {
                all
            }
        }
        None => Vec::new(),
    };
    j.account_details = chosen
        .into_iter()
        .map(|(acc, name)| account_detail(&inp, *acc, name, &by_key))
        .collect();
    j
}

fn inputs(ctx: &Context, js: &Arc<JetStream>, opts: JszOptions) -> Inputs {
    let (accounts, listed) = snapshot(ctx, js);
    let live = ctx.state().live();
    Inputs {
        js: js.clone(),
        opts,
        accounts,
        listed,
        config: js_config(js, &live.opts.jetstream, true),
        limits: js_limits(&live.opts.jetstream),
        server_id: live.info.server_id.clone(),
    }
}

fn want(o: &JszOptions) -> PartWant {
    PartWant {
        config: o.config,
        consumers: o.consumer,
    }
}

/// `/jsz` without JetStream: `disabled`, or nothing for `leader_only` (not the leader).
fn disabled(ctx: &Context, opts: &JszOptions) -> Result<Jsz, MonitorError> {
    if opts.leader_only {
        return Err(MonitorError::BadRequest("filtered response: not leader".into()));
    }
    Ok(Jsz {
        server_id: ctx.server_id(),
        now: json_time(SystemTime::now()),
        disabled: true,
        ..Default::default()
    })
}

/// What answering `/jsz` takes: an answer at once, or a plan for the shards.
pub enum JszWork {
    Ready(Box<Result<Jsz, MonitorError>>),
    Gather(Plan<Vec<StreamPart>, Jsz>),
}

/// How `/jsz` for `opts` is answered. A standalone JetStream server is its own meta
/// leader, so `leader_only` changes nothing while JetStream runs.
pub fn jsz_work(ctx: &Context, opts: JszOptions) -> JszWork {
    let opts = opts.normalized();
    let Some(js) = ctx.jetstream() else {
        return JszWork::Ready(Box::new(disabled(ctx, &opts)));
    };
    let inp = inputs(ctx, js, opts);
    let w = want(&inp.opts);
    JszWork::Gather(Plan::new(
        move |core: &mut ShardCore, now| shard_streams(core, w, now),
        move |parts| Ok(merge_jsz(inp, parts)),
    ))
}

/// `/jsz` from the HTTP server.
pub async fn jsz_async(ctx: &Arc<Context>, opts: JszOptions) -> Result<Jsz, MonitorError> {
    match jsz_work(ctx, opts) {
        JszWork::Ready(r) => *r,
        JszWork::Gather(p) => p.run_async(ctx).await,
    }
}

/// `/jsz` from a shard (the system services).
pub fn jsz_on_shard(core: &mut ShardCore, ctx: &Arc<Context>, opts: JszOptions, done: Done<Jsz>, now: Instant) {
    match jsz_work(ctx, opts) {
        JszWork::Ready(r) => done(core, *r, now),
        JszWork::Gather(p) => p.run_on_shard(core, done, now),
    }
}

/// `$SYS.REQ.ACCOUNT.<acc>.JSZ`: one account's detail (nats-server's `JszAccount`), from
/// a shard.
pub fn account_on_shard(
    core: &mut ShardCore,
    ctx: &Arc<Context>,
    opts: JszOptions,
    done: Done<AccountDetail>,
    now: Instant,
) {
    let Some(js) = ctx.jetstream() else {
        return done(core, Err(MonitorError::BadRequest("jetstream not enabled".into())), now);
    };
    let name = opts.account.clone();
    let quoted = crate::proto::reply::go_quote(name.as_bytes());
    let table = ctx.state().shared.accounts.snapshot();
    let Some(def) = table.iter().find(|d| d.name == name) else {
        return done(
            core,
            Err(MonitorError::BadRequest(format!("account {quoted} not found"))),
            now,
        );
    };
    let acc = def.id;
    if !js.enabled_for(&name, Some(acc) == table.system()) {
        let e = MonitorError::BadRequest(format!("account {quoted} not jetstream enabled"));
        return done(core, Err(e), now);
    }
    let inp = inputs(ctx, js, opts);
    let w = want(&inp.opts);
    Plan::new(
        move |core: &mut ShardCore, now| shard_streams(core, w, now),
        move |parts: Vec<Vec<StreamPart>>| {
            let by_key = index(&parts);
            Ok(account_detail(&inp, acc, &name, &by_key))
        },
    )
    .run_on_shard(core, done, now);
}

/// `/varz`'s and STATSZ's `jetstream` (STATSZ shows no `store_dir`), with the usage
/// (memory, storage, reservations) gathered from the shards.
pub fn usage_plan(ctx: &Context, store_dir: bool) -> Option<Plan<Vec<StreamPart>, JetStreamVarz>> {
    let js = ctx.jetstream()?.clone();
    let (accounts, listed) = snapshot(ctx, &js);
    let o = ctx.state().live().opts.jetstream.clone();
    Some(Plan::new(
        |core: &mut ShardCore, now| shard_streams(core, PartWant::default(), now),
        move |parts: Vec<Vec<StreamPart>>| {
            let by_key = index(&parts);
            Ok(JetStreamVarz {
                config: Some(js_config(&js, &o, store_dir)),
                stats: Some(server_stats(&js, accounts.len(), &listed, &by_key)),
                limits: Some(js_limits(&o)),
            })
        },
    ))
}

/// Whether a stream `name` of `acc` has consumer `consumer` (healthz), from the parts.
pub fn has_consumer(parts: &[Vec<StreamPart>], acc: AccountId, name: &str, consumer: &str) -> bool {
    parts
        .iter()
        .flatten()
        .any(|p| p.account == acc && p.name == name && p.consumer_names.iter().any(|c| c == consumer))
}

#[cfg(test)]
#[path = "jsz_tests.rs"]
mod tests;
