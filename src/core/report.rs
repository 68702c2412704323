//! What a shard tells monitoring about itself, as plain owned data: its connections (open
//! and recently closed), their subscriptions, its share of each account, and its own
//! counters. Shards build these in jobs (`core::shard::report`); the monitor merges the
//! parts of every shard into nats-server's JSON (`crate::monitor`).
//!
//! Ownership: everything here is a copy. The closed-connection ring ([`ClosedRing`]) is
//! per shard, owned by the shard and filled when one of its connections closes; the
//! monitor sees it only through copies handed out by jobs.

use super::accounts::AccountId;
use super::client::ClosedState;
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// One subscription, as `/connz` and `/subsz` list it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubReport {
    /// The account whose sublist holds it.
    pub account: String,
    /// That account's name tag (its JWT `name`, or its name).
    pub account_tag: String,
    pub subject: String,
    pub queue: Option<String>,
    pub sid: String,
    /// Messages delivered to it.
    pub msgs: u64,
    /// Auto-unsubscribe limit (0: none).
    pub max: u64,
    /// Its connection's id (0 for the server's internal clients).
    pub cid: u64,
}

/// TLS details of a connection (once its handshake is done).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsReport {
    pub version: String,
    pub cipher_suite: String,
    pub first: bool,
    /// The client's certificates, leaf first.
    pub peer_certs: Vec<PeerCertReport>,
}

/// One client certificate as `/connz?auth=1` shows it (nats-server's `TLSPeerCert`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerCertReport {
    pub subject: String,
    pub spki_sha256: String,
    pub cert_sha256: String,
}

/// One connection: open, or closed and kept in a shard's ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnReport {
    pub cid: u64,
    /// `Client` (later also `Leafnode`).
    pub kind: &'static str,
    /// `nats` (later `websocket`, `mqtt`).
    pub conn_type: &'static str,
    pub ip: String,
    pub port: u16,
    pub start: SystemTime,
    pub last_activity: SystemTime,
    /// Set for closed connections.
    pub stop: Option<SystemTime>,
    pub reason: Option<ClosedState>,
    /// Zero until measured.
    pub rtt: Duration,
    pub pending: usize,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    pub stalls: u64,
    pub num_subs: u32,
    pub name: String,
    pub lang: String,
    pub version: String,
    /// The bound account's name.
    pub account: String,
    /// The bound account's name tag (its JWT `name`, or its name).
    pub account_tag: String,
    /// nats-server's "raw auth user": the nkey, user name, JWT user key, or
    /// `[REDACTED]` for a token.
    pub user: String,
    pub jwt: String,
    pub issuer_key: String,
    pub tags: Vec<String>,
    /// The trusted proxy the connection came through.
    pub proxy_key: String,
    pub mqtt_client: String,
    pub tls: Option<TlsReport>,
    /// Filled when asked for (open connections) and always for closed ones.
    pub subs: Vec<SubReport>,
}

impl Default for ConnReport {
    fn default() -> Self {
        ConnReport {
            cid: 0,
            kind: "Client",
            conn_type: "nats",
            ip: String::new(),
            port: 0,
            start: SystemTime::UNIX_EPOCH,
            last_activity: SystemTime::UNIX_EPOCH,
            stop: None,
            reason: None,
            rtt: Duration::ZERO,
            pending: 0,
            in_msgs: 0,
            out_msgs: 0,
            in_bytes: 0,
            out_bytes: 0,
            stalls: 0,
            num_subs: 0,
            name: String::new(),
            lang: String::new(),
            version: String::new(),
            account: String::new(),
            account_tag: String::new(),
            user: String::new(),
            jwt: String::new(),
            issuer_key: String::new(),
            tags: Vec::new(),
            proxy_key: String::new(),
            mqtt_client: String::new(),
            tls: None,
            subs: Vec::new(),
        }
    }
}

