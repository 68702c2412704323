//! `/metrics`: the Prometheus text exposition format (version 0.0.4) of the varz, connz,
//! subsz, accstatz, jsz and shardz counters, so no exporter sidecar is needed. The metric
//! names and labels are stable and listed in README.md ("Monitoring"): `nats_*` for what
//! nats-server's endpoints report, `rnats_shard_*` for the shards. One job per shard
//! gathers everything a scrape needs.

use super::gather::Plan;
use super::shardz::Shardz;
use super::{varz, Context, MonitorError};
use crate::core::report::{AccountPart, ShardReport, SubQuery, SublistStats};
use crate::core::shard::ShardCore;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::SystemTime;

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What one shard contributes to a scrape.
pub struct MetricsPart {
    pub shard: ShardReport,
    pub accounts: Vec<AccountPart>,
    pub sublist: SublistStats,
}

/// Text being written: families with their HELP and TYPE lines, then samples.
#[derive(Default)]
struct Out {
    s: String,
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.s, "# HELP {name} {help}");
        let _ = writeln!(self.s, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.s.push_str(name);
        if !labels.is_empty() {
            self.s.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.s.push(',');
                }
                let _ = write!(self.s, "{k}=\"{}\"", escape(val));
            }
            self.s.push('}');
        }
        let _ = writeln!(self.s, " {v}");
    }

    /// A family with one unlabelled sample.
    fn one(&mut self, name: &str, kind: &str, help: &str, v: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], v);
    }
}

fn plan() -> Plan<MetricsPart, Vec<MetricsPart>> {
    Plan::new(
        |core: &mut ShardCore, _| MetricsPart {
            shard: core.report_shard(),
            accounts: core.report_accounts(None),
            sublist: core.report_subs(&SubQuery::default()).stats,
        },
        Ok,
    )
}

