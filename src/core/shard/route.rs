//! Publishing: match, deliver to local subscribers, pick queue members across shards,
//! and stage one envelope per interested shard (ARCHITECTURE.md, invariants 5 to 7).

use super::memo::Hit;
use super::trace::Pre;
use super::ShardCore;
use crate::core::accounts::AccountId;
use crate::core::bits::Set256;
use crate::core::client::{ClosedState, ConnKey, SubId};
use crate::core::fill::Fill;
use crate::core::mesh_codec::{self, flags, MsgRecord};
use crate::core::mesh_run::RunRecord;
use crate::core::remote::{REntry, RKey};
use crate::core::sublist::Matches;
use crate::core::trace::event::errors;
use crate::proto::reply;
use smallvec::SmallVec;
use std::rc::Rc;
use std::time::Instant;

/// A message on its way to subscribers.
#[derive(Clone, Copy)]
pub(super) struct Msg<'a> {
    pub subject: &'a [u8],
    /// Empty: no reply subject.
    pub reply: &'a [u8],
    pub header_len: Option<usize>,
    /// Header block and payload.
    pub data: &'a [u8],
    /// `data.len()` and the header length as the publisher wrote them: nats-server echoes
    /// these texts (`PUB foo 05` is delivered as `MSG foo 1 05`).
    pub size_text: &'a [u8],
    pub hdr_text: &'a [u8],
    /// Published by the server itself: nats-server delivers such a message without a
    /// reply as `MSG <subject> <sid>  <size>` (two spaces), and so does rnats.
    pub internal: bool,
    /// The subject subscribers see when it differs from the routed one (empty: none):
    /// JetStream delivers a stored message to a pull request's reply subject under the
    /// message's own subject.
    pub shown: &'a [u8],
}

impl<'a> Msg<'a> {
    /// The header block, if the message has one.
    pub fn header(&self) -> Option<&'a [u8]> {
        self.header_len.and_then(|h| self.data.get(..h))
    }

    /// The subject subscribers see.
    pub fn shown_subject(&self) -> &'a [u8] {
        if self.shown.is_empty() {
            self.subject
        } else {
            self.shown
        }
    }

    /// The payload without headers.
    pub fn payload(&self) -> &'a [u8] {
        self.data.get(self.header_len.unwrap_or(0)..).unwrap_or_default()
    }

    pub(super) fn parts(&self) -> mesh_codec::MsgParts<'a> {
        mesh_codec::MsgParts {
            subject: self.subject,
            reply: self.reply,
            header_len: self.header_len,
            data: self.data,
            shown: self.shown,
        }
    }

    /// A message record from another shard, with size texts: the publisher's when they
    /// were not plain decimals, else `data_len` and the header length formatted into
    /// `b1` and `b2`. (A blob record's data is not in the record: `data_len` says how
    /// long it is.)
    pub(super) fn from_record(
        rec: &MsgRecord<'a>,
        data_len: usize,
        b1: &'a mut itoa::Buffer,
        b2: &'a mut itoa::Buffer,
    ) -> Msg<'a> {
        let header_len = rec.header_len.map(|h| h as usize);
        let (size_text, hdr_text) = match rec.raw_sizes {
            Some((s, h)) => (s, h),
            None => (
                b1.format(data_len).as_bytes(),
                header_len.map_or(&b""[..], |h| b2.format(h).as_bytes()),
            ),
        };
        Msg {
            subject: rec.subject,
            reply: rec.reply,
            header_len,
            data: rec.data,
            size_text,
            hdr_text,
            internal: rec.flags & flags::INTERNAL != 0,
            shown: rec.shown,
        }
    }

    /// One payload of a run of shape `sh` (`core::mesh_run`), its size written `size_text`.
    pub(super) fn in_run(sh: &crate::core::mesh_run::Shape<'a>, data: &'a [u8], size_text: &'a [u8]) -> Msg<'a> {
        Msg {
            subject: sh.subject,
            reply: sh.reply,
            header_len: None,
            data,
            size_text,
            hdr_text: b"",
            internal: sh.flags & flags::INTERNAL != 0,
            shown: b"",
        }
    }

    /// The size texts, when they differ from the plain decimal numbers.
    pub(super) fn raw_sizes(&self) -> Option<(&[u8], &[u8])> {
        let size_plain = is_decimal(self.size_text, self.data.len());
        let hdr_plain = self.header_len.is_none_or(|h| is_decimal(self.hdr_text, h));
        (!size_plain || !hdr_plain).then_some((self.size_text, self.hdr_text))
    }
}

/// Whether `text` is `n` in plain decimal (digits only, no leading zero). Read in one
/// pass rather than formatting `n` and comparing: every message a shard hands to another
/// asks this.
#[inline(always)]
fn is_decimal(text: &[u8], n: usize) -> bool {
    // 19 digits cannot overflow a u64.
    if text.is_empty() || text.len() > 19 || (text.len() > 1 && text.first() == Some(&b'0')) {
        return false;
    }
    let mut v: u64 = 0;
    for &c in text {
        if !c.is_ascii_digit() {
            return false;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    v == n as u64
}

/// The group named `name` among `groups`, compared in place (a `find` with a closure
/// was a call of its own per queue publish).
#[inline(always)]
#[allow(clippy::manual_find)] // the loop is the point: it inlines where `find` did not
pub(super) fn group<'g, T>(
    groups: &'g [crate::core::sublist::QueueGroup<T>],
    name: &[u8],
) -> Option<&'g crate::core::sublist::QueueGroup<T>> {
    for g in groups {
        if crate::core::subject::same(&g.name, name) {
            return Some(g);
        }
    }
    None
}