impl ConnReport {
    /// How long the connection lived (closed) or has lived so far (open).
    pub fn uptime(&self, now: SystemTime) -> Duration {
        let end = self.stop.unwrap_or(now);
        end.duration_since(self.start).unwrap_or_default()
    }

    /// Time since the last activity.
    pub fn idle(&self, now: SystemTime) -> Duration {
        now.duration_since(self.last_activity).unwrap_or_default()
    }
}

/// `/connz` sort orders (nats-server's `SortOpt`). `cid`, `start`, `uptime` and `reason`
/// ascend; the others descend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConnSort {
    #[default]
    Cid,
    Start,
    Subs,
    Pending,
    OutMsgs,
    InMsgs,
    OutBytes,
    InBytes,
    Last,
    Idle,
    Uptime,
    Stop,
    Reason,
    Rtt,
}

impl ConnSort {
    /// The option's name (`sort=...`); `None` for an unknown one.
    pub fn parse(s: &str) -> Option<ConnSort> {
        Some(match s {
            "" | "cid" => ConnSort::Cid,
            "start" => ConnSort::Start,
            "subs" => ConnSort::Subs,
            "pending" => ConnSort::Pending,
            "msgs_to" => ConnSort::OutMsgs,
            "msgs_from" => ConnSort::InMsgs,
            "bytes_to" => ConnSort::OutBytes,
            "bytes_from" => ConnSort::InBytes,
            "last" => ConnSort::Last,
            "idle" => ConnSort::Idle,
            "uptime" => ConnSort::Uptime,
            "stop" => ConnSort::Stop,
            "reason" => ConnSort::Reason,
            "rtt" => ConnSort::Rtt,
            _ => return None,
        })
    }

    /// The option's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnSort::Cid => "cid",
            ConnSort::Start => "start",
            ConnSort::Subs => "subs",
            ConnSort::Pending => "pending",
            ConnSort::OutMsgs => "msgs_to",
            ConnSort::InMsgs => "msgs_from",
            ConnSort::OutBytes => "bytes_to",
            ConnSort::InBytes => "bytes_from",
            ConnSort::Last => "last",
            ConnSort::Idle => "idle",
            ConnSort::Uptime => "uptime",
            ConnSort::Stop => "stop",
            ConnSort::Reason => "reason",
            ConnSort::Rtt => "rtt",
        }
    }

    /// The order connections are listed in: `Less` means `a` comes first. Ties go by
    /// connection id, so every shard and the merge agree.
    pub fn order(self, a: &ConnReport, b: &ConnReport, now: SystemTime) -> Ordering {
        let o = match self {
            ConnSort::Cid | ConnSort::Start => Ordering::Equal,
            ConnSort::Subs => b.num_subs.cmp(&a.num_subs),
            ConnSort::Pending => b.pending.cmp(&a.pending),
            ConnSort::OutMsgs => b.out_msgs.cmp(&a.out_msgs),
            ConnSort::InMsgs => b.in_msgs.cmp(&a.in_msgs),
            ConnSort::OutBytes => b.out_bytes.cmp(&a.out_bytes),
            ConnSort::InBytes => b.in_bytes.cmp(&a.in_bytes),
            ConnSort::Last => b.last_activity.cmp(&a.last_activity),
            ConnSort::Idle => b.idle(now).cmp(&a.idle(now)),
            ConnSort::Uptime => a.uptime(now).cmp(&b.uptime(now)),
            ConnSort::Stop => b.stop.cmp(&a.stop),
            ConnSort::Reason => reason_text(a).cmp(reason_text(b)),
            ConnSort::Rtt => b.rtt.cmp(&a.rtt),
        };
        o.then(a.cid.cmp(&b.cid))
    }
}

fn reason_text(c: &ConnReport) -> &'static str {
    c.reason.map_or("", ClosedState::as_str)
}

/// Which connections `/connz` asks about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConnState {
    #[default]
    Open,
    Closed,
    All,
    /// A numeric state nats-server has no name for (past 2, or negative): it lists nothing.
    Nothing,
}

