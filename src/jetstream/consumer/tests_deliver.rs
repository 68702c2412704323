//! Delivery tests: deliver policies, filters, the ack subject, headers only, max ack
//! pending, replay timing, persisted state, interest retention, reset, removals.

use super::tests_support::*;
use super::Consumer;
use crate::jetstream::api::config::{AckPolicy, DeliverPolicy, ReplayPolicy};
use crate::jetstream::api::GoTime;

/// Stream: 1 a.1, 2 a.2, 3 b.1, 4 a.1.
fn world4() -> World {
    let mut w = World::new();
    for s in ["a.1", "a.2", "b.1", "a.1"] {
        w.store(s, b"x");
    }
    w.listen("D");
    w
}

#[test]
fn deliver_policies_and_filters() {
    let ts2 = {
        let mut w = world4();
        w.env.store.load_msg_ts(2)
    };
    type Case = (
        &'static str,
        DeliverPolicy,
        u64,
        Option<i64>,
        Vec<&'static str>,
        Vec<u64>,
    );
    let cases: Vec<Case> = vec![
        ("all", DeliverPolicy::All, 0, None, vec![], vec![1, 2, 3, 4]),
        ("last", DeliverPolicy::Last, 0, None, vec![], vec![4]),
        ("new", DeliverPolicy::New, 0, None, vec![], vec![]),
        ("by seq", DeliverPolicy::ByStartSequence, 3, None, vec![], vec![3, 4]),
        (
            "by time",
            DeliverPolicy::ByStartTime,
            0,
            Some(ts2),
            vec![],
            vec![2, 3, 4],
        ),
        (
            "last per subject",
            DeliverPolicy::LastPerSubject,
            0,
            None,
            vec![],
            vec![2, 3, 4],
        ),
        ("filter a.*", DeliverPolicy::All, 0, None, vec!["a.*"], vec![1, 2, 4]),
        (
            "filters b.1 a.2",
            DeliverPolicy::All,
            0,
            None,
            vec!["b.1", "a.2"],
            vec![2, 3],
        ),
        ("last filtered", DeliverPolicy::Last, 0, None, vec!["b.*"], vec![3]),
        (
            "last per subject a.*",
            DeliverPolicy::LastPerSubject,
            0,
            None,
            vec!["a.*"],
            vec![2, 4],
        ),
        ("filter >", DeliverPolicy::All, 0, None, vec![">"], vec![1, 2, 3, 4]),
    ];
    for (name, dp, seq, ts, filters, want) in cases {
        let mut w = world4();
        let mut cfg = push_cfg();
        cfg.deliver_policy = dp;
        cfg.opt_start_seq = seq;
        cfg.opt_start_time = ts.map(GoTime);
        match filters.as_slice() {
            [] => {}
            [one] => cfg.filter_subject = one.to_string(),
            many => cfg.filter_subjects = many.iter().map(|s| s.to_string()).collect(),
        }
        let mut c = w.consumer(cfg);
        let out = w.poll(&mut c);
        assert_eq!(seqs(&out), want, "{name}");
        // New messages follow, filtered.
        w.store("b.1", b"y");
        w.store("a.9", b"y");
        let out = w.poll(&mut c);
        let expect: Vec<u64> = [5u64, 6]
            .into_iter()
            .filter(|s| match filters.as_slice() {
                [] | [">"] => true,
                f => f
                    .iter()
                    .any(|f| storage::subject::matches(f, if *s == 5 { "b.1" } else { "a.9" })),
            })
            .collect();
        assert_eq!(seqs(&out), expect, "{name}: new messages");
        assert!(out.iter().all(|o| o.to == "D"), "{name}");
    }
}

trait TsOf {
    fn load_msg_ts(&mut self, seq: u64) -> i64;
}
impl TsOf for storage::MemStore {
    fn load_msg_ts(&mut self, seq: u64) -> i64 {
        storage::Store::load_msg(self, seq).unwrap().ts
    }
}

#[test]
fn deliveries_keep_subject_and_carry_the_ack_subject() {
    let mut w = world4();
    let mut c = w.consumer(push_cfg());
    let out = w.poll(&mut c);
    assert_eq!(out.len(), 4);
    let ts1 = w.env.store.load_msg_ts(1);
    assert_eq!(out[0].subject, "a.1");
    assert_eq!(out[0].reply, format!("$JS.ACK.S.C.1.1.1.{ts1}.3"));
    // The pending count counts down to 0.
    let pend: Vec<u64> = out
        .iter()
        .map(|o| super::wire::parse_ack_subject(&o.reply).unwrap().pending)
        .collect();
    assert_eq!(pend, vec![3, 2, 1, 0]);
    let cseq: Vec<u64> = out
        .iter()
        .map(|o| super::wire::parse_ack_subject(&o.reply).unwrap().consumer_seq)
        .collect();
    assert_eq!(cseq, vec![1, 2, 3, 4]);
    assert_eq!(out[2].payload, b"x");
}

