//! The [`Consumer`]: its state, creation (the start position of each deliver policy, or a
//! restored [`ConsumerState`]), configuration updates, pause, reset, removals, stop and
//! unpin. What it reports is in `query`.

use super::pull::PullReq;
use super::ConsumerEnv;
use crate::jetstream::api::config::{AckPolicy, ConsumerConfig, DeliverPolicy, PriorityPolicy, ReplayPolicy};
use crate::jetstream::api::errors_table as errs;
use crate::jetstream::api::{ApiError, GoTime};
use crate::system::nuid::Nuid;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};
use storage::{ConsumerState, Filter, Pending, SeqPair, StoredMsg};

/// Flow control: bytes allowed in flight at most (the reference's 32 MiB).
pub(super) const FC_MAX_PENDING: u64 = 32 * 1024 * 1024;
/// Slack added to ack wait timers (the reference's 1 ms).
pub(super) const ACK_WAIT_DELAY: Duration = Duration::from_millis(1);
/// Burst of the rate limiter (the server's default max payload).
pub(super) const RATE_BURST: f64 = 1024.0 * 1024.0;

/// The last-per-subject start: the sequences still to deliver, then where to resume.
pub(super) struct SkipList {
    pub seqs: VecDeque<u64>,
    pub resume: u64,
}

/// A delivery held back by replay timing or the rate limit, ready to send.
pub(super) struct Held {
    /// A pull request's reply subject; empty for a push consumer (its deliver subject).
    pub to: String,
    pub msg: StoredMsg,
    pub reply: String,
    pub hdr: Vec<u8>,
    pub payload: bytes::Bytes,
    pub not_before: Instant,
    /// The pull request's remaining (batch, bytes) after this delivery.
    pub req_left: Option<(i64, i64)>,
}

/// A token bucket in bytes (`rate_limit_bps` / 8 per second).
pub(super) struct RateLimit {
    pub rate: f64,
    pub tokens: f64,
    pub last: Instant,
}

impl RateLimit {
    /// Take `n` bytes; how long the send must wait.
    pub fn reserve(&mut self, now: Instant, n: usize) -> Duration {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(RATE_BURST);
        self.tokens -= (n as f64).min(RATE_BURST);
        if self.tokens >= 0.0 || self.rate <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }
}

/// One consumer of a stream.
pub struct Consumer {
    pub(super) stream: String,
    pub(super) name: String,
    pub(super) cfg: ConsumerConfig,
    pub(super) created: GoTime,
    pub(super) filter: Filter,
    /// Next stream sequence to look at.
    pub(super) sseq: u64,
    /// Next consumer (delivery) sequence.
    pub(super) dseq: u64,
    pub(super) adflr: u64,
    pub(super) asflr: u64,
    pub(super) pending: BTreeMap<u64, Pending>,
    /// Redeliveries per stream sequence (delivery count - 1).
    pub(super) rdc: BTreeMap<u64, u64>,
    /// Due for redelivery, lowest stream sequence first.
    pub(super) rdq: BTreeSet<u64>,
    pub(super) lss: Option<SkipList>,
    /// Max ack pending (0: unlimited).
    pub(super) maxp: usize,
    /// Max deliveries (0: unlimited).
    pub(super) maxdc: u64,
    /// When the pending (redelivery) check runs next.
    pub(super) ptmr: Option<Instant>,
    pub(super) waiting: VecDeque<PullReq>,
    pub(super) max_waiting: usize,
    /// Last pull request (or delivery to one): pull inactivity.
    pub(super) waiting_last: Instant,
    pub(super) last_wait_check: Option<Instant>,
    /// Push: interest on the deliver subject.
    pub(super) active: bool,
    /// Push: last time interest was seen (push inactivity).
    pub(super) last_interest: Instant,
    pub(super) hb_next: Option<Instant>,
    pub(super) pbytes: u64,
    pub(super) maxpb: u64,
    pub(super) pblimit: u64,
    pub(super) fcid: String,
    pub(super) fcsz: u64,
    /// The highest delivery (consumer and stream sequence) ConsumerInfo reports.
    pub(super) delivered: SeqPair,
    /// Last delivery / last ack, Unix ns (0: none).
    pub(super) ldt: i64,
    pub(super) lat: i64,
    pub(super) pause_end: Option<Instant>,
    pub(super) pin_id: String,
    pub(super) pinned_ts: i64,
    pub(super) pin_deadline: Option<Instant>,
    pub(super) replay: bool,
    pub(super) replay_last_seq: u64,
    pub(super) lts: i64,
    pub(super) held: Option<Held>,
    pub(super) rate: Option<RateLimit>,
    pub(super) sfreq: i64,
    pub(super) wake: bool,
    pub(super) dirty: bool,
    pub(super) closed: bool,
    pub(super) nuid: Nuid,
    pub(super) domain: String,
    pub(super) account: String,
    pub(super) retention_acks: bool,
    pub(super) acked_out: Vec<u64>,
    /// The latest `now` a caller passed (for calls that take none).
    pub(super) last_now: Instant,
    /// The pending count and the start sequence it was counted from: kept up to date as
    /// messages are stored and delivered, so a delivery does not count the stream again
    /// (filtered counts walk the subject's messages).
    /// (count, start sequence, the stream's last sequence it includes)
    pub(super) np_cache: std::cell::Cell<Option<(u64, u64, u64)>>,
}

