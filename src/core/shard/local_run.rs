//! Publishes held in a run for this shard's own plain subscribers.
//!
//! A client that publishes the same subject again and again to plain subscribers on its own
//! shard (fan-out, fan-in) had each message delivered on its own: the checks, the frame
//! and the appends per subscriber per message. A fan-out profile put a delivery to a
//! subscriber on the publisher's shard at twice the cost of one on another shard, where
//! messages arrive in runs (`core::mesh_run`) and are delivered a run at a time (module
//! `run_deliver`). So a publish whose memo says its interest is plain subscribers only
//! ([`RunPlan`](super::memo::RunPlan) with `here`) goes into the shard's local run, in the
//! mesh's run format, and the run is delivered the way a run from another shard is.
//!
//! Order: the local run holds only publishes of one connection, made one after another
//! with nothing else in between, and it is delivered before anything else that connection
//! asks for is done: before any other operation of its input (a `SUB`, a `PING`), before a
//! publish that goes another way or brings a reply of the server's (`+OK`, `-ERR`, a
//! no-responders status), and at the end of its input. Each subscriber so gets what the
//! publisher sent in the order it was sent, and after what came before.
//!
//! Stalls and limits: a run is delivered once it would put more than [`run_limit`] on a
//! subscriber's connection, so a consumer that passes three quarters of `max_pending`
//! holds its producer back (module `stall`) before a quarter more can arrive; a delivery
//! past `max_pending` closes the slow consumer as on the general path. With
//! `no_fast_producer_stall`, protocol tracing or a request that may have nobody to answer
//! it, publishes are delivered one by one as before.
//!
//! Ownership: the local run belongs to the shard (`ShardCore::local_run`) and is empty
//! outside the processing of one connection's input.

use super::memo::RunPlan;
use super::route::Msg;
use super::{ConnKey, ShardCore, SubId};
use crate::core::accounts::AccountId;
use crate::core::mesh_run::{RunMark, RunRecord, Shape};
use crate::core::sublist::Matches;
use std::rc::Rc;
use std::time::Instant;

/// Subscribers on the publisher's shard for which its publishes are held in a local run:
/// fewer take the general path, where a single delivery costs no more than a staged one.
pub(super) const LOCAL_RUN_MIN_SUBS: usize = 2;

/// The most a local run puts on one subscriber's connection before it is delivered.
const LOCAL_RUN_MAX_OUT: usize = 32 * 1024;

/// How much a local run may put on one subscriber's connection before it is delivered:
/// [`LOCAL_RUN_MAX_OUT`], and no more than an eighth of `max_pending` (a consumer at the
/// stall mark, three quarters, stays clear of the limit).
fn run_limit(max_pending: usize) -> usize {
    LOCAL_RUN_MAX_OUT.min(max_pending / 8)
}

/// The shard's local run: one connection's publishes not yet delivered.
#[derive(Default)]
pub(super) struct LocalRun {
    /// Run records, as the mesh's (`mesh_run::put_run`).
    records: Vec<u8>,
    mark: Option<RunMark>,
    /// The connection that published them.
    publisher: Option<ConnKey>,
    /// The interest they were published to, and the sublist epoch it is of.
    local: Option<Rc<Matches<SubId>>>,
    epoch: u64,
    /// The most the run puts on one subscriber's connection (less its sids).
    out: usize,
}

impl LocalRun {
    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

impl ShardCore {
    /// Whether a plain publish `m` on plan `plan` may be held in the local run (when the
    /// plan has subscribers here at all).
    #[inline(always)]
    pub(super) fn may_run_here(&self, plan: RunPlan, m: &Msg<'_>) -> bool {
        if plan.queue {
            // (A request may find no member to take it, which the publisher is told of.)
            return m.reply.is_empty() && !self.cfg.trace && !self.cfg.no_fast_producer_stall;
        }
        !plan.here
            || (!self.cfg.trace
                && !self.cfg.no_fast_producer_stall
                // A request only to subscribers here may find nobody to take it, which
                // the publisher is told of on the spot.
                && (m.reply.is_empty() || plan.shards != 0))
    }