/// The interest in `subject`: through the sublist's caches, or past them for a subject
/// used once (`once`: a service reply or an ack subject), which would only churn them.
pub(super) fn routed_matches<T: Copy + Eq>(
    sl: &mut crate::core::sublist::Sublist<T>,
    subject: &[u8],
    once: bool,
) -> Rc<Matches<T>> {
    if once {
        sl.matches_once(subject)
    } else {
        sl.matches(subject)
    }
}

fn has_prefix(s: &[u8], p: &[u8]) -> bool {
    s.len() > p.len() && s.starts_with(p)
}

/// Reply subjects a client may not use (service-import, JetStream ack, gateway replies).
fn is_reserved_reply(r: &[u8]) -> bool {
    (r.len() > 3 && r.starts_with(b"_R_.")) || has_prefix(r, b"$JS.ACK.") || has_prefix(r, b"_GR_.")
}

impl ShardCore {
    pub(super) fn on_msg(&mut self, key: ConnKey, m: &Msg<'_>, now: Instant) {
        if !m.reply.is_empty() {
            self.conversing = true;
        }
        // Tracing: only a header block can ask for it (module `trace`).
        if let Some(h) = m.header() {
            if crate::core::trace::may_trace(h) {
                self.flush_local_run(now);
                return self.on_msg_maybe_traced(key, m, h, now);
            }
        }
        self.on_msg_checked(key, m, None, now)
    }

    /// A client's publish. `dest_denied`: its trace destination, which its permissions
    /// do not allow (a publish violation, after the subject's).
    // Inlined into `on_msg` as before tracing split it (the publish path's cost).
    #[inline(always)]
    pub(super) fn on_msg_checked(&mut self, key: ConnKey, m: &Msg<'_>, dest_denied: Option<&[u8]>, now: Instant) {
        let Some(c) = self.client(key) else { return };
        let account = c.account;
        // A memo taken while the account had no subject mappings answers first (module
        // `memo`): no definition has changed since, so there is nothing to map.
        let hit = super::memo::lookup(&c.route_memo, account, m.subject, false);
        // Else subject mappings come first: permissions and routing see the mapped
        // subject. (A reference, not a copy: `Msg` is 120 bytes, and copying it on every
        // publish showed as a fifth of the no-subscriber path's time.)
        let mapped = match hit {
            Hit::Miss => self.map_subject(account, m.subject),
            _ => None,
        };
        let remapped;
        let m = match &mapped {
            Some(s) => {
                if self.tracing.is_some() {
                    self.trace_mapped(s);
                }
                remapped = Msg { subject: s, ..*m };
                &remapped
            }
            None => m,
        };
        let (subject, reply, data) = (m.subject, m.reply, m.data);
        // (The system account is looked up only for a `$NRG.` subject.)
        let nrg = subject.starts_with(b"$NRG.") && self.table.system() != Some(account);
        let with_mappings =
            matches!(hit, Hit::Miss) && self.accts.get(account as usize).is_some_and(|a| a.has_mappings);
        let Some(c) = self.client_mut(key) else { return };
        c.in_msgs += 1;
        c.in_bytes += data.len() as u64;
        let hit = if with_mappings {
            super::memo::lookup(&c.route_memo, account, subject, true)
        } else {
            hit
        };
        let (verbose, no_responders) = (c.opts.verbose, c.opts.no_responders);
        let allowed = match c.perms.as_mut() {
            Some(p) => p.can_publish(subject, now),
            None => true,
        };
        self.counters.in_msgs += 1;
        self.counters.in_bytes += data.len() as u64;
        let denied = if has_prefix(subject, b"_GR_.") || !allowed {
            Some(subject)
        } else if dest_denied.is_some() {
            dest_denied
        } else if nrg {
            Some(subject)
        } else {
            None
        };
        if let Some(denied) = denied {
            self.flush_local_run(now);
            let label = self.label(key);
            tracing::error!("{label} - Publish Violation - Subject {}", reply::go_quote(denied));
            let text = reply::pub_violation(denied);
            if self.tracing.is_some() {
                self.trace_ingress_error(&text);
            }
            self.send_err(key, &text, now);
            return;
        }
        if !reply.is_empty() && is_reserved_reply(reply) {
            self.flush_local_run(now);
            let label = self.label(key);
            tracing::error!("{label} - Publish Violation - Reply {}", reply::go_quote(reply));
            let text = reply::reply_violation(reply);
            if self.tracing.is_some() {
                self.trace_ingress_error(&text);
            }
            self.send_err(key, &text, now);
            return;
        }
        if verbose {
            self.flush_local_run(now);
            self.send_bytes(key, reply::OK, now);
        }
        // A weighted mapping may drop the message (its share of nobody).
        let delivered = !subject.is_empty() && self.route_published(account, key, m, now, hit);
        if !delivered && !reply.is_empty() && no_responders {
            self.flush_local_run(now);
            self.no_responders(key, m, now);
        }
    }

