//! Stream mirrors and sources (FEATURES.md §14.x): a stream with `mirror` or `sources`
//! pulls its messages from other streams through internal consumers created on the
//! origin over the JetStream API, as the reference does, so the same code serves an
//! origin in the same account, in another account (`external.api` through a service
//! import) or in another JetStream domain (`$JS.<domain>.API`).
//!
//! - [`mod@self`]: the state of a stream's links ([`Sourcing`], [`Link`]), starting,
//!   stopping and reconfiguring them, and their timers.
//! - [`setup`]: the consumer create request for a link (ephemeral direct push consumer
//!   with flow control and idle heartbeats, delivering to a private `$JS.M.*`/`$JS.S.*`
//!   subject) and its response; retries with the reference's backoff.
//! - [`inbound`]: deliveries on a link: heartbeats and flow control, sequence tracking
//!   (gaps detected by the delivery sequence recreate the consumer), a mirror storing at
//!   the origin's sequence, a source storing with `Nats-Stream-Source`.
//! - [`resume`]: where each link starts after a restart (a mirror at its last sequence,
//!   a source at the origin sequence of its last `Nats-Stream-Source` header).
//! - [`report`]: `StreamSourceInfo` for stream info (`mirror`, `sources`).
//!
//! Ownership: the state lives in the sourcing stream's [`Stream`](super::stream::Stream)
//! (`Stream.sourcing`) on the shard that owns that stream; the deliver subscriptions and
//! API requests are made from that shard, and every handler runs there. The origin may
//! live on any shard: it is only reached through subjects.

pub mod inbound;
pub mod report;
pub mod resume;
pub mod setup;

use super::api::config::{StreamConfig, StreamSource};
use super::api::ApiError;
use super::shard::{ShardJs, StreamKey};
use crate::core::client::SubId;
use crate::core::shard::internal::InternalMsg;
use crate::core::shard::ShardCore;
use crate::core::transform::SubjectTransform;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Deliveries of a link's current consumer not handled yet (filled by its subscription,
/// drained with the stream's state at hand).
pub type Inbox = Arc<Mutex<VecDeque<InternalMsg>>>;

/// A publish to make once the shard's JetStream state is no longer borrowed.
pub type Outgoing = (Vec<u8>, Option<Vec<u8>>);

/// Run `job` on this shard as a job of its own: a request published while the shard's
/// JetStream state is borrowed (timers, API jobs) would have its answer handled before
/// that borrow ends, and lost. Without a runtime (sans-IO tests) nothing runs.
pub fn later(core: &ShardCore, job: impl FnOnce(&mut ShardCore, Instant) + Send + 'static) {
    if let Some(p) = core.post() {
        p.post(core.index(), Box::new(job));
    }
}

/// Idle heartbeat of the sourcing consumers.
pub const HEALTH_HB: Duration = Duration::from_secs(1);
/// A link not heard from this long is set up again (also the consumers' inactive
/// threshold).
pub const HEALTH_CHECK: Duration = Duration::from_secs(10);
/// Consumer creates of one link are at least this far apart.
pub const RETRY_THRESHOLD: Duration = Duration::from_secs(2);
/// How long a consumer create may take before it is tried again.
pub const CREATE_WAIT: Duration = Duration::from_secs(30);

/// The reference's backoff: 10 s per failure, at most 2 minutes.
pub fn retry_backoff(fails: u32) -> Duration {
    (Duration::from_secs(5) * fails.saturating_mul(2)).min(Duration::from_secs(120))
}

/// Which link of a stream.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LinkId {
    Mirror,
    /// A source by its index name.
    Source(String),
}

/// One mirror or source of a stream and its progress.
pub struct Link {
    pub cfg: StreamSource,
    /// The index name (sources; the mirror's is its stream name).
    pub iname: String,
    pub transforms: Vec<Option<SubjectTransform>>,
    /// Last origin sequence taken, last delivery sequence of the current consumer.
    pub sseq: u64,
    pub dseq: u64,
    pub lag: u64,
    /// Wall clock (Unix ns) of the last delivery or heartbeat; 0: never.
    pub last: i64,
    pub err: Option<ApiError>,
    /// The current consumer and its deliver subscription.
    pub cname: String,
    pub deliver: String,
    pub sub: Option<SubId>,
    /// A create request is out (its number, to ignore late answers of older ones).
    pub pending: Option<u64>,
    pub attempt: u64,
    /// When the last create was sent, failures in a row, the next scheduled setup and
    /// the origin sequence it starts at (0: from the configuration).
    pub lreq: Option<Instant>,
    pub fails: u32,
    pub retry_at: Option<Instant>,
    pub start_seq: u64,
    /// The next health check.
    pub check_at: Option<Instant>,
    /// Consumers created for this link that should be deleted on the origin when the
    /// link goes (best effort).
    pub created: Vec<String>,
    /// The current consumer's deliveries waiting to be handled.
    pub inbox: Inbox,
}