    /// Hold `m`, published by `key` in `acc` to `local` (plain subscribers only, or for
    /// `queue`, a member of that group), in the local run; delivered first if the run
    /// holds another connection's or interest's publishes, and after if it is full.
    #[inline]
    pub(super) fn stage_local(
        &mut self,
        key: ConnKey,
        acc: AccountId,
        local: &Rc<Matches<SubId>>,
        m: &Msg<'_>,
        queue: &[u8],
        now: Instant,
    ) {
        let same = self.local_run.publisher == Some(key)
            && self.local_run.local.as_ref().is_some_and(|l| Rc::ptr_eq(l, local));
        if !same {
            self.flush_local_run(now);
            let lr = &mut self.local_run;
            lr.publisher = Some(key);
            lr.local = Some(local.clone());
            lr.epoch = crate::core::sublist::epoch();
        }
        let shape = Shape {
            flags: 0,
            account: acc,
            subject: m.subject,
            reply: m.reply,
            queue,
        };
        let lr = &mut self.local_run;
        crate::core::mesh_run::put_run(&mut lr.records, &mut lr.mark, &shape, m.data);
        lr.out += 32 + m.subject.len() + m.reply.len() + m.data.len();
        if lr.out >= run_limit(self.cfg.max_pending) {
            self.flush_local_run(now);
        }
    }

    /// Deliver what the local run holds (nothing if it is empty).
    #[inline(always)]
    pub(super) fn flush_local_run(&mut self, now: Instant) {
        if !self.local_run.is_empty() {
            self.deliver_local_run(now);
        }
    }

    #[inline(never)]
    fn deliver_local_run(&mut self, now: Instant) {
        // (A delivery publishes nothing through a memo, so this goes round once; were
        // something staged meanwhile, it would go out too rather than be lost.)
        while !self.local_run.is_empty() {
            let mut lr = std::mem::take(&mut self.local_run);
            if let (Some(publisher), Some(mut local)) = (lr.publisher.take(), lr.local.take()) {
                for rec in crate::core::mesh_codec::records(&lr.records) {
                    if let crate::core::mesh_codec::Record::Run(run) = rec {
                        self.deliver_run_here(publisher, &mut local, lr.epoch, &run, now);
                    }
                }
            }
            lr.records.clear();
            lr.mark = None;
            lr.out = 0;
            if self.local_run.is_empty() {
                // Its buffer's capacity kept for the next run.
                self.local_run = lr;
            }
        }
    }

    /// One run of the local run: the fast way (module `run_deliver`) while the interest
    /// it was published to holds, then message by message to the subscribers there are.
    fn deliver_run_here(
        &mut self,
        publisher: ConnKey,
        local: &mut Rc<Matches<SubId>>,
        epoch: u64,
        run: &RunRecord<'_>,
        now: Instant,
    ) {
        let sh = &run.shape;
        let mut epoch = epoch;
        let fast = if epoch == crate::core::sublist::epoch() {
            self.deliver_run_fast(self.idx, local, run, Some(publisher), now)
        } else {
            0
        };
        let mut size = itoa::Buffer::new();
        for data in run.payloads().skip(fast) {
            if crate::core::sublist::epoch() != epoch {
                epoch = crate::core::sublist::epoch();
                *local = super::route::routed_matches(&mut self.acct(sh.account).sublist, sh.subject, false);
            }
            let m = Msg::in_run(sh, data, size.format(data.len()).as_bytes());
            if sh.queue.is_empty() {
                self.deliver_each(&local.psubs, Some(publisher), &m, now);
                continue;
            }
            // A member here was picked: one of them, else one on another shard.
            let (src, acc, flags) = (self.idx, sh.account, sh.flags);
            self.deliver_remote_queue(src, acc, 0, flags, sh.queue, Some(publisher), local, &m, now);
        }
    }
}