fn sample_freq(s: &str) -> i64 {
    s.trim_end_matches('%').parse().unwrap_or(0)
}

/// Nanoseconds from configuration or a request as a duration: negative is zero, and
/// anything beyond a century is a century (so `Instant` arithmetic cannot overflow).
fn dur_ns(ns: i64) -> Duration {
    const CENTURY: u64 = 100 * 365 * 86_400 * 1_000_000_000;
    Duration::from_nanos(u64::try_from(ns).unwrap_or(0).min(CENTURY))
}

impl Consumer {
    /// `cfg` is already defaulted and validated by the API layer.
    pub fn new(
        stream: &str,
        name: &str,
        cfg: ConsumerConfig,
        created: GoTime,
        state: Option<ConsumerState>,
        env: &mut dyn ConsumerEnv,
        now: Instant,
    ) -> Consumer {
        let mut c = Consumer {
            stream: stream.to_string(),
            name: name.to_string(),
            filter: Filter::many(cfg.filters()),
            sseq: 1,
            dseq: 1,
            adflr: 0,
            asflr: 0,
            pending: BTreeMap::new(),
            rdc: BTreeMap::new(),
            rdq: BTreeSet::new(),
            lss: None,
            maxp: 0,
            maxdc: 0,
            ptmr: None,
            waiting: VecDeque::new(),
            max_waiting: 0,
            waiting_last: now,
            last_wait_check: None,
            active: false,
            last_interest: now,
            hb_next: None,
            pbytes: 0,
            maxpb: 0,
            pblimit: 0,
            fcid: String::new(),
            fcsz: 0,
            delivered: SeqPair::default(),
            ldt: 0,
            lat: 0,
            pause_end: None,
            pin_id: String::new(),
            pinned_ts: 0,
            pin_deadline: None,
            replay: cfg.replay_policy != ReplayPolicy::Instant,
            replay_last_seq: 0,
            lts: 0,
            held: None,
            rate: None,
            sfreq: sample_freq(&cfg.sample_freq),
            wake: true,
            dirty: false,
            closed: false,
            nuid: Nuid::new(),
            domain: String::new(),
            account: String::new(),
            retention_acks: false,
            acked_out: Vec::new(),
            last_now: now,
            np_cache: std::cell::Cell::new(None),
            created,
            cfg,
        };
        c.apply_limits(now);
        if c.cfg.flow_control {
            c.pblimit = FC_MAX_PENDING;
            c.maxpb = (FC_MAX_PENDING / 16).max(1);
        }
        if c.replay {
            c.replay_last_seq = env.store().fast_state().last_seq;
        }
        match state {
            Some(st) => c.apply_state(st, env, now),
            None => {
                c.select_start(env);
                c.dirty = true;
            }
        }
        if c.cfg.is_push() {
            c.active = c.bound(env);
            if c.cfg.idle_heartbeat > 0 {
                c.hb_next = Some(now + dur_ns(c.cfg.idle_heartbeat));
            }
        }
        c.set_pause(env, now);
        c
    }

    /// The limits derived from the configuration.
    fn apply_limits(&mut self, now: Instant) {
        let ack = self.cfg.ack_policy != AckPolicy::None;
        self.maxp = if ack {
            usize::try_from(self.cfg.max_ack_pending.max(0)).unwrap_or(usize::MAX)
        } else {
            0
        };
        self.maxdc = u64::try_from(self.cfg.max_deliver.max(0)).unwrap_or(0);
        self.max_waiting = usize::try_from(self.cfg.max_waiting.max(0)).unwrap_or(0);
        self.sfreq = sample_freq(&self.cfg.sample_freq);
        self.rate = (self.cfg.rate_limit_bps > 0).then_some(RateLimit {
            rate: (self.cfg.rate_limit_bps / 8) as f64,
            tokens: RATE_BURST,
            last: now,
        });
    }

