//! Ack protocol tests: ack policies and floors, double acks, redelivery after ack wait
//! and backoff, max deliver, NAK (with delays), TERM, WPI, +NXT, ack metrics.

use super::tests_support::*;
use crate::jetstream::api::config::AckPolicy;

fn world(n: usize) -> World {
    let mut w = World::new();
    for i in 0..n {
        w.store(&format!("s.{i}"), b"x");
    }
    w.listen("D");
    w
}

fn floors(w: &mut World, c: &mut super::Consumer) -> (u64, u64, usize) {
    let st = c.stats(&mut w.env);
    (st.ack_floor.stream_seq, st.ack_floor.consumer_seq, st.num_ack_pending)
}

#[test]
fn explicit_acks_move_the_floor_in_order() {
    let mut w = world(4);
    let mut c = w.consumer(push_cfg());
    let out = w.poll(&mut c);
    // (which delivery to ack, floor after: stream, consumer, pending)
    let steps = [(1, (0, 0, 3)), (0, (2, 2, 2)), (3, (2, 2, 1)), (2, (4, 4, 0))];
    for (i, want) in steps {
        assert_eq!(w.ack(&mut c, &out[i], "+ACK"), vec![out[i].sseq()]);
        assert_eq!(floors(&mut w, &mut c), want, "after acking delivery {i}");
    }
    // A second ack of the same message changes nothing.
    w.ack(&mut c, &out[1], "");
    assert_eq!(floors(&mut w, &mut c), (4, 4, 0));
    assert!(c.stats(&mut w.env).ack_floor.last_active.is_some());
}

#[test]
fn ack_all_acks_everything_below() {
    let mut w = world(5);
    let mut cfg = push_cfg();
    cfg.ack_policy = AckPolicy::All;
    let mut c = w.consumer(cfg);
    let out = w.poll(&mut c);
    assert_eq!(w.ack(&mut c, &out[2], "+OK"), vec![1, 2, 3]);
    assert_eq!(floors(&mut w, &mut c), (3, 3, 2));
    // Acks below the floor are ignored.
    assert!(w.ack(&mut c, &out[0], "").is_empty());
    assert_eq!(w.ack(&mut c, &out[4], ""), vec![4, 5]);
    assert_eq!(floors(&mut w, &mut c), (5, 5, 0));
}

#[test]
fn double_ack_gets_an_empty_reply() {
    let mut w = world(2);
    let mut c = w.consumer(push_cfg());
    let out = w.poll(&mut c);
    let now = w.now();
    c.on_ack(&mut w.env, &out[0].reply, "_INBOX.a", b"+ACK", now);
    let r = w.take();
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].to.as_str(), r[0].payload.len(), r[0].hdr.len()),
        ("_INBOX.a", 0, 0)
    );
    // An ack beyond what was delivered is refused silently; not an ack subject: ignored.
    c.on_ack(&mut w.env, "$JS.ACK.S.C.1.9.9.0.0", "_INBOX.b", b"", now);
    c.on_ack(&mut w.env, "$JS.ACK.bogus", "_INBOX.c", b"", now);
    assert!(w.take().is_empty());
    assert_eq!(floors(&mut w, &mut c).2, 1);
}

#[test]
fn redelivery_after_ack_wait_lowest_first_before_new() {
    let mut w = world(3);
    let mut c = w.consumer(push_cfg());
    let out = w.poll(&mut c);
    w.ack(&mut c, &out[1], "");
    assert!(w.tick_after(&mut c, ms(900)).is_empty());
    w.store("s.new", b"n");
    // Redeliveries (1, 3) before the new message (4).
    let out = w.tick_after(&mut c, ms(200));
    assert_eq!(seqs(&out), vec![1, 3, 4]);
    assert_eq!(out.iter().map(|o| o.dc()).collect::<Vec<_>>(), vec![2, 2, 1]);
    let st = c.stats(&mut w.env);
    assert_eq!(st.num_redelivered, 2);
    assert_eq!(st.delivered.consumer_seq, 6);
}