impl Link {
    fn new(cfg: StreamSource, iname: String) -> Link {
        let transforms = cfg
            .subject_transforms
            .iter()
            .map(|t| SubjectTransform::new(&t.src, &t.dest).ok())
            .collect();
        Link {
            cfg,
            iname,
            transforms,
            sseq: 0,
            dseq: 0,
            lag: 0,
            last: 0,
            err: None,
            cname: String::new(),
            deliver: String::new(),
            sub: None,
            pending: None,
            attempt: 0,
            lreq: None,
            fails: 0,
            retry_at: None,
            start_seq: 0,
            check_at: None,
            created: Vec::new(),
            inbox: Inbox::default(),
        }
    }

    /// Map a subject through the link's transforms (the first that matches).
    pub fn transform(&self, subject: &str) -> Option<String> {
        let mut rand = rand::random::<u64>;
        for tr in self.transforms.iter().flatten() {
            if let Some(s) = tr.match_and_transform(subject.as_bytes(), &mut rand) {
                return String::from_utf8(s).ok();
            }
        }
        None
    }

    /// The earliest timer of this link.
    fn deadline(&self) -> Option<Instant> {
        [self.retry_at, self.check_at].into_iter().flatten().min()
    }
}

/// The mirror or sources of one stream.
#[derive(Default)]
pub struct Sourcing {
    pub mirror: Option<Link>,
    /// Sources by index name, in configuration order of `order`.
    pub sources: BTreeMap<String, Link>,
    pub order: Vec<String>,
    /// The mirror direct-get subscriptions (`mirror_direct`, once caught up).
    pub direct_subs: Vec<SubId>,
}

impl Sourcing {
    pub fn link_mut(&mut self, id: &LinkId) -> Option<&mut Link> {
        match id {
            LinkId::Mirror => self.mirror.as_mut(),
            LinkId::Source(n) => self.sources.get_mut(n),
        }
    }

    fn ids(&self) -> Vec<LinkId> {
        let mut v: Vec<LinkId> = self.mirror.iter().map(|_| LinkId::Mirror).collect();
        v.extend(self.order.iter().map(|n| LinkId::Source(n.clone())));
        v
    }

    fn deadline(&self) -> Option<Instant> {
        self.mirror
            .iter()
            .chain(self.sources.values())
            .filter_map(Link::deadline)
            .min()
    }
}

/// The reference's index name of a source: `<name>[:<hash of api>] <filters> <dests>`.
pub fn index_name(src: &StreamSource) -> String {
    let mut name = src.name.clone();
    if let Some(e) = &src.external {
        name = format!("{name}:{}", crate::system::server_reqs::server_hash(&e.api));
    }
    if let Some(c) = &src.consumer {
        name = format!("{name}:C={}", crate::system::server_reqs::server_hash(&c.name));
    }
    let or_all = |s: &str| if s.is_empty() { ">".to_string() } else { s.to_string() };
    let (source, dest) = if src.subject_transforms.is_empty() {
        (or_all(&src.filter_subject), ">".to_string())
    } else {
        let s: Vec<String> = src.subject_transforms.iter().map(|t| or_all(&t.src)).collect();
        let d: Vec<String> = src.subject_transforms.iter().map(|t| or_all(&t.dest)).collect();
        (s.join("\x0c"), d.join("\x0c"))
    };
    format!("{name} {source} {dest}")
}

/// Does this configuration pull from other streams?
pub fn wanted(cfg: &StreamConfig) -> bool {
    cfg.mirror.is_some() || !cfg.sources.is_empty()
}

/// Start the links of a stream just opened (created or recovered) on this shard.
pub fn start(sjs: &mut ShardJs, core: &mut ShardCore, key: &StreamKey, now: Instant) {
    let Some(st) = sjs.streams.get_mut(key) else { return };
    if !wanted(&st.cfg) {
        return;
    }
    let mut sc = Sourcing::default();
    if let Some(m) = st.cfg.mirror.clone() {
        let mut link = Link::new(m.clone(), m.name.clone());
        link.sseq = st.store.fast_state().last_seq;
        sc.mirror = Some(link);
    }
    for src in st.cfg.sources.clone() {
        let iname = index_name(&src);
        sc.order.push(iname.clone());
        sc.sources.insert(iname.clone(), Link::new(src, iname));
    }
    resume::starting_sequences(st.store.as_mut(), &mut sc);
    for id in sc.ids() {
        if let Some(l) = sc.link_mut(&id) {
            l.start_seq = l.sseq + 1;
            // The first setup goes out at once (jitter only).
            l.retry_at = Some(now + jitter());
        }
    }
    st.sourcing = Some(Box::new(sc));
    reschedule(sjs, now);
    let _ = core;
}