    /// Where a new consumer starts, per its deliver policy.
    fn select_start(&mut self, env: &mut dyn ConsumerEnv) {
        let store = env.store();
        let st = store.fast_state();
        let mut sseq = if self.cfg.opt_start_seq != 0 {
            self.cfg.opt_start_seq
        } else {
            match self.cfg.deliver_policy {
                DeliverPolicy::All | DeliverPolicy::ByStartSequence => st.first_seq,
                DeliverPolicy::Last => {
                    if self.filter.is_all() {
                        st.last_seq
                    } else {
                        self.filter
                            .subjects()
                            .iter()
                            .map(|f| store.filtered_state(1, f).last)
                            .max()
                            .unwrap_or(0)
                    }
                }
                DeliverPolicy::LastPerSubject => {
                    let mut seqs = store.multi_last_seqs(&self.filter, 0, 0).unwrap_or_default();
                    seqs.sort_unstable();
                    let first = seqs.first().copied();
                    self.lss = Some(SkipList {
                        seqs: seqs.into(),
                        resume: st.last_seq,
                    });
                    first.unwrap_or(st.last_seq)
                }
                DeliverPolicy::ByStartTime => {
                    let ts = self.cfg.opt_start_time.map_or(0, |t| t.nanos());
                    let mut seq = store.seq_from_time(ts);
                    if !self.filter.is_all() {
                        let mut nseq = st.last_seq;
                        for f in self.filter.subjects() {
                            let ss = store.filtered_state(st.first_seq, f);
                            if ss.first >= seq && ss.first < nseq {
                                nseq = ss.first;
                            }
                        }
                        if nseq > seq && nseq < st.last_seq {
                            seq = nseq;
                        }
                    }
                    seq
                }
                DeliverPolicy::New => st.last_seq + 1,
            }
        };
        let unset = self.cfg.opt_start_seq == 0 || self.cfg.direct;
        if st.first_seq == 0 && unset {
            sseq = 1;
        } else if sseq > st.last_seq && unset {
            sseq = st.last_seq + 1;
        } else if sseq < st.first_seq {
            sseq = st.first_seq;
        }
        if self.lss.as_ref().is_some_and(|l| l.seqs.is_empty()) {
            self.lss = None;
        }
        self.sseq = sseq.max(1);
        self.dseq = 1;
        self.adflr = 0;
        self.asflr = self.sseq - 1;
        self.delivered = SeqPair {
            consumer: 0,
            stream: self.asflr,
        };
    }

    /// Resume from persisted state.
    fn apply_state(&mut self, st: ConsumerState, env: &mut dyn ConsumerEnv, now: Instant) {
        self.sseq = st.delivered.stream.saturating_add(1);
        self.dseq = st.delivered.consumer.saturating_add(1);
        self.adflr = st.ack_floor.consumer;
        self.asflr = st.ack_floor.stream;
        self.delivered = st.delivered;
        self.pending = st.pending;
        self.rdc = st.redelivered;
        let last = env.store().fast_state().last_seq;
        if self.asflr > last {
            self.asflr = last;
            self.adflr = self.dseq.saturating_sub(1);
            self.pending.clear();
            self.rdc.clear();
        }
        self.pending.retain(|s, _| *s <= last);
        self.rdc.retain(|s, _| *s <= last);
        if self.pending.is_empty() {
            self.sseq = self.sseq.max(self.asflr.saturating_add(1));
        }
        if !self.pending.is_empty() {
            // Check restored pending soon, as the reference does after a restart.
            let soon = Duration::from_millis(500).min(self.ack_wait(Duration::ZERO));
            self.ptmr = Some(now + soon);
        }
    }

