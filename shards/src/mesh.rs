//! The shard mesh: a bounded single-producer single-consumer ring for every ordered pair
//! of shards, plus a return ring per pair so the consumer hands emptied buffers back to
//! the producer (no allocation on one core and free on another).
//!
//! Ownership: each shard owns exactly one [`Endpoint`]: the producer halves of its
//! outgoing rings, the consumer halves of its incoming rings, and the matching return
//! rings. Only the per-shard `parked` flags and per-link `producer_waiting` flags are
//! shared, as atomics.
//!
//! Waking: a shard that is about to sleep calls [`Endpoint::prepare_park`], which
//! publishes `parked = true` and then re-checks its inputs; a producer, after pushing,
//! notifies the consumer only if it saw `parked` set (and clears it). The SeqCst fences on
//! both sides make sure that one of the two sees the other's write, so no wake-up is lost
//! and a busy consumer costs its producers no system call.
//!
//! Deferred wakes ([`Endpoint::defer_wakes`]): instead of notifying a parked consumer
//! at each push, the producer remembers which links it pushed to and, at the end of its
//! loop turn, checks their `parked` flags once ([`Endpoint::flush_wakes`]). Its driver can
//! then post the wake-up with the I/O it submits anyway (an io_uring write to the
//! consumer's eventfd rides in the same `io_uring_enter`), so a wake costs no system call
//! of its own. Reading `parked` later than the push keeps the argument above: the read
//! still follows the push and a SeqCst fence.
//!
//! Backpressure: a full ring is reported to the caller (`Err(item)`), who keeps the item
//! and pauses its own producers; the link is marked `producer_waiting`, and the consumer
//! wakes the producer shard when it frees a slot.

use rtrb::{Consumer, Producer, PushError, RingBuffer};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;

/// Wakes one shard. Implemented over an eventfd (io_uring shards) or a `mio::Waker`.
pub trait Notify: Send + Sync {
    fn notify(&self);
    /// The eventfd whose counter this notifier bumps, if that is how it wakes: a driver
    /// with a ring may write to it from there instead of calling [`Notify::notify`].
    fn eventfd(&self) -> Option<i32> {
        None
    }
}

/// One cache line pair per shard: a shard writes its `parked` flag each time it sleeps
/// and wakes, and every producer reads it after each push; packed together, the flags of
/// different shards would share a line and each park would evict it from every core.
#[repr(align(128))]
struct Peer {
    parked: AtomicBool,
    notify: Box<dyn Notify>,
}

struct Shared {
    n: usize,
    peers: Vec<Peer>,
    /// Indexed `src * n + dst`: the producer `src` found the ring to `dst` full.
    producer_waiting: Vec<AtomicBool>,
}

impl Shared {
    fn wake(&self, shard: usize) {
        if let Some(n) = self.claim(shard) {
            n.notify();
        }
    }

    /// If `shard` is parked, take the duty to wake it (nobody else will): its notifier.
    fn claim(&self, shard: usize) -> Option<&dyn Notify> {
        let p = self.peers.get(shard)?;
        (p.parked.load(Ordering::SeqCst) && p.parked.swap(false, Ordering::SeqCst)).then_some(&*p.notify)
    }
}

/// One shard's view of the mesh. Owned by that shard only.
pub struct Endpoint<T> {
    me: usize,
    tx: Vec<Option<Producer<T>>>,
    rx: Vec<Option<Consumer<T>>>,
    ret_tx: Vec<Option<Producer<T>>>,
    ret_rx: Vec<Option<Consumer<T>>>,
    blocked: Vec<bool>,
    /// Deferred wakes: the links pushed to since the last [`Endpoint::flush_wakes`].
    defer: bool,
    pushed: Vec<bool>,
    any_pushed: bool,
    shared: Arc<Shared>,
}

