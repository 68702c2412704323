//! A stream's consumers on the stream's shard: each [`Slot`] holds the sans-IO engine
//! ([`super::consumer::Consumer`]), its subscriptions (acks, pull requests, flow control
//! replies) and, for durable consumers of file streams, its directory (`obs/<name>`:
//! `meta.inf` and the `o.dat` state, rewritten in place: one `pwrite` into the page cache,
//! no fdatasync on the shard's thread (it is synced when the consumer stops or the server
//! shuts down). A change is written at once when an ack waits for its confirmation, so a
//! kill -9 never loses an ack the client saw confirmed; otherwise at most
//! [`STATE_WRITE_EVERY`] after it (the reference writes at most every 100 ms). A kill -9
//! or a power loss may so replay the last unconfirmed acknowledgements' messages
//! (redelivered, never lost). Writing after every step cost 15% of the shard's time in a
//! push consumer at 300k acks/s: the state holds every pending delivery.
//!
//! The shard drives them: new messages wake them, [`ShardJs::poll_consumers`] delivers
//! after each step, timers come through the shard extension's deadline, and acks on
//! interest and work-queue streams remove what no consumer needs any more.
//!
//! The answer to an ack that asks for one (`AckSync`, a double ack) is held in
//! [`Slot::confirms`] until the state the ack changed is written, so a confirmed ack
//! survives a crash.

use super::api::config::{ConsumerConfig, Retention};
use super::api::{ApiError, GoTime};
use super::consumer::{Consumer, ConsumerEnv};
use super::shard::{wall_ns, with_js, ShardJs, StreamKey};
use crate::core::accounts::AccountId;
use crate::core::client::SubId;
use crate::core::shard::internal::{Handler, InternalMsg};
use crate::core::shard::ShardCore;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use storage::Store;

/// The longest a durable consumer's changed state waits to be written when no ack
/// waits for its confirmation.
pub const STATE_WRITE_EVERY: Duration = Duration::from_millis(20);

/// One consumer and what the shard keeps for it.
pub struct Slot {
    pub c: Consumer,
    pub subs: Vec<SubId>,
    /// `obs/<name>` of a durable consumer on file storage.
    pub dir: Option<PathBuf>,
    /// Its open `o.dat`.
    pub state_file: Option<StateFile>,
    /// Answers to acks (their reply subjects), sent once the consumer's state is written.
    pub confirms: Vec<String>,
    /// The state changed and is not written yet: when it is due.
    pub write_at: Option<Instant>,
}

/// An open `o.dat`, its length, and the buffer its state is encoded into.
pub struct StateFile {
    file: std::fs::File,
    len: u64,
    buf: Vec<u8>,
}

impl Slot {
    /// Note a change of state; write it now when `now` reaches its due time or an ack
    /// waits for its confirmation, then send the confirmations that the write covers.
    /// When the write fails the confirmations are dropped (their acks time out at the
    /// client and are retried) and the write is tried again later.
    fn save(&mut self, env: &mut Env<'_>, changed: bool, now: Instant) {
        if changed && self.dir.is_some() {
            self.write_at.get_or_insert(now + STATE_WRITE_EVERY);
        }
        let mut written = true;
        if self.write_at.is_some_and(|t| t <= now || !self.confirms.is_empty()) {
            written = self.persist(false);
            self.write_at = (!written).then_some(now + STATE_WRITE_EVERY);
        }
        for reply in self.confirms.drain(..) {
            if written {
                env.publish(&reply, "", None, b"");
            }
        }
    }

    /// Write the consumer's state over `o.dat` (page cache; `sync`: and fdatasync it).
    /// The state is encoded from the consumer's own maps into a reused buffer, and the
    /// file is truncated only when the state got shorter (the decoder reads counted
    /// entries, so a crash between the write and the truncation leaves a readable file).
    fn persist(&mut self, sync: bool) -> bool {
        let Some(d) = &self.dir else { return true };
        let r = (|| -> std::io::Result<()> {
            if self.state_file.is_none() {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(d.join("o.dat"))?;
                let len = file.metadata()?.len();
                self.state_file = Some(StateFile {
                    file,
                    len,
                    buf: Vec::new(),
                });
            }
            let Some(sf) = &mut self.state_file else { return Ok(()) };
            storage::consumer_state::encode_into(&mut sf.buf, self.c.state_ref(), storage::consumer_state::now_secs());
            write_at(&sf.file, &sf.buf)?;
            let len = sf.buf.len() as u64;
            if len < sf.len {
                sf.file.set_len(len)?;
            }
            sf.len = len;
            if sync {
                sf.file.sync_data()?;
            }
            Ok(())
        })();
        match r {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("JetStream consumer '{}' state write failed: {e}", self.c.name());
                self.state_file = None;
                false
            }
        }
    }
}