    pub fn config(&self) -> &ConsumerConfig {
        &self.cfg
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn created(&self) -> GoTime {
        self.created
    }

    /// The domain and account names the advisories carry (empty: omitted).
    pub fn set_identity(&mut self, account: &str, domain: &str) {
        self.account = account.to_string();
        self.domain = domain.to_string();
    }

    /// On interest / work-queue streams: collect the stream sequences acknowledged outside
    /// [`Consumer::on_ack`] (ack-none deliveries, flow-control acks, terminations of
    /// removed messages) for [`Consumer::take_acked`].
    pub fn set_retention_acks(&mut self, on: bool) {
        self.retention_acks = on;
        if !on {
            self.acked_out.clear();
        }
    }

    /// Stream sequences acknowledged since the last call (see [`Consumer::set_retention_acks`]).
    pub fn take_acked(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.acked_out)
    }

    pub(super) fn note_acked(&mut self, seqs: impl IntoIterator<Item = u64>) {
        if self.retention_acks {
            self.acked_out.extend(seqs);
        }
    }

    /// Does an event want [`Consumer::poll`] to run?
    pub fn wants_poll(&self) -> bool {
        self.wake && !self.closed
    }

    /// Apply an update (only fields the API allows to change).
    pub fn update_config(&mut self, cfg: ConsumerConfig, env: &mut dyn ConsumerEnv, now: Instant) {
        let old = std::mem::replace(&mut self.cfg, cfg);
        if old.ack_wait != self.cfg.ack_wait && self.ptmr.is_some() {
            self.ptmr = Some(now + Duration::from_millis(100));
        }
        if old.rate_limit_bps != self.cfg.rate_limit_bps || old.max_ack_pending != self.cfg.max_ack_pending {
            self.wake = true;
        }
        let rate = self.rate.take();
        self.apply_limits(now);
        if old.rate_limit_bps == self.cfg.rate_limit_bps {
            self.rate = rate;
        }
        if old.deliver_subject != self.cfg.deliver_subject && self.cfg.is_push() {
            self.active = self.bound(env);
            self.wake = true;
        }
        if old.idle_heartbeat != self.cfg.idle_heartbeat {
            self.hb_next =
                (self.cfg.is_push() && self.cfg.idle_heartbeat > 0).then(|| now + dur_ns(self.cfg.idle_heartbeat));
        }
        if old.filters() != self.cfg.filters() {
            self.filter = Filter::many(self.cfg.filters());
            self.wake = true;
        }
        if old.pause_until != self.cfg.pause_until {
            self.set_pause(env, now);
            self.pause_advisory(env);
        }
    }

    /// Pause until `until` (None or zero: resume); sends the pause advisory.
    pub fn pause(&mut self, until: Option<GoTime>, env: &mut dyn ConsumerEnv, now: Instant) {
        self.cfg.pause_until = until.filter(|t| !t.is_zero());
        self.set_pause(env, now);
        self.pause_advisory(env);
        self.wake = true;
    }

    fn set_pause(&mut self, env: &mut dyn ConsumerEnv, now: Instant) {
        let wall = env.now_ns();
        self.pause_end = match self.cfg.pause_until {
            Some(t) if !t.is_zero() && t.0 > wall => Some(now + dur_ns(t.0.saturating_sub(wall))),
            _ => None,
        };
    }

    pub(super) fn paused(&self, now: Instant) -> bool {
        self.pause_end.is_some_and(|end| now < end)
    }

    /// Reset delivery to the ack floor (`None`) or to `seq` (2.14 `CONSUMER.RESET`);
    /// returns the sequence delivery restarts at.
    pub fn reset(&mut self, seq: Option<u64>, env: &mut dyn ConsumerEnv, now: Instant) -> Result<u64, ApiError> {
        let bad = |why: &str| errs::JS_CONSUMER_INVALID_RESET_ERR.err_with(why);
        let seq = match seq.unwrap_or(0) {
            0 => self.asflr + 1,
            s => match self.cfg.deliver_policy {
                DeliverPolicy::All => s,
                DeliverPolicy::ByStartSequence if s < self.cfg.opt_start_seq => return Err(bad("below start seq")),
                DeliverPolicy::ByStartSequence => s,
                DeliverPolicy::ByStartTime => {
                    let ts = self.cfg.opt_start_time.map_or(0, |t| t.nanos());
                    if s < env.store().seq_from_time(ts) {
                        return Err(bad("below start time"));
                    }
                    s
                }
                _ => return Err(bad("not allowed")),
            },
        }
        .max(1);
        self.pending.clear();
        self.rdc.clear();
        self.rdq.clear();
        self.lss = None;
        self.held = None;
        self.ptmr = None;
        self.sseq = seq;
        self.dseq = 1;
        self.adflr = 0;
        self.asflr = seq - 1;
        self.delivered = SeqPair {
            consumer: 0,
            stream: seq - 1,
        };
        self.ldt = 0;
        self.lat = 0;
        self.dirty = true;
        self.wake = true;
        let _ = now;
        Ok(seq)
    }