    /// The subject `subject` is mapped to in `acc`, if a mapping applies.
    #[inline]
    pub(super) fn map_subject(&mut self, acc: AccountId, subject: &[u8]) -> Option<Vec<u8>> {
        if !self.accts.get(acc as usize).is_some_and(|a| a.has_mappings) {
            return None;
        }
        self.apply_mapping(acc, subject)
    }

    #[cold]
    fn apply_mapping(&mut self, acc: AccountId, subject: &[u8]) -> Option<Vec<u8>> {
        let def = self.acct(acc).def.clone()?;
        let r = self.next_rand();
        def.mappings.apply(subject, r, None)
    }

    /// Deliver a message published on this shard in account `acc`, and wherever imports
    /// take it. Returns whether anyone (here or on another shard) was given it.
    pub(super) fn route(&mut self, acc: AccountId, publisher: Option<ConnKey>, m: &Msg<'_>, now: Instant) -> bool {
        self.route_at(acc, publisher, m, now, 0)
    }

    /// A client's publish in `acc`, routed by its connection's memo when that holds
    /// (`hit`, module `memo`), else looked up and remembered.
    #[inline(always)]
    fn route_published(&mut self, acc: AccountId, key: ConnKey, m: &Msg<'_>, now: Instant, hit: Hit) -> bool {
        let found = match hit {
            Hit::Nobody => {
                self.count_memo_hit(acc);
                return false;
            }
            Hit::One(id) => {
                // What `deliver_matched` would do for this interest, less its search.
                self.count_memo_hit(acc);
                self.flush_local_run(now);
                return self.deliver_framed(id, Some(key), m, now, None);
            }
            Hit::Found => self.client(key).and_then(|c| super::memo::found(&c.route_memo)),
            Hit::Miss => None,
        };
        let (local, remote, via) = match found {
            Some((local, remote, via, run_to)) => {
                self.count_memo_hit(acc);
                // (A `match` rather than `Option::filter`, which was a call of its own.)
                let plan = match run_to {
                    Some(p) if self.runs_plainly(m) && self.may_run_here(p, m) => Some(p),
                    _ => None,
                };
                if let Some(plan) = plan {
                    // What `deliver_matched` would do, less its search: the interest is
                    // plain subscribers, here (the local run) and on the other shards, or
                    // one queue group.
                    if plan.queue {
                        return self.stage_queue_pick(key, acc, &local, remote.as_deref(), m, now);
                    }
                    if plan.here {
                        self.stage_local(key, acc, &local, m, b"", now);
                    }
                    for dst in plan.each_shard() {
                        self.stage_in_run(dst, 0, acc, m, b"");
                        self.maybe_flush_early(dst, now);
                    }
                    return true;
                }
                (local, remote, via)
            }
            None => {
                let epoch = crate::core::sublist::epoch();
                let once = super::imports::is_one_shot(m.subject);
                let (local, remote) = self.interest(acc, m.subject, once);
                let via = self.onward(acc, m.subject);
                let mapped = self.accts.get(acc as usize).is_some_and(|a| a.has_mappings);
                let run_to = if once {
                    None
                } else {
                    self.run_plan(acc, &local, remote.as_deref(), via)
                };
                if let Some(c) = self.client_mut(key) {
                    super::memo::store(
                        &mut c.route_memo,
                        epoch,
                        acc,
                        m.subject,
                        &local,
                        remote.as_ref(),
                        via,
                        once,
                        run_to,
                        mapped,
                    );
                }
                (local, remote, via)
            }
        };
        // Whatever a local run holds goes out before what this message brings.
        self.flush_local_run(now);
        let delivered = self.deliver_matched(acc, Some(key), m, now, &local, remote.as_deref());
        delivered | self.follow(acc, Some(key), m, now, 0, via)
    }

    /// Where the interest is when it is plain subscribers and nothing else (no queue
    /// group anywhere, no import to follow): the other shards with such subscribers, and
    /// whether this one has enough of them for its local run (module `local_run`).
    fn run_plan(
        &self,
        acc: AccountId,
        local: &Matches<SubId>,
        remote: Option<&Matches<RKey>>,
        via: super::imports::Onward,
    ) -> Option<super::memo::RunPlan> {
        if via.any() {
            return None;
        }
        let remote_q = remote.map_or(&[][..], |r| &r.qsubs[..]);
        if !local.qsubs.is_empty() || !remote_q.is_empty() {
            return self.queue_plan(local, remote);
        }
        let here = !local.psubs.is_empty();
        if here && local.psubs.len() < super::local_run::LOCAL_RUN_MIN_SUBS {
            return None;
        }
        let mut shards = 0u64;
        if let Some(remote) = remote {
            if !remote.qsubs.is_empty() {
                return None;
            }
            for &rk in &remote.psubs {
                let shard = usize::from(self.remote_entry(acc, rk)?.shard);
                if shard == self.idx || shard >= self.nshards || shard >= 64 {
                    return None;
                }
                shards |= 1 << shard;
            }
        }
        (here || shards != 0).then_some(super::memo::RunPlan {
            shards,
            here,
            queue: false,
        })
    }