#[cfg(unix)]
fn write_at(f: &std::fs::File, bytes: &[u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, bytes, 0)
}

#[cfg(not(unix))]
fn write_at(mut f: &std::fs::File, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::{Seek, Write};
    f.seek(std::io::SeekFrom::Start(0))?;
    f.write_all(bytes)
}

/// What a consumer sees of its shard.
pub struct Env<'a> {
    pub core: &'a mut ShardCore,
    pub store: &'a mut dyn Store,
    pub acc: AccountId,
    pub now: Instant,
    /// The wall clock, read once per environment (a poll delivers up to 256 messages, each
    /// stamped; reading the clock for each was 3% of a push consumer's shard).
    pub wall: std::cell::Cell<i64>,
}

impl ConsumerEnv for Env<'_> {
    fn store(&mut self) -> &mut dyn Store {
        self.store
    }

    fn now_ns(&self) -> i64 {
        if self.wall.get() == 0 {
            self.wall.set(wall_ns());
        }
        self.wall.get()
    }

    fn has_interest(&mut self, subject: &str) -> bool {
        self.core.has_interest(self.acc, subject.as_bytes())
    }

    fn has_delivery_interest(&mut self, subject: &str, group: &str) -> bool {
        let queue = (!group.is_empty()).then_some(group.as_bytes());
        self.core.has_exact_interest(self.acc, subject.as_bytes(), queue)
    }

    fn publish(&mut self, subject: &str, reply: &str, header: Option<&[u8]>, payload: &[u8]) {
        self.core.publish_jetstream(
            self.acc,
            subject.as_bytes(),
            reply.as_bytes(),
            header,
            payload,
            self.now,
        );
    }

    fn deliver(&mut self, to: &str, subject: &str, reply: &str, header: Option<&[u8]>, payload: &[u8]) {
        self.core.deliver_jetstream(
            self.acc,
            to.as_bytes(),
            subject.as_bytes(),
            reply.as_bytes(),
            header,
            payload,
            self.now,
        );
    }
}

/// The environment of an ack: its empty answer on the ack's reply subject is held back
/// (for [`Slot::confirms`]); everything else goes through.
struct HoldConfirm<'e, 'a> {
    env: &'e mut Env<'a>,
    reply: &'e str,
    held: &'e mut Vec<String>,
}

impl ConsumerEnv for HoldConfirm<'_, '_> {
    fn store(&mut self) -> &mut dyn Store {
        self.env.store()
    }

    fn now_ns(&self) -> i64 {
        self.env.now_ns()
    }

    fn has_interest(&mut self, subject: &str) -> bool {
        self.env.has_interest(subject)
    }

    fn has_delivery_interest(&mut self, subject: &str, group: &str) -> bool {
        self.env.has_delivery_interest(subject, group)
    }

    fn publish(&mut self, subject: &str, reply: &str, header: Option<&[u8]>, payload: &[u8]) {
        if !self.reply.is_empty() && subject == self.reply && reply.is_empty() && header.is_none() && payload.is_empty()
        {
            self.held.push(subject.to_string());
        } else {
            self.env.publish(subject, reply, header, payload);
        }
    }

    fn deliver(&mut self, to: &str, subject: &str, reply: &str, header: Option<&[u8]>, payload: &[u8]) {
        self.env.deliver(to, subject, reply, header, payload);
    }
}

