//! The JetStream part of one shard ([`ShardJs`], installed as the shard's extension):
//! the streams this shard owns, their ingest subscriptions, the PubAcks released after
//! each group commit, and the timers of their stores and consumers.
//!
//! Ownership: everything here belongs to the shard's thread. Subscription handlers and
//! jobs reach it with [`with_js`].

use super::api::config::StreamConfig;
use super::api::{ApiError, GoTime};
use super::stream::ingest::Ingested;
use super::stream::{self, Stream};
use super::JetStream;
use crate::core::accounts::AccountId;
use crate::core::shard::internal::{Handler, InternalMsg};
use crate::core::shard::{ShardCore, ShardExt};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// How soon a shard looks again at writes in flight whose completions its stores do not
/// signal (a backend without the shard's wake-up, the mio reactor).
const DURABILITY_POLL: Duration = Duration::from_micros(50);
/// How soon it looks again when every store in flight signals its completions (they wake
/// the shard, which looks at once: this is only a safety net).
const DURABILITY_FALLBACK: Duration = Duration::from_millis(2);

/// Streams are keyed by account and name.
pub type StreamKey = (AccountId, String);

/// JetStream's state on one shard.
pub struct ShardJs {
    pub js: Arc<JetStream>,
    pub streams: BTreeMap<StreamKey, Stream>,
    /// Some stream has writes or acknowledgements in flight.
    attention: bool,
    poll_at: Option<Instant>,
    /// When store expiry (max age, TTLs) next has work.
    expire_at: Option<Instant>,
    /// The earliest consumer timer.
    consumer_at: Option<Instant>,
    /// The earliest mirror/source timer (see [`super::sourcing`]).
    pub sourcing_at: Option<Instant>,
    /// When the stores next give back the memory their readers and writers left unused
    /// (every [`storage::io::TRIM_EVERY`] while the shard has streams).
    trim_at: Option<Instant>,
    /// The accounts whose `$JS.API.>` is subscribed, and the account table seen
    /// last (new accounts get theirs when it changes).
    api_accounts: Option<(
        std::collections::HashSet<AccountId>,
        Arc<crate::core::accounts::AccountTable>,
    )>,
}

/// Wall clock, Unix nanoseconds.
pub fn wall_ns() -> i64 {
    GoTime::from_system(SystemTime::now()).0
}

/// Run `f` with this shard's JetStream part (if JetStream runs and it is not already
/// borrowed further up the stack).
pub fn with_js<R>(core: &mut ShardCore, f: impl FnOnce(&mut ShardJs, &mut ShardCore) -> R) -> Option<R> {
    core.with_ext(|e, core| e.as_any_mut().downcast_mut::<ShardJs>().map(|js| f(js, core)))
        .flatten()
}

impl ShardJs {
    pub fn new(js: Arc<JetStream>) -> ShardJs {
        ShardJs {
            js,
            streams: BTreeMap::new(),
            attention: false,
            poll_at: None,
            expire_at: None,
            consumer_at: None,
            sourcing_at: None,
            trim_at: None,
            api_accounts: None,
        }
    }

