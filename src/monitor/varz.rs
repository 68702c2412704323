//! `/varz` (monitoring.md §2): the server's options and counters. Reads only what the
//! shards publish in their atomics, so it never waits for a shard.

use super::gofmt::uptime;
use super::Context;
use crate::proto::gotime::rfc3339_nano;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

/// An always-present object of a feature rnats does not have yet (`{}`).
#[derive(Serialize, Clone, Debug, Default)]
pub struct Empty {}

#[derive(Serialize, Clone, Debug, Default)]
pub struct ScStats {
    pub clients: u64,
    pub routes: u64,
    pub gateways: u64,
    pub leafs: u64,
}

#[derive(Serialize, Clone, Debug, Default)]
pub struct FeatureFlags {
    pub js_ack_fc_v2: bool,
    pub js_raft_delete_range: bool,
}

/// nats-server's `Varz` (the fields rnats has).
#[derive(Serialize, Clone, Debug, Default)]
pub struct Varz {
    pub server_id: String,
    pub server_name: String,
    pub version: String,
    pub proto: i32,
    pub go: String,
    pub host: String,
    pub port: u16,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub auth_required: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tls_required: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tls_verify: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tls_ocsp_peer_verify: bool,
    pub max_connections: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub max_subscriptions: i64,
    pub ping_interval: u128,
    pub ping_max: i64,
    pub http_host: String,
    pub http_port: i64,
    pub http_base_path: String,
    pub https_port: i64,
    pub auth_timeout: f64,
    pub max_control_line: i64,
    pub max_payload: i64,
    pub max_pending: i64,
    pub cluster: Empty,
    pub gateway: Empty,
    pub leaf: Empty,
    pub mqtt: Empty,
    pub websocket: Empty,
    pub jetstream: super::jsz_types::JetStreamVarz,
    pub tls_timeout: f64,
    pub write_deadline: u128,
    pub start: String,
    pub now: String,
    pub uptime: String,
    pub mem: u64,
    pub cores: usize,
    pub gomaxprocs: usize,
    pub cpu: f64,
    pub connections: u64,
    pub total_connections: u64,
    pub routes: u64,
    pub remotes: u64,
    pub leafnodes: u64,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    pub slow_consumers: u64,
    pub stale_connections: u64,
    pub stalled_clients: u64,
    pub subscriptions: u64,
    pub http_req_stats: BTreeMap<String, u64>,
    pub config_load_time: String,
    pub config_digest: String,
    pub feature_flags: FeatureFlags,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub system_account: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ocsp_peer_cache: Option<OcspCacheVarz>,
    pub slow_consumer_stats: ScStats,
    pub stale_connection_stats: ScStats,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxies: Option<ProxiesVarz>,
    /// rnats additions.
    pub rnats_shards: usize,
    pub rnats_reactor: String,
}

/// `ocsp_peer_cache` in `/varz` (nats-server's `OCSPResponseCacheVarz`).
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct OcspCacheVarz {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cache_type: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_hits: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_misses: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub cached_responses: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub cached_revoked_responses: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub cached_good_responses: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub cached_unknown_responses: i64,
}

fn ocsp_cache_varz(state: &crate::server::state::ServerState) -> Option<OcspCacheVarz> {
    let guard = state.ocsp_cache.read().unwrap_or_else(|p| p.into_inner());
    let c = guard.as_ref().filter(|c| c.type_name() != "none")?;
    let s = c.stats();
    Some(OcspCacheVarz {
        cache_type: c.type_name().to_string(),
        cache_hits: s.hits,
        cache_misses: s.misses,
        cached_responses: s.responses,
        cached_revoked_responses: s.revokes,
        cached_good_responses: s.goods,
        cached_unknown_responses: s.unknowns,
    })
}

/// `proxies` in `/varz`: the trusted proxies' keys.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxiesVarz {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trusted: Vec<ProxyKey>,
}

/// One trusted proxy.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyKey {
    pub key: String,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The server's `/varz` now.
