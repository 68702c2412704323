//! The API request queues' limits (`request_queue_limit`, `info_queue_limit`).
//!
//! The reference queues API requests for a pool of workers and, when a queue reaches its
//! limit, drops everything queued, warns, and publishes `$JS.EVENT.ADVISORY.API.LIMIT_REACHED`
//! in the system account. Here a request is served on the shard it arrives on; what waits
//! is a request posted to its stream's shard. Those are counted per queue (info requests
//! apart from the others, as the reference splits them), and reaching the limit drops
//! every posted request of that queue: each carries the queue's generation and is
//! discarded when it runs after the generation moved on. A request handled where it
//! arrived is in its queue while it is handled (so a limit of 1 drops every request, as
//! the reference's does).

use crate::jetstream::JetStream;
use std::cell::RefCell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

thread_local! {
    /// The ticket of the request being dispatched on this shard's thread: a job posted to
    /// the stream's shard takes it along, else the dispatch ends it.
    static CURRENT: RefCell<Option<(Arc<JetStream>, Ticket)>> = const { RefCell::new(None) };
}

/// The request being dispatched holds `ticket`.
pub fn set_current(js: Arc<JetStream>, ticket: Ticket) {
    CURRENT.with(|c| *c.borrow_mut() = Some((js, ticket)));
}

/// Take the dispatched request's ticket (once).
pub fn take_current() -> Option<(Arc<JetStream>, Ticket)> {
    CURRENT.with(|c| c.borrow_mut().take())
}

/// Which queue a request waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// Everything but the info requests.
    Requests = 0,
    /// `INFO`, `STREAM.NAMES/LIST/INFO`, `CONSUMER.NAMES/LIST/INFO` (the reference's info
    /// queue, served after the other one).
    Info = 1,
}

impl QueueKind {
    /// The queue of the request for `api` (the subject after `$JS.API.`).
    pub fn of(api: &str) -> QueueKind {
        let info = api == "INFO"
            || api == "STREAM.NAMES"
            || api == "STREAM.LIST"
            || api.starts_with("STREAM.INFO.")
            || api.starts_with("CONSUMER.NAMES.")
            || api.starts_with("CONSUMER.LIST.")
            || api.starts_with("CONSUMER.INFO.");
        if info {
            QueueKind::Info
        } else {
            QueueKind::Requests
        }
    }

    /// The reference's queue name, as its warning shows it.
    pub fn name(self) -> &'static str {
        match self {
            QueueKind::Requests => "JetStream API queue",
            QueueKind::Info => "JetStream API info queue",
        }
    }
}

/// A queued request's place: valid while its queue's generation is unchanged.
#[derive(Clone, Copy, Debug)]
pub struct Ticket {
    kind: QueueKind,
    generation: u64,
}

/// The two queues' pending counts and generations (shared by every shard).
#[derive(Debug, Default)]
pub struct ApiQueues {
    pending: [AtomicI64; 2],
    generation: [AtomicU64; 2],
}

impl ApiQueues {
    /// Queue one request with `limit` for its queue: its ticket, or `Err(dropped)` when
    /// this request reached the limit and the whole queue (it included) was dropped.
    pub fn admit(&self, kind: QueueKind, limit: i64) -> Result<Ticket, i64> {
        let k = kind as usize;
        let (Some(pending), Some(generation)) = (self.pending.get(k), self.generation.get(k)) else {
            return Err(0);
        };
        let at = generation.load(Ordering::Acquire);
        let now = pending.fetch_add(1, Ordering::AcqRel) + 1;
        if limit > 0 && now >= limit {
            generation.fetch_add(1, Ordering::AcqRel);
            let dropped = pending.swap(0, Ordering::AcqRel);
            return Err(dropped);
        }
        Ok(Ticket { kind, generation: at })
    }

    /// The queued request is about to run: false when its queue was dropped meanwhile
    /// (the request is then discarded unanswered, as the reference's drained ones are).
    pub fn start(&self, t: Ticket) -> bool {
        let k = t.kind as usize;
        let (Some(pending), Some(generation)) = (self.pending.get(k), self.generation.get(k)) else {
            return false;
        };
        if generation.load(Ordering::Acquire) != t.generation {
            return false;
        }
        pending.fetch_sub(1, Ordering::AcqRel);
        true
    }

    /// Requests waiting now, both queues (the `inflight` of the API statistics).
    pub fn inflight(&self) -> u64 {
        self.pending
            .iter()
            .map(|p| u64::try_from(p.load(Ordering::Acquire)).unwrap_or(0))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_requests_have_their_own_queue() {
        for (api, kind) in [
            ("INFO", QueueKind::Info),
            ("STREAM.NAMES", QueueKind::Info),
            ("STREAM.LIST", QueueKind::Info),
            ("STREAM.INFO.S", QueueKind::Info),
            ("CONSUMER.INFO.S.C", QueueKind::Info),
            ("CONSUMER.NAMES.S", QueueKind::Info),
            ("CONSUMER.LIST.S", QueueKind::Info),
            ("STREAM.CREATE.S", QueueKind::Requests),
            ("STREAM.MSG.GET.S", QueueKind::Requests),
            ("CONSUMER.CREATE.S", QueueKind::Requests),
            ("STREAM.INFOX", QueueKind::Requests),
        ] {
            assert_eq!(QueueKind::of(api), kind, "{api}");
        }
    }

    #[test]
    fn reaching_the_limit_drops_the_queue() {
        let q = ApiQueues::default();
        let a = q.admit(QueueKind::Requests, 3).unwrap();
        let b = q.admit(QueueKind::Requests, 3).unwrap();
        // The info queue is apart.
        let i = q.admit(QueueKind::Info, 3).unwrap();
        assert_eq!(q.inflight(), 3);
        // The third request reaches the limit: all three are dropped.
        assert_eq!(q.admit(QueueKind::Requests, 3).unwrap_err(), 3);
        assert!(!q.start(a));
        assert!(!q.start(b));
        assert!(q.start(i));
        assert_eq!(q.inflight(), 0);
        // The queue works again afterwards.
        let c = q.admit(QueueKind::Requests, 3).unwrap();
        assert!(q.start(c));
        assert_eq!(q.inflight(), 0);
    }

    #[test]
    fn requests_that_run_leave_the_queue() {
        let q = ApiQueues::default();
        for _ in 0..10 {
            let t = q.admit(QueueKind::Requests, 2).unwrap();
            assert!(q.start(t));
        }
        assert_eq!(q.inflight(), 0);
    }
}
