//! Fast producers held back for a consumer on their shard (module `stall`).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;

fn world(no_stall: bool) -> World {
    World::new(
        1,
        CoreConfig {
            max_pending: 4096,
            no_fast_producer_stall: no_stall,
            ..CoreConfig::default()
        },
    )
}

/// `MSG s 1 100\r\n` + 100 bytes + CRLF.
const FRAME: usize = 13 + 100 + 2;

fn publish(n: usize) -> String {
    format!("PUB s 100\r\n{}\r\n", "x".repeat(100)).repeat(n)
}

/// A world with a consumer of `s` and a producer, both on shard 0.
fn consumer_and_producer(no_stall: bool) -> (World, usize, ConnKey, ConnKey) {
    let mut w = world(no_stall);
    let (s, sub) = w.connect(0, QUIET);
    w.send(s, sub, "SUB s 1\r\n");
    let (_, p) = w.connect(0, QUIET);
    (w, s, sub, p)
}

#[test]
fn a_producer_past_the_mark_stops_until_the_consumer_drains() {
    let (mut w, s, sub, p) = consumer_and_producer(false);
    // 3072 bytes is the mark: the 27th message passes it, the rest of the read waits.
    w.send(s, p, &publish(40));
    assert_eq!(w.shards[s].status(p), ConnStatus::Open { read: false });
    assert_eq!(w.shards[s].pending_len(sub), 27 * FRAME);
    assert_eq!(w.shards[s].counters.stalls, 1);
    assert_eq!(w.shards[s].client(sub).unwrap().stalls, 1, "counted on the consumer");
    // Input that arrives meanwhile waits behind it, in order.
    w.send(s, p, "PUB s 2\r\nzz\r\n");
    // The consumer writes out what it had (no time passes): the producer goes on where
    // it stopped, and everything arrives in order.
    let all = w.take(s, sub);
    assert_eq!(all.matches("MSG s 1 100").count(), 40);
    assert!(all.ends_with("MSG s 1 2\r\nzz\r\n"), "{all}");
    assert_eq!(w.shards[s].status(p), ConnStatus::Open { read: true });
    assert_eq!(w.shards[s].counters.slow_consumers, 0);
}

#[test]
fn a_stall_ends_after_two_milliseconds_and_the_budget_after_ten() {
    let (mut w, s, sub, p) = consumer_and_producer(false);
    w.send(s, p, &publish(33));
    assert_eq!(w.shards[s].status(p), ConnStatus::Open { read: false });
    assert_eq!(w.shards[s].next_stall_end(), Some(w.now + Duration::from_millis(2)));
    // The consumer reads nothing: every message after the mark stalls again, 2 ms each,
    // until the read's 10 ms are spent; then the rest goes through at once.
    for _ in 0..5 {
        w.advance(Duration::from_millis(2));
    }
    assert_eq!(w.shards[s].counters.stalls, 5);
    assert_eq!(w.shards[s].status(p), ConnStatus::Open { read: true });
    assert_eq!(w.shards[s].pending_len(sub), 33 * FRAME);
    // A new read has a new budget.
    w.send(s, p, &publish(1));
    assert_eq!(w.shards[s].status(p), ConnStatus::Open { read: false });
    // At max_pending the consumer is cut off as before, and the producer goes on.
    w.advance(Duration::from_millis(5));
    w.send(s, p, &publish(10));
    w.advance(Duration::from_millis(5));
    assert_eq!(w.shards[s].status(sub), ConnStatus::Close);
    assert_eq!(w.shards[s].counters.slow_consumers, 1);
    w.advance(Duration::from_millis(5));
    assert_eq!(w.shards[s].status(p), ConnStatus::Open { read: true });
}

#[test]
fn without_stalls_messages_past_the_mark_are_dropped_for_that_consumer() {
    let mut w = world(true);
    let (s, sub) = w.connect(0, QUIET);
    w.send(s, sub, "SUB s 1\r\n");
    let (_, other) = w.connect(0, QUIET);
    w.send(s, other, "SUB s 2\r\n");
    let (_, p) = w.connect(0, QUIET);
    w.send(s, p, &publish(40));
    assert_eq!(
        w.shards[s].status(p),
        ConnStatus::Open { read: true },
        "never held back"
    );
    assert_eq!(w.shards[s].counters.stalls, 0);
    // The consumer keeps what took it past the mark; the rest is not delivered to it.
    assert_eq!(w.shards[s].pending_len(sub), 27 * FRAME);
    assert_eq!(w.shards[s].status(sub), ConnStatus::Open { read: true });
    assert_eq!(w.shards[s].counters.slow_consumers, 0);
    // Once it drains, it gets messages again.
    w.take(s, sub);
    w.take(s, other);
    w.send(s, p, &publish(1));
    assert_eq!(w.take(s, sub).matches("MSG s 1 100").count(), 1);
}

#[test]
fn the_servers_own_publishers_are_never_held_back_or_refused() {
    // A consumer past the mark still gets what internal clients publish (the system
    // account's events, JetStream deliveries): only client producers stall.
    let (mut w, s, sub, p) = consumer_and_producer(true);
    w.send(s, p, &publish(40));
    let before = w.shards[s].pending_len(sub);
    w.shards[s].publish_internal(crate::core::accounts::GLOBAL, b"s", b"", None, b"hi", w.now);
    assert!(w.shards[s].pending_len(sub) > before, "delivered past the mark");
}