/// The account name nats-server keeps with a closed connection: none for `$G` (so
/// `acc=$G` finds no closed connection there).
pub fn closed_account(c: &ConnReport) -> &str {
    if c.account == super::accounts::GLOBAL_NAME {
        ""
    } else {
        &c.account
    }
}

/// A `/connz` question as a shard answers it.
#[derive(Clone, Debug)]
pub struct ConnQuery {
    pub state: ConnState,
    /// Only this connection (0: any).
    pub cid: u64,
    /// Only connections of this account (by name).
    pub account: Option<String>,
    /// Only connections of this raw auth user.
    pub user: Option<String>,
    pub mqtt_client: Option<String>,
    /// Only connections with a subscription that collides with this subject (open ones).
    pub filter_subject: Option<String>,
    pub sort: ConnSort,
    /// Return at most this many connections: the first ones in `sort` order.
    pub keep: usize,
    /// Include the subscriptions of open connections.
    pub subs: bool,
    pub now: SystemTime,
}

/// A shard's answer to a [`ConnQuery`].
#[derive(Clone, Debug, Default)]
pub struct ConnPart {
    /// Open connections on this shard (of the account, if one was asked for), before the
    /// user and subject filters: nats-server's `total` counts these.
    pub open_total: usize,
    /// The first `keep` matching open connections, in sort order.
    pub open: Vec<ConnReport>,
    /// Every closed connection in this shard's ring (shared copies; the monitor applies
    /// the server-wide limit and the filters).
    pub closed: Vec<Arc<ConnReport>>,
}

/// Statistics of a sublist, as nats-server's `SublistStats` (unsummed parts kept so that
/// sums over shards and accounts stay exact).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SublistStats {
    pub num_subs: u64,
    pub num_cache: u64,
    pub inserts: u64,
    pub removes: u64,
    pub matches: u64,
    pub cache_hits: u64,
    pub max_fanout: u64,
    /// Sum of the fanouts of the cached results, and how many there were.
    pub total_fanout: u64,
    pub cached: u64,
}

impl SublistStats {
    /// Add another sublist's numbers (nats-server's `SublistStats.add`).
    pub fn add(&mut self, o: &SublistStats) {
        self.num_subs += o.num_subs;
        self.num_cache += o.num_cache;
        self.inserts += o.inserts;
        self.removes += o.removes;
        self.matches += o.matches;
        self.cache_hits += o.cache_hits;
        self.max_fanout = self.max_fanout.max(o.max_fanout);
        self.total_fanout += o.total_fanout;
        self.cached += o.cached;
    }

    /// Cache hits per match (0 without matches).
    pub fn cache_hit_rate(&self) -> f64 {
        if self.matches == 0 {
            0.0
        } else {
            self.cache_hits as f64 / self.matches as f64
        }
    }

    /// Mean fanout of the cached results (0 without any).
    pub fn avg_fanout(&self) -> f64 {
        if self.total_fanout == 0 || self.cached == 0 {
            0.0
        } else {
            self.total_fanout as f64 / self.cached as f64
        }
    }
}

/// Message counters of an account (nats-server's account `stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsgTotals {
    pub in_msgs: u64,
    pub in_bytes: u64,
    pub out_msgs: u64,
    pub out_bytes: u64,
    pub slow_consumers: u64,
}

impl std::ops::AddAssign for MsgTotals {
    fn add_assign(&mut self, o: MsgTotals) {
        self.in_msgs += o.in_msgs;
        self.in_bytes += o.in_bytes;
        self.out_msgs += o.out_msgs;
        self.out_bytes += o.out_bytes;
        self.slow_consumers += o.slow_consumers;
    }
}

/// One shard's share of one account.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AccountPart {
    pub id: AccountId,
    pub name: String,
    /// Client connections bound to it on this shard.
    pub conns: u64,
    pub leafnodes: u64,
    /// Entries of its sublist on this shard (internal subscriptions included).
    pub subs: u64,
    pub sublist: SublistStats,
    /// Counted from its connections, open and closed.
    pub totals: MsgTotals,
}