#[test]
fn headers_only_strips_payload() {
    let mut w = World::new();
    w.listen("D");
    w.store("a", b"hello");
    w.store_hdr("a", b"NATS/1.0\r\nK: v\r\n\r\n", b"12345678");
    let mut cfg = push_cfg();
    cfg.headers_only = true;
    let mut c = w.consumer(cfg);
    let out = w.poll(&mut c);
    assert_eq!(out[0].hdr_str(), "NATS/1.0\r\nNats-Msg-Size: 5\r\n\r\n");
    assert_eq!(out[1].hdr_str(), "NATS/1.0\r\nK: v\r\nNats-Msg-Size: 8\r\n\r\n");
    assert!(out.iter().all(|o| o.payload.is_empty()));
}

#[test]
fn ack_none_counts_delivered_as_acked() {
    let mut w = world4();
    let mut cfg = push_cfg();
    cfg.ack_policy = AckPolicy::None;
    cfg.ack_wait = 0;
    cfg.max_ack_pending = 0;
    let mut c = w.consumer(cfg);
    c.set_retention_acks(true);
    assert!(c.needs(1, "a.1"));
    let out = w.poll(&mut c);
    assert_eq!(seqs(&out), vec![1, 2, 3, 4]);
    let st = c.stats(&mut w.env);
    assert_eq!((st.ack_floor.stream_seq, st.ack_floor.consumer_seq), (4, 4));
    assert_eq!(st.num_ack_pending, 0);
    assert!(!c.needs(3, "b.1"));
    assert_eq!(c.take_acked(), vec![1, 2, 3, 4]);
    assert_eq!(c.next_deadline(), None);
}

#[test]
fn max_ack_pending_stalls_until_acked() {
    let mut w = world4();
    let mut cfg = push_cfg();
    cfg.max_ack_pending = 2;
    let mut c = w.consumer(cfg);
    let out = w.poll(&mut c);
    assert_eq!(seqs(&out), vec![1, 2]);
    assert!(w.poll(&mut c).is_empty());
    w.ack(&mut c, &out[1], "+ACK");
    assert!(c.wants_poll());
    assert_eq!(seqs(&w.poll(&mut c)), vec![3]);
}

#[test]
fn replay_original_keeps_gaps() {
    let mut w = World::new();
    w.listen("D");
    w.store("a", b"1");
    w.advance(secs(2));
    w.store("a", b"2");
    let mut cfg = push_cfg();
    cfg.replay_policy = ReplayPolicy::Original;
    cfg.ack_wait = 30_000_000_000;
    let mut c = w.consumer(cfg);
    assert_eq!(seqs(&w.poll(&mut c)), vec![1]);
    let due = c.next_deadline().unwrap();
    assert!(due >= w.now() + ms(1900), "held for the original gap");
    assert!(w.tick_after(&mut c, ms(1500)).iter().all(|o| !o.is_delivery()));
    assert_eq!(seqs(&w.tick_after(&mut c, ms(600))), vec![2]);
}

#[test]
fn rate_limit_spaces_deliveries() {
    let mut w = World::new();
    w.listen("D");
    let big = vec![b'x'; 600 * 1024];
    w.store("a", &big);
    w.store("a", &big);
    let mut cfg = push_cfg();
    cfg.rate_limit_bps = 8 * 1024 * 1024; // 1 MiB/s, burst 1 MiB
    let mut c = w.consumer(cfg);
    assert_eq!(seqs(&w.poll(&mut c)), vec![1]);
    let due = c.next_deadline().unwrap();
    assert!(due > w.now() + ms(100), "the second waits for tokens");
    assert_eq!(seqs(&w.tick_after(&mut c, secs(1))), vec![2]);
}

#[test]
fn state_round_trips_through_new() {
    let mut w = world4();
    let mut c = w.consumer(push_cfg());
    let out = w.poll(&mut c);
    w.ack(&mut c, &out[0], "");
    assert!(c.take_dirty());
    assert!(!c.take_dirty());
    let st = c.state();
    assert_eq!((st.delivered.stream, st.delivered.consumer), (4, 4));
    assert_eq!((st.ack_floor.stream, st.ack_floor.consumer), (1, 1));
    assert_eq!(st.pending.keys().copied().collect::<Vec<_>>(), vec![2, 3, 4]);
    let now = w.now();
    let mut c2 = Consumer::new("S", "C", push_cfg(), GoTime(T0), Some(st.clone()), &mut w.env, now);
    assert_eq!(c2.state(), st);
    w.store("a.1", b"z");
    let out = w.poll(&mut c2);
    assert_eq!(seqs(&out), vec![5], "resumes after what was delivered");
    w.ack(&mut c2, &out[0], "");
    // The restored pending entries are redelivered after the ack wait.
    let out = w.tick_after(&mut c2, ms(1010));
    assert_eq!(seqs(&out), vec![2, 3, 4]);
    assert!(out.iter().all(|o| o.dc() == 2));
    assert_eq!(c2.state().redelivered.get(&2), Some(&1));
}