/// Stop every link of a stream (it is closing or no longer sources): unsubscribe, and
/// with `delete_consumers` ask the origins to delete the consumers made for it.
pub fn stop(core: &mut ShardCore, st: &mut super::stream::Stream, delete_consumers: bool, now: Instant) {
    let Some(mut sc) = st.sourcing.take() else { return };
    for id in sc.ids() {
        if let Some(l) = sc.link_mut(&id) {
            cancel(core, l);
            if delete_consumers {
                setup::delete_consumers(core, st.account, l, now);
            }
        }
    }
    for id in sc.direct_subs.drain(..) {
        core.unsubscribe_internal(id);
    }
}

/// Drop a link's current consumer subscription (a new setup follows, or none).
pub fn cancel(core: &mut ShardCore, l: &mut Link) {
    if let Some(id) = l.sub.take() {
        core.unsubscribe_internal(id);
    }
    l.cname.clear();
    l.deliver.clear();
    l.pending = None;
}

/// The configuration of a stream changed (update): follow its mirror and sources.
pub fn reconfigure(sjs: &mut ShardJs, core: &mut ShardCore, key: &StreamKey, now: Instant) {
    let Some(st) = sjs.streams.get_mut(key) else { return };
    if !wanted(&st.cfg) {
        // Promoted mirror or all sources removed.
        stop(core, st, true, now);
        return;
    }
    let Some(mut sc) = st.sourcing.take() else {
        start(sjs, core, key, now);
        return;
    };
    let acc = st.account;
    // The mirror cannot change (the update checks refuse it).
    let wanted_sources: Vec<(String, StreamSource)> =
        st.cfg.sources.iter().map(|s| (index_name(s), s.clone())).collect();
    let keep: std::collections::HashSet<&String> = wanted_sources.iter().map(|(n, _)| n).collect();
    let gone: Vec<String> = sc.sources.keys().filter(|n| !keep.contains(n)).cloned().collect();
    for n in gone {
        if let Some(mut l) = sc.sources.remove(&n) {
            cancel(core, &mut l);
            setup::delete_consumers(core, acc, &l, now);
        }
    }
    let mut added = Sourcing::default();
    for (n, src) in &wanted_sources {
        if let Some(l) = sc.sources.get_mut(n) {
            // Same origin and filters; other settings (start options) may have changed.
            l.cfg = src.clone();
        } else {
            added.order.push(n.clone());
            added.sources.insert(n.clone(), Link::new(src.clone(), n.clone()));
        }
    }
    resume::starting_sequences(st.store.as_mut(), &mut added);
    for (n, mut l) in added.sources {
        l.start_seq = l.sseq + 1;
        l.retry_at = Some(now + jitter());
        sc.sources.insert(n, l);
    }
    sc.order = wanted_sources.into_iter().map(|(n, _)| n).collect();
    st.sourcing = Some(sc);
    reschedule(sjs, now);
}

/// 100-200 ms, as the reference adds to every scheduled setup.
pub fn jitter() -> Duration {
    Duration::from_millis(100 + rand::random::<u64>() % 100)
}

/// Schedule the next setup of a link (throttled, with backoff after failures).
pub fn schedule_retry(l: &mut Link, now: Instant) {
    if l.retry_at.is_some() {
        return;
    }
    let mut delay = Duration::ZERO;
    if let Some(last) = l.lreq {
        delay = RETRY_THRESHOLD.saturating_sub(now.saturating_duration_since(last));
        if l.fails > 0 {
            delay += retry_backoff(l.fails);
        }
    }
    l.retry_at = Some(now + delay + jitter());
}

/// Recompute the shard's sourcing timer.
pub fn reschedule(sjs: &mut ShardJs, _now: Instant) {
    sjs.sourcing_at = sjs
        .streams
        .values()
        .filter_map(|s| s.sourcing.as_ref().and_then(|sc| sc.deadline()))
        .min();
}

/// The shard's sourcing timer fired: run due setups and health checks.
pub fn tick(sjs: &mut ShardJs, core: &mut ShardCore, now: Instant) {
    let keys: Vec<StreamKey> = sjs
        .streams
        .iter()
        .filter(|(_, s)| {
            s.sourcing
                .as_ref()
                .and_then(|sc| sc.deadline())
                .is_some_and(|t| t <= now)
        })
        .map(|(k, _)| k.clone())
        .collect();
    for key in keys {
        let ids = sjs
            .streams
            .get(&key)
            .and_then(|s| s.sourcing.as_ref())
            .map(|sc| sc.ids())
            .unwrap_or_default();
        for id in ids {
            let (due_setup, due_check) = {
                let Some(l) = sjs
                    .streams
                    .get_mut(&key)
                    .and_then(|s| s.sourcing.as_mut())
                    .and_then(|sc| sc.link_mut(&id))
                else {
                    continue;
                };
                (
                    l.retry_at.is_some_and(|t| t <= now),
                    l.check_at.is_some_and(|t| t <= now),
                )
            };
            if due_setup {
                setup::run(sjs, core, &key, &id, now);
            } else if due_check {
                health_check(sjs, core, &key, &id, now);
            }
        }
    }
    reschedule(sjs, now);
}