    /// More of the stream became durable: look for deliveries again.
    pub fn on_durable(&mut self) {
        self.wake = true;
    }

    /// A message was stored in the stream: wake deliveries when it is ours.
    pub fn on_stored(&mut self, seq: u64, subject: &str) {
        if self.filter.matches(subject) {
            self.wake = true;
            if let Some((n, at, last)) = self.np_cache.get() {
                if seq >= at && seq > last {
                    self.np_cache.set(Some((n + 1, at, seq)));
                }
            }
        }
    }

    /// Messages below `first_seq_now` were removed (purge, limits): drop their pending
    /// entries and move the ack floor.
    pub fn on_removed(&mut self, first_seq_now: u64) {
        self.np_cache.set(None);
        let first = first_seq_now.max(1);
        if self.sseq < first {
            self.sseq = first;
            self.delivered.stream = self.delivered.stream.max(first - 1);
        }
        if self.asflr < first {
            self.asflr = first - 1;
            let gone: Vec<u64> = self.pending.range(..first).map(|(s, _)| *s).collect();
            for s in gone {
                if let Some(p) = self.pending.remove(&s) {
                    if p.sequence > self.adflr {
                        self.adflr = p.sequence;
                        self.dseq = self.dseq.max(self.adflr);
                    }
                }
                self.rdc.remove(&s);
            }
            self.rdc.retain(|s, _| *s >= first);
        }
        if self.pending.is_empty() {
            self.adflr = self.dseq - 1;
            self.asflr = self.sseq - 1;
        }
        let sseq = self.sseq;
        self.rdq.retain(|s| *s >= sseq && *s >= first);
        if self.held.as_ref().is_some_and(|h| h.msg.seq < first) {
            self.held = None;
        }
        if let Some(l) = &mut self.lss {
            l.seqs.retain(|s| *s >= first);
        }
        self.dirty = true;
        self.wake = true;
    }

    /// Stop: pending pull requests get `status` (e.g. `409 Consumer Deleted`).
    pub fn stop(&mut self, env: &mut dyn ConsumerEnv, status: &str) {
        let hdr = format!("NATS/1.0 {status}\r\n\r\n");
        for wr in std::mem::take(&mut self.waiting) {
            env.publish(&wr.reply, "", Some(hdr.as_bytes()), b"");
        }
        self.closed = true;
        self.held = None;
        self.ptmr = None;
    }

    /// The server shuts down: each pending pull request hears `409 Server Shutdown` with
    /// what it still waited for (the consumer itself stays as it is on disk).
    pub fn server_shutdown(&mut self, env: &mut dyn ConsumerEnv) {
        for wr in std::mem::take(&mut self.waiting) {
            let hdr = super::wire::status_pending(409, "Server Shutdown", wr.n, wr.b);
            env.publish(&wr.reply, "", Some(&hdr), b"");
        }
    }

    /// Unpin the pinned client of `group` (`$JS.API.CONSUMER.UNPIN`).
    pub fn unpin(&mut self, group: &str, env: &mut dyn ConsumerEnv) -> Result<(), ApiError> {
        if !self.cfg.priority_groups.iter().any(|g| g == group) {
            return Err(errs::JS_CONSUMER_INVALID_PRIORITY_GROUP_ERR.err());
        }
        self.unassign_pin();
        self.unpinned_advisory(env, group, "admin");
        self.wake = true;
        Ok(())
    }

    pub(super) fn unassign_pin(&mut self) {
        self.pin_id.clear();
        self.pinned_ts = 0;
        self.pin_deadline = None;
    }

    pub(super) fn is_pinned_policy(&self) -> bool {
        self.cfg.priority_policy == PriorityPolicy::PinnedClient
    }

    /// Ack wait for a delay (`ZERO`: the configured ack wait), with the timer slack.
    pub(super) fn ack_wait(&self, next: Duration) -> Duration {
        if next > Duration::ZERO {
            next + ACK_WAIT_DELAY
        } else {
            dur_ns(self.cfg.ack_wait) + ACK_WAIT_DELAY
        }
    }

    pub(super) fn dur(ns: i64) -> Duration {
        dur_ns(ns)
    }
}