    /// Open a stream on this shard (new, or recovered from its directory) and subscribe
    /// its subjects. `dir` is its directory for file storage.
    pub fn open_stream(
        &mut self,
        core: &mut ShardCore,
        acc: AccountId,
        cfg: StreamConfig,
        created: GoTime,
        now: Instant,
    ) -> Result<(), ApiError> {
        let account = core.account_table().name(acc).to_string();
        let dir = match cfg.storage {
            super::api::config::StorageType::File => Some(self.js.streams_dir(&account).join(&cfg.name)),
            super::api::config::StorageType::Memory => None,
        };
        let staged = dir.as_ref().and_then(|d| stream::import::stage(d, &cfg.name));
        let keys = self
            .js
            .settings
            .encryption
            .as_ref()
            .map(|enc| storage::crypto::StreamKeys::new(enc, &account, &cfg.name));
        let mut store = stream::open_store(
            &cfg,
            dir.as_ref(),
            &self.js.settings.store,
            keys.as_ref(),
            core.io_wake(),
        )
        .map_err(|e| super::api::errors_table::JS_STREAM_CREATE_ERR_F.err_with(e))?;
        if let Some(staging) = staged {
            stream::import::import(&staging, &account, self.js.settings.encryption.as_ref(), store.as_mut());
        }
        if let Some(d) = &dir {
            stream::persist::write_stream_meta(d, &cfg, created)
                .map_err(|e| super::api::errors_table::JS_STREAM_CREATE_ERR_F.err_with(e))?;
        }
        let mut st = Stream::new(acc, cfg, created, store, dir);
        st.recover_schedules();
        let limits = self.js.account_limits(&account);
        st.limits = match st.cfg.storage {
            super::api::config::StorageType::Memory => (limits.max_memory, self.js.settings.max_memory),
            super::api::config::StorageType::File => (limits.max_store, self.js.settings.max_store),
        };
        st.usage = Some((self.js.usage(acc), self.js.total.clone()));
        st.sync_usage();
        st.subs = subscribe_stream(core, acc, &st.cfg, now);
        let key = (acc, st.name.clone());
        self.streams.insert(key.clone(), st);
        self.schedule_expiry(now);
        self.trim_at.get_or_insert(now + storage::io::TRIM_EVERY);
        super::sourcing::start(self, core, &key, now);
        Ok(())
    }

    /// Remove a stream from this shard: unsubscribe, stop its store, and with `delete`
    /// remove its directory.
    pub fn close_stream(&mut self, core: &mut ShardCore, acc: AccountId, name: &str, delete: bool) -> Option<Stream> {
        let mut st = self.streams.remove(&(acc, name.to_string()))?;
        st.batches.clear();
        // Its bytes leave the usage counters.
        if let Some((a, all)) = &st.usage {
            let memory = st.cfg.storage == super::api::config::StorageType::Memory;
            a.of(memory).fetch_sub(st.counted, std::sync::atomic::Ordering::Relaxed);
            all.of(memory)
                .fetch_sub(st.counted, std::sync::atomic::Ordering::Relaxed);
        }
        for id in st.subs.drain(..) {
            core.unsubscribe_internal(id);
        }
        super::sourcing::stop(core, &mut st, delete, Instant::now());
        // A deleted stream's files go: nothing more is synced or written for them.
        let _ = if delete { st.store.discard() } else { st.store.stop() };
        if delete {
            if let Some(d) = &st.dir {
                let _ = std::fs::remove_dir_all(d);
            }
        }
        Some(st)
    }

    /// Resubscribe a stream after its subjects changed.
    pub fn resubscribe(&mut self, core: &mut ShardCore, acc: AccountId, name: &str, now: Instant) {
        let Some(st) = self.streams.get_mut(&(acc, name.to_string())) else {
            return;
        };
        for id in st.subs.drain(..) {
            core.unsubscribe_internal(id);
        }
        let cfg = st.cfg.clone();
        let subs = subscribe_stream(core, acc, &cfg, now);
        if let Some(st) = self.streams.get_mut(&(acc, name.to_string())) {
            st.subs = subs;
        }
    }

    /// Subscribe the API in accounts not seen yet.
    pub fn watch_accounts(&mut self, core: &mut ShardCore, now: Instant) {
        let table = core.account_table().clone();
        let mut seen = self.api_accounts.take().map(|(s, _)| s).unwrap_or_default();
        let js = self.js.clone();
        super::service::subscribe_accounts(core, &js, &mut seen, now);
        self.api_accounts = Some((seen, table));
    }

    /// Something happened that the next step end must look at.
    pub fn touch(&mut self) {
        self.attention = true;
    }

    /// Consumers of a stream on this shard.
    pub fn consumer_count(&self, acc: AccountId, name: &str) -> usize {
        self.streams
            .get(&(acc, name.to_string()))
            .map_or(0, |s| s.consumers.values().filter(|c| !c.c.config().direct).count())
    }

    /// Stop and delete every consumer of a stream (the stream is being deleted).
    pub fn delete_consumers(&mut self, core: &mut ShardCore, acc: AccountId, name: &str, now: Instant) {
        let key = (acc, name.to_string());
        let names: Vec<String> = self
            .streams
            .get(&key)
            .map(|s| s.consumers.keys().cloned().collect())
            .unwrap_or_default();
        for c in names {
            self.remove_consumer(core, &key, &c, true, now);
        }
    }