    /// A plan for interest that is one queue group (here, elsewhere or both) and no plain
    /// subscriber: not the server's own services' groups (served where a request
    /// arrives, see `deliver_matched`).
    fn queue_plan(&self, local: &Matches<SubId>, remote: Option<&Matches<RKey>>) -> Option<super::memo::RunPlan> {
        let remote_q = remote.map_or(&[][..], |r| &r.qsubs[..]);
        if !local.psubs.is_empty()
            || remote.is_some_and(|r| !r.psubs.is_empty())
            || local.qsubs.len() > 1
            || remote_q.len() > 1
        {
            return None;
        }
        let name = match (local.qsubs.first(), remote_q.first()) {
            (Some(a), Some(b)) if !crate::core::subject::same(&a.name, &b.name) => return None,
            (Some(g), _) => &g.name,
            (None, Some(g)) => &g.name,
            (None, None) => return None,
        };
        (!name.starts_with(b"_sys_")).then_some(super::memo::RunPlan {
            shards: 0,
            here: false,
            queue: true,
        })
    }

    /// A plain publish to the one queue group that is its interest (a queue plan): to
    /// the run of the shard whose member is picked, as `deliver_matched` picks; whether
    /// there was a member.
    fn stage_queue_pick(
        &mut self,
        key: ConnKey,
        acc: AccountId,
        local: &Rc<Matches<SubId>>,
        remote: Option<&Matches<RKey>>,
        m: &Msg<'_>,
        now: Instant,
    ) -> bool {
        let here = local.qsubs.first();
        let there = remote.and_then(|r| r.qsubs.first());
        let Some(name) = here.or(there).map(|g| &g.name[..]) else {
            return false;
        };
        let members = there.map_or(&[][..], |g| &g.members[..]);
        match self.pick_queue(acc, here.map_or(0, |g| g.members.len()), members) {
            Pick::Local(_) => self.stage_local(key, acc, local, m, name, now),
            Pick::Remote(dst) => {
                self.stage_in_run(dst, 0, acc, m, name);
                self.maybe_flush_early(dst, now);
            }
            Pick::Nobody => return false,
        }
        true
    }

    /// Stage plain message `m` for shard `dst` in a run of its subject, reply and `queue`.
    #[inline(always)]
    fn stage_in_run(&mut self, dst: usize, flags: u8, acc: AccountId, m: &Msg<'_>, queue: &[u8]) {
        let shape = crate::core::mesh_run::Shape {
            flags,
            account: acc,
            subject: m.subject,
            reply: m.reply,
            queue,
        };
        self.stage_run(dst, &shape, m.data);
    }

    /// Whether `m` would go to another shard's plain subscribers in a run (as
    /// `deliver_matched` decides): no headers, plain size text, not traced, not the
    /// server's own, smaller than a blob.
    #[inline(always)]
    fn runs_plainly(&self, m: &Msg<'_>) -> bool {
        self.tracing.is_none()
            && m.header_len.is_none()
            && m.shown.is_empty()
            && !m.internal
            && m.data.len() < super::blob::BLOB_MIN
            // (`raw_sizes` less its header half: there is no header.)
            && is_decimal(m.size_text, m.data.len())
    }

    /// A memo hit stands for a lookup in the account's sublist (its `/subsz` statistics;
    /// the remote-interest tree's are not reported).
    #[inline(always)]
    fn count_memo_hit(&mut self, acc: AccountId) {
        if let Some(st) = self.accts.get_mut(acc as usize) {
            st.sublist.count_memo_hit();
        }
    }

    /// The interest in `subject` in `acc`: on this shard, and (with several shards) on
    /// the others.
    #[inline(always)]
    fn interest(
        &mut self,
        acc: AccountId,
        subject: &[u8],
        once: bool,
    ) -> (Rc<Matches<SubId>>, Option<Rc<Matches<RKey>>>) {
        let local = routed_matches(&mut self.acct(acc).sublist, subject, once);
        if self.nshards < 2 {
            return (local, None);
        }
        let remote = if once {
            self.acct(acc).remote.matches_once(subject)
        } else {
            self.acct(acc).remote.matches(subject)
        };
        (local, Some(remote))
    }

    /// Deliver to the subscribers of `acc` on every shard (no imports).
    // Inlined into `route_at` (its hot caller), as before tracing added a second caller.
    #[inline(always)]
    pub(super) fn deliver_in(&mut self, acc: AccountId, publisher: Option<ConnKey>, m: &Msg<'_>, now: Instant) -> bool {
        let once = super::imports::is_one_shot(m.subject);
        let (local, remote) = self.interest(acc, m.subject, once);
        self.deliver_matched(acc, publisher, m, now, &local, remote.as_deref())
    }