/// Run `f` on one consumer with its environment.
pub(crate) fn with_consumer<R>(
    sjs: &mut ShardJs,
    core: &mut ShardCore,
    key: &StreamKey,
    name: &str,
    now: Instant,
    f: impl FnOnce(&mut Consumer, &mut Env<'_>) -> R,
) -> Option<R> {
    let st = sjs.streams.get_mut(key)?;
    let slot = st.consumers.get_mut(name)?;
    let mut env = Env {
        core,
        store: st.store.as_mut(),
        acc: key.0,
        now,
        wall: Default::default(),
    };
    Some(f(&mut slot.c, &mut env))
}

impl ShardJs {
    /// Create (or recover) a consumer of a stream on this shard and subscribe its
    /// subjects. `durable`: it keeps a directory on file streams.
    #[allow(clippy::too_many_arguments)]
    pub fn add_consumer(
        &mut self,
        core: &mut ShardCore,
        acc: AccountId,
        stream: &str,
        name: &str,
        cfg: ConsumerConfig,
        created: GoTime,
        state: Option<storage::ConsumerState>,
        now: Instant,
    ) -> Result<(), ApiError> {
        let key = (acc, stream.to_string());
        let domain = self.js.settings.domain.clone();
        let account = core.account_table().name(acc).to_string();
        let Some(st) = self.streams.get_mut(&key) else {
            return Err(super::api::errors_table::JS_STREAM_NOT_FOUND_ERR.err());
        };
        let durable = !cfg.durable_name.is_empty();
        let dir = match (&st.dir, durable && !cfg.mem_storage) {
            (Some(d), true) => Some(super::stream::persist::consumer_dir(d, name)),
            _ => None,
        };
        if let Some(d) = &dir {
            super::stream::persist::write_consumer_meta(d, name, &cfg, created)
                .map_err(|e| super::api::errors_table::JS_CONSUMER_STORE_FAILED_ERR_F.err_with(e))?;
        }
        let retention = st.cfg.retention != Retention::Limits;
        let mut env = Env {
            core,
            store: st.store.as_mut(),
            acc,
            now,
            wall: Default::default(),
        };
        let mut c = Consumer::new(stream, name, cfg, created, state, &mut env, now);
        c.set_identity(&account, &domain);
        c.set_retention_acks(retention);
        let subs = subscribe_consumer(core, acc, stream, name, &domain, now);
        if let Some(st) = self.streams.get_mut(&key) {
            st.consumers.insert(
                name.to_string(),
                Slot {
                    c,
                    subs,
                    dir,
                    state_file: None,
                    confirms: Vec::new(),
                    write_at: None,
                },
            );
        }
        self.touch();
        Ok(())
    }

    /// The server shuts down: pull requests waiting on this shard's consumers hear it.
    pub fn shutdown_consumers(&mut self, core: &mut ShardCore, now: Instant) {
        for st in self.streams.values_mut() {
            let acc = st.account;
            for slot in st.consumers.values_mut() {
                let mut env = Env {
                    core,
                    store: st.store.as_mut(),
                    acc,
                    now,
                    wall: Default::default(),
                };
                slot.c.server_shutdown(&mut env);
                if slot.write_at.take().is_some() || slot.c.take_dirty() {
                    let _ = slot.persist(true);
                }
            }
        }
    }

    /// Stop a consumer, unsubscribe it and with `delete` remove its directory. Pending
    /// pull requests get `status` (`409 Consumer Deleted`).
    pub fn remove_consumer(
        &mut self,
        core: &mut ShardCore,
        key: &StreamKey,
        name: &str,
        delete: bool,
        now: Instant,
    ) -> bool {
        let Some(st) = self.streams.get_mut(key) else {
            return false;
        };
        let Some(mut slot) = st.consumers.remove(name) else {
            return false;
        };
        {
            let mut env = Env {
                core,
                store: st.store.as_mut(),
                acc: key.0,
                now,
                wall: Default::default(),
            };
            slot.c.stop(&mut env, "409 Consumer Deleted");
        }
        for id in slot.subs.drain(..) {
            core.unsubscribe_internal(id);
        }
        if delete && st.cfg.retention == Retention::Interest {
            // What only this consumer still needed goes with it.
            let state = st.store.fast_state();
            let mut removed = false;
            for seq in state.first_seq.max(1)..=state.last_seq {
                let Ok(subject) = st.store.subject_for_seq(seq) else {
                    continue;
                };
                if !st.consumers.values().any(|s| s.c.needs(seq, &subject)) && st.store.remove_msg(seq).unwrap_or(false)
                {
                    removed = true;
                }
            }
            if removed {
                st.dirty = true;
                let first = st.store.fast_state().first_seq;
                for s in st.consumers.values_mut() {
                    s.c.on_removed(first);
                }
            }
        }
        if delete {
            if let Some(d) = &slot.dir {
                let _ = std::fs::remove_dir_all(d);
            }
        } else {
            let _ = slot.persist(true);
        }
        self.touch();
        true
    }

    /// Deliver for every consumer that wants to; persist changed durable state; apply
    /// retention. Returns whether some consumer has more to do at once.
    pub fn poll_consumers(&mut self, core: &mut ShardCore, now: Instant) -> bool {
        let mut more = false;
        let mut removals: Vec<(StreamKey, Vec<u64>)> = Vec::new();
        for (key, st) in self.streams.iter_mut() {
            if st.consumers.is_empty() {
                continue;
            }
            let mut acked = std::mem::take(&mut st.acked);
            for slot in st.consumers.values_mut() {
                let mut env = Env {
                    core,
                    store: st.store.as_mut(),
                    acc: key.0,
                    now,
                    wall: Default::default(),
                };
                if slot.c.wants_poll() {
                    more |= slot.c.poll(&mut env, now);
                }
                acked.extend(slot.c.take_acked());
                let changed = slot.c.take_dirty();
                slot.save(&mut env, changed, now);
            }
            if !acked.is_empty() {
                removals.push((key.clone(), acked));
            }
        }
        for (key, seqs) in removals {
            self.apply_retention(core, &key, seqs, now);
        }
        more
    }

    /// Remove acknowledged messages from interest and work-queue streams.
    fn apply_retention(&mut self, core: &mut ShardCore, key: &StreamKey, seqs: Vec<u64>, now: Instant) {
        let Some(st) = self.streams.get_mut(key) else { return };
        let mut removed = false;
        for seq in seqs {
            let gone = match st.cfg.retention {
                Retention::Limits => false,
                Retention::WorkQueue => true,
                Retention::Interest => {
                    let subject = st.store.subject_for_seq(seq).unwrap_or_default();
                    !st.consumers.values().any(|s| s.c.needs(seq, &subject))
                }
            };
            if gone && st.store.remove_msg(seq).unwrap_or(false) {
                removed = true;
                st.dirty = true;
            }
        }
        if removed {
            let first = st.store.fast_state().first_seq;
            for slot in st.consumers.values_mut() {
                slot.c.on_removed(first);
            }
        }
        let _ = (core, now);
    }

    /// Timers of every consumer (redelivery, expiry, heartbeats) and inactivity.
    pub fn tick_consumers(&mut self, core: &mut ShardCore, now: Instant) {
        let mut gone: Vec<(StreamKey, String)> = Vec::new();
        for (key, st) in self.streams.iter_mut() {
            for (name, slot) in st.consumers.iter_mut() {
                let mut env = Env {
                    core,
                    store: st.store.as_mut(),
                    acc: key.0,
                    now,
                    wall: Default::default(),
                };
                if slot.c.next_deadline().is_some_and(|d| d <= now) {
                    slot.c.tick(&mut env, now);
                }
                let changed = slot.c.take_dirty();
                slot.save(&mut env, changed, now);
                if slot.c.inactive(&mut env, now) {
                    gone.push((key.clone(), name.clone()));
                }
            }
        }
        for (key, name) in gone {
            self.remove_consumer(core, &key, &name, true, now);
            if let Some(e) = self.js.registry().get_mut(key.0, &key.1) {
                e.consumers.remove(&name);
            }
        }
        self.touch();
    }

    /// The earliest consumer deadline on this shard.
    pub fn consumer_deadline(&self) -> Option<Instant> {
        self.streams
            .values()
            .flat_map(|st| st.consumers.values())
            .flat_map(|s| [s.c.next_deadline(), s.write_at])
            .flatten()
            .min()
    }

    /// Recover the durable consumers of a stream from its directory.
    pub fn recover_consumers(&mut self, core: &mut ShardCore, acc: AccountId, stream: &str, now: Instant) {
        let Some(dir) = self.streams.get(&(acc, stream.to_string())).and_then(|s| s.dir.clone()) else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(dir.join("obs")) else {
            return;
        };
        for e in entries.flatten() {
            let cdir = e.path();
            let (name, cfg, created) = match super::stream::persist::read_consumer_meta(&cdir) {
                Ok(m) => m,
                Err(err) => {
                    tracing::warn!("JetStream: skipping consumer directory {}: {err}", cdir.display());
                    continue;
                }
            };
            let mut state = std::fs::read(cdir.join("o.dat"))
                .ok()
                .and_then(|b| storage::consumer_state::decode(&b).ok());
            // A consumer may have delivered messages the stream had not made durable when
            // the server died: the stream then ends below what the consumer delivered, and
            // the sequences after its end will be taken by new messages. The consumer goes
            // back to the stream's end so that it delivers those.
            let last = self
                .streams
                .get(&(acc, stream.to_string()))
                .map_or(0, |s| s.store.fast_state().last_seq);
            if let Some(st) = state.as_mut() {
                clamp_to_stream(st, last);
            }
            if let Err(err) = self.add_consumer(core, acc, stream, &name, cfg, created, state, now) {
                tracing::warn!("JetStream: could not recover consumer '{stream} > {name}': {err}");
            } else if let Some(en) = self.js.registry().get_mut(acc, stream) {
                en.consumers.insert(name.clone());
            }
        }
    }
}

/// Subscribe a consumer's ack, pull and flow-control subjects on this shard.
fn subscribe_consumer(
    core: &mut ShardCore,
    acc: AccountId,
    stream: &str,
    name: &str,
    domain: &str,
    now: Instant,
) -> Vec<SubId> {
    #[derive(Clone, Copy)]
    enum Kind {
        Ack,
        Pull,
        Fc,
    }
    let mut subjects = vec![
        (format!("$JS.ACK.{stream}.{name}.>"), Kind::Ack),
        (format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}"), Kind::Pull),
        (format!("$JS.FC.{stream}.{name}.>"), Kind::Fc),
    ];
    if !domain.is_empty() {
        subjects.push((
            format!("$JS.{domain}.API.CONSUMER.MSG.NEXT.{stream}.{name}"),
            Kind::Pull,
        ));
    }
    let mut subs = Vec::new();
    for (subject, kind) in subjects {
        let key: StreamKey = (acc, stream.to_string());
        let cname = name.to_string();
        let h: Handler = Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
            with_js(core, |sjs, core| {
                // Valid UTF-8 (every real ack) is checked word by word; lossy only if not.
                fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
                    match std::str::from_utf8(b) {
                        Ok(s) => std::borrow::Cow::Borrowed(s),
                        Err(_) => String::from_utf8_lossy(b),
                    }
                }
                let subject = text(&m.subject);
                let reply = text(&m.reply);
                let mut held = Vec::new();
                with_consumer(sjs, core, &key, &cname, now, |c, env| match kind {
                    Kind::Ack => {
                        let mut hold = HoldConfirm {
                            env,
                            reply: &reply,
                            held: &mut held,
                        };
                        c.on_ack(&mut hold, &subject, &reply, &m.payload, now)
                    }
                    Kind::Pull => {
                        c.on_pull(env, &reply, m.header.as_deref(), &m.payload, now);
                        Vec::new()
                    }
                    Kind::Fc => c.on_flow_control_reply(env, &subject, m.header.as_deref(), now),
                })
                .filter(|acked| !acked.is_empty())
                .and_then(|acked| sjs.streams.get_mut(&key).map(|st| st.acked.extend(acked)));
                if !held.is_empty() {
                    if let Some(slot) = sjs.streams.get_mut(&key).and_then(|st| st.consumers.get_mut(&cname)) {
                        slot.confirms.append(&mut held);
                    }
                }
                sjs.touch();
            });
        });
        if let Some(id) = core.subscribe_internal(acc, &subject, None, false, h, now) {
            subs.push(id);
        }
    }
    subs
}

