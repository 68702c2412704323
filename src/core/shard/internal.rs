//! Internal clients (ARCHITECTURE.md, invariant 14): server-side subscribers and
//! publishers without a socket, one per account on each shard, reached like any other
//! subscriber so that accounts, imports and permissions apply to them unchanged.
//!
//! - [`ShardCore::subscribe_internal`]: a subscription whose messages go to a handler
//!   running on this shard (after the step that delivered them, never re-entrantly);
//!   `local` ones see only messages published on this shard (per-connection services
//!   such as `$SYS.REQ.USER.INFO` answer where the requester is), the others get their
//!   interest replicated like a client's (one shard hosts the service for the server).
//! - [`ShardCore::publish_internal`]: publish into an account from this shard.
//! - [`ShardCore::request_internal`]: publish with a private inbox and get the first reply
//!   (or nothing by a deadline).
//! - [`ShardCore::gather`]: run a function on every shard and combine the parts here.

use super::route::Msg;
use super::ShardCore;
use crate::core::accounts::AccountId;
use crate::core::client::{Client, ConnKey, SubId, Subscription};
use crate::core::post::Job;
use crate::core::FastMap;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Internal deliveries handled per step before yielding to sockets.
const INTERNAL_BUDGET: usize = 4096;

/// A message for an internal subscription (an owned copy).
#[derive(Clone, Debug)]
pub struct InternalMsg {
    pub account: AccountId,
    pub subject: Vec<u8>,
    pub reply: Vec<u8>,
    /// The header block (`NATS/1.0\r\n...\r\n\r\n`), if any.
    pub header: Option<Vec<u8>>,
    pub payload: Vec<u8>,
    /// The publishing connection when it is on this shard.
    pub sender: Option<ConnKey>,
}

impl InternalMsg {
    /// Move the message out (a handler that keeps it), leaving empty buffers behind.
    pub fn take(&mut self) -> InternalMsg {
        InternalMsg {
            account: self.account,
            subject: std::mem::take(&mut self.subject),
            reply: std::mem::take(&mut self.reply),
            header: self.header.take(),
            payload: std::mem::take(&mut self.payload),
            sender: self.sender,
        }
    }
}

/// What an internal subscription does with a message. Runs on the owning shard. The
/// message is lent: what the handler leaves in it is reused for later deliveries
/// ([`InternalMsg::take`] keeps it).
pub type Handler = Box<dyn FnMut(&mut ShardCore, &mut InternalMsg, Instant)>;

/// A test run before an internal subscription's message is copied for its handler: given
/// the account and the routed subject, true means the handler would do nothing with it, so
/// it is taken (it counts as delivered) without a copy or a handler run. Runs on the
/// delivering shard, inside routing: it must not publish.
pub type Skip = Box<dyn Fn(AccountId, &[u8]) -> bool>;

/// Buffers kept for reuse by internal deliveries: at most this many, holding at most
/// [`POOL_MAX_BYTES`] together, none over [`POOL_MAX_CAP`]. One read of 64 KiB of small
/// JetStream publishes queues over a thousand messages of up to four buffers each before
/// their handlers run: with 256 buffers most of them were allocated and freed again.
const POOL_BUFS: usize = 8192;
const POOL_MAX_CAP: usize = 64 * 1024;
const POOL_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Buffers up to this capacity are the pool's small class.
const SMALL_CAP: usize = 256;
/// The least capacity of a new pooled buffer (a subject or an inbox fits).
const MIN_CAP: usize = 64;

/// A shard's part of a [`ShardCore::gather`].
pub type PartFn<T> = Arc<dyn Fn(&mut ShardCore, Instant) -> T + Send + Sync>;
/// What combines the parts of a [`ShardCore::gather`], on the shard that asked.
pub type DoneFn<T> = Box<dyn FnOnce(&mut ShardCore, Vec<T>, Instant) + Send>;
/// The parts collected so far, how many are missing, and the combiner.
type Gathering<T> = Arc<Mutex<(Vec<Option<T>>, usize, Option<DoneFn<T>>)>>;

/// What a request's caller gets: the reply, or `None` at the deadline.
pub type ReplyHandler = Box<dyn FnOnce(&mut ShardCore, Option<InternalMsg>, Instant)>;