#[test]
fn backoff_steps_per_delivery() {
    let mut w = world(1);
    let mut cfg = push_cfg();
    cfg.backoff = vec![1_000_000_000, 3_000_000_000];
    let mut c = w.consumer(cfg);
    assert_eq!(seqs(&w.poll(&mut c)), vec![1]);
    assert_eq!(seqs(&w.tick_after(&mut c, ms(1010))), vec![1], "first step: 1s");
    // Second wait: 3s.
    let mut got = Vec::new();
    for _ in 0..29 {
        let out = w.tick_after(&mut c, ms(100));
        got.extend(seqs(&out));
    }
    assert!(got.is_empty(), "not before 3s: {got:?}");
    assert_eq!(seqs(&w.tick_after(&mut c, ms(120))), vec![1]);
    assert_eq!(seqs(&w.tick_after(&mut c, ms(3010))), vec![1], "last step repeats");
    assert!(c.next_deadline().unwrap() <= w.now() + ms(3010));
}

#[test]
fn max_deliver_drops_and_advises() {
    let mut w = world(1);
    w.listen("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.C");
    let mut cfg = push_cfg();
    cfg.max_deliver = 2;
    let mut c = w.consumer(cfg);
    assert_eq!(seqs(&w.poll(&mut c)), vec![1]);
    assert_eq!(seqs(&w.tick_after(&mut c, ms(1010))), vec![1]);
    let out = w.tick_after(&mut c, ms(1010));
    assert!(seqs(&out).is_empty());
    let adv: Vec<_> = out.iter().filter(|o| o.to.contains("MAX_DELIVERIES")).collect();
    assert_eq!(adv.len(), 1);
    let v: serde_json::Value = serde_json::from_slice(&adv[0].payload).unwrap();
    assert_eq!(v["type"], "io.nats.jetstream.advisory.v1.max_deliver");
    assert_eq!((v["stream"].as_str(), v["consumer"].as_str()), (Some("S"), Some("C")));
    assert_eq!((v["stream_seq"].as_u64(), v["deliveries"].as_u64()), (Some(1), Some(2)));
    assert!(v.get("domain").is_none());
    assert_eq!(v["id"].as_str().map(str::len), Some(22));
    assert!(w.tick_after(&mut c, secs(5)).is_empty());
    assert_eq!(c.stats(&mut w.env).num_ack_pending, 0);
    // Interest retention still keeps it (it was never acked).
    assert!(c.needs(1, "s.0"));
}