#[test]
fn needs_for_interest_retention() {
    let mut w = world4();
    let mut cfg = push_cfg();
    cfg.filter_subject = "a.*".into();
    cfg.max_ack_pending = 2;
    let mut c = w.consumer(cfg);
    let out = w.poll(&mut c);
    assert_eq!(seqs(&out), vec![1, 2]);
    assert_eq!(w.ack(&mut c, &out[0], ""), vec![1]);
    let cases = [
        (1, "a.1", false),
        (2, "a.2", true),
        (3, "b.1", false),
        (4, "a.1", true),
        (9, "a.x", true),
    ];
    for (seq, subj, want) in cases {
        assert_eq!(c.needs(seq, subj), want, "{seq} {subj}");
    }
}

#[test]
fn reset_to_floor_or_sequence() {
    let mut w = world4();
    let mut c = w.consumer(push_cfg());
    let out = w.poll(&mut c);
    w.ack(&mut c, &out[0], "");
    let now = w.now();
    assert_eq!(c.reset(None, &mut w.env, now), Ok(2));
    assert_eq!(c.stats(&mut w.env).num_ack_pending, 0);
    let out = w.poll(&mut c);
    assert_eq!(seqs(&out), vec![2, 3, 4]);
    assert_eq!(super::wire::parse_ack_subject(&out[0].reply).unwrap().consumer_seq, 1);
    assert_eq!(c.reset(Some(4), &mut w.env, now), Ok(4));
    assert_eq!(seqs(&w.poll(&mut c)), vec![4]);

    let mut cfg = push_cfg();
    cfg.deliver_policy = DeliverPolicy::Last;
    let mut c = w.consumer(cfg);
    let e = c.reset(Some(2), &mut w.env, now).unwrap_err();
    assert_eq!(
        (e.err_code, e.description.as_str()),
        (10204, "invalid reset: not allowed")
    );
    let mut cfg = push_cfg();
    cfg.deliver_policy = DeliverPolicy::ByStartSequence;
    cfg.opt_start_seq = 3;
    let mut c = w.consumer(cfg);
    assert_eq!(
        c.reset(Some(2), &mut w.env, now).unwrap_err().description,
        "invalid reset: below start seq"
    );
    assert_eq!(c.reset(Some(3), &mut w.env, now), Ok(3));
}

#[test]
fn removed_messages_leave_pending_and_floor() {
    let mut w = world4();
    let mut c = w.consumer(push_cfg());
    let out = w.poll(&mut c);
    assert_eq!(out.len(), 4);
    w.env.store.compact_to(3);
    c.on_removed(3);
    let st = c.state();
    assert_eq!(st.pending.keys().copied().collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!((st.ack_floor.stream, st.ack_floor.consumer), (2, 2));
    // A removed message due for redelivery is dropped (terminated), not redelivered.
    w.listen("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.C");
    storage::Store::remove_msg(&mut w.env.store, 4).unwrap();
    let out = w.tick_after(&mut c, ms(1010));
    assert_eq!(seqs(&out), vec![3]);
    let adv: Vec<_> = out.iter().filter(|o| o.to.contains("MSG_TERMINATED")).collect();
    assert_eq!(adv.len(), 1);
    let v: serde_json::Value = serde_json::from_slice(&adv[0].payload).unwrap();
    assert_eq!(v["reason"], "Unacknowledged message was deleted");
    assert_eq!(v["stream_seq"], 4);
}

trait Compact {
    fn compact_to(&mut self, seq: u64);
}
impl Compact for storage::MemStore {
    fn compact_to(&mut self, seq: u64) {
        storage::Store::compact(self, seq).unwrap();
    }
}

#[test]
fn info_delivered_is_the_last_delivery_not_the_scan_position() {
    let mut w = world4();
    let mut cfg = push_cfg();
    cfg.filter_subject = "a.2".into();
    let mut c = w.consumer(cfg);
    assert_eq!(seqs(&w.poll(&mut c)), vec![2]);
    let st = c.stats(&mut w.env);
    assert_eq!((st.delivered.consumer_seq, st.delivered.stream_seq), (1, 2));
    assert_eq!(st.num_pending, 0);
    assert!(st.delivered.last_active.is_some());
}
