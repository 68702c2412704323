//! Fast producers held back (nats-server's producer stall). When a message leaves a
//! consumer with more than three quarters of `max_pending` queued, the client that
//! published it stops being read for a moment: until that consumer's output drops below
//! the mark, or 2 ms pass (5 ms when the consumer is at `max_pending`), and for at most
//! 10 ms per read of the producer's socket (per 64 KiB of a larger read). The producer's unprocessed input waits in its
//! stash, and the reactor stops reading it, so TCP slows the producer down instead of the
//! consumer being cut off as a slow consumer.
//!
//! With `no_fast_producer_stall` the producer is never held back; a message for a consumer
//! past the mark is not delivered to it (see [`ShardCore::deliver`]).
//!
//! Only consumers on the producer's own shard stall it; the mesh to other shards has its
//! own backpressure (`Pause::Mesh`). State: the shard's `stalled` list, owned by the shard.

use super::ShardCore;
use crate::core::client::{ConnKey, Pause};
use std::time::{Duration, Instant};

/// A stall while the consumer is below `max_pending`.
pub(super) const STALL_MIN: Duration = Duration::from_millis(2);
/// A stall while the consumer is at `max_pending`.
pub(super) const STALL_MAX: Duration = Duration::from_millis(5);
/// The egress error of a message trace for a message not delivered that way.
const FAST_PRODUCER_NOT_STALLED: &str = "Not delivered because fast producer not stalled and consumer is slow";

/// The most a producer is held back per read of its socket, or per this much of its input
/// when a read brought more (nats-server reads at most 64 KiB at a time).
pub(super) const STALL_TOTAL: Duration = Duration::from_millis(10);
pub(super) const STALL_WINDOW: usize = 64 * 1024;

/// Queued output past which a consumer holds its producers back: three quarters of
/// `max_pending`.
#[inline]
pub(super) fn mark(max_pending: usize) -> usize {
    max_pending / 4 * 3
}

/// A producer held back for a consumer.
pub(super) struct Stalled {
    producer: ConnKey,
    consumer: ConnKey,
    until: Instant,
}

impl ShardCore {
    /// A delivery from `producer` left `consumer` with `queued` bytes: past the mark, ask
    /// for the producer to be held back after the event (longer at `max_pending`), unless
    /// `no_fast_producer_stall` says producers are never held back.
    #[inline]
    pub(super) fn ask_stall(&mut self, producer: ConnKey, consumer: ConnKey, queued: usize) {
        let max_pending = self.cfg.max_pending;
        if queued > mark(max_pending) && !self.cfg.no_fast_producer_stall {
            let ttl = if queued >= max_pending { STALL_MAX } else { STALL_MIN };
            self.stall_req = Some((producer, consumer, ttl));
        }
    }

    /// Hold `producer` back for `consumer` (asked for by a delivery of the event just
    /// processed). False when it is not held back: not a running client, or its budget for
    /// this read is spent.
    pub(super) fn stall(&mut self, producer: ConnKey, consumer: ConnKey, ttl: Duration, now: Instant) -> bool {
        let Some(c) = self.client_mut(producer) else {
            return false;
        };
        if c.internal || c.pause != Pause::Running || c.closing.is_some() || c.stall_total >= STALL_TOTAL {
            return false;
        }
        let ttl = ttl.min(STALL_TOTAL.saturating_sub(c.stall_total));
        c.stall_total += ttl;
        c.pause = Pause::Stall;
        if let Some(k) = self.client_mut(consumer) {
            k.stalls += 1;
        }
        self.counters.stalls += 1;
        self.stalled.push(Stalled {
            producer,
            consumer,
            until: now + ttl,
        });
        true
    }

    /// `consumer` wrote output: let the producers it held back go once it is below the
    /// mark (or gone). Whether any was let go.
    pub(super) fn consumer_drained(&mut self, consumer: ConnKey, now: Instant) -> bool {
        let mark = mark(self.cfg.max_pending);
        if self
            .client(consumer)
            .is_some_and(|c| c.closing.is_none() && c.out.len() >= mark)
        {
            return false;
        }
        self.release_where(|s| s.consumer == consumer, now)
    }

    /// The earliest end of a stall.
    pub(super) fn next_stall_end(&self) -> Option<Instant> {
        self.stalled.iter().map(|s| s.until).min()
    }

    /// End the stalls that are due.
    pub(super) fn expire_stalls(&mut self, now: Instant) {
        if !self.stalled.is_empty() {
            self.release_where(|s| s.until <= now, now);
        }
    }

    /// End the stalls `done` picks, resuming their producers. Whether there were any.
    fn release_where(&mut self, done: impl Fn(&Stalled) -> bool, now: Instant) -> bool {
        let mut released = Vec::new();
        self.stalled.retain(|s| {
            if done(s) {
                released.push(s.producer);
                return false;
            }
            true
        });
        for &p in &released {
            self.release(p, now);
        }
        !released.is_empty()
    }

    /// With `no_fast_producer_stall`: whether a message from `publisher` to subscription
    /// `id` is not delivered, because its connection is past the mark and the publisher is
    /// a client (the server's own publishers are never refused).
    #[cold]
    pub(super) fn fast_producer_drop(
        &mut self,
        id: crate::core::client::SubId,
        publisher: Option<ConnKey>,
        traced: bool,
    ) -> bool {
        let Some(p) = publisher.and_then(|p| self.client(p)) else {
            return false;
        };
        if p.internal {
            return false;
        }
        let mark = mark(self.cfg.max_pending);
        let Some(conn) = self.subs.get(id as usize).map(|s| s.conn) else {
            return false;
        };
        let behind = self.client(conn).is_some_and(|c| !c.internal && c.out.len() > mark);
        if behind && traced {
            self.trace_egress(id, FAST_PRODUCER_NOT_STALLED);
        }
        behind
    }

    fn release(&mut self, producer: ConnKey, now: Instant) {
        if self
            .client(producer)
            .is_some_and(|c| c.pause == Pause::Stall && c.closing.is_none())
        {
            self.resume(producer, now);
        }
    }
}
