//! Server statistics. Each shard counts in plain integers on its hot path and publishes
//! them into its own cache-line-aligned atomics once per processing step; readers
//! (monitoring) sum all shards. Single writer per slot: relaxed loads and stores suffice.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Counters of one shard, as last published.
#[derive(Default)]
#[repr(align(128))]
pub struct ShardStats {
    pub in_msgs: AtomicU64,
    pub in_bytes: AtomicU64,
    pub out_msgs: AtomicU64,
    pub out_bytes: AtomicU64,
    pub slow_consumers: AtomicU64,
    pub stalls: AtomicU64,
    pub stale_connections: AtomicU64,
    pub subscriptions: AtomicU64,
    pub connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub mesh_ring_full: AtomicU64,
    /// The driver's loop, published by the event loop itself (`/shardz`): turns, times it
    /// slept and woke up, and nanoseconds spent working (not waiting).
    pub loop_turns: AtomicU64,
    pub wakeups: AtomicU64,
    pub busy_ns: AtomicU64,
}

/// The shard-local working copy.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counters {
    pub in_msgs: u64,
    pub in_bytes: u64,
    pub out_msgs: u64,
    pub out_bytes: u64,
    pub slow_consumers: u64,
    /// Times a producer was stalled for a consumer falling behind (`stalled_clients`).
    pub stalls: u64,
    pub stale_connections: u64,
    pub subscriptions: u64,
    pub connections: u64,
    pub total_connections: u64,
    /// Times a batch found the ring to another shard full.
    pub mesh_ring_full: u64,
}

/// The event loop's own counters (see [`ShardStats::publish_loop`]).
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopCounters {
    pub turns: u64,
    pub wakeups: u64,
    pub busy_ns: u64,
}

impl ShardStats {
    /// The event loop publishes its counters (single writer: the shard thread).
    pub fn publish_loop(&self, l: &LoopCounters) {
        let r = Ordering::Relaxed;
        self.loop_turns.store(l.turns, r);
        self.wakeups.store(l.wakeups, r);
        self.busy_ns.store(l.busy_ns, r);
    }

    /// The event loop's counters as last published.
    pub fn loop_snapshot(&self) -> LoopCounters {
        let r = Ordering::Relaxed;
        LoopCounters {
            turns: self.loop_turns.load(r),
            wakeups: self.wakeups.load(r),
            busy_ns: self.busy_ns.load(r),
        }
    }

    pub fn publish(&self, c: &Counters) {
        let r = Ordering::Relaxed;
        self.in_msgs.store(c.in_msgs, r);
        self.in_bytes.store(c.in_bytes, r);
        self.out_msgs.store(c.out_msgs, r);
        self.out_bytes.store(c.out_bytes, r);
        self.slow_consumers.store(c.slow_consumers, r);
        self.stalls.store(c.stalls, r);
        self.stale_connections.store(c.stale_connections, r);
        self.subscriptions.store(c.subscriptions, r);
        self.connections.store(c.connections, r);
        self.total_connections.store(c.total_connections, r);
        self.mesh_ring_full.store(c.mesh_ring_full, r);
    }

    pub fn snapshot(&self) -> Counters {
        let r = Ordering::Relaxed;
        Counters {
            in_msgs: self.in_msgs.load(r),
            in_bytes: self.in_bytes.load(r),
            out_msgs: self.out_msgs.load(r),
            out_bytes: self.out_bytes.load(r),
            slow_consumers: self.slow_consumers.load(r),
            stalls: self.stalls.load(r),
            stale_connections: self.stale_connections.load(r),
            subscriptions: self.subscriptions.load(r),
            connections: self.connections.load(r),
            total_connections: self.total_connections.load(r),
            mesh_ring_full: self.mesh_ring_full.load(r),
        }
    }
}

impl std::ops::AddAssign for Counters {
    fn add_assign(&mut self, o: Counters) {
        self.in_msgs += o.in_msgs;
        self.in_bytes += o.in_bytes;
        self.out_msgs += o.out_msgs;
        self.out_bytes += o.out_bytes;
        self.slow_consumers += o.slow_consumers;
        self.stalls += o.stalls;
        self.stale_connections += o.stale_connections;
        self.subscriptions += o.subscriptions;
        self.connections += o.connections;
        self.total_connections += o.total_connections;
        self.mesh_ring_full += o.mesh_ring_full;
    }
}

/// State every shard shares: counters per shard, and the few global numbers that must be
/// agreed on (client ids, the connection limit, account ids).
pub struct Shared {
    pub shards: Box<[ShardStats]>,
    next_cid: AtomicU64,
    /// Open client connections across all shards (enforces `max_connections`).
    pub open_conns: AtomicI64,
    /// Connections still to close after a reload lowered `max_connections` (each shard
    /// closes some of its own while this is above zero; see `ShardCore::reconfigure`).
    pub conn_trim: AtomicI64,
    /// Account ids and the current account table (read by shards when it changes).
    pub accounts: crate::core::accounts::AccountRegistry,
    /// Random per server: seeds the account prefixes of service response subjects.
    pub reply_seed: u64,
}

impl Shared {
    pub fn new(nshards: usize) -> Self {
        Shared {
            shards: (0..nshards).map(|_| ShardStats::default()).collect(),
            next_cid: AtomicU64::new(1),
            open_conns: AtomicI64::new(0),
            conn_trim: AtomicI64::new(0),
            accounts: crate::core::accounts::AccountRegistry::new(),
            reply_seed: rand::random(),
        }
    }

    /// A fresh, server-wide unique client id.
    pub fn next_cid(&self) -> u64 {
        self.next_cid.fetch_add(1, Ordering::Relaxed)
    }

    /// Sum over all shards.
    pub fn totals(&self) -> Counters {
        let mut t = Counters::default();
        for s in self.shards.iter() {
            t += s.snapshot();
        }
        t
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("shards", &self.shards.len()).finish()
    }
}