/// Build a full mesh between `notifiers.len()` shards; `capacity` is the number of items
/// each ring holds. Endpoint `i` belongs to shard `i` and is woken through `notifiers[i]`.
pub fn build<T: Send>(notifiers: Vec<Box<dyn Notify>>, capacity: usize) -> Vec<Endpoint<T>> {
    let n = notifiers.len();
    let shared = Arc::new(Shared {
        n,
        peers: notifiers
            .into_iter()
            .map(|notify| Peer {
                parked: AtomicBool::new(false),
                notify,
            })
            .collect(),
        producer_waiting: (0..n * n).map(|_| AtomicBool::new(false)).collect(),
    });
    let mut eps: Vec<Endpoint<T>> = (0..n)
        .map(|me| Endpoint {
            me,
            tx: (0..n).map(|_| None).collect(),
            rx: (0..n).map(|_| None).collect(),
            ret_tx: (0..n).map(|_| None).collect(),
            ret_rx: (0..n).map(|_| None).collect(),
            blocked: vec![false; n],
            defer: false,
            pushed: vec![false; n],
            any_pushed: false,
            shared: shared.clone(),
        })
        .collect();
    for src in 0..n {
        for dst in 0..n {
            if src == dst {
                continue;
            }
            let (p, c) = RingBuffer::new(capacity);
            eps[src].tx[dst] = Some(p);
            eps[dst].rx[src] = Some(c);
            let (rp, rc) = RingBuffer::new(capacity);
            eps[dst].ret_tx[src] = Some(rp);
            eps[src].ret_rx[dst] = Some(rc);
        }
    }
    eps
}

impl<T> Endpoint<T> {
    /// Push `item` to shard `dst`, waking it if it sleeps. On a full ring the item comes
    /// back and the link is marked so that `dst` wakes us when it frees a slot.
    pub fn try_send(&mut self, dst: usize, item: T) -> Result<(), T> {
        let n = self.shared.n;
        let Some(Some(tx)) = self.tx.get_mut(dst) else {
            return Err(item);
        };
        let item = match tx.push(item) {
            Ok(()) => {
                self.blocked[dst] = false;
                self.pushed_to(dst);
                return Ok(());
            }
            Err(PushError::Full(item)) => item,
        };
        let waiting = &self.shared.producer_waiting[self.me * n + dst];
        waiting.store(true, Ordering::SeqCst);
        // The consumer may have drained between the failed push and the flag: retry once.
        match tx.push(item) {
            Ok(()) => {
                waiting.store(false, Ordering::SeqCst);
                self.blocked[dst] = false;
                self.pushed_to(dst);
                Ok(())
            }
            Err(PushError::Full(item)) => {
                self.blocked[dst] = true;
                Err(item)
            }
        }
    }

    /// After a push to `dst`: wake it now, or remember to look at the end of the turn.
    fn pushed_to(&mut self, dst: usize) {
        if self.defer {
            self.pushed[dst] = true;
            self.any_pushed = true;
        } else {
            fence(Ordering::SeqCst);
            self.shared.wake(dst);
        }
    }

    /// Hold wakes of parked consumers back until [`Endpoint::flush_wakes`] (`on`), or
    /// wake them at each push (the default).
    pub fn defer_wakes(&mut self, on: bool) {
        if !on {
            self.flush_wakes(&mut |n| n.notify());
        }
        self.defer = on;
    }

    /// Deferred wakes: for each shard pushed to since the last call that is parked, claim
    /// its wake-up and hand its notifier to `wake`, which must wake it (now, or with I/O
    /// it submits before it sleeps or blocks). Call once per loop turn, before waiting.
    pub fn flush_wakes(&mut self, wake: &mut dyn FnMut(&dyn Notify)) {
        if !std::mem::take(&mut self.any_pushed) {
            return;
        }
        fence(Ordering::SeqCst);
        for (dst, pushed) in self.pushed.iter_mut().enumerate() {
            if !std::mem::take(pushed) {
                continue;
            }
            if let Some(n) = self.shared.claim(dst) {
                wake(n);
            }
        }
    }

    /// Pop the next item from shard `src`, waking `src` if it was waiting for room.
    pub fn try_recv(&mut self, src: usize) -> Option<T> {
        let n = self.shared.n;
        let rx = self.rx.get_mut(src)?.as_mut()?;
        let item = rx.pop().ok()?;
        let waiting = &self.shared.producer_waiting[src * n + self.me];
        if waiting.load(Ordering::SeqCst) && waiting.swap(false, Ordering::SeqCst) {
            self.shared.wake(src);
        }
        Some(item)
    }

