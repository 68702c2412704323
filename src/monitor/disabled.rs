//! What nats-server answers on `/routez`, `/gatewayz`, `/leafz` and `/raftz` while
//! clustering, gateways and leaf nodes are off (rnats does not have them yet), the option
//! fields of their `$SYS` requests (and `/jsz`'s, see [`super::jsz`]), and `/ipqueuesz` with rnats's own queues: each shard's internal delivery queue
//! and its inbound mesh rings.

use super::gather::Plan;
use super::optjson::{self, f, EventFilter, Field, Kind, Val};
use super::{json_time, Context, MonitorError};
use crate::core::report::ShardReport;
use crate::core::shard::ShardCore;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

/// `/routez` without routes.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Routez {
    pub server_id: String,
    pub server_name: String,
    pub now: String,
    pub num_routes: u64,
    pub routes: Vec<serde_json::Value>,
}

/// `/gatewayz` without gateways.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Gatewayz {
    pub server_id: String,
    pub now: String,
    pub outbound_gateways: BTreeMap<String, serde_json::Value>,
    pub inbound_gateways: BTreeMap<String, serde_json::Value>,
}

/// `/leafz` without leaf nodes.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Leafz {
    pub server_id: String,
    pub now: String,
    pub leafnodes: u64,
    pub leafs: Vec<serde_json::Value>,
}

pub fn routez(ctx: &Context) -> Routez {
    let live = ctx.state().live();
    Routez {
        server_id: live.info.server_id.clone(),
        server_name: live.info.server_name.clone(),
        now: json_time(SystemTime::now()),
        ..Default::default()
    }
}

pub fn gatewayz(ctx: &Context) -> Gatewayz {
    Gatewayz {
        server_id: ctx.server_id(),
        now: json_time(SystemTime::now()),
        ..Default::default()
    }
}

pub fn leafz(ctx: &Context) -> Leafz {
    Leafz {
        server_id: ctx.server_id(),
        now: json_time(SystemTime::now()),
        ..Default::default()
    }
}

/// Options of the `$SYS` requests for the endpoints of this file: the JSON fields of
/// nats-server's `*EventOptions` (type-checked like Go does; the values change nothing
/// while the features are off).
pub const ROUTEZ_FIELDS: [Field; 2] = [
    f("subscriptions", "RoutezOptions", Kind::Bool),
    f("subscriptions_detail", "RoutezOptions", Kind::Bool),
];
pub const GATEWAYZ_FIELDS: [Field; 5] = [
    f("name", "GatewayzOptions", Kind::Str),
    f("accounts", "GatewayzOptions", Kind::Bool),
    f("account_name", "GatewayzOptions", Kind::Str),
    f("subscriptions", "GatewayzOptions", Kind::Bool),
    f("subscriptions_detail", "GatewayzOptions", Kind::Bool),
];
pub const LEAFZ_FIELDS: [Field; 2] = [
    f("subscriptions", "LeafzOptions", Kind::Bool),
    f("account", "LeafzOptions", Kind::Str),
];
pub const JSZ_FIELDS: [Field; 11] = [
    f("account", "JSzOptions", Kind::Str),
    f("accounts", "JSzOptions", Kind::Bool),
    f("streams", "JSzOptions", Kind::Bool),
    f("consumer", "JSzOptions", Kind::Bool),
    f("direct_consumer", "JSzOptions", Kind::Bool),
    f("config", "JSzOptions", Kind::Bool),
    f("leader_only", "JSzOptions", Kind::Bool),
    f("offset", "JSzOptions", Kind::Int),
    f("limit", "JSzOptions", Kind::Int),
    f("raft", "JSzOptions", Kind::Bool),
    f("stream_leader_only", "JSzOptions", Kind::Bool),
];
pub const RAFTZ_FIELDS: [Field; 2] = [
    f("account", "RaftzOptions", Kind::Str),
    f("group", "RaftzOptions", Kind::Str),
];
pub const IPQUEUESZ_FIELDS: [Field; 2] = [
    f("all", "IpqueueszOptions", Kind::Bool),
    f("filter", "IpqueueszOptions", Kind::Str),
];