/// The internal side of one shard.
#[derive(Default)]
pub(crate) struct Internals {
    /// The internal client of each account on this shard.
    clients: FastMap<AccountId, ConnKey>,
    /// Handlers by subscription.
    handlers: FastMap<SubId, Option<Handler>>,
    /// Subscriptions that see only local publishes.
    local: FastMap<SubId, ()>,
    queue: VecDeque<(SubId, InternalMsg)>,
    /// Subscriptions whose messages are tested before they are copied.
    skips: FastMap<SubId, Skip>,
    /// Buffers of handled messages, for the copies of the next ones: small ones (subjects,
    /// replies, short payloads) apart from large ones, so that a large copy does not grow
    /// a small buffer (a reallocation) and a small copy does not hold a large one.
    pool: Vec<Vec<u8>>,
    pool_large: Vec<Vec<u8>>,
    /// The capacity the pool holds.
    pool_bytes: usize,
    /// Pending requests by inbox subject.
    requests: FastMap<Vec<u8>, (Instant, Option<ReplyHandler>)>,
    /// The inbox subscription of each account for requests.
    inboxes: FastMap<AccountId, SubId>,
    next_request: u64,
    next_sid: u64,
    /// Handlers are running (no nested run).
    pub(crate) running: bool,
    /// Publishes queued from inside routing: (account, subject, payload).
    pub(crate) deferred: Vec<(AccountId, String, Vec<u8>)>,
}

impl Internals {
    /// `data` in a buffer from the pool (no allocation once the pool is warm).
    fn copy(&mut self, data: &[u8]) -> Vec<u8> {
        if data.is_empty() {
            return Vec::new();
        }
        let mut v = self.buffer(data.len());
        v.extend_from_slice(data);
        v
    }

    /// Keep a handled message's buffers for later copies.
    fn recycle(&mut self, m: InternalMsg) {
        let bufs = [Some(m.subject), Some(m.reply), m.header, Some(m.payload)];
        for v in bufs.into_iter().flatten() {
            self.give_back(v);
        }
    }

    /// An empty buffer for `need` bytes from the pool of its size class (or a new one).
    fn buffer(&mut self, need: usize) -> Vec<u8> {
        let class = if need > SMALL_CAP {
            &mut self.pool_large
        } else {
            &mut self.pool
        };
        let Some(mut v) = class.pop() else {
            return Vec::with_capacity(need.max(MIN_CAP));
        };
        self.pool_bytes = self.pool_bytes.saturating_sub(v.capacity());
        v.clear();
        v.reserve(need);
        v
    }

    /// Keep one buffer for later copies (if the pool has room and it is not too large).
    fn give_back(&mut self, v: Vec<u8>) {
        let cap = v.capacity();
        let held = self.pool.len() + self.pool_large.len();
        if held < POOL_BUFS && cap > 0 && cap <= POOL_MAX_CAP && self.pool_bytes + cap <= POOL_MAX_BYTES {
            self.pool_bytes += cap;
            if cap > SMALL_CAP {
                self.pool_large.push(v);
            } else {
                self.pool.push(v);
            }
        }
    }

    /// Whether a message on `subject` in `acc` for subscription `id` is skipped.
    fn skipped(&self, id: SubId, acc: AccountId, subject: &[u8]) -> bool {
        !self.skips.is_empty() && self.skips.get(&id).is_some_and(|f| f(acc, subject))
    }

    /// True if internal deliveries wait to be handled.
    pub(crate) fn busy(&self) -> bool {
        !self.queue.is_empty() || !self.deferred.is_empty()
    }

    /// Internal deliveries waiting for their handlers.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Internal clients on this shard.
    pub(crate) fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// The earliest request deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.requests.values().map(|(t, _)| *t).min()
    }
}

impl Internals {
    /// Is `id` an internal subscription (with a handler)?
    pub(crate) fn handles(&self, id: SubId) -> bool {
        self.handlers.contains_key(&id)
    }
}