    /// Messages were removed from a stream (purge, delete): its consumers adjust.
    pub fn after_removal(&mut self, _core: &mut ShardCore, acc: AccountId, name: &str, _now: Instant) {
        if let Some(st) = self.streams.get_mut(&(acc, name.to_string())) {
            let first = st.store.fast_state().first_seq;
            for slot in st.consumers.values_mut() {
                slot.c.on_removed(first);
            }
        }
        self.attention = true;
    }

    /// An account's usage on this shard: memory bytes, store bytes, streams, consumers.
    pub fn usage(&self, acc: AccountId) -> (u64, u64, usize, usize) {
        let mut u = (0, 0, 0, 0);
        for ((a, _), st) in &self.streams {
            if *a != acc {
                continue;
            }
            let bytes = st.store.fast_state().bytes;
            match st.cfg.storage {
                super::api::config::StorageType::Memory => u.0 += bytes,
                super::api::config::StorageType::File => u.1 += bytes,
            }
            u.2 += 1;
            // The account counts its mirror and source consumers too (stream info does not).
            u.3 += st.consumers.len();
        }
        u
    }

    /// A publish on one of a stream's subjects.
    fn on_publish(&mut self, core: &mut ShardCore, key: &StreamKey, m: &InternalMsg, now: Instant) {
        let acc = key.0;
        // The settings are shared: no per-message copy of the domain.
        let js = self.js.clone();
        let domain = js.settings.domain.as_str();
        let max_payload = core.config().max_payload;
        let Some(st) = self.streams.get_mut(key) else {
            return;
        };
        let Ok(subject) = std::str::from_utf8(&m.subject) else {
            return;
        };
        // The input subject transform comes before anything else.
        let mapped = st.flows.input(subject);
        let subject = mapped.as_deref().unwrap_or(subject);
        let size = st
            .store
            .msg_size(subject, m.header.as_deref().unwrap_or_default(), &m.payload);
        if let Some(server) = st.over_limits(size) {
            let err = if server {
                super::api::errors_table::JS_INSUFFICIENT_RESOURCES_ERR.err()
            } else {
                super::api::errors_table::JS_ACCOUNT_RESOURCES_EXCEEDED_ERR.err()
            };
            if !m.reply.is_empty() && !st.cfg.no_ack {
                let body = super::stream::ingest::pub_ack_error(&st.name, &err);
                core.publish_jetstream(acc, &m.reply, b"", None, &body, now);
            }
            return;
        }
        let wall = wall_ns();
        if let Some(done) = st.batch_publish(
            subject,
            &m.reply,
            m.header.as_deref(),
            &m.payload,
            wall,
            domain,
            max_payload,
            &js.settings.batch,
        ) {
            for body in &done.replies {
                core.publish_jetstream(acc, &m.reply, b"", None, body, now);
            }
            for (id, reason) in st.batches.take_abandoned() {
                super::advisory::batch_abandoned(core, &js, acc, &st.name, &id, reason, now);
            }
            // The batch just touched times out last: the timer needs to run by then.
            let batch_due = (!st.batches.is_empty()).then(|| wall_ns().saturating_add(js.settings.batch.timeout_ns()));
            self.notify_stored(key, &done.stored, done.purged, batch_due, now);
            return;
        }
        let interest = st.cfg.retention != super::api::config::Retention::Interest || {
            let next = st.store.fast_state().last_seq + 1;
            st.consumers.values().any(|s| s.c.needs(next, subject))
        };
        let outcome = st.ingest(
            subject,
            &m.reply,
            m.header.as_deref(),
            &m.payload,
            wall,
            interest,
            domain,
            max_payload,
        );
        match outcome {
            Ingested::Stored { seq, purged } => {
                self.notify_stored(key, &[(seq, subject)], purged, None, now);
            }
            Ingested::Reply(body) => {
                core.publish_jetstream(acc, &m.reply, b"", None, &body, now);
            }
            Ingested::Quiet => {}
        }
    }