    /// Deliver to `local` subscribers and to the shards of `remote` interest.
    #[inline(always)]
    fn deliver_matched(
        &mut self,
        acc: AccountId,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
        local: &Matches<SubId>,
        remote: Option<&Matches<RKey>>,
    ) -> bool {
        let mut delivered = self.deliver_each(&local.psubs, publisher, m, now);
        let remote = match remote {
            Some(r) if !r.is_empty() => r,
            _ => {
                for g in &local.qsubs {
                    delivered |= self.deliver_queue_local(&g.members, publisher, m, now);
                }
                return delivered;
            }
        };
        let mut targets = Set256::default();
        for &rk in &remote.psubs {
            if let Some(e) = self.remote_entry(acc, rk) {
                targets.insert(e.shard as usize);
            }
        }
        // Queue groups: one member in the whole server, chosen by member count.
        // (Inline lists and comparisons without `memcmp`: a queue publish allocated and
        // freed these and called `memcmp` per group name.)
        let mut assigned: SmallVec<[(usize, &[u8]); 4]> = SmallVec::new();
        for g in &local.qsubs {
            let remote_members = group(&remote.qsubs, &g.name).map(|r| &r.members[..]);
            // The server's own services (one internal member per shard) serve a client's
            // request where it arrived: the requester is known there. (Not the server's own
            // requests: those may be published while the service's state is in use.)
            let pick = match g.members.first() {
                Some(&id)
                    if g.name.starts_with(b"_sys_")
                        && self.internals.handles(id)
                        && publisher.is_some_and(|k| self.client(k).is_some_and(|c| !c.internal)) =>
                {
                    Pick::Local(0)
                }
                _ => self.pick_queue(acc, g.members.len(), remote_members.unwrap_or_default()),
            };
            match pick {
                Pick::Local(start) => {
                    if self.deliver_queue_from(&g.members, start, publisher, m, now) {
                        delivered = true;
                    } else if let Some(shard) = self.pick_remote_shard(acc, remote_members.unwrap_or_default(), None) {
                        targets.insert(shard);
                        assigned.push((shard, &g.name));
                    }
                }
                Pick::Remote(shard) => {
                    targets.insert(shard);
                    assigned.push((shard, &g.name));
                }
                Pick::Nobody => {}
            }
        }
        for r in &remote.qsubs {
            if group(&local.qsubs, &r.name).is_some() {
                continue;
            }
            if let Some(shard) = self.pick_remote_shard(acc, &r.members, None) {
                targets.insert(shard);
                assigned.push((shard, &r.name));
            }
        }
        if !targets.is_empty() {
            delivered = true;
            let raw = m.raw_sizes();
            let mut queues: SmallVec<[&[u8]; 4]> = SmallVec::new();
            for dst in 0..self.nshards {
                if dst == self.idx || !targets.contains(dst) {
                    continue;
                }
                queues.clear();
                if !assigned.is_empty() {
                    queues.extend(assigned.iter().filter(|(s, _)| *s == dst).map(|(_, q)| *q));
                }
                let f = if m.internal { flags::INTERNAL } else { 0 };
                if self.tracing.is_some() {
                    self.stage_msg(dst, f, 0, acc, m, raw, &queues);
                } else if m.data.len() >= super::blob::BLOB_MIN && self.stage_blob(dst, f, acc, m, queues.len()) {
                    // Large: the payload travels in a buffer of its own (`blob.rs`).
                } else if queues.len() <= 1 && raw.is_none() && m.header_len.is_none() && m.shown.is_empty() {
                    // Plain: in a run of its subject and queue (`core::mesh_run`).
                    self.stage_in_run(dst, f, acc, m, queues.first().copied().unwrap_or_default());
                } else {
                    mesh_codec::put_msg(self.stage(dst), f, 0, acc, &m.parts(), raw, &queues);
                }
                self.maybe_flush_early(dst, now);
            }
        }
        delivered
    }

    fn remote_entry(&self, acc: AccountId, rk: RKey) -> Option<&REntry> {
        self.accts.get(acc as usize).and_then(|a| a.remote.entry(rk))
    }

    fn pick_queue(&mut self, acc: AccountId, local: usize, remote: &[RKey]) -> Pick {
        let remote_total: u64 = remote
            .iter()
            .filter_map(|&rk| self.remote_entry(acc, rk))
            .map(|e| u64::from(e.count))
            .sum();
        let total = local as u64 + remote_total;
        if total == 0 {
            return Pick::Nobody;
        }
        let r = self.rand_below(total);
        if r < local as u64 {
            return Pick::Local(r as usize);
        }
        let mut r = r - local as u64;
        for &rk in remote {
            if let Some(e) = self.remote_entry(acc, rk) {
                if r < u64::from(e.count) {
                    return Pick::Remote(e.shard as usize);
                }
                r -= u64::from(e.count);
            }
        }
        Pick::Nobody
    }

    /// A shard among `members` (remote entries), weighted by member count, not `exclude`.
    fn pick_remote_shard(&mut self, acc: AccountId, members: &[RKey], exclude: Option<usize>) -> Option<usize> {
        let total: u64 = live_shards(self, acc, members, exclude).map(|(_, n)| n).sum();
        if total == 0 {
            return None;
        }
        let mut r = self.rand_below(total);
        for (s, n) in live_shards(self, acc, members, exclude) {
            if r < n {
                return Some(s);
            }
            r -= n;
        }
        None
    }

    fn deliver_queue_local(
        &mut self,
        members: &[SubId],
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
    ) -> bool {
        if members.is_empty() {
            return false;
        }
        let start = self.rand_below(members.len() as u64) as usize;
        self.deliver_queue_from(members, start, publisher, m, now)
    }

    /// Try members from `start` round the group until one takes the message.
    fn deliver_queue_from(
        &mut self,
        members: &[SubId],
        start: usize,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
    ) -> bool {
        let n = members.len();
        (0..n).any(|i| {
            members
                .get((start + i) % n)
                .is_some_and(|&sid| self.deliver(sid, publisher, m, now))
        })
    }

    /// A message from another shard: deliver it to this shard's subscribers.
    pub(super) fn deliver_remote(&mut self, src: usize, rec: &MsgRecord<'_>, now: Instant) {
        if let Some(tag) = &rec.trace {
            self.trace_enter(tag);
            self.deliver_remote_msg(src, rec, now);
            self.trace_leave();
            return;
        }
        self.deliver_remote_msg(src, rec, now)
    }