/// A `/subsz` question as a shard answers it.
#[derive(Clone, Debug, Default)]
pub struct SubQuery {
    /// Only this account (by name).
    pub account: Option<String>,
    /// Only subscriptions a message on this literal subject would reach.
    pub test: Option<String>,
    /// List subscriptions at all.
    pub list: bool,
    /// Return at most this many (the first in this shard's order).
    pub keep: usize,
}

/// A shard's answer to a [`SubQuery`].
#[derive(Clone, Debug, Default)]
pub struct SubPart {
    pub stats: SublistStats,
    /// Matching subscriptions on this shard.
    pub total: usize,
    pub subs: Vec<SubReport>,
}

/// A shard's own numbers (`/shardz`, `/stacksz`, `/metrics`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardReport {
    pub index: usize,
    /// Client connections (internal ones not counted).
    pub connections: usize,
    /// Connections waiting to be closed or flushed.
    pub closing: usize,
    pub internal_clients: usize,
    pub subscriptions: usize,
    /// Remote-interest entries (what other shards told this one).
    pub remote_interest: usize,
    /// Accounts with routing state on this shard.
    pub accounts: usize,
    /// Bytes staged for each other shard, not yet handed to its ring.
    pub mesh_staged: Vec<usize>,
    /// Batches waiting in the ring from each other shard.
    pub mesh_inbound: Vec<usize>,
    /// Connections paused until the mesh drains.
    pub mesh_waiters: usize,
    /// Connections paused on a barrier.
    pub barriers: usize,
    pub timers: usize,
    /// Internal deliveries waiting for their handlers.
    pub internal_queue: usize,
    /// Output bytes queued for all connections.
    pub pending_bytes: usize,
    /// Closed connections kept in this shard's ring.
    pub closed_kept: usize,
}

/// The recently closed connections of one shard, newest last, at most `cap` of them
/// (`max_closed_clients`).
#[derive(Debug, Default)]
pub struct ClosedRing {
    entries: VecDeque<Arc<ConnReport>>,
}

impl ClosedRing {
    /// Keep `c`, dropping the oldest entries beyond `cap`.
    pub fn push(&mut self, c: ConnReport, cap: usize) {
        if cap == 0 {
            self.entries.clear();
            return;
        }
        while self.entries.len() >= cap {
            self.entries.pop_front();
        }
        self.entries.push_back(Arc::new(c));
    }

    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<ConnReport>> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(cid: u64, f: impl FnOnce(&mut ConnReport)) -> ConnReport {
        let mut c = ConnReport {
            cid,
            start: SystemTime::UNIX_EPOCH + Duration::from_secs(100),
            last_activity: SystemTime::UNIX_EPOCH + Duration::from_secs(100),
            ..Default::default()
        };
        f(&mut c);
        c
    }

    fn sorted(sort: ConnSort, mut v: Vec<ConnReport>) -> Vec<u64> {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        v.sort_by(|a, b| sort.order(a, b, now));
        v.iter().map(|c| c.cid).collect()
    }

