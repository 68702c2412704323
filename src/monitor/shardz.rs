//! `/shardz` and `/stacksz`: rnats's own view of its shards, for seeing imbalance in a
//! thread-per-core server. Per shard: connections, subscriptions, messages and bytes in
//! and out (the published atomics), the event loop's turns, wake-ups and busy time, the
//! mesh (ring occupancy, bytes staged behind full rings, ring-full stalls), and what the
//! shard itself reports in a job. A shard that does not answer the job in time is still
//! listed with its atomics (`answered: false`), so a stuck shard shows up.

use super::gather::Plan;
use super::{json_time, Context, MonitorError};
use crate::core::report::ShardReport;
use crate::core::shard::ShardCore;
use crate::driver::MESH_RING_CAPACITY;
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::SystemTime;

/// The mesh as one shard sees it.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct MeshInfo {
    /// Batches each ring holds.
    pub ring_capacity: usize,
    /// Batches waiting in the ring from each shard (index = source shard).
    pub inbound_batches: Vec<usize>,
    /// Bytes staged for each shard that its ring has not taken yet (index = destination).
    pub staged_bytes: Vec<usize>,
    /// Times a batch found the ring to another shard full.
    pub ring_full_stalls: u64,
    /// Connections paused until the mesh drains.
    pub waiting_connections: usize,
}

/// The event loop of one shard.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct LoopInfo {
    pub iterations: u64,
    /// Times the shard slept and woke up again.
    pub wakeups: u64,
    /// Time spent working (not waiting for events), nanoseconds.
    pub busy_ns: u64,
}

/// One shard in `/shardz`.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardInfo {
    pub index: usize,
    /// The shard answered the job (its own report below is current).
    pub answered: bool,
    pub connections: u64,
    pub total_connections: u64,
    pub subscriptions: u64,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    pub slow_consumers: u64,
    pub stale_connections: u64,
    #[serde(rename = "loop")]
    pub event_loop: LoopInfo,
    pub mesh: MeshInfo,
    pub closing_connections: usize,
    pub internal_clients: usize,
    pub remote_interest: usize,
    pub accounts: usize,
    pub barriers: usize,
    pub timers: usize,
    pub internal_queue: usize,
    pub pending_bytes: usize,
    pub closed_kept: usize,
}

/// `/shardz`.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Shardz {
    pub server_id: String,
    pub now: String,
    pub reactor: String,
    pub num_shards: usize,
    pub shards: Vec<ShardInfo>,
}

fn plan() -> Plan<ShardReport, Vec<ShardReport>> {
    Plan::new(|core: &mut ShardCore, _| core.report_shard(), Ok)
}

/// Combine the atomics of every shard with the reports that came back.
pub(crate) fn build(ctx: &Context, reports: Option<Vec<ShardReport>>) -> Shardz {
    let state = ctx.state();
    let mut shards = Vec::with_capacity(state.shared.shards.len());
    for (i, s) in state.shared.shards.iter().enumerate() {
        let c = s.snapshot();
        let l = s.loop_snapshot();
        let r = reports.as_ref().and_then(|v| v.iter().find(|r| r.index == i));
        let mut info = ShardInfo {
            index: i,
            answered: r.is_some(),
            connections: c.connections,
            total_connections: c.total_connections,
            subscriptions: c.subscriptions,
            in_msgs: c.in_msgs,
            out_msgs: c.out_msgs,
            in_bytes: c.in_bytes,
            out_bytes: c.out_bytes,
            slow_consumers: c.slow_consumers,
            stale_connections: c.stale_connections,
            event_loop: LoopInfo {
                iterations: l.turns,
                wakeups: l.wakeups,
                busy_ns: l.busy_ns,
            },
            mesh: MeshInfo {
                ring_capacity: if state.nshards > 1 { MESH_RING_CAPACITY } else { 0 },
                ring_full_stalls: c.mesh_ring_full,
                ..Default::default()
            },
            ..Default::default()
        };
        if let Some(r) = r {
            info.mesh.inbound_batches = r.mesh_inbound.clone();
            info.mesh.staged_bytes = r.mesh_staged.clone();
            info.mesh.waiting_connections = r.mesh_waiters;
            info.closing_connections = r.closing;
            info.internal_clients = r.internal_clients;
            info.remote_interest = r.remote_interest;
            info.accounts = r.accounts;
            info.barriers = r.barriers;
            info.timers = r.timers;
            info.internal_queue = r.internal_queue;
            info.pending_bytes = r.pending_bytes;
            info.closed_kept = r.closed_kept;
        }
        shards.push(info);
    }
    Shardz {
        server_id: ctx.server_id(),
        now: json_time(SystemTime::now()),
        reactor: state.reactor.clone(),
        num_shards: state.nshards,
        shards,
    }
}