impl ShardCore {
    /// The internal client of `acc` on this shard (created on first use).
    fn internal_client(&mut self, acc: AccountId, now: Instant) -> ConnKey {
        if let Some(&k) = self.internals.clients.get(&acc) {
            if self.client(k).is_some() {
                return k;
            }
        }
        let gen = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1).max(1);
        let peer = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
        let mut c = Client::new(0, gen, peer, now, Duration::from_secs(3600 * 24 * 365));
        c.internal = true;
        c.account = acc;
        c.connect_received = true;
        c.headers = true;
        c.opts.verbose = false;
        c.opts.pedantic = false;
        c.opts.headers = true;
        c.label = format!("ACCOUNT - {}", self.table.name(acc));
        let idx = self.clients.insert(c) as u32;
        let key = ConnKey { idx, gen };
        self.internals.clients.insert(acc, key);
        key
    }

    /// Subscribe `handler` to `subject` in `acc` (see the module documentation for
    /// `local`). Returns the subscription, or `None` for an invalid subject.
    pub fn subscribe_internal(
        &mut self,
        acc: AccountId,
        subject: &str,
        queue: Option<&str>,
        local: bool,
        handler: Handler,
        now: Instant,
    ) -> Option<SubId> {
        let key = self.internal_client(acc, now);
        self.internals.next_sid += 1;
        let sid = self.internals.next_sid.to_string();
        let sub = Subscription {
            conn: key,
            account: acc,
            subject: subject.as_bytes().into(),
            queue: queue.map(|q| q.as_bytes().into()),
            sid: sid.as_bytes().into(),
            max: 0,
            delivered: 0,
        };
        let id = self.subs.insert(sub) as SubId;
        if self
            .acct(acc)
            .sublist
            .insert(subject.as_bytes(), queue.map(str::as_bytes), id)
            .is_err()
        {
            self.subs.remove(id as usize);
            return None;
        }
        let sid_key: Box<[u8]> = self.subs.get(id as usize).map(|s| s.sid.clone()).unwrap_or_default();
        if let Some(c) = self.client_mut(key) {
            c.subs.insert(sid_key, id);
        }
        self.internals.handlers.insert(id, Some(handler));
        if local {
            self.internals.local.insert(id, ());
        } else {
            self.interest_delta(acc, subject.as_bytes(), queue.map(str::as_bytes), 1);
        }
        Some(id)
    }

    /// Test the messages of internal subscription `id` with `skip` before they are copied
    /// for its handler (see [`Skip`]).
    pub fn skip_internal(&mut self, id: SubId, skip: Skip) {
        if self.internals.handlers.contains_key(&id) {
            self.internals.skips.insert(id, skip);
        }
    }

    /// Remove an internal subscription.
    pub fn unsubscribe_internal(&mut self, id: SubId) {
        let Some(sub) = self.subs.get(id as usize) else { return };
        let (conn, sid) = (sub.conn, sub.sid.clone());
        if let Some(c) = self.client_mut(conn) {
            c.subs.remove(&sid);
        }
        self.internals.handlers.remove(&id);
        self.internals.skips.remove(&id);
        if self.internals.local.remove(&id).is_some() {
            if let Some(sub) = self.subs.try_remove(id as usize) {
                self.acct(sub.account)
                    .sublist
                    .remove(&sub.subject, sub.queue.as_deref(), id);
            }
        } else {
            self.remove_sub(id);
        }
    }

    /// Publish into `acc` from this shard's internal client. Returns whether anyone took
    /// it.
    pub fn publish_internal(
        &mut self,
        acc: AccountId,
        subject: &[u8],
        reply: &[u8],
        header: Option<&[u8]>,
        payload: &[u8],
        now: Instant,
    ) -> bool {
        self.publish_from_internal(acc, subject, b"", reply, header, payload, true, now)
    }

    /// Publish into `acc` as JetStream does: its messages are framed like a client's
    /// (`MSG <subject> <sid> <size>`, where the system's own have a double space when they
    /// carry no reply).
    pub fn publish_jetstream(
        &mut self,
        acc: AccountId,
        subject: &[u8],
        reply: &[u8],
        header: Option<&[u8]>,
        payload: &[u8],
        now: Instant,
    ) -> bool {
        self.publish_from_internal(acc, subject, b"", reply, header, payload, false, now)
    }

    /// Publish on `to` as JetStream delivers a stored message: subscribers of `to` see it
    /// under its own `subject`.
    #[allow(clippy::too_many_arguments)]
    pub fn deliver_jetstream(
        &mut self,
        acc: AccountId,
        to: &[u8],
        subject: &[u8],
        reply: &[u8],
        header: Option<&[u8]>,
        payload: &[u8],
        now: Instant,
    ) -> bool {
        let shown = if to == subject { &b""[..] } else { subject };
        self.publish_from_internal(acc, to, shown, reply, header, payload, false, now)
    }

    #[allow(clippy::too_many_arguments)]
    fn publish_from_internal(
        &mut self,
        acc: AccountId,
        subject: &[u8],
        shown: &[u8],
        reply: &[u8],
        header: Option<&[u8]>,
        payload: &[u8],
        system_framing: bool,
        now: Instant,
    ) -> bool {
        let key = self.internal_client(acc, now);
        // Header and payload joined in a pooled buffer (routing needs them as one), given
        // back to the pool after the delivery.
        let mut data = self.internals.buffer(header.map_or(0, <[u8]>::len) + payload.len());
        data.extend_from_slice(header.unwrap_or_default());
        data.extend_from_slice(payload);
        let mut size = itoa::Buffer::new();
        let mut hdr = itoa::Buffer::new();
        let m = Msg {
            subject,
            reply,
            header_len: header.map(<[u8]>::len),
            data: &data,
            size_text: size.format(data.len()).as_bytes(),
            hdr_text: header.map_or(&b""[..], |h| hdr.format(h.len()).as_bytes()),
            internal: system_framing,
            shown,
        };
        // nats-server counts only what its clients sent in `in_msgs`: the server's own
        // publishes (events, service replies) are not.
        let delivered = self.route(acc, Some(key), &m, now);
        self.internals.give_back(data);
        self.finish(now);
        delivered
    }

    /// Publish into `acc` once the current step is done (from inside routing, where a
    /// publish must not nest): events such as service latency results.
    pub fn publish_later(&mut self, acc: AccountId, subject: &str, payload: Vec<u8>) {
        self.internals.deferred.push((acc, subject.to_string(), payload));
    }

    /// Would a publish on `subject` in `acc` from this shard reach anyone: a local or
    /// remote subscriber, or an account importing it as a stream? The server's own
    /// local-only internal subscriptions do not count (they only keep the reference's
    /// subscription set). Cheap: the sublists cache their matches.
    pub fn has_interest(&mut self, acc: AccountId, subject: &[u8]) -> bool {
        let local = self.acct(acc).sublist.matches(subject);
        if !local.qsubs.is_empty() || local.psubs.iter().any(|id| !self.internals.local.contains_key(id)) {
            return true;
        }
        if self.nshards > 1 && !self.acct(acc).remote.matches(subject).is_empty() {
            return true;
        }
        let st = self.acct(acc);
        st.has_stream_links() && !st.stream_out.matches(subject).psubs.is_empty()
    }

    /// Is there a subscription on exactly `subject` in `acc` on any shard, plain
    /// (`queue: None`) or in group `queue`: a push consumer's interest in its deliver
    /// subject. As with the reference's interest notifications, a wildcard subscription
    /// that matches the subject, or a member of another queue group, does not count; nor
    /// do the server's local-only internal subscriptions. An account importing the
    /// subject as a stream counts (the reference's import is a subscription on it).
    pub fn has_exact_interest(&mut self, acc: AccountId, subject: &[u8], queue: Option<&[u8]>) -> bool {
        let multi = self.nshards > 1;
        let i = acc as usize;
        let Some(st) = self.accts.get(i) else {
            return false;
        };
        let local = &self.internals.local;
        if st
            .sublist
            .exact(subject, queue)
            .iter()
            .any(|id| !local.contains_key(id))
            || (multi && st.remote.has_exact(subject, queue))
        {
            return true;
        }
        let st = self.acct(acc);
        st.has_stream_links() && !st.stream_out.matches(subject).psubs.is_empty()
    }

    /// Publish what [`Self::publish_later`] queued.
    pub(super) fn publish_deferred(&mut self, now: Instant) {
        let list = std::mem::take(&mut self.internals.deferred);
        for (acc, subject, payload) in list {
            self.publish_internal(acc, subject.as_bytes(), b"", None, &payload, now);
        }
    }

    /// Publish a request in `acc` with a private reply subject; `on_reply` gets the
    /// first reply, or `None` after `timeout`. Returns false if nobody took the request
    /// (then `on_reply` has been called with `None`).
    #[allow(clippy::too_many_arguments)]
    pub fn request_internal(
        &mut self,
        acc: AccountId,
        subject: &[u8],
        header: Option<&[u8]>,
        payload: &[u8],
        timeout: Duration,
        on_reply: ReplyHandler,
        now: Instant,
    ) -> bool {
        let prefix = self.inbox_prefix(acc);
        if !self.internals.inboxes.contains_key(&acc) {
            let pattern = format!("{prefix}>");
            let h: Handler = Box::new(|core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
                if let Some((_, Some(f))) = core.internals.requests.remove(&m.subject) {
                    f(core, Some(m.take()), now);
                }
            });
            if let Some(id) = self.subscribe_internal(acc, &pattern, None, false, h, now) {
                self.internals.inboxes.insert(acc, id);
            }
        }
        self.internals.next_request += 1;
        let inbox = format!("{prefix}{}", self.internals.next_request).into_bytes();
        self.internals
            .requests
            .insert(inbox.clone(), (now + timeout, Some(on_reply)));
        let taken = self.publish_internal(acc, subject, &inbox, header, payload, now);
        if !taken {
            if let Some((_, Some(f))) = self.internals.requests.remove(&inbox) {
                f(self, None, now);
            }
        }
        taken
    }

    /// Does the connection `key` of this shard want no-responders statuses (CONNECT's
    /// `no_responders` with headers)? `None`: not a connection of this shard.
    pub fn wants_no_responders(&self, key: ConnKey) -> Option<bool> {
        self.client(key).map(|c| c.opts.no_responders && c.opts.headers)
    }

    /// `$SYS._INBOX.<server><shard>.` — this shard's private reply space.
    fn inbox_prefix(&self, _acc: AccountId) -> String {
        let id = &self.cfg.info.server_id;
        let short = id.get(id.len().saturating_sub(8)..).unwrap_or(id);
        format!("$SYS._INBOX.{short}{}.", self.idx)
    }

    /// Deliver to an internal subscription: queue a copy for its handler.
    pub(super) fn deliver_internal(
        &mut self,
        id: SubId,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        remote: bool,
    ) -> bool {
        if remote && self.internals.local.contains_key(&id) {
            return false;
        }
        let Some(sub) = self.subs.get(id as usize) else {
            return false;
        };
        let account = sub.account;
        if self.internals.skipped(id, account, m.subject) {
            return true;
        }
        let sender = publisher.filter(|k| self.client(*k).is_some_and(|c| !c.internal));
        let i = &mut self.internals;
        let msg = InternalMsg {
            account,
            // What a client would see: a JetStream delivery shows the stored subject.
            subject: i.copy(m.shown_subject()),
            reply: i.copy(m.reply),
            header: m.header().map(|h| i.copy(h)),
            payload: i.copy(m.payload()),
            sender,
        };
        self.internals.queue.push_back((id, msg));
        true
    }

    /// Run the handlers of queued internal deliveries (bounded per call).
    pub(super) fn run_internal(&mut self, now: Instant) {
        let mut budget = INTERNAL_BUDGET;
        while budget > 0 {
            let Some((id, mut msg)) = self.internals.queue.pop_front() else {
                break;
            };
            budget -= 1;
            let Some(slot) = self.internals.handlers.get_mut(&id) else {
                continue;
            };
            let Some(mut h) = slot.take() else { continue };
            h(self, &mut msg, now);
            self.internals.recycle(msg);
            if let Some(slot) = self.internals.handlers.get_mut(&id) {
                if slot.is_none() {
                    *slot = Some(h);
                }
            }
        }
    }

    /// Run a posted job, then finish the step (handlers, mesh, statistics).
    pub fn run_job(&mut self, job: Job, now: Instant) {
        self.sync_accounts();
        job(self, now);
        self.finish(now);
    }

    /// Requests whose deadline passed get `None`.
    pub(super) fn expire_requests(&mut self, now: Instant) {
        if self.internals.requests.is_empty() {
            return;
        }
        let due: Vec<Vec<u8>> = self
            .internals
            .requests
            .iter()
            .filter(|(_, (t, _))| *t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            if let Some((_, Some(f))) = self.internals.requests.remove(&k) {
                f(self, None, now);
            }
        }
    }

    /// Run `part` on every shard (this one included) and hand the parts, in shard order,
    /// to `done` here. Without a runtime, only this shard's part is taken.
    pub fn gather<T: Send + 'static>(&mut self, part: PartFn<T>, done: DoneFn<T>, now: Instant) {
        let Some(post) = self.post.clone().filter(|_| self.nshards > 1) else {
            let mine = part(self, now);
            done(self, vec![mine], now);
            return;
        };
        let n = self.nshards;
        let origin = self.idx;
        let slots: Gathering<T> = Arc::new(Mutex::new(((0..n).map(|_| None).collect(), n, Some(done))));
        for s in 0..n {
            let part = part.clone();
            let slots = slots.clone();
            let post2 = post.clone();
            let job: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
                let v = part(core, now);
                let mut g = slots.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(slot) = g.0.get_mut(core.idx) {
                    *slot = Some(v);
                }
                g.1 -= 1;
                if g.1 == 0 {
                    let parts: Vec<T> = g.0.drain(..).flatten().collect();
                    let Some(done) = g.2.take() else { return };
                    drop(g);
                    let finish: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
                        done(core, parts, now);
                        core.finish(now);
                    });
                    post2.post(origin, finish);
                }
            });
            post.post(s, job);
        }
    }
}