/// Bring a recovered consumer state back to a stream that ends at `last`: nothing after it
/// counts as delivered, pending or acknowledged.
fn clamp_to_stream(st: &mut storage::consumer_state::ConsumerState, last: u64) {
    if st.delivered.stream <= last && st.ack_floor.stream <= last {
        return;
    }
    st.pending.retain(|seq, _| *seq <= last);
    st.redelivered.retain(|seq, _| *seq <= last);
    st.delivered.stream = st.delivered.stream.min(last);
    st.ack_floor.stream = st.ack_floor.stream.min(last);
}

#[cfg(test)]
mod clamp_tests {
    use super::clamp_to_stream;
    use storage::consumer_state::{ConsumerState, Pending, SeqPair};

    #[test]
    fn a_consumer_ahead_of_its_stream_goes_back_to_its_end() {
        let mut st = ConsumerState {
            delivered: SeqPair {
                consumer: 12,
                stream: 120,
            },
            ack_floor: SeqPair {
                consumer: 9,
                stream: 110,
            },
            ..Default::default()
        };
        for seq in [111, 116, 119] {
            st.pending.insert(
                seq,
                Pending {
                    sequence: seq,
                    timestamp: 0,
                },
            );
        }
        st.redelivered.insert(119, 1);
        clamp_to_stream(&mut st, 115);
        assert_eq!(st.delivered.stream, 115);
        assert_eq!(st.ack_floor.stream, 110);
        assert_eq!(st.pending.keys().copied().collect::<Vec<_>>(), vec![111]);
        assert!(st.redelivered.is_empty());
        // A consumer within its stream is left alone.
        let before = st.clone();
        clamp_to_stream(&mut st, 200);
        assert_eq!(st, before);
    }
}
