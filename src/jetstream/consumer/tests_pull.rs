//! Pull request tests: batches, expiry, no_wait, max bytes, heartbeats, max waiting, the
//! consumer's request limits, priority groups, interest, stop, inactivity. The status
//! header bytes asserted here (404, 408 Request Timeout / Requests Pending, 409 Batch
//! Completed / Message Size Exceeds MaxBytes / Exceeded Max* / Consumer Deleted, 400s,
//! 100 Idle Heartbeat) were checked against nats-server 2.14.0 over raw TCP.

use super::tests_support::*;
use crate::jetstream::api::config::PriorityPolicy;

fn world(n: usize) -> World {
    let mut w = World::new();
    for i in 0..n {
        w.store(&format!("s.{i}"), b"0123456789");
    }
    w
}

const TIMEOUT_3: &str = "NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n";

#[test]
fn batch_then_expiry_408_with_pending_counts() {
    let mut w = world(2);
    let mut c = w.consumer(pull_cfg());
    let out = w.pull(&mut c, "R", r#"{"batch":5,"expires":1000000000}"#);
    assert_eq!(seqs(&out), vec![1, 2]);
    assert!(out.iter().all(|o| o.to == "R" && o.subject.starts_with("s.")));
    assert_eq!(c.stats(&mut w.env).num_waiting, 1);
    let out = w.tick_after(&mut c, secs(1));
    assert_eq!(statuses(&out), vec![TIMEOUT_3]);
    assert_eq!(c.stats(&mut w.env).num_waiting, 0);
}

#[test]
fn requests_wait_for_new_messages_fifo() {
    let mut w = world(0);
    let mut c = w.consumer(pull_cfg());
    assert!(w.pull(&mut c, "R1", "1").is_empty());
    assert!(w.pull(&mut c, "R2", "2").is_empty());
    w.store("s.a", b"1");
    w.store("s.b", b"2");
    w.store("s.c", b"3");
    c.on_stored(3, "s.c");
    let out = w.poll(&mut c);
    let to: Vec<(&str, u64)> = out.iter().map(|o| (o.to.as_str(), o.sseq())).collect();
    assert_eq!(to, vec![("R1", 1), ("R2", 2), ("R2", 3)]);
}

#[test]
fn no_wait_statuses() {
    let mut w = world(0);
    let mut c = w.consumer(pull_cfg());
    // Nothing at all: 404 at once.
    let out = w.pull(&mut c, "R", r#"{"batch":2,"no_wait":true}"#);
    assert_eq!(statuses(&out), vec!["NATS/1.0 404 No Messages\r\n\r\n"]);
    // Fewer than asked: what there is, then 404 at the end of the stream.
    w.store("s.a", b"1");
    let out = w.pull(&mut c, "R", r#"{"batch":2,"no_wait":true}"#);
    assert_eq!(seqs(&out), vec![1]);
    assert_eq!(statuses(&out), vec!["NATS/1.0 404 No Messages\r\n\r\n"]);
    assert_eq!(c.stats(&mut w.env).num_waiting, 0);
    // Pending messages already claimed by waiting requests: 408 Requests Pending
    // (as the reference answers with max_ack_pending 1, 3 messages, a waiting batch of 10).
    w.store("s.b", b"2");
    w.store("s.c", b"3");
    let mut cfg = pull_cfg();
    cfg.max_ack_pending = 1;
    let mut c = w.consumer(cfg);
    assert_eq!(seqs(&w.pull(&mut c, "Q", "10")), vec![1]);
    let out = w.pull(&mut c, "R2", r#"{"no_wait":true}"#);
    assert_eq!(statuses(&out), vec!["NATS/1.0 408 Requests Pending\r\n\r\n"]);
}

#[test]
fn max_bytes_statuses() {
    let mut w = world(3);
    let mut c = w.consumer(pull_cfg());
    // Each delivery is subject (3) + ack reply + payload (10) bytes; ~60 in all.
    let out = w.pull(&mut c, "R", r#"{"batch":1,"max_bytes":1000}"#);
    assert_eq!(seqs(&out), vec![1]);
    let sz = out[0].subject.len() + out[0].reply.len() + out[0].payload.len();
    let left = 1000 - sz;
    assert_eq!(
        statuses(&out),
        vec![format!(
            "NATS/1.0 409 Batch Completed\r\nNats-Pending-Messages: 0\r\nNats-Pending-Bytes: {left}\r\n\r\n"
        )]
    );
    let out = w.pull(&mut c, "R", r#"{"batch":5,"max_bytes":10}"#);
    assert_eq!(
        statuses(&out),
        vec![
            "NATS/1.0 409 Message Size Exceeds MaxBytes\r\nNats-Pending-Messages: 5\r\nNats-Pending-Bytes: 10\r\n\r\n"
        ]
    );
    assert_eq!(c.stats(&mut w.env).num_waiting, 0);
}

#[test]
fn pull_heartbeats() {
    let mut w = world(1);
    let mut c = w.consumer(pull_cfg());
    let out = w.pull(
        &mut c,
        "R",
        r#"{"batch":3,"expires":5000000000,"idle_heartbeat":1000000000}"#,
    );
    assert_eq!(seqs(&out), vec![1]);
    let out = w.tick_after(&mut c, secs(1));
    assert_eq!(
        statuses(&out),
        vec!["NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1\r\nNats-Last-Stream: 1\r\n\r\n"]
    );
    assert!(c.next_deadline().unwrap() <= w.now() + secs(1));
}

#[test]
fn request_limits_and_bad_requests() {
    let mut w = world(1);
    let mut cfg = pull_cfg();
    cfg.max_batch = 10;
    cfg.max_expires = 2_000_000_000;
    cfg.max_bytes = 100;
    cfg.max_waiting = 1;
    let mut c = w.consumer(cfg);
    let cases = [
        (r#"{"batch":11}"#, "NATS/1.0 409 Exceeded MaxRequestBatch of 10\r\n\r\n"),
        (
            r#"{"batch":1,"expires":3000000000}"#,
            "NATS/1.0 409 Exceeded MaxRequestExpires of 2s\r\n\r\n",
        ),
        (
            r#"{"batch":1,"max_bytes":101}"#,
            "NATS/1.0 409 Exceeded MaxRequestMaxBytes of 100\r\n\r\n",
        ),
        (
            r#"{"batch":1,"expires":1000,"idle_heartbeat":800}"#,
            "NATS/1.0 400 Bad Request - heartbeat value too large\r\n\r\n",
        ),
        (
            r#"{"batch":1,"priority":10}"#,
            "NATS/1.0 400 Bad Request - Priority must be between 0 and 9\r\n\r\n",
        ),
    ];
    for (body, want) in cases {
        let out = w.pull(&mut c, "R", body);
        assert_eq!(statuses(&out), vec![want], "{body}");
    }
    // Max waiting 1: the first waits (after taking the message), the second is refused.
    assert_eq!(seqs(&w.pull(&mut c, "R1", "2")), vec![1]);
    let out = w.pull(&mut c, "R2", "1");
    assert_eq!(statuses(&out), vec!["NATS/1.0 409 Exceeded MaxWaiting\r\n\r\n"]);
    // ...unless it has a heartbeat: then no answer.
    let out = w.pull(
        &mut c,
        "R3",
        r#"{"batch":1,"expires":2000000000,"idle_heartbeat":1000000000}"#,
    );
    assert!(out.is_empty(), "{out:?}");
    // A required API level above ours.
    w.listen("R4");
    let now = w.now();
    c.on_pull(
        &mut w.env,
        "R4",
        Some(b"NATS/1.0\r\nNats-Required-Api-Level: 99\r\n\r\n"),
        b"",
        now,
    );
    assert_eq!(statuses(&w.take()), vec!["NATS/1.0 412 Required Api Level\r\n\r\n"]);
    // Push consumers refuse pulls; requests without a reply are ignored.
    let mut p = w.consumer(push_cfg());
    assert_eq!(
        statuses(&w.pull(&mut p, "R", "")),
        vec!["NATS/1.0 409 Consumer is push based\r\n\r\n"]
    );
    p.on_pull(&mut w.env, "", None, b"", now);
    assert!(w.take().is_empty());
}

#[test]
fn lost_interest_and_stop() {
    let mut w = world(0);
    let mut c = w.consumer(pull_cfg());
    w.pull(&mut c, "R1", "3");
    w.pull(&mut c, "R2", "3");
    w.unlisten("R1");
    w.store("s.a", b"1");
    let out = w.poll(&mut c);
    assert_eq!(
        statuses(&out),
        vec!["NATS/1.0 408 Interest Expired\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n"]
    );
    assert_eq!(
        out.iter()
            .filter(|o| o.is_delivery())
            .map(|o| o.to.as_str())
            .collect::<Vec<_>>(),
        vec!["R2"]
    );
    c.stop(&mut w.env, "409 Consumer Deleted");
    let out = w.take();
    assert_eq!(
        (out[0].to.as_str(), out[0].hdr_str().as_str()),
        ("R2", "NATS/1.0 409 Consumer Deleted\r\n\r\n")
    );
    assert_eq!(c.next_deadline(), None);
}

#[test]
fn pull_inactivity() {
    let mut w = world(0);
    let mut cfg = pull_cfg();
    cfg.inactive_threshold = 1_000_000_000;
    let mut c = w.consumer(cfg);
    w.advance(ms(900));
    assert!(!w.inactive(&c));
    w.pull(&mut c, "R", r#"{"batch":1,"expires":500000000}"#);
    w.advance(ms(900));
    assert!(!w.inactive(&c), "a pull request is activity");
    w.tick_after(&mut c, ms(200));
    assert!(w.inactive(&c));
    assert_eq!(
        c.next_deadline(),
        None,
        "a passed inactivity deadline does not keep firing"
    );
    let mut d = w.consumer(pull_cfg());
    w.advance(secs(100));
    assert!(!w.inactive(&d), "no threshold: never");
    d.stop(&mut w.env, "409 Consumer Deleted");
}

fn group_cfg(policy: PriorityPolicy) -> crate::jetstream::api::config::ConsumerConfig {
    let mut cfg = pull_cfg();
    cfg.priority_policy = policy;
    cfg.priority_groups = vec!["G".into()];
    cfg.priority_timeout = 2_000_000_000;
    cfg
}

#[test]
fn priority_group_checks() {
    let mut w = world(0);
    let mut c = w.consumer(group_cfg(PriorityPolicy::Overflow));
    let cases = [
        (
            r#"{"batch":1}"#,
            "NATS/1.0 400 Bad Request - Priority Group missing\r\n\r\n",
        ),
        (
            r#"{"batch":1,"group":"X"}"#,
            "NATS/1.0 400 Bad Request - Invalid Priority Group\r\n\r\n",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(statuses(&w.pull(&mut c, "R", body)), vec![want], "{body}");
    }
    let mut plain = w.consumer(pull_cfg());
    let out = w.pull(&mut plain, "R", r#"{"batch":1,"min_pending":5}"#);
    assert_eq!(
        statuses(&out),
        vec!["NATS/1.0 400 Bad Request - Not a Overflow Priority consumer\r\n\r\n"]
    );
    assert_eq!(
        plain.stats(&mut w.env).num_waiting,
        1,
        "the reference answers but still queues it"
    );
}

#[test]
fn overflow_waits_for_min_pending() {
    let mut w = world(2);
    let mut c = w.consumer(group_cfg(PriorityPolicy::Overflow));
    assert!(w
        .pull(&mut c, "R", r#"{"batch":5,"group":"G","min_pending":4}"#)
        .is_empty());
    w.store("s.x", b"1");
    assert!(w.poll(&mut c).is_empty());
    w.store("s.y", b"1");
    assert_eq!(seqs(&w.poll(&mut c)), vec![1], "delivers once 4 are pending");
}

#[test]
fn pinned_client() {
    let mut w = world(3);
    w.listen("$JS.EVENT.ADVISORY.CONSUMER.PINNED.S.C");
    let mut c = w.consumer(group_cfg(PriorityPolicy::PinnedClient));
    let out = w.pull(&mut c, "A", r#"{"batch":1,"group":"G"}"#);
    let d = out.iter().find(|o| o.is_delivery()).unwrap();
    let pin = super::wire::header_value(&d.hdr, "Nats-Pin-Id").unwrap().to_string();
    assert_eq!(pin.len(), 22);
    assert!(out.iter().any(|o| o.to.ends_with("PINNED.S.C")));
    assert_eq!(c.stats(&mut w.env).priority_groups[0].pinned_client_id, pin);
    // Another client without the pin waits; with a wrong pin it is refused.
    assert!(w.pull(&mut c, "B", r#"{"batch":1,"group":"G"}"#).is_empty());
    let out = w.pull(&mut c, "B2", r#"{"batch":1,"group":"G","id":"nope"}"#);
    assert_eq!(statuses(&out), vec!["NATS/1.0 423 Nats-Pin-Id mismatch\r\n\r\n"]);
    let body = format!(r#"{{"batch":1,"group":"G","id":"{pin}"}}"#);
    assert_eq!(seqs(&w.pull(&mut c, "A", &body)), vec![2]);
    // Unpin: the waiting client B gets a new pin.
    assert!(c.unpin("X", &mut w.env).is_err());
    c.unpin("G", &mut w.env).unwrap();
    let out = w.poll(&mut c);
    let d = out.iter().find(|o| o.is_delivery()).unwrap();
    assert_eq!(d.to, "B");
    assert_ne!(super::wire::header_value(&d.hdr, "Nats-Pin-Id").unwrap(), pin);
    // The pin times out after priority_timeout without requests.
    w.tick_after(&mut c, secs(3));
    assert_eq!(c.stats(&mut w.env).priority_groups[0].pinned_client_id, "");
}

#[test]
fn prioritized_serves_lowest_priority_number_first() {
    let mut w = world(0);
    let mut c = w.consumer(group_cfg(PriorityPolicy::Prioritized));
    w.pull(&mut c, "P5", r#"{"batch":2,"group":"G","priority":5}"#);
    w.pull(&mut c, "P1", r#"{"batch":1,"group":"G","priority":1}"#);
    for _ in 0..3 {
        w.store("s.a", b"1");
    }
    let out = w.poll(&mut c);
    let to: Vec<&str> = out.iter().map(|o| o.to.as_str()).collect();
    assert_eq!(to, vec!["P1", "P5", "P5"]);
}
