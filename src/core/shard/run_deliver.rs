//! A run of plain messages from another shard (`core::mesh_run`), or from a connection on
//! this one (module `local_run`), delivered to plain subscribers whose every delivery is
//! the same: a client connection without delivery permissions, a subscription without an
//! auto-unsubscribe limit, no tracing. For those the `MSG <subject> <sid> [<reply> ]` head
//! is put together once per run, and each payload is one head append, its size and the
//! payload. A run assigned to a queue group goes to one of the group's members here,
//! picked as the general path picks. The checks [`ShardCore::deliver_framed`] makes per
//! message (tracing, stalls, permissions, limits, echo, headers) are made once. A profile
//! of a one-to-one stream across shards had the per-message delivery, its head and its
//! appends at a fifth of the server's time.
//!
//! When no two subscribers share a connection and the run fits under their pending
//! limits, each gets the whole run at once (module `run_block`). Otherwise what may still
//! change within a run is looked at per message: a connection closing (a slow consumer,
//! on this shard) and the interest itself (an epoch change hands the rest of the run to
//! the general path). A delivery that would pass the connection's pending limit goes the
//! general way, which closes it as a slow consumer.
//!
//! Ownership: the head buffer belongs to the shard (`ShardCore::run_heads`), taken out
//! while a run is delivered.

use super::route::Msg;
use super::{ConnKey, ShardCore, SubId};
use crate::core::mesh_run::{RunRecord, Shape};
use crate::core::sublist::Matches;
use smallvec::SmallVec;
use std::time::Instant;

/// One subscriber of a run: its head is `heads[at..end]`.
pub(super) struct Target {
    pub(super) id: SubId,
    pub(super) conn: ConnKey,
    pub(super) at: usize,
    pub(super) end: usize,
    /// Its sid's length (the sid follows `MSG <subject> ` in the head).
    pub(super) sid_len: usize,
    /// The general path's pending estimate for this subscriber, less the payload.
    pub(super) need: usize,
}

/// Whether a subscription takes a run the fast way.
enum Qualifies {
    Yes(Target),
    /// It does not get the run at all (the publisher's own, without echo).
    Skip,
    /// It needs the general path, and so does the whole run.
    No,
}

impl ShardCore {
    /// Deliver `run`'s payloads in order to `local`'s plain subscribers and, if the run
    /// was assigned a queue group, to one member of that group here each, if all of them
    /// take the fast way (see the module). Returns how many payloads were delivered, the
    /// rest being left to the general path (all of them when some subscriber does not
    /// qualify, or from where interest changed). `publisher`: the connection on this shard
    /// that published the run (module `local_run`), whose own subscriptions get it only
    /// with echo on, and which consumers past the stall mark hold back.
    pub(super) fn deliver_run_fast(
        &mut self,
        src: usize,
        local: &Matches<SubId>,
        run: &RunRecord<'_>,
        publisher: Option<ConnKey>,
        now: Instant,
    ) -> usize {
        let sh = &run.shape;
        if sh.flags & crate::core::mesh_codec::flags::INTERNAL != 0 || self.tracing.is_some() || self.cfg.trace {
            return 0;
        }
        let members: &[SubId] = if sh.queue.is_empty() {
            &[]
        } else {
            match super::route::group(&local.qsubs, sh.queue) {
                Some(g) if !g.members.is_empty() => &g.members,
                // No member here: the general path passes the messages on.
                _ => return 0,
            }
        };
        if local.psubs.is_empty() && members.is_empty() {
            return 0;
        }
        let mut heads = std::mem::take(&mut self.run_heads);
        heads.clear();
        let mut targets: SmallVec<[Target; 4]> = SmallVec::new();
        let mut plain_n = 0;
        for (i, &id) in local.psubs.iter().chain(members).enumerate() {
            match self.run_target(id, sh, publisher, &mut heads) {
                Qualifies::Yes(t) => {
                    targets.push(t);
                    if i < local.psubs.len() {
                        plain_n += 1;
                    }
                }
                // The publisher's own subscription, without echo (not a queue member: a
                // local run has no queue group).
                Qualifies::Skip => {}
                Qualifies::No => {
                    self.run_heads = heads;
                    return 0;
                }
            }
        }
        let (plain, group) = targets.split_at(plain_n);
        if !sh.reply.is_empty() {
            self.conversing = true;
        }
        // Each subscriber's whole run at once, when that cannot be told from payload by
        // payload: see `whole_runs_fit`.
        let whole = self.whole_runs_fit(&targets, plain, run);
        if let Some(count) = whole {
            self.write_whole_runs(plain, &heads, run, now);
            if group.is_empty() {
                // Every payload delivered: nothing for the loop below.
                if let Some(p) = publisher {
                    self.stall_mark(p, plain);
                }
                self.run_heads = heads;
                return count;
            }
        }
        let epoch = crate::core::sublist::epoch();
        let mut size = itoa::Buffer::new();
        let mut tail = std::mem::take(&mut self.run_tail);
        let mut done = 0;
        for data in run.payloads() {
            if crate::core::sublist::epoch() != epoch {
                break;
            }
            let m = Msg::in_run(sh, data, size.format(data.len()).as_bytes());
            if whole.is_none() {
                // Two or more subscribers here: the frame's tail (size, payload) once.
                tail.clear();
                if plain.len() > 1 && data.len() <= super::fan::FAN_MAX_DATA {
                    tail.extend_from_slice(m.size_text);
                    super::route::finish_frame(&mut tail, data);
                }
                for t in plain {
                    self.run_write(t, &heads, &tail, &m, now);
                }
            }
            if !group.is_empty() {
                // As `deliver_queue_local`: a random member first, then round the group.
                let n = group.len();
                let start = self.rand_below(n as u64) as usize;
                let taken = (0..n).any(|i| {
                    group
                        .get((start + i) % n)
                        .is_some_and(|t| self.run_write(t, &heads, &[], &m, now))
                });
                if !taken {
                    self.forward_queue(src, sh.account, 0, sh.flags, sh.queue, &m);
                }
            }
            done += 1;
        }
        if let Some(p) = publisher {
            self.stall_mark(p, plain);
        }
        self.run_tail = tail;
        self.run_heads = heads;
        done
    }