/// The exposition for the parts the shards gave (`None`: they did not answer; then the
/// published counters are still written).
fn render(ctx: &Context, parts: Option<Vec<MetricsPart>>) -> String {
    let v = varz::varz(ctx);
    let mut o = Out::default();
    o.family("nats_server_info", "gauge", "Server identity (always 1).");
    o.sample(
        "nats_server_info",
        &[
            ("server_id", &v.server_id),
            ("server_name", &v.server_name),
            ("version", &v.version),
            ("rnats_version", crate::server::RNATS_VERSION),
            ("reactor", &v.rnats_reactor),
        ],
        1.0,
    );
    let start = ctx
        .state()
        .start
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    o.one(
        "nats_server_start_time_seconds",
        "gauge",
        "When the server started (Unix time).",
        start,
    );
    o.one(
        "nats_server_shards",
        "gauge",
        "Number of shards (threads serving clients).",
        v.rnats_shards as f64,
    );
    o.one(
        "nats_server_cores",
        "gauge",
        "CPU cores available to the process.",
        v.cores as f64,
    );
    o.one(
        "nats_server_mem_bytes",
        "gauge",
        "Resident memory of the process.",
        v.mem as f64,
    );
    o.one(
        "nats_server_cpu_seconds_total",
        "counter",
        "CPU time used by the process.",
        varz::cpu_seconds(),
    );
    o.one(
        "nats_server_max_connections",
        "gauge",
        "Configured connection limit.",
        v.max_connections as f64,
    );
    o.one(
        "nats_server_max_payload_bytes",
        "gauge",
        "Configured payload limit.",
        v.max_payload as f64,
    );
    o.one(
        "nats_server_connections",
        "gauge",
        "Open client connections (varz connections).",
        v.connections as f64,
    );
    o.one(
        "nats_server_connections_total",
        "counter",
        "Client connections accepted since start (varz total_connections).",
        v.total_connections as f64,
    );
    o.one(
        "nats_server_subscriptions",
        "gauge",
        "Subscriptions, internal ones included.",
        v.subscriptions as f64,
    );
    o.one(
        "nats_server_in_msgs_total",
        "counter",
        "Messages received from clients.",
        v.in_msgs as f64,
    );
    o.one(
        "nats_server_out_msgs_total",
        "counter",
        "Messages sent to clients.",
        v.out_msgs as f64,
    );
    o.one(
        "nats_server_in_bytes_total",
        "counter",
        "Payload bytes received from clients.",
        v.in_bytes as f64,
    );
    o.one(
        "nats_server_out_bytes_total",
        "counter",
        "Payload bytes sent to clients.",
        v.out_bytes as f64,
    );
    o.one(
        "nats_server_slow_consumers_total",
        "counter",
        "Clients disconnected as slow consumers.",
        v.slow_consumers as f64,
    );
    o.one(
        "nats_server_stale_connections_total",
        "counter",
        "Connections closed for not answering PINGs.",
        v.stale_connections as f64,
    );
    o.family(
        "nats_server_http_requests_total",
        "counter",
        "Monitoring requests by endpoint (varz http_req_stats).",
    );
    for (path, n) in &v.http_req_stats {
        o.sample("nats_server_http_requests_total", &[("path", path)], *n as f64);
    }
    let js_on = if ctx.jetstream().is_some() { 1.0 } else { 0.0 };
    o.one("nats_jetstream_enabled", "gauge", "JetStream is enabled (jsz).", js_on);
    let Some(parts) = parts else {
        o.one(
            "rnats_shards_answered",
            "gauge",
            "Shards that answered this scrape.",
            0.0,
        );
        return o.s;
    };
    o.one(
        "rnats_shards_answered",
        "gauge",
        "Shards that answered this scrape.",
        parts.len() as f64,
    );

    // connz totals
    let pending: usize = parts.iter().map(|p| p.shard.pending_bytes).sum();
    let closing: usize = parts.iter().map(|p| p.shard.closing).sum();
    let closed: usize = parts.iter().map(|p| p.shard.closed_kept).sum();
    o.one(
        "nats_connz_pending_bytes",
        "gauge",
        "Output bytes queued for all connections.",
        pending as f64,
    );
    o.one(
        "nats_connz_closing_connections",
        "gauge",
        "Connections being closed.",
        closing as f64,
    );
    o.one(
        "nats_connz_closed_connections",
        "gauge",
        "Closed connections kept for connz state=closed.",
        closed as f64,
    );

    // subsz
    let mut sl = SublistStats::default();
    for p in &parts {
        sl.add(&p.sublist);
    }
    o.one(
        "nats_subsz_subscriptions",
        "gauge",
        "Sublist entries (subsz num_subscriptions).",
        sl.num_subs as f64,
    );
    o.one(
        "nats_subsz_cache_entries",
        "gauge",
        "Cached match results (subsz num_cache).",
        sl.num_cache as f64,
    );
    o.one(
        "nats_subsz_inserts_total",
        "counter",
        "Sublist inserts.",
        sl.inserts as f64,
    );
    o.one(
        "nats_subsz_removes_total",
        "counter",
        "Sublist removals.",
        sl.removes as f64,
    );
    o.one(
        "nats_subsz_matches_total",
        "counter",
        "Sublist lookups.",
        sl.matches as f64,
    );
    o.one(
        "nats_subsz_cache_hits_total",
        "counter",
        "Sublist lookups answered from the cache.",
        sl.cache_hits as f64,
    );
    o.one(
        "nats_subsz_max_fanout",
        "gauge",
        "Largest fanout of a cached result.",
        sl.max_fanout as f64,
    );
    o.one(
        "nats_subsz_avg_fanout",
        "gauge",
        "Mean fanout of the cached results.",
        sl.avg_fanout(),
    );

    // accstatz
    let mut accts: BTreeMap<String, AccountPart> = BTreeMap::new();
    for a in parts.iter().flat_map(|p| p.accounts.iter()) {
        let e = accts.entry(a.name.clone()).or_insert_with(|| AccountPart {
            id: a.id,
            name: a.name.clone(),
            ..Default::default()
        });
        e.conns += a.conns;
        e.subs += a.subs;
        e.totals += a.totals;
    }
    type Get = fn(&AccountPart) -> u64;
    let account_metrics: [(&str, &str, &str, Get); 7] = [
        (
            "nats_account_connections",
            "gauge",
            "Client connections of the account.",
            |a| a.conns,
        ),
        (
            "nats_account_subscriptions",
            "gauge",
            "Subscriptions of the account.",
            |a| a.subs,
        ),
        (
            "nats_account_received_msgs_total",
            "counter",
            "Messages the account's clients published.",
            |a| a.totals.in_msgs,
        ),
        (
            "nats_account_received_bytes_total",
            "counter",
            "Bytes the account's clients published.",
            |a| a.totals.in_bytes,
        ),
        (
            "nats_account_sent_msgs_total",
            "counter",
            "Messages delivered to the account's clients.",
            |a| a.totals.out_msgs,
        ),
        (
            "nats_account_sent_bytes_total",
            "counter",
            "Bytes delivered to the account's clients.",
            |a| a.totals.out_bytes,
        ),
        (
            "nats_account_slow_consumers_total",
            "counter",
            "Slow consumers among the account's clients.",
            |a| a.totals.slow_consumers,
        ),
    ];
    for (name, kind, help, get) in account_metrics {
        o.family(name, kind, help);
        for a in accts.values() {
            o.sample(name, &[("account", &a.name)], get(a) as f64);
        }
    }

    // shardz
    let z: Shardz = super::shardz::build(ctx, Some(parts.iter().map(|p| p.shard.clone()).collect()));
    type GetS = fn(&super::shardz::ShardInfo) -> f64;
    let shard_metrics: [(&str, &str, &str, GetS); 14] = [
        (
            "rnats_shard_connections",
            "gauge",
            "Client connections of the shard.",
            |s| s.connections as f64,
        ),
        (
            "rnats_shard_subscriptions",
            "gauge",
            "Subscriptions held by the shard.",
            |s| s.subscriptions as f64,
        ),
        (
            "rnats_shard_in_msgs_total",
            "counter",
            "Messages received by the shard's clients.",
            |s| s.in_msgs as f64,
        ),
        (
            "rnats_shard_out_msgs_total",
            "counter",
            "Messages sent to the shard's clients.",
            |s| s.out_msgs as f64,
        ),
        (
            "rnats_shard_in_bytes_total",
            "counter",
            "Bytes received by the shard's clients.",
            |s| s.in_bytes as f64,
        ),
        (
            "rnats_shard_out_bytes_total",
            "counter",
            "Bytes sent to the shard's clients.",
            |s| s.out_bytes as f64,
        ),
        (
            "rnats_shard_loop_iterations_total",
            "counter",
            "Event loop turns.",
            |s| s.event_loop.iterations as f64,
        ),
        (
            "rnats_shard_wakeups_total",
            "counter",
            "Times the shard slept and woke up.",
            |s| s.event_loop.wakeups as f64,
        ),
        (
            "rnats_shard_busy_seconds_total",
            "counter",
            "Time the shard spent working, not waiting.",
            |s| s.event_loop.busy_ns as f64 / 1e9,
        ),
        (
            "rnats_shard_mesh_ring_full_total",
            "counter",
            "Batches that found a mesh ring full.",
            |s| s.mesh.ring_full_stalls as f64,
        ),
        (
            "rnats_shard_mesh_waiting_connections",
            "gauge",
            "Connections paused until the mesh drains.",
            |s| s.mesh.waiting_connections as f64,
        ),
        (
            "rnats_shard_pending_bytes",
            "gauge",
            "Output bytes queued for the shard's connections.",
            |s| s.pending_bytes as f64,
        ),
        (
            "rnats_shard_internal_queue",
            "gauge",
            "Internal deliveries waiting for their handlers.",
            |s| s.internal_queue as f64,
        ),
        (
            "rnats_shard_remote_interest",
            "gauge",
            "Interest entries other shards told this one about.",
            |s| s.remote_interest as f64,
        ),
    ];
    for (name, kind, help, get) in shard_metrics {
        o.family(name, kind, help);
        for s in &z.shards {
            o.sample(name, &[("shard", &s.index.to_string())], get(s));
        }
    }
    o.family(
        "rnats_shard_mesh_inbound_batches",
        "gauge",
        "Batches waiting in the mesh ring from shard `from` to shard `shard`.",
    );
    for s in &z.shards {
        for (from, n) in s.mesh.inbound_batches.iter().enumerate() {
            if from != s.index {
                o.sample(
                    "rnats_shard_mesh_inbound_batches",
                    &[("shard", &s.index.to_string()), ("from", &from.to_string())],
                    *n as f64,
                );
            }
        }
    }
    o.family(
        "rnats_shard_mesh_staged_bytes",
        "gauge",
        "Bytes shard `shard` has staged for shard `to` that the ring has not taken yet.",
    );
    for s in &z.shards {
        for (to, n) in s.mesh.staged_bytes.iter().enumerate() {
            if to != s.index {
                o.sample(
                    "rnats_shard_mesh_staged_bytes",
                    &[("shard", &s.index.to_string()), ("to", &to.to_string())],
                    *n as f64,
                );
            }
        }
    }
    o.s
}

/// `/metrics` from async code.
pub async fn metrics_async(ctx: &Arc<Context>) -> String {
    let parts: Result<Vec<MetricsPart>, MonitorError> = plan().run_async(ctx).await;
    render(ctx, parts.ok())
}

/// `/metrics` from a thread that may block.
pub fn metrics(ctx: &Arc<Context>) -> String {
    render(ctx, plan().run_blocking(ctx).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_and_labels_are_escaped() {
        let mut o = Out::default();
        o.family("x_total", "counter", "Help.");
        o.sample("x_total", &[("a", "q\"b\\c\nd"), ("shard", "0")], 3.0);
        o.sample("x_total", &[], 0.5);
        assert_eq!(
            o.s,
            "# HELP x_total Help.\n# TYPE x_total counter\nx_total{a=\"q\\\"b\\\\c\\nd\",shard=\"0\"} 3\nx_total 0.5\n"
        );
    }
}