    /// Messages were stored in a stream: its consumers learn of them, and a first
    /// message under max age, with a TTL or a schedule (or `also_due`, Unix ns) starts
    /// the expiry timer.
    pub(crate) fn notify_stored<S: AsRef<str>>(
        &mut self,
        key: &StreamKey,
        stored: &[(u64, S)],
        purged: bool,
        also_due: Option<i64>,
        now: Instant,
    ) {
        let Some(st) = self.streams.get_mut(key) else {
            return;
        };
        let first = purged.then(|| st.store.fast_state().first_seq);
        for slot in st.consumers.values_mut() {
            if let Some(first) = first {
                slot.c.on_removed(first);
            }
            for (seq, subject) in stored {
                slot.c.on_stored(*seq, subject.as_ref());
            }
        }
        let due = [st.store.next_expiry(), st.schedules.next_at(), also_due];
        if let Some(at) = due.into_iter().flatten().min() {
            let t = now + Duration::from_nanos(at.saturating_sub(wall_ns()).max(0) as u64);
            if self.expire_at.is_none_or(|e| t < e) {
                self.expire_at = Some(t);
            }
        }
        self.attention = true;
    }

    /// Release PubAcks whose writes are durable; remember to look again while writes are
    /// in flight.
    fn release_acks(&mut self, core: &mut ShardCore, now: Instant) {
        if !self.attention {
            return;
        }
        self.attention = false;
        // Writes first: consumers deliver what is durable by now.
        for st in self.streams.values_mut() {
            st.sync_usage();
            let before = st.store.durable_seq();
            st.durable_acks(now);
            if st.store.durable_seq() > before {
                for slot in st.consumers.values_mut() {
                    slot.c.on_durable();
                }
            }
        }
        let more = self.poll_consumers(core, now);
        let mut waiting = more;
        let mut unsignalled = false;
        let mut held: Option<Instant> = None;
        for st in self.streams.values_mut() {
            held = [held, st.store.write_due()].into_iter().flatten().min();
            let acc = st.account;
            let n = std::mem::take(&mut st.acks_ready);
            st.acks.release(n, |reply, body| {
                core.publish_jetstream(acc, reply, b"", None, body, now);
            });
            let w = st.waiting();
            waiting |= w;
            unsignalled |= w && !st.store.signals_completions();
        }
        self.attention |= waiting;
        self.poll_at = waiting.then(|| match (more, unsignalled) {
            (true, _) => now,
            (false, true) => now + DURABILITY_POLL,
            (false, false) => now + DURABILITY_FALLBACK,
        });
        if held.is_some() {
            self.poll_at = [self.poll_at, held].into_iter().flatten().min();
        }
        self.consumer_at = self.consumer_deadline();
    }

    pub(crate) fn schedule_expiry(&mut self, now: Instant) {
        let wall = wall_ns();
        self.expire_at = self
            .streams
            .values()
            .filter_map(stream_deadline)
            .min()
            .map(|at| now + Duration::from_nanos(at.saturating_sub(wall).max(0) as u64));
    }

    /// Publish the messages of the schedules that are due.
    fn fire_schedules(&mut self, core: &mut ShardCore, now: Instant) {
        let wall = wall_ns();
        let max_payload = core.config().max_payload;
        let js = self.js.clone();
        let due: Vec<StreamKey> = self
            .streams
            .iter()
            .filter(|(_, s)| s.schedules.next_at().is_some_and(|t| t <= wall))
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            let Some(st) = self.streams.get_mut(&key) else { continue };
            let done = st.run_schedules(wall, &js.settings.domain, max_payload);
            self.notify_stored(&key, &done.stored, done.purged, None, now);
        }
    }

    fn expire(&mut self, core: &mut ShardCore, now: Instant) {
        self.fire_schedules(core, now);
        let max_payload = core.config().max_payload;
        for st in self.streams.values_mut() {
            st.batches.expire(wall_ns());
            for (id, reason) in st.batches.take_abandoned() {
                super::advisory::batch_abandoned(core, &self.js, st.account, &st.name, &id, reason, now);
            }
            if st.store.next_expiry().is_some_and(|at| at <= wall_ns()) {
                let mut markers = Vec::new();
                if st.cfg.subject_delete_marker_ttl > 0 {
                    markers = st
                        .expire_with_markers(wall_ns(), &self.js.settings.domain, max_payload)
                        .markers;
                    stream::republish::send_later(core, st.account, std::mem::take(&mut st.outbox));
                } else if let Err(e) = st.store.expire() {
                    tracing::warn!("JetStream stream '{}' expiry failed: {e}", st.name);
                }
                let first = st.store.fast_state().first_seq;
                for slot in st.consumers.values_mut() {
                    slot.c.on_removed(first);
                    for (seq, subject) in &markers {
                        slot.c.on_stored(*seq, subject);
                    }
                }
                st.dirty = true;
                self.attention = true;
            }
        }
        self.schedule_expiry(now);
    }
}