    /// After a local run: hold `publisher` back for the last of `targets` past the stall
    /// mark, as a delivery on the general path asks for (module `stall`).
    fn stall_mark(&mut self, publisher: ConnKey, targets: &[Target]) {
        for t in targets {
            if let Some(queued) = self.client(t.conn).map(|c| c.out.len()) {
                self.ask_stall(publisher, t.conn, queued);
            }
        }
    }

    /// Subscription `id` as a fast target of a run of shape `sh` published by `publisher`
    /// (if on this shard), its head appended to `heads`.
    fn run_target(&self, id: SubId, sh: &Shape<'_>, publisher: Option<ConnKey>, heads: &mut Vec<u8>) -> Qualifies {
        let Some(sub) = self.subs.get(id as usize) else {
            return Qualifies::No;
        };
        let conn = sub.conn;
        let Some(c) = self.clients.get(conn.idx as usize).filter(|c| c.gen == conn.gen) else {
            return Qualifies::No;
        };
        if c.internal || c.closing.is_some() || c.perms.is_some() || sub.max > 0 {
            return Qualifies::No;
        }
        if publisher == Some(conn) && !c.opts.echo {
            return Qualifies::Skip;
        }
        let at = heads.len();
        heads.extend_from_slice(b"MSG ");
        super::route::write_head(heads, sh.subject, &sub.sid, sh.reply, false);
        Qualifies::Yes(Target {
            id,
            conn,
            at,
            end: heads.len(),
            sid_len: sub.sid.len(),
            need: 32 + sh.subject.len() + sub.sid.len() + sh.reply.len(),
        })
    }

    /// One delivery of a run: whether `t` took `m` (not if its connection is closing, or
    /// it became a slow consumer, which the general path finds and closes).
    #[inline]
    fn run_write(&mut self, t: &Target, heads: &[u8], tail: &[u8], m: &Msg<'_>, now: Instant) -> bool {
        let max_pending = self.cfg.max_pending;
        let Some(c) = self.open_target(t) else {
            return false;
        };
        let data = m.data;
        let need = t.need + data.len();
        if c.out.len() + need > max_pending {
            return self.deliver(t.id, None, m, now);
        }
        {
            let mut w = c.out.frame(need, now);
            w.extend_from_slice(heads.get(t.at..t.end).unwrap_or_default());
            if tail.is_empty() {
                w.extend_from_slice(m.size_text);
                super::route::finish_frame(&mut w, data);
            } else {
                w.extend_from_slice(tail);
            }
        }
        c.out_msgs += 1;
        c.out_bytes += data.len() as u64;
        if !c.woken {
            c.woken = true;
            self.wakeups.push(t.conn);
        }
        if let Some(sub) = self.subs.get_mut(t.id as usize) {
            sub.delivered += 1;
        }
        self.counters.out_msgs += 1;
        self.counters.out_bytes += data.len() as u64;
        true
    }
}