pub fn varz(ctx: &Context) -> Varz {
    let cpu = ctx.cpu_percent();
    let state = ctx.state();
    let live = state.live();
    let o = &live.opts;
    let info = &live.info;
    let t = state.shared.totals();
    let table = state.shared.accounts.snapshot();
    let now = SystemTime::now();
    Varz {
        server_id: info.server_id.clone(),
        server_name: info.server_name.clone(),
        version: info.version.clone(),
        proto: info.proto,
        go: info.go.clone(),
        host: info.host.clone(),
        port: info.port,
        auth_required: info.auth_required,
        tls_required: info.tls_required,
        tls_verify: info.tls_verify,
        tls_ocsp_peer_verify: info.tls_required
            && o.tls
                .as_ref()
                .and_then(|t| t.ocsp_peer.as_ref())
                .is_some_and(|p| p.verify),
        max_connections: o.max_connections,
        max_subscriptions: o.max_subscriptions,
        ping_interval: o.ping_interval.as_nanos(),
        ping_max: o.ping_max,
        http_host: state.http_host.clone(),
        http_port: state.http_port,
        http_base_path: o.http_base_path.clone(),
        https_port: o.https_port,
        auth_timeout: o.auth_timeout_secs(),
        max_control_line: o.max_control_line,
        max_payload: o.max_payload,
        max_pending: o.max_pending,
        tls_timeout: o.tls.as_ref().map_or(2.0, |t| t.timeout_duration().as_secs_f64()),
        write_deadline: o.write_deadline.as_nanos(),
        start: rfc3339_nano(state.start),
        now: rfc3339_nano(now),
        uptime: uptime(now.duration_since(state.start).unwrap_or_default()),
        mem: rss_bytes(),
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        gomaxprocs: state.nshards,
        cpu,
        connections: t.connections,
        total_connections: t.total_connections,
        in_msgs: t.in_msgs,
        out_msgs: t.out_msgs,
        in_bytes: t.in_bytes,
        out_bytes: t.out_bytes,
        slow_consumers: t.slow_consumers,
        stalled_clients: t.stalls,
        stale_connections: t.stale_connections,
        subscriptions: t.subscriptions + table.iter().map(|d| super::import_subs(d)).sum::<u64>(),
        http_req_stats: ctx.http_stats(),
        config_load_time: rfc3339_nano(live.config_load_time),
        config_digest: o.config_digest.clone(),
        system_account: table.system().map(|id| table.name(id).to_string()).unwrap_or_default(),
        ocsp_peer_cache: ocsp_cache_varz(state),
        slow_consumer_stats: ScStats {
            clients: t.slow_consumers,
            ..Default::default()
        },
        stale_connection_stats: ScStats {
            clients: t.stale_connections,
            ..Default::default()
        },
        proxies: o.security.proxies.as_ref().map(|keys| ProxiesVarz {
            trusted: keys.iter().map(|k| ProxyKey { key: k.clone() }).collect(),
        }),
        rnats_shards: state.nshards,
        rnats_reactor: state.reactor.clone(),
        ..Default::default()
    }
}

/// `/varz` with its `jetstream` section, from the HTTP server (the usage is asked of
/// the shards; if they do not answer, the section keeps only what needs no shard).
pub async fn varz_async(ctx: &Context) -> Varz {
    let mut v = varz(ctx);
    if let Some(plan) = super::jsz::usage_plan(ctx, true) {
        v.jetstream = plan
            .run_async(ctx)
            .await
            .unwrap_or_else(|_| jetstream_without_shards(ctx));
    }
    v
}

/// `/varz` with its `jetstream` section, from a shard (the system services).
pub fn varz_on_shard(
    core: &mut crate::core::shard::ShardCore,
    ctx: &std::sync::Arc<Context>,
    done: super::gather::Done<Varz>,
    now: Instant,
) {
    let v = varz(ctx);
    let Some(plan) = super::jsz::usage_plan(ctx, true) else {
        return done(core, Ok(v), now);
    };
    let ctx2 = ctx.clone();
    plan.run_on_shard(
        core,
        Box::new(move |core, r, now| {
            let mut v = v;
            v.jetstream = r.unwrap_or_else(|_| jetstream_without_shards(&ctx2));
            done(core, Ok(v), now)
        }),
        now,
    );
}

fn jetstream_without_shards(ctx: &Context) -> super::jsz_types::JetStreamVarz {
    let Some(js) = ctx.jetstream() else {
        return Default::default();
    };
    let o = &ctx.state().live().opts.jetstream;
    super::jsz_types::JetStreamVarz {
        config: Some(super::jsz::js_config(js, o, true)),
        stats: None,
        limits: Some(super::jsz::js_limits(o)),
    }
}

/// Resident set size of this process (`VmRSS`; 0 where /proc is missing).
pub fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Process CPU time in seconds, user + system (0 where /proc is missing). The kernel
/// reports it in `USER_HZ` ticks, 100 per second on Linux.
pub fn cpu_seconds() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The command name (field 2) may hold spaces; the fields after it are plain.
    let Some((_, rest)) = s.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (tick(11) + tick(12)) as f64 / 100.0
}

/// CPU percentage between samples (the first sample has nothing to compare with: 0).
#[derive(Default)]
pub(crate) struct CpuSampler {
    last: Option<(Instant, f64)>,
}

impl CpuSampler {
    pub(crate) fn sample(&mut self) -> f64 {
        let now = Instant::now();
        let cpu = cpu_seconds();
        let pct = match self.last {
            Some((t, c)) => {
                let dt = now.duration_since(t).as_secs_f64();
                if dt > 0.0 {
                    ((cpu - c) / dt * 100.0 * 10.0).round() / 10.0
                } else {
                    0.0
                }
            }
            None => 0.0,
        };
        self.last = Some((now, cpu));
        pct
    }
}