    #[test]
    fn sort_orders_follow_the_reference_directions() {
        let secs = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let cases: Vec<(ConnSort, Vec<ConnReport>, Vec<u64>)> = vec![
            (
                ConnSort::Cid,
                vec![conn(3, |_| {}), conn(1, |_| {}), conn(2, |_| {})],
                vec![1, 2, 3],
            ),
            (
                ConnSort::Subs,
                vec![
                    conn(1, |c| c.num_subs = 1),
                    conn(2, |c| c.num_subs = 5),
                    conn(3, |c| c.num_subs = 3),
                ],
                vec![2, 3, 1],
            ),
            (
                ConnSort::InMsgs,
                vec![conn(1, |c| c.in_msgs = 9), conn(2, |c| c.in_msgs = 1)],
                vec![1, 2],
            ),
            (
                ConnSort::Idle,
                vec![
                    conn(1, |c| c.last_activity = secs(900)),
                    conn(2, |c| c.last_activity = secs(200)),
                ],
                vec![2, 1],
            ),
            (
                ConnSort::Last,
                vec![
                    conn(1, |c| c.last_activity = secs(200)),
                    conn(2, |c| c.last_activity = secs(900)),
                ],
                vec![2, 1],
            ),
            // Uptime ascends: the youngest connection first.
            (
                ConnSort::Uptime,
                vec![conn(1, |c| c.start = secs(10)), conn(2, |c| c.start = secs(500))],
                vec![2, 1],
            ),
            (
                ConnSort::Stop,
                vec![
                    conn(1, |c| c.stop = Some(secs(300))),
                    conn(2, |c| c.stop = Some(secs(400))),
                ],
                vec![2, 1],
            ),
            (
                ConnSort::Reason,
                vec![
                    conn(1, |c| c.reason = Some(ClosedState::StaleConnection)),
                    conn(2, |c| c.reason = Some(ClosedState::ClientClosed)),
                ],
                vec![2, 1],
            ),
            (
                ConnSort::Rtt,
                vec![
                    conn(1, |c| c.rtt = Duration::from_micros(5)),
                    conn(2, |c| c.rtt = Duration::from_millis(5)),
                ],
                vec![2, 1],
            ),
            // Ties go by cid.
            (
                ConnSort::Pending,
                vec![conn(7, |c| c.pending = 1), conn(4, |c| c.pending = 1)],
                vec![4, 7],
            ),
        ];
        for (sort, conns, want) in cases {
            assert_eq!(sorted(sort, conns), want, "{sort:?}");
        }
    }

    #[test]
    fn sort_names_round_trip() {
        for s in [
            "cid",
            "start",
            "subs",
            "pending",
            "msgs_to",
            "msgs_from",
            "bytes_to",
            "bytes_from",
            "last",
            "idle",
            "uptime",
            "stop",
            "reason",
            "rtt",
        ] {
            assert_eq!(ConnSort::parse(s).map(ConnSort::as_str), Some(s));
        }
        assert_eq!(ConnSort::parse(""), Some(ConnSort::Cid));
        assert_eq!(ConnSort::parse("CID"), None);
        assert_eq!(ConnSort::parse("bogus"), None);
    }

    #[test]
    fn closed_ring_keeps_the_newest() {
        let mut r = ClosedRing::default();
        for cid in 1..=5 {
            r.push(conn(cid, |_| {}), 3);
        }
        assert_eq!(r.iter().map(|c| c.cid).collect::<Vec<_>>(), vec![3, 4, 5]);
        // A smaller limit after a reload trims on the next push.
        r.push(conn(6, |_| {}), 2);
        assert_eq!(r.iter().map(|c| c.cid).collect::<Vec<_>>(), vec![5, 6]);
        r.push(conn(7, |_| {}), 0);
        assert!(r.is_empty());
    }

    #[test]
    fn sublist_stats_sum_like_the_reference() {
        let mut a = SublistStats {
            num_subs: 2,
            matches: 4,
            cache_hits: 1,
            max_fanout: 3,
            total_fanout: 4,
            cached: 2,
            ..Default::default()
        };
        let b = SublistStats {
            num_subs: 1,
            matches: 4,
            cache_hits: 3,
            max_fanout: 1,
            total_fanout: 1,
            cached: 2,
            ..Default::default()
        };
        a.add(&b);
        assert_eq!(a.num_subs, 3);
        assert_eq!(a.max_fanout, 3);
        assert!((a.cache_hit_rate() - 0.5).abs() < 1e-9);
        assert!((a.avg_fanout() - 1.25).abs() < 1e-9);
        assert_eq!(SublistStats::default().cache_hit_rate(), 0.0);
        assert_eq!(SublistStats::default().avg_fanout(), 0.0);
    }
}