/// `/shardz`, from a thread that may block (never fails: silent shards are marked).
pub fn shardz(ctx: &Arc<Context>) -> Shardz {
    let reports = plan().run_blocking(ctx).ok();
    build(ctx, reports)
}

/// `/shardz` from async code.
pub async fn shardz_async(ctx: &Arc<Context>) -> Shardz {
    let reports: Result<Vec<ShardReport>, MonitorError> = plan().run_async(ctx).await;
    build(ctx, reports.ok())
}

/// The threads of this process with their state letter (Linux; empty elsewhere).
fn threads() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let tid = e.file_name().to_string_lossy().into_owned();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let name = stat
            .split_once('(')
            .and_then(|(_, r)| r.rsplit_once(')'))
            .map(|(n, _)| n.to_string())
            .unwrap_or_default();
        let st = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        out.push((tid, name, st));
    }
    out.sort_by_key(|(tid, _, _)| tid.parse::<u64>().unwrap_or(0));
    out
}

/// `/stacksz`: each shard's state as text, and the process's threads.
pub fn stacksz_text(z: &Shardz) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "rnats {}: {} shards on the {} reactor",
        crate::server::RNATS_VERSION,
        z.num_shards,
        z.reactor
    );
    for sh in &z.shards {
        let _ = writeln!(
            s,
            "\nshard {}{}",
            sh.index,
            if sh.answered {
                ""
            } else {
                " (did not answer: counters only)"
            }
        );
        let _ = writeln!(
            s,
            "  connections {} (closing {}, internal {}), subscriptions {}, remote interest {}",
            sh.connections, sh.closing_connections, sh.internal_clients, sh.subscriptions, sh.remote_interest
        );
        let _ = writeln!(
            s,
            "  in {} msgs / {} bytes, out {} msgs / {} bytes, pending output {} bytes",
            sh.in_msgs, sh.in_bytes, sh.out_msgs, sh.out_bytes, sh.pending_bytes
        );
        let _ = writeln!(
            s,
            "  loop: {} iterations, {} wake-ups, busy {} ms",
            sh.event_loop.iterations,
            sh.event_loop.wakeups,
            sh.event_loop.busy_ns / 1_000_000
        );
        let _ = writeln!(
            s,
            "  mesh: inbound batches {:?}, staged bytes {:?}, ring-full stalls {}, waiting connections {}",
            sh.mesh.inbound_batches, sh.mesh.staged_bytes, sh.mesh.ring_full_stalls, sh.mesh.waiting_connections
        );
        let _ = writeln!(
            s,
            "  timers {}, barriers {}, internal queue {}, accounts {}, closed kept {}",
            sh.timers, sh.barriers, sh.internal_queue, sh.accounts, sh.closed_kept
        );
    }
    let th = threads();
    if !th.is_empty() {
        let _ = writeln!(s, "\nthreads:");
        for (tid, name, st) in th {
            let _ = writeln!(s, "  {tid} {name} [{st}]");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacksz_marks_silent_shards() {
        let z = Shardz {
            num_shards: 2,
            reactor: "mio".into(),
            shards: vec![
                ShardInfo {
                    index: 0,
                    answered: true,
                    connections: 3,
                    ..Default::default()
                },
                ShardInfo {
                    index: 1,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let t = stacksz_text(&z);
        assert!(t.contains("2 shards on the mio reactor"), "{t}");
        assert!(t.contains("shard 0\n  connections 3"), "{t}");
        assert!(t.contains("shard 1 (did not answer: counters only)"), "{t}");
    }
}