    fn deliver_remote_msg(&mut self, src: usize, rec: &MsgRecord<'_>, now: Instant) {
        let (mut b1, mut b2) = (itoa::Buffer::new(), itoa::Buffer::new());
        let m = Msg::from_record(rec, rec.data.len(), &mut b1, &mut b2);
        let acc = rec.account;
        if rec.flags & flags::RESPONSE != 0 {
            self.route_response_here(acc, &m, now, rec.hops);
            return;
        }
        self.delivering_remote = true;
        self.deliver_remote_in(src, acc, rec, &m, now);
        self.delivering_remote = false;
    }

    /// A run of plain messages from another shard: to this shard's plain subscribers of
    /// their subject and to the queue group they were assigned (if any), looked up again
    /// only if interest changed while delivering (an auto-unsubscribe).
    pub(super) fn deliver_remote_run(&mut self, src: usize, run: &RunRecord<'_>, now: Instant) {
        let sh = &run.shape;
        let acc = sh.account;
        let mut epoch = crate::core::sublist::epoch();
        let mut local = self.interest_here(acc, sh.subject);
        let mut size = itoa::Buffer::new();
        self.delivering_remote = true;
        let fast = self.deliver_run_fast(src, &local, run, None, now);
        for data in run.payloads().skip(fast) {
            if crate::core::sublist::epoch() != epoch {
                epoch = crate::core::sublist::epoch();
                local = self.interest_here(acc, sh.subject);
            }
            let m = Msg::in_run(sh, data, size.format(data.len()).as_bytes());
            self.deliver_each(&local.psubs, None, &m, now);
            if !sh.queue.is_empty() {
                self.deliver_remote_queue(src, acc, 0, sh.flags, sh.queue, None, &local, &m, now);
            }
        }
        self.delivering_remote = false;
    }

    /// This shard's interest in `subject` published in `acc` on another shard: from the
    /// shard's prefix memo when that covers it, else looked up (and remembered by prefix
    /// when the lookup was decided by one).
    fn interest_here(&mut self, acc: AccountId, subject: &[u8]) -> Rc<Matches<SubId>> {
        if let Some(local) = super::memo::lookup_local(&self.remote_memo, acc, subject) {
            self.count_memo_hit(acc);
            return local;
        }
        let epoch = crate::core::sublist::epoch();
        let once = super::imports::is_one_shot(subject);
        let local = routed_matches(&mut self.acct(acc).sublist, subject, once);
        let no_imports = super::imports::Onward::default();
        super::memo::store(
            &mut self.remote_memo,
            epoch,
            acc,
            subject,
            &local,
            None,
            no_imports,
            true,
            None,
            false,
        );
        local
    }

    fn deliver_remote_in(&mut self, src: usize, acc: AccountId, rec: &MsgRecord<'_>, m: &Msg<'_>, now: Instant) {
        let local = self.interest_here(acc, m.subject);
        if rec.flags & flags::QUEUE_ONLY == 0 {
            self.deliver_each(&local.psubs, None, m, now);
        }
        for q in rec.queues() {
            self.deliver_remote_queue(src, acc, rec.hops, rec.flags, q, None, &local, m, now);
        }
    }

    /// A message another shard (`src`) assigned to queue group `q` here, `hops` shards
    /// ago: to one of the group's members on this shard, or if they are gone to another
    /// shard's members (ARCHITECTURE.md, invariant 6) while some shard has not seen it.
    /// (Also a local run's message, `src` this shard, with its `publisher` here.)
    #[allow(clippy::too_many_arguments)]
    pub(super) fn deliver_remote_queue(
        &mut self,
        src: usize,
        acc: AccountId,
        hops: u8,
        flags_in: u8,
        q: &[u8],
        publisher: Option<ConnKey>,
        local: &Matches<SubId>,
        m: &Msg<'_>,
        now: Instant,
    ) {
        let taken = match group(&local.qsubs, q) {
            Some(g) => self.deliver_queue_local(&g.members, publisher, m, now),
            None => false,
        };
        if !taken {
            self.forward_queue(src, acc, hops, flags_in, q, m);
        }
    }

    /// A message for queue group `q` that no member here took: on to another shard's
    /// members while some shard has not seen it.
    pub(super) fn forward_queue(&mut self, src: usize, acc: AccountId, hops: u8, flags_in: u8, q: &[u8], m: &Msg<'_>) {
        if usize::from(hops) + 1 >= self.nshards {
            return;
        }
        let remote = self.acct(acc).remote.matches(m.subject);
        let members = group(&remote.qsubs, q).map(|g| &g.members[..]);
        let exclude = if hops == 0 { Some(src) } else { None };
        if let Some(dst) = members.and_then(|mm| self.pick_remote_shard(acc, mm, exclude)) {
            let raw = m.raw_sizes();
            let f = flags::QUEUE_ONLY | (flags_in & flags::INTERNAL);
            if self.tracing.is_some() {
                self.stage_msg(dst, f, hops + 1, acc, m, raw, &[q]);
            } else {
                mesh_codec::put_msg(self.stage(dst), f, hops + 1, acc, &m.parts(), raw, &[q]);
            }
        }
    }

    /// Write one message to one subscription. Returns false if it was not delivered
    /// (echo off, closed connection, slow consumer, auto-unsubscribe overrun).
    pub(super) fn deliver(&mut self, id: SubId, publisher: Option<ConnKey>, m: &Msg<'_>, now: Instant) -> bool {
        self.deliver_framed(id, publisher, m, now, None)
    }