impl ShardExt for ShardJs {
    fn after_step(&mut self, core: &mut ShardCore, now: Instant) {
        if self
            .api_accounts
            .as_ref()
            .is_some_and(|(_, t)| !Arc::ptr_eq(t, core.account_table()))
        {
            self.watch_accounts(core, now);
        }
        self.release_acks(core, now);
    }

    fn next_deadline(&self) -> Option<Instant> {
        [
            self.poll_at,
            self.expire_at,
            self.consumer_at,
            self.sourcing_at,
            self.trim_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn tick(&mut self, core: &mut ShardCore, now: Instant) {
        if self.expire_at.is_some_and(|t| t <= now) {
            self.expire(core, now);
        }
        if self.poll_at.is_some_and(|t| t <= now) {
            self.poll_at = None;
            self.attention = true;
        }
        if self.consumer_at.is_some_and(|t| t <= now) {
            self.consumer_at = None;
            self.tick_consumers(core, now);
        }
        if self.sourcing_at.is_some_and(|t| t <= now) {
            super::sourcing::tick(self, core, now);
        }
        if self.trim_at.is_some_and(|t| t <= now) {
            for st in self.streams.values_mut() {
                st.store.trim();
            }
            self.trim_at = (!self.streams.is_empty()).then(|| now + storage::io::TRIM_EVERY);
        }
        self.release_acks(core, now);
    }

    fn woken(&mut self, now: Instant) {
        // Writes in flight: their completion may be what woke the shard.
        if self.poll_at.is_some() {
            self.poll_at = Some(now);
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// When a stream's timed work (store expiry, schedules, batch timeouts) is next due
/// (Unix ns).
fn stream_deadline(st: &Stream) -> Option<i64> {
    [st.store.next_expiry(), st.schedules.next_at(), st.batches.next_expiry()]
        .into_iter()
        .flatten()
        .min()
}

/// Subscribe the stream's subjects (its ingest) on this shard.
fn subscribe_stream(
    core: &mut ShardCore,
    acc: AccountId,
    cfg: &StreamConfig,
    now: Instant,
) -> Vec<crate::core::client::SubId> {
    let mut subs = Vec::new();
    for subject in &cfg.subjects {
        // The stream's key is built once here, not per message.
        let key: StreamKey = (acc, cfg.name.clone());
        let h: Handler = Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
            let out = with_js(core, |js, core| {
                js.on_publish(core, &key, m, now);
                js.streams.get_mut(&key).map(|st| std::mem::take(&mut st.outbox))
            });
            if let Some(Some(out)) = out {
                stream::republish::send(core, key.0, out, now);
            }
        });
        if let Some(id) = core.subscribe_internal(acc, subject, None, false, h, now) {
            subs.push(id);
        }
    }
    if cfg.allow_direct {
        for subject in [
            format!("$JS.API.DIRECT.GET.{}", cfg.name),
            format!("$JS.API.DIRECT.GET.{}.>", cfg.name),
        ] {
            let key = (acc, cfg.name.clone());
            let h: Handler = Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
                if m.reply.is_empty() {
                    return;
                }
                let replies = with_js(core, |js, _core| {
                    let st = js.streams.get_mut(&key)?;
                    Some(st.direct_get(&String::from_utf8_lossy(&m.subject), &m.payload))
                })
                .flatten()
                .unwrap_or_default();
                for r in replies {
                    core.publish_jetstream(acc, &m.reply, b"", Some(&r.header), &r.payload, now);
                }
            });
            if let Some(id) = core.subscribe_internal(acc, &subject, Some("_sys_"), false, h, now) {
                subs.push(id);
            }
        }
    }
    subs
}