/// Decoded option values by JSON name, in document order.
pub type Values = Vec<(&'static str, Val)>;

/// Decode a `$SYS` request body for `outer` (`RoutezEventOptions`, `JszEventOptions`, ...,
/// `VarzEventOptions` and `ExpvarzEventOptions` with no fields of their own): the filter
/// and the endpoint's own values by JSON name.
pub fn event_options(body: &[u8], outer: &str, fields: &[Field]) -> Result<(Values, EventFilter), String> {
    let mut filter = EventFilter::default();
    if body.is_empty() {
        return Ok((Vec::new(), filter));
    }
    let all: Vec<Field> = fields.iter().chain(EventFilter::FIELDS.iter()).copied().collect();
    let mut own = Vec::new();
    for (name, v) in optjson::decode(body, outer, &all)? {
        if !filter.take(name, &v) {
            own.push((name, v));
        }
    }
    Ok((own, filter))
}

/// `/raftz`: no raft groups exist.
pub fn raftz() -> MonitorError {
    MonitorError::NotFound("No Raft nodes registered".into())
}

/// One queue of `/ipqueuesz`.
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpQueue {
    pub pending: usize,
    #[serde(skip_serializing_if = "is_zero")]
    pub in_progress: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The queues of one shard, by name.
fn shard_queues(r: &ShardReport) -> Vec<(String, IpQueue)> {
    let mut out = vec![(
        format!("shard {} internal deliveries", r.index),
        IpQueue {
            pending: r.internal_queue,
            in_progress: 0,
        },
    )];
    for (src, n) in r.mesh_inbound.iter().enumerate() {
        if src != r.index {
            out.push((
                format!("shard {} mesh from shard {src}", r.index),
                IpQueue {
                    pending: *n,
                    in_progress: 0,
                },
            ));
        }
    }
    out
}

/// `/ipqueuesz`: `all` includes empty queues, `filter` keeps names containing it.
pub fn ipqueuesz_plan(all: bool, filter: String) -> Plan<ShardReport, BTreeMap<String, IpQueue>> {
    Plan::new(
        |core: &mut ShardCore, _| core.report_shard(),
        move |parts: Vec<ShardReport>| {
            let mut out = BTreeMap::new();
            for r in &parts {
                for (name, q) in shard_queues(r) {
                    if !all && q.pending == 0 && q.in_progress == 0 {
                        continue;
                    }
                    if !filter.is_empty() && !name.contains(&filter) {
                        continue;
                    }
                    out.insert(name, q);
                }
            }
            Ok(out)
        },
    )
}

/// `/ipqueuesz` from a thread that may block.
pub fn ipqueuesz(ctx: &Arc<Context>, all: bool, filter: &str) -> Result<BTreeMap<String, IpQueue>, MonitorError> {
    ipqueuesz_plan(all, filter.to_string()).run_blocking(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_options_check_types_and_split_the_filter() {
        let (own, fl) =
            event_options(br#"{"leader_only":true,"host":"h"}"#, "JszEventOptions", &JSZ_FIELDS).unwrap_or_default();
        assert_eq!(own, vec![("leader_only", Val::Bool(true))]);
        assert_eq!(fl.host, "h");
        assert_eq!(
            event_options(br#"{"limit":"x"}"#, "JszEventOptions", &JSZ_FIELDS).err(),
            Some(
                "json: cannot unmarshal string into Go struct field JszEventOptions.JSzOptions.limit of type int"
                    .into()
            )
        );
        assert_eq!(
            event_options(b"", "VarzEventOptions", &[]),
            Ok((vec![], EventFilter::default()))
        );
    }

    #[test]
    fn shard_queues_name_every_ring_but_its_own() {
        let r = ShardReport {
            index: 1,
            mesh_inbound: vec![2, 0, 5],
            internal_queue: 3,
            ..Default::default()
        };
        let names: Vec<String> = shard_queues(&r).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            vec![
                "shard 1 internal deliveries".to_string(),
                "shard 1 mesh from shard 0".to_string(),
                "shard 1 mesh from shard 2".to_string()
            ]
        );
    }
}