    /// [`ShardCore::deliver`], with `m`'s frame put together beforehand when it goes to
    /// many subscribers (module `fan`).
    pub(super) fn deliver_framed(
        &mut self,
        id: SubId,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
        fan: Option<&mut super::fan::FanFrame>,
    ) -> bool {
        if !m.reply.is_empty() {
            self.conversing = true;
        }
        let mut traced = false;
        if self.tracing.is_some() {
            match self.trace_pre_deliver(id, publisher, m) {
                Pre::Done(v) => return v,
                Pre::Deliver { record } => traced = record,
            }
        }
        if self.cfg.no_fast_producer_stall && self.fast_producer_drop(id, publisher, traced) {
            return false;
        }
        let Some(sub) = self.subs.get_mut(id as usize) else {
            return false;
        };
        let conn = sub.conn;
        let Some(c) = self.clients.get_mut(conn.idx as usize).filter(|c| c.gen == conn.gen) else {
            return false;
        };
        if c.internal {
            let remote = self.delivering_remote;
            return self.deliver_internal(id, publisher, m, remote);
        }
        if c.closing.is_some() || (publisher == Some(conn) && !c.opts.echo) {
            return false;
        }
        if let Some(p) = c.perms.as_mut() {
            if p.filters_delivery() && p.delivery_denied(m.subject, sub.queue.as_deref().unwrap_or_default()) {
                return false;
            }
        }
        sub.delivered += 1;
        let mut unsub_after = false;
        if sub.max > 0 {
            if sub.delivered > sub.max {
                if traced {
                    self.trace_egress(id, errors::AUTO_UNSUB);
                }
                self.auto_unsubscribe(id);
                return false;
            }
            unsub_after = sub.delivered == sub.max;
        }
        let headers = c.headers;
        // Stripped headers: the payload size is recomputed; otherwise the publisher's
        // size texts go out unchanged.
        let (data, hdr, stripped) = match m.header_len {
            Some(h) if !headers => (m.data.get(h..).unwrap_or_default(), None, true),
            other => (m.data, other, false),
        };
        let need = 32 + m.subject.len() + sub.sid.len() + m.reply.len() + data.len();
        let max_pending = self.cfg.max_pending;
        if c.out.len() + need > max_pending {
            tracing::info!(
                "{} - Slow Consumer Detected: MaxPending of {} Exceeded",
                c.label,
                max_pending
            );
            self.counters.slow_consumers += 1;
            if traced {
                // As the reference: the attempt counts, the slow consumer is found after.
                self.trace_egress(id, "");
            }
            self.close(conn, ClosedState::SlowConsumerPendingBytes);
            return false;
        }
        {
            let mut w = c.out.frame(need, now);
            match (fan, hdr) {
                // Put together once for all of the message's subscribers (module `fan`).
                (Some(f), None) if !stripped => f.write(&mut w, &sub.sid),
                (_, Some(_)) => put_msg(&mut w, m, &sub.sid, Some(m.hdr_text), m.size_text, data),
                (_, None) if stripped => {
                    let mut size = itoa::Buffer::new();
                    put_msg(&mut w, m, &sub.sid, None, size.format(data.len()).as_bytes(), data);
                }
                (_, None) => put_msg(&mut w, m, &sub.sid, None, m.size_text, data),
            }
        }
        c.out_msgs += 1;
        c.out_bytes += data.len() as u64;
        if !m.reply.is_empty() {
            if let Some(p) = c.perms.as_mut() {
                p.track_reply(m.reply, now);
            }
        }
        self.counters.out_msgs += 1;
        self.counters.out_bytes += data.len() as u64;
        if self.cfg.trace {
            tracing::trace!(
                "{} - ->> [MSG {} {} {}]",
                c.label,
                String::from_utf8_lossy(m.subject),
                String::from_utf8_lossy(&sub.sid),
                data.len()
            );
        }
        let queued = c.out.len();
        if !c.woken {
            c.woken = true;
            self.wakeups.push(conn);
        }
        if let Some(p) = publisher {
            // Hold the producer back after this event if past the mark (module `stall`).
            self.ask_stall(p, conn, queued);
        }
        if traced {
            self.trace_egress(id, "");
        }
        if unsub_after {
            self.auto_unsubscribe(id);
        }
        true
    }

    /// Nobody took a request: tell the publisher with a 503 on its own reply
    /// subscription (protocol.md §6.3).
    fn no_responders(&mut self, key: ConnKey, m: &Msg<'_>, now: Instant) {
        let account = self.client(key).map_or(crate::core::accounts::GLOBAL, |c| c.account);
        let matches = self.acct(account).sublist.matches(m.reply);
        let sid = matches
            .psubs
            .iter()
            .filter_map(|&id| self.subs.get(id as usize))
            .find(|s| s.conn == key)
            .map(|s| s.sid.clone());
        let Some(sid) = sid else { return };
        let hdr_len = 32 + m.subject.len();
        let mut b = itoa::Buffer::new();
        let n = b.format(hdr_len);
        let mut line = Vec::with_capacity(64 + m.subject.len() * 2 + m.reply.len());
        line.extend_from_slice(b"HMSG ");
        line.extend_from_slice(m.reply);
        line.push(b' ');
        line.extend_from_slice(&sid);
        line.push(b' ');
        line.extend_from_slice(n.as_bytes());
        line.push(b' ');
        line.extend_from_slice(n.as_bytes());
        line.extend_from_slice(b"\r\nNATS/1.0 503\r\nNats-Subject: ");
        line.extend_from_slice(m.subject);
        line.extend_from_slice(b"\r\n\r\n\r\n");
        self.send_bytes(key, &line, now);
    }
}