/// A link quiet for [`HEALTH_CHECK`] (no message, no heartbeat) is set up again.
fn health_check(sjs: &mut ShardJs, core: &mut ShardCore, key: &StreamKey, id: &LinkId, now: Instant) {
    let Some(st) = sjs.streams.get_mut(key) else { return };
    let last_seq = st.store.fast_state().last_seq;
    let Some(l) = st.sourcing.as_mut().and_then(|sc| sc.link_mut(id)) else {
        return;
    };
    let quiet = Duration::from_nanos(u64::try_from(super::shard::wall_ns().saturating_sub(l.last)).unwrap_or(0));
    if l.pending.is_none() && (l.sub.is_none() || quiet > HEALTH_CHECK) {
        l.check_at = Some(now + HEALTH_CHECK);
        restart_link(core, l, id, last_seq, now);
    } else if l.pending.is_some() {
        l.check_at = Some(now + HEALTH_CHECK);
    } else {
        // Look again when it would have been quiet for the whole interval.
        l.check_at = Some(now + HEALTH_CHECK.saturating_sub(quiet) + Duration::from_millis(100));
    }
}

/// Give up the current consumer of a link and schedule a new one from where it is.
pub fn restart_link(core: &mut ShardCore, l: &mut Link, id: &LinkId, last_seq: u64, now: Instant) {
    cancel(core, l);
    if *id == LinkId::Mirror {
        l.sseq = last_seq;
    }
    l.start_seq = l.sseq + 1;
    schedule_retry(l, now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::api::config::{ExternalStream, SourceConsumer, SubjectTransform as Tr};

    #[test]
    fn index_names() {
        let cases = [
            (
                StreamSource {
                    name: "O".into(),
                    ..Default::default()
                },
                "O > >",
            ),
            (
                StreamSource {
                    name: "O".into(),
                    filter_subject: "a.*".into(),
                    ..Default::default()
                },
                "O a.* >",
            ),
            (
                StreamSource {
                    name: "O".into(),
                    subject_transforms: vec![
                        Tr {
                            src: "a.>".into(),
                            dest: "x.>".into(),
                        },
                        Tr {
                            src: "b".into(),
                            dest: String::new(),
                        },
                    ],
                    ..Default::default()
                },
                "O a.>\x0cb x.>\x0c>",
            ),
            // The hashes are the reference's (as its Nats-Stream-Source headers show).
            (
                StreamSource {
                    name: "ORIGIN".into(),
                    external: Some(ExternalStream {
                        api: "RI.JS.API".into(),
                        deliver: "RI.DELIVER.SYNC.SOURCES".into(),
                    }),
                    ..Default::default()
                },
                "ORIGIN:dpDEksoe > >",
            ),
            (
                StreamSource {
                    name: "ORIGIN".into(),
                    consumer: Some(SourceConsumer {
                        name: "agg-consumer".into(),
                        deliver_subject: "agg.deliver".into(),
                    }),
                    ..Default::default()
                },
                "ORIGIN:C=y3r60E6r > >",
            ),
        ];
        for (src, want) in cases {
            assert_eq!(index_name(&src), want);
        }
    }

    #[test]
    fn transforms_first_match() {
        let src = StreamSource {
            name: "O".into(),
            subject_transforms: vec![
                Tr {
                    src: "a.*".into(),
                    dest: "x.{{wildcard(1)}}".into(),
                },
                Tr {
                    src: "b.>".into(),
                    dest: String::new(),
                },
            ],
            ..Default::default()
        };
        let l = Link::new(src.clone(), index_name(&src));
        assert_eq!(l.transform("a.1").as_deref(), Some("x.1"));
        assert_eq!(l.transform("b.c.d").as_deref(), Some("b.c.d"));
        assert_eq!(l.transform("c"), None);
    }

    #[test]
    fn retry_schedule() {
        let now = Instant::now();
        let mut l = Link::new(StreamSource::default(), String::new());
        schedule_retry(&mut l, now);
        let first = l.retry_at.unwrap();
        assert!(first >= now + Duration::from_millis(100) && first < now + Duration::from_millis(200));
        // Within the threshold of the last request and after two failures.
        l.retry_at = None;
        l.lreq = Some(now);
        l.fails = 2;
        schedule_retry(&mut l, now);
        let t = l.retry_at.unwrap();
        assert!(t >= now + Duration::from_secs(22) && t < now + Duration::from_millis(22_200));
    }
}
