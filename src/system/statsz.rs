//! The server's statistics message (`{"server":..., "statsz":...}`, nats-server's
//! `ServerStatsMsg`), sent on `$SYS.SERVER.<id>.STATSZ` and in answer to
//! `$SYS.REQ.SERVER.PING[.STATSZ]`, and the cadence of the broadcast: the first 250 ms
//! after the system account starts, then at doubling intervals up to every 10 s, never
//! more than once a second, and only while someone listens (a standalone server).

use super::System;
use crate::core::shard::ShardCore;
use crate::monitor::jsz_types::JetStreamVarz;
use crate::monitor::varz::ScStats;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The first broadcast interval.
pub const FIRST: Duration = Duration::from_millis(250);
/// The longest interval (nats-server's `statsHBInterval`).
pub const MAX: Duration = Duration::from_secs(10);
/// Broadcasts are at least this far apart (`statszRateLimit`).
pub const RATE_LIMIT: Duration = Duration::from_secs(1);

/// When the next broadcast is due and when the last went out.
#[derive(Debug)]
pub struct Clock {
    /// The current interval (doubles up to [`MAX`]).
    interval: Duration,
    /// The timer's next expiry.
    pub next: Instant,
    last: Option<Instant>,
}

impl Clock {
    pub fn new(start: Instant) -> Clock {
        Clock {
            interval: FIRST,
            next: start + FIRST,
            last: None,
        }
    }

    /// The timer expired at `now`: lengthen the interval, schedule the next expiry, and
    /// say whether the broadcast goes out (the rate limit may move the expiry instead).
    pub fn fire(&mut self, now: Instant) -> bool {
        if self.interval < MAX {
            self.interval = (self.interval * 2).min(MAX);
        }
        self.next = now + self.interval;
        self.allow(now)
    }

    /// A broadcast asked for at `now` (nats-server's `limitStatsz`): allowed at most once
    /// per `min(1 s, interval)`; a refused one moves the timer to when it would be allowed.
    pub fn allow(&mut self, now: Instant) -> bool {
        let gap = RATE_LIMIT.min(self.interval);
        if let Some(last) = self.last {
            if now.saturating_duration_since(last) < gap {
                self.next = last + gap;
                return false;
            }
        }
        self.last = Some(now);
        true
    }

    /// A `$SYS.REQ.SERVER.PING` without a reply lifts the rate limit for one broadcast.
    pub fn reset(&mut self) {
        self.last = None;
    }
}

/// `{msgs, bytes}`.
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsgBytes {
    pub msgs: u64,
    pub bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// nats-server's `ServerStats` (the fields a server without routes and gateways has).
#[derive(Serialize, Clone, Debug, Default)]
pub struct ServerStats {
    pub start: String,
    pub mem: u64,
    pub cores: usize,
    pub cpu: f64,
    pub connections: u64,
    pub total_connections: u64,
    pub active_accounts: u64,
    pub subscriptions: u64,
    pub sent: MsgBytes,
    pub received: MsgBytes,
    pub slow_consumers: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_consumer_stats: Option<ScStats>,
    #[serde(skip_serializing_if = "is_zero")]
    pub stale_connections: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_connection_stats: Option<ScStats>,
    #[serde(skip_serializing_if = "is_zero")]
    pub stalled_clients: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub active_servers: u64,
    /// JetStream's configuration (without the store directory), usage and limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<JetStreamVarz>,
    #[serde(skip_serializing_if = "is_zero")]
    pub gomaxprocs: u64,
}

/// The statistics now (from the shards' published counters; no shard is asked).
pub fn stats(sys: &System) -> ServerStats {
    let state = sys.monitor.state();
    let t = state.shared.totals();
    let table = state.shared.accounts.snapshot();
    let system = table.system();
    let active = table
        .iter()
        .filter(|d| Some(d.id) == system || d.conns.load(std::sync::atomic::Ordering::Relaxed) > 0)
        .count() as u64;
    let some = |n: u64| {
        (n > 0).then(|| ScStats {
            clients: n,
            ..Default::default()
        })
    };
    ServerStats {
        start: crate::proto::gotime::rfc3339_nano(state.start),
        mem: crate::monitor::varz::rss_bytes(),
        cores: sys.cores,
        cpu: sys.cpu_percent(),
        connections: t.connections,
        total_connections: t.total_connections,
        active_accounts: active,
        subscriptions: t.subscriptions + table.iter().map(|d| crate::monitor::import_subs(d)).sum::<u64>(),
        sent: MsgBytes {
            msgs: t.out_msgs,
            bytes: t.out_bytes,
        },
        received: MsgBytes {
            msgs: t.in_msgs,
            bytes: t.in_bytes,
        },
        slow_consumers: t.slow_consumers,
        slow_consumer_stats: some(t.slow_consumers),
        stale_connections: t.stale_connections,
        stale_connection_stats: some(t.stale_connections),
        stalled_clients: 0,
        active_servers: 1,
        jetstream: None,
        gomaxprocs: state.nshards as u64,
    }
}

/// `{"server":...,"statsz":...}` with the next sequence number and `jetstream` (if it
/// runs, from the shards' usage).
pub fn message(sys: &System, jetstream: Option<JetStreamVarz>) -> Vec<u8> {
    #[derive(Serialize)]
    struct Msg<'a> {
        server: super::envelope::ServerInfo<'a>,
        statsz: ServerStats,
    }
    let mut statsz = stats(sys);
    statsz.jetstream = jetstream;
    crate::proto::gojson::to_vec(&Msg {
        server: sys.server().info(),
        statsz,
    })
}

/// Build the statistics message and hand it to `send` on this shard: at once without
/// JetStream, after asking the shards for JetStream's usage with it.
pub fn with_message(
    core: &mut ShardCore,
    sys: &Arc<System>,
    send: impl FnOnce(&mut ShardCore, Vec<u8>, Instant) + Send + 'static,
    now: Instant,
) {
    let Some(plan) = crate::monitor::jsz::usage_plan(&sys.monitor, false) else {
        return send(core, message(sys, None), now);
    };
    let sys = sys.clone();
    plan.run_on_shard(
        core,
        Box::new(move |core: &mut ShardCore, r, now| send(core, message(&sys, r.ok()), now)),
        now,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The broadcasts of a server nobody asks, as nats-server 2.14.0 sent them (measured:
    /// 0.25 s, 1.25 s, 3.25 s, 7.25 s, 15.25 s, 25.25 s, then every 10 s).
    #[test]
    fn cadence_matches_the_reference() {
        let t0 = Instant::now();
        let mut c = Clock::new(t0);
        let mut sent = Vec::new();
        for _ in 0..12 {
            let now = c.next;
            if c.fire(now) {
                sent.push(now.duration_since(t0).as_millis());
            }
        }
        assert_eq!(&sent[..8], &[250, 1250, 3250, 7250, 15250, 25250, 35250, 45250]);
    }

    #[test]
    fn rate_limit_and_reset() {
        let t0 = Instant::now();
        let mut c = Clock::new(t0);
        assert!(c.allow(t0));
        // Within a quarter second (the first interval) of the last: refused, timer moved.
        assert!(!c.allow(t0 + Duration::from_millis(100)));
        assert_eq!(c.next, t0 + FIRST);
        c.reset();
        assert!(c.allow(t0 + Duration::from_millis(150)));
    }
}