    /// Give an emptied item back to the shard that sent it (dropped if its return ring is full).
    pub fn recycle(&mut self, src: usize, item: T) {
        if let Some(Some(r)) = self.ret_tx.get_mut(src) {
            let _ = r.push(item);
        }
    }

    /// An item previously sent to `dst` and handed back by it, for reuse.
    pub fn take_recycled(&mut self, dst: usize) -> Option<T> {
        self.ret_rx.get_mut(dst)?.as_mut()?.pop().ok()
    }

    /// Items waiting in the ring from shard `src` (for monitoring).
    pub fn inbound_len(&self, src: usize) -> usize {
        self.rx.get(src).and_then(Option::as_ref).map_or(0, |c| c.slots())
    }

    /// True if some incoming ring has items, or a ring we were blocked on has room again.
    pub fn has_work(&self) -> bool {
        let incoming = self.rx.iter().flatten().any(|c| !c.is_empty());
        let unblocked = self
            .blocked
            .iter()
            .zip(&self.tx)
            .any(|(b, tx)| *b && tx.as_ref().is_some_and(|p| p.slots() > 0));
        incoming || unblocked
    }

    /// True if an earlier `try_send` to some shard failed and has not succeeded since.
    pub fn any_blocked(&self) -> bool {
        self.blocked.iter().any(|b| *b)
    }