/// The shards holding `members`, with their member counts, other than `exclude` and this
/// shard.
fn live_shards<'a>(
    core: &'a ShardCore,
    acc: AccountId,
    members: &'a [RKey],
    exclude: Option<usize>,
) -> impl Iterator<Item = (usize, u64)> + 'a {
    let me = core.idx;
    members
        .iter()
        .filter_map(move |&rk| core.remote_entry(acc, rk))
        .map(|e| (e.shard as usize, u64::from(e.count)))
        .filter(move |(s, _)| Some(*s) != exclude && *s != me)
}

enum Pick {
    Local(usize),
    Remote(usize),
    Nobody,
}

/// `\r\n<payload>\r\n`: the end of a delivered frame.
pub(super) fn finish_frame(w: &mut Vec<u8>, data: &[u8]) {
    w.extend_from_slice(b"\r\n");
    w.extend_from_slice(data);
    w.extend_from_slice(b"\r\n");
}

/// A whole frame of `m` for a subscription with `sid`, in one reservation (`core::fill`):
/// `MSG <subject> <sid> [<reply> ]<size>\r\n`, or with `hdr` (the header size text)
/// `HMSG <subject> <sid> [<reply> ]<hdr> <size>\r\n`, then `data` and `\r\n`. A message of
/// the server's own without a reply has two spaces after the sid.
#[inline(always)]
fn put_msg(w: &mut Vec<u8>, m: &Msg<'_>, sid: &[u8], hdr: Option<&[u8]>, size: &[u8], data: &[u8]) {
    let (subject, reply) = (m.shown_subject(), m.reply);
    let op: &[u8] = if hdr.is_some() { b"HMSG " } else { b"MSG " };
    let hdr_part = hdr.map_or(0, |h| h.len() + 1);
    let total = op.len() + head_len(subject, sid, reply, m.internal) + hdr_part + size.len() + 2 + data.len() + 2;
    let mut f = Fill::new(w, total);
    // SAFETY: the pieces put below add up to `total` exactly (the head is `head_len`; the
    // header size and its space `hdr_part`).
    unsafe {
        f.put_unchecked(op);
        put_head(&mut f, subject, sid, reply, m.internal);
        if let Some(h) = hdr {
            f.put_unchecked(h);
            f.put_unchecked(b" ");
        }
        f.put_unchecked(size);
        f.put_unchecked(b"\r\n");
        f.put_unchecked(data);
        f.put_unchecked(b"\r\n");
    }
}

/// Bytes of a frame head as [`put_head`] writes it.
#[inline(always)]
fn head_len(subject: &[u8], sid: &[u8], reply: &[u8], internal: bool) -> usize {
    let reply_part = if !reply.is_empty() {
        reply.len() + 1
    } else {
        usize::from(internal)
    };
    subject.len() + 1 + sid.len() + 1 + reply_part
}

/// A frame head after its op: `<subject> <sid> [<reply> ]`. A message of the server's own
/// without a reply has two spaces after the sid, as nats-server writes it.
///
/// # Safety
/// `f` must have room for [`head_len`] of the same arguments.
#[inline(always)]
unsafe fn put_head(f: &mut Fill<'_>, subject: &[u8], sid: &[u8], reply: &[u8], internal: bool) {
    // SAFETY: the pieces add up to `head_len`, for which the caller has room.
    unsafe {
        f.put_unchecked(subject);
        f.put_unchecked(b" ");
        f.put_unchecked(sid);
        f.put_unchecked(b" ");
        if !reply.is_empty() {
            f.put_unchecked(reply);
            f.put_unchecked(b" ");
        } else if internal {
            f.put_unchecked(b" ");
        }
    }
}

/// Append a frame head (see [`put_head`]) to `w`: for blob and run heads, which are put
/// together apart from their payloads.
pub(super) fn write_head(w: &mut Vec<u8>, subject: &[u8], sid: &[u8], reply: &[u8], internal: bool) {
    let mut f = Fill::new(w, head_len(subject, sid, reply, internal));
    // SAFETY: room for `head_len` of the same arguments was reserved just above.
    unsafe { put_head(&mut f, subject, sid, reply, internal) };
}

#[cfg(test)]
mod decimal_tests {
    use super::is_decimal;

    #[test]
    fn plain_decimal_only() {
        for n in [0usize, 1, 9, 10, 16, 99, 100, 4096, 1 << 20, usize::MAX >> 1] {
            assert!(is_decimal(itoa::Buffer::new().format(n).as_bytes(), n), "{n}");
            assert!(!is_decimal(itoa::Buffer::new().format(n + 1).as_bytes(), n), "{n} + 1");
        }
        for (text, n) in [
            (&b"016"[..], 16),
            (b"00", 0),
            (b"", 0),
            (b"+16", 16),
            (b"1 6", 16),
            (b"18446744073709551632", 16),
        ] {
            assert!(!is_decimal(text, n), "{:?}", String::from_utf8_lossy(text));
        }
    }
}