#[test]
fn nak_redelivers_now_or_after_delay() {
    let mut w = world(3);
    w.listen("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.C");
    let mut c = w.consumer(push_cfg());
    let out = w.poll(&mut c);
    w.ack(&mut c, &out[0], "-NAK");
    let again = w.poll(&mut c);
    let adv: Vec<_> = again.iter().filter(|o| o.to.contains("MSG_NAKED")).collect();
    assert_eq!(adv.len(), 1);
    assert_eq!(seqs(&again), vec![1]);
    assert_eq!(again.iter().find(|o| o.is_delivery()).unwrap().dc(), 2);
    // Delays: JSON and Go duration.
    w.ack(&mut c, &out[1], r#"-NAK {"delay": 2000000000}"#);
    w.ack(&mut c, &out[2], "-NAK 500ms");
    assert!(seqs(&w.poll(&mut c)).is_empty());
    let mut got = Vec::new();
    for _ in 0..15 {
        got.push(seqs(&w.tick_after(&mut c, ms(100))));
    }
    let when = |s: u64| got.iter().position(|v| v.contains(&s));
    assert_eq!(when(3), Some(4), "500 ms");
    assert_eq!(when(2), None);
    let mut later = Vec::new();
    for _ in 0..6 {
        later.extend(seqs(&w.tick_after(&mut c, ms(100))));
    }
    assert!(later.contains(&2), "2 s");
}

#[test]
fn term_stops_redelivery_with_reason() {
    let mut w = world(1);
    w.listen("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.C");
    let mut c = w.consumer(push_cfg());
    let out = w.poll(&mut c);
    assert_eq!(w.ack(&mut c, &out[0], "+TERM bad payload"), vec![1]);
    let adv = w.take();
    assert_eq!(adv.len(), 1);
    let v: serde_json::Value = serde_json::from_slice(&adv[0].payload).unwrap();
    assert_eq!(v["type"], "io.nats.jetstream.advisory.v1.terminated");
    assert_eq!(v["reason"], "bad payload");
    assert_eq!(
        (v["consumer_seq"].as_u64(), v["deliveries"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(seqs(&w.tick_after(&mut c, secs(2))).is_empty());
    assert!(!c.needs(1, "s.0"));
}

#[test]
fn wpi_restarts_the_ack_timer() {
    let mut w = world(1);
    let mut c = w.consumer(push_cfg());
    let out = w.poll(&mut c);
    w.advance(ms(800));
    w.ack(&mut c, &out[0], "+WPI");
    assert!(seqs(&w.tick_after(&mut c, ms(300))).is_empty(), "1.1 s after delivery");
    let mut got = Vec::new();
    for _ in 0..10 {
        got.extend(seqs(&w.tick_after(&mut c, ms(100))));
    }
    assert_eq!(got, vec![1], "1 s after the WPI");
}

#[test]
fn ack_next_acks_and_pulls() {
    let mut w = world(3);
    let mut c = w.consumer(pull_cfg());
    let out = w.pull(&mut c, "_INBOX.1", "");
    assert_eq!(seqs(&out), vec![1]);
    w.listen("_INBOX.2");
    let now = w.now();
    let acked = c.on_ack(&mut w.env, &out[0].reply, "_INBOX.2", b"+NXT {\"batch\":2}", now);
    assert_eq!(acked, vec![1]);
    let out = w.poll(&mut c);
    assert_eq!(seqs(&out), vec![2, 3]);
    assert!(
        out.iter().all(|o| o.to == "_INBOX.2"),
        "no empty double-ack reply for +NXT"
    );
}

#[test]
fn sampled_acks_publish_the_metric() {
    let mut w = world(1);
    w.listen("$JS.EVENT.METRIC.CONSUMER.ACK.S.C");
    let mut cfg = push_cfg();
    cfg.sample_freq = "100%".into();
    let mut c = w.consumer(cfg);
    let out = w.poll(&mut c);
    w.advance(ms(250));
    w.ack(&mut c, &out[0], "+ACK");
    let m = w.take();
    assert_eq!(m.len(), 1);
    let v: serde_json::Value = serde_json::from_slice(&m[0].payload).unwrap();
    assert_eq!(v["type"], "io.nats.jetstream.metric.v1.consumer_ack");
    assert_eq!(v["ack_time"].as_i64(), Some(250_000_000));
}

#[test]
fn flow_control_ack_policy_acks_by_fc_reply() {
    let mut w = world(3);
    let mut cfg = push_cfg();
    cfg.ack_policy = AckPolicy::FlowControl;
    cfg.ack_wait = 0;
    cfg.flow_control = true;
    cfg.idle_heartbeat = 1_000_000_000;
    cfg.max_ack_pending = 100;
    let mut c = w.consumer(cfg);
    assert_eq!(seqs(&w.poll(&mut c)).len(), 3);
    // Idle: the heartbeat goes out with a flow control request (pending acks).
    let out = w.tick_after(&mut c, secs(1));
    let fc = out
        .iter()
        .find(|o| o.hdr.starts_with(b"NATS/1.0 100 FlowControl"))
        .unwrap();
    assert!(fc.reply.starts_with("$JS.FC.S.C."));
    let now = w.now();
    let acked = c.on_flow_control_reply(
        &mut w.env,
        &fc.reply.clone(),
        Some(b"NATS/1.0\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 3\r\n\r\n"),
        now,
    );
    assert_eq!(acked, vec![1, 2, 3]);
    assert_eq!(floors(&mut w, &mut c), (3, 3, 0));
}

#[test]
fn hostile_ack_subjects_do_not_panic() {
    let mut w = world(2);
    let mut cfg = push_cfg();
    cfg.flow_control = true;
    cfg.idle_heartbeat = 1_000_000_000;
    let mut c = w.consumer(cfg);
    let out = w.poll(&mut c);
    w.ack(&mut c, &out[1], "");
    let now = w.now();
    let max = u64::MAX;
    for subj in [
        format!("$JS.ACK.S.C.1.{max}.{max}.0.0"),
        format!("$JS.ACK.S.C.{max}.1.{max}.{max}.{max}"),
        "$JS.ACK.S.C.1.1.1.-5.0".to_string(),
    ] {
        for body in [
            "",
            "-NAK {\"delay\": 9223372036854775807}",
            "-NAK -9999h",
            "+TERM",
            "+WPI",
            "+ACK",
        ] {
            c.on_ack(&mut w.env, &subj, "r", body.as_bytes(), now);
        }
    }
    w.tick_after(&mut c, secs(5));
    let _ = c.stats(&mut w.env);
}