    /// Announce that this shard is going to sleep. Returns false (and stays awake) if work
    /// arrived meanwhile; then the caller must process it instead of sleeping.
    pub fn prepare_park(&self) -> bool {
        let me = &self.shared.peers[self.me];
        me.parked.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.has_work() {
            me.parked.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Called after waking up, whatever woke us.
    pub fn unpark(&self) {
        self.shared.peers[self.me].parked.store(false, Ordering::SeqCst);
    }
}

/// Wakes every shard of a mesh from outside it (signal thread, acceptor thread).
#[derive(Clone)]
pub struct Waker {
    shared: Arc<Shared>,
}

impl<T> Endpoint<T> {
    /// A handle that can wake any shard of this mesh from any thread.
    pub fn waker(&self) -> Waker {
        Waker {
            shared: self.shared.clone(),
        }
    }
}

impl Waker {
    /// Wake `shard` whether or not it announced that it sleeps.
    pub fn wake(&self, shard: usize) {
        if let Some(p) = self.shared.peers.get(shard) {
            p.parked.store(false, Ordering::SeqCst);
            p.notify.notify();
        }
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.shared.n
    }

    /// A mesh always has at least one shard.
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Count(Arc<AtomicUsize>);
    impl Notify for Count {
        fn notify(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn mesh3(cap: usize) -> (Vec<Endpoint<u32>>, Vec<Arc<AtomicUsize>>) {
        let counts: Vec<_> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
        let notifiers = counts
            .iter()
            .map(|c| Box::new(Count(c.clone())) as Box<dyn Notify>)
            .collect();
        (build(notifiers, cap), counts)
    }

    #[test]
    fn fifo_per_link_and_no_self_link() {
        let (mut eps, _) = mesh3(8);
        for i in 0..5 {
            eps[0].try_send(2, i).unwrap();
        }
        assert!(eps[0].try_send(0, 9).is_err(), "no ring to self");
        let got: Vec<u32> = std::iter::from_fn(|| eps[2].try_recv(0)).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert_eq!(eps[2].try_recv(1), None);
    }

    #[test]
    fn notify_only_when_parked() {
        let (mut eps, counts) = mesh3(8);
        eps[0].try_send(1, 1).unwrap();
        assert_eq!(counts[1].load(Ordering::SeqCst), 0, "busy consumer is not woken");
        assert!(!eps[1].prepare_park(), "pending input prevents parking");
        assert_eq!(eps[1].try_recv(0), Some(1));
        assert!(eps[1].prepare_park());
        eps[0].try_send(1, 2).unwrap();
        eps[2].try_send(1, 3).unwrap();
        assert_eq!(counts[1].load(Ordering::SeqCst), 1, "one wake for a parked shard");
    }

    #[test]
    fn deferred_wakes_wait_for_the_flush_and_claim_once() {
        let (mut eps, counts) = mesh3(8);
        eps[0].defer_wakes(true);
        eps[2].defer_wakes(true);
        assert!(eps[1].prepare_park());
        eps[0].try_send(1, 1).unwrap();
        eps[0].try_send(1, 2).unwrap();
        eps[2].try_send(1, 3).unwrap();
        assert_eq!(counts[1].load(Ordering::SeqCst), 0, "nothing woken before the flush");
        let mut woken = 0;
        eps[0].flush_wakes(&mut |n| {
            woken += 1;
            n.notify();
        });
        assert_eq!(woken, 1, "one wake for two pushes");
        // The wake was claimed: the other producer's flush finds the shard awake.
        eps[2].flush_wakes(&mut |_| panic!("woken twice"));
        assert_eq!(counts[1].load(Ordering::SeqCst), 1);
        // A flush without pushes since wakes nobody, even a parked shard.
        eps[1].unpark();
        assert_eq!(eps[1].try_recv(0), Some(1));
        assert_eq!(eps[1].try_recv(0), Some(2));
        assert_eq!(eps[1].try_recv(2), Some(3));
        assert!(eps[1].prepare_park());
        eps[0].flush_wakes(&mut |_| panic!("no push since the last flush"));
        // A consumer that is awake is not woken; one that parks after the push is, at the
        // flush (it saw the item when it parked, or the flush sees it parked).
        eps[1].unpark();
        eps[0].try_send(1, 4).unwrap();
        eps[0].flush_wakes(&mut |_| panic!("consumer awake"));
        assert!(!eps[1].prepare_park(), "the pushed item keeps it awake");
        // Turning deferral off wakes what is still owed.
        assert_eq!(eps[1].try_recv(0), Some(4));
        assert!(eps[1].prepare_park());
        eps[0].try_send(1, 5).unwrap();
        eps[0].defer_wakes(false);
        assert_eq!(counts[1].load(Ordering::SeqCst), 2);
        eps[1].unpark();
        assert_eq!(eps[1].try_recv(0), Some(5));
        assert!(eps[1].prepare_park());
        eps[0].try_send(1, 6).unwrap();
        assert_eq!(counts[1].load(Ordering::SeqCst), 3, "immediate again");
    }

    #[test]
    fn full_ring_returns_item_and_wakes_producer_on_drain() {
        let (mut eps, counts) = mesh3(2);
        eps[0].try_send(1, 1).unwrap();
        eps[0].try_send(1, 2).unwrap();
        assert_eq!(eps[0].try_send(1, 3), Err(3));
        assert!(eps[0].any_blocked());
        assert!(eps[0].prepare_park(), "nothing to do until the consumer drains");
        assert_eq!(eps[1].try_recv(0), Some(1));
        assert_eq!(counts[0].load(Ordering::SeqCst), 1, "producer woken when room appears");
        assert!(eps[0].has_work());
        eps[0].try_send(1, 3).unwrap();
        assert!(!eps[0].any_blocked());
    }

    #[test]
    fn recycle_returns_items_to_sender() {
        let (mut eps, _) = mesh3(4);
        eps[0].try_send(2, 7).unwrap();
        let v = eps[2].try_recv(0).unwrap();
        eps[2].recycle(0, v);
        assert_eq!(eps[0].take_recycled(2), Some(7));
        assert_eq!(eps[0].take_recycled(1), None);
    }

    #[test]
    fn threads_exchange_in_order() {
        let (eps, _) = mesh3(16);
        let mut it = eps.into_iter();
        let mut a = it.next().unwrap();
        let mut b = it.next().unwrap();
        let n = 100_000u32;
        let t = std::thread::spawn(move || {
            let mut next = 0;
            while next < n {
                if let Some(v) = b.try_recv(0) {
                    assert_eq!(v, next);
                    next += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut i = 0;
        while i < n {
            if a.try_send(1, i).is_ok() {
                i += 1;
            }
        }
        t.join().unwrap();
    }
}
