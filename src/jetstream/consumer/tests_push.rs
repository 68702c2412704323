//! Push consumer tests: interest, idle heartbeats, flow control, pause, inactivity,
//! configuration updates. Checked against nats-server 2.14.0: the idle heartbeat bytes
//! (with and without `Nats-Consumer-Stalled`), and that 300 KiB messages stall after 7
//! deliveries under flow control (testdata/reference_statuses.py).

use super::tests_support::*;
use crate::jetstream::api::GoTime;

#[test]
fn delivers_only_with_interest() {
    let mut w = World::new();
    w.store("a", b"1");
    let mut c = w.consumer(push_cfg());
    assert!(w.poll(&mut c).is_empty());
    assert!(!c.stats(&mut w.env).push_bound);
    w.listen("D");
    assert_eq!(seqs(&w.poll(&mut c)), vec![1]);
    assert!(c.stats(&mut w.env).push_bound);
    w.unlisten("D");
    w.store("a", b"2");
    assert!(w.poll(&mut c).is_empty());
    assert_eq!(c.stats(&mut w.env).num_pending, 1);
}

#[test]
fn idle_heartbeats() {
    let mut w = World::new();
    w.listen("D");
    w.store("a", b"1");
    let mut cfg = push_cfg();
    cfg.idle_heartbeat = 1_000_000_000;
    cfg.ack_wait = 30_000_000_000;
    let mut c = w.consumer(cfg);
    assert_eq!(seqs(&w.poll(&mut c)), vec![1]);
    assert!(statuses(&w.tick_after(&mut c, ms(900))).is_empty());
    let out = w.tick_after(&mut c, ms(100));
    assert_eq!(
        statuses(&out),
        vec!["NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1\r\nNats-Last-Stream: 1\r\n\r\n"]
    );
    assert_eq!(out[0].to, "D");
    // A delivery restarts the idle interval.
    w.advance(ms(500));
    w.store("a", b"2");
    assert_eq!(seqs(&w.poll(&mut c)), vec![2]);
    assert!(statuses(&w.tick_after(&mut c, ms(900))).is_empty());
    let out = w.tick_after(&mut c, ms(100));
    assert_eq!(statuses(&out).len(), 1, "{out:?}");
    // No interest, no heartbeat.
    w.unlisten("D");
    assert!(w.tick_after(&mut c, secs(1)).is_empty());
}

#[test]
fn flow_control_stalls_until_answered() {
    let mut w = World::new();
    w.listen("D");
    let big = vec![b'x'; 300 * 1024];
    for _ in 0..10 {
        w.store("a", &big);
    }
    let mut cfg = push_cfg();
    cfg.flow_control = true;
    cfg.idle_heartbeat = 1_000_000_000;
    let mut c = w.consumer(cfg);
    let out = w.poll(&mut c);
    // The window starts at 2 MiB: a request once over half of it, a stall once over it.
    let fc: Vec<&Out> = out
        .iter()
        .filter(|o| o.hdr.starts_with(b"NATS/1.0 100 FlowControl"))
        .collect();
    assert_eq!(fc.len(), 1);
    assert_eq!(fc[0].hdr_str(), "NATS/1.0 100 FlowControl Request\r\n\r\n");
    assert_eq!(fc[0].to, "D");
    let fc_reply = fc[0].reply.clone();
    assert_eq!(fc_reply.len(), "$JS.FC.S.C.".len() + 4);
    let n = seqs(&out).len();
    assert_eq!(n, 7, "stalled past 2 MiB");
    assert!(w.poll(&mut c).is_empty());
    // While stalled the heartbeat names the flow control reply.
    let hb = w.tick_after(&mut c, secs(1));
    assert_eq!(
        statuses(&hb),
        vec![format!(
            "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\nNats-Last-Stream: 7\r\nNats-Consumer-Stalled: {fc_reply}\r\n\r\n"
        )]
    );
    // A stale answer does nothing; the right one resumes (and widens the window).
    let now = w.now();
    c.on_flow_control_reply(&mut w.env, "$JS.FC.S.C.zzzz", None, now);
    assert!(w.poll(&mut c).is_empty());
    c.on_flow_control_reply(&mut w.env, &fc_reply, None, now);
    assert_eq!(seqs(&w.poll(&mut c)), vec![8, 9, 10]);
}

#[test]
fn pause_and_resume() {
    let mut w = World::new();
    w.listen("D");
    w.listen("$JS.EVENT.ADVISORY.CONSUMER.PAUSE.S.C");
    w.store("a", b"1");
    let mut c = w.consumer(push_cfg());
    let now = w.now();
    let until = GoTime(w.env.clock_now() + 2_000_000_000);
    c.pause(Some(until), &mut w.env, now);
    let adv = w.take();
    let v: serde_json::Value = serde_json::from_slice(&adv[0].payload).unwrap();
    assert_eq!(
        (v["type"].as_str(), v["paused"].as_bool()),
        (Some("io.nats.jetstream.advisory.v1.consumer_pause"), Some(true))
    );
    assert_eq!(v["pause_until"].as_str(), Some(until.format().as_str()));
    assert!(w.poll(&mut c).is_empty());
    let st = c.stats(&mut w.env);
    assert!(st.paused);
    assert_eq!(st.pause_remaining, 2_000_000_000);
    assert_eq!(c.next_deadline(), Some(now + secs(2)));
    let out = w.tick_after(&mut c, secs(2));
    assert_eq!(seqs(&out), vec![1]);
    let adv: Vec<_> = out.iter().filter(|o| o.to.contains("PAUSE")).collect();
    let v: serde_json::Value = serde_json::from_slice(&adv[0].payload).unwrap();
    assert_eq!(v["paused"].as_bool(), Some(false));
    assert!(!c.stats(&mut w.env).paused);
    // Resume early with None.
    let (now, t) = (w.now(), w.env.clock_now());
    c.pause(Some(GoTime(t + 60_000_000_000)), &mut w.env, now);
    w.store("a", b"2");
    assert!(seqs(&w.poll(&mut c)).is_empty());
    let now = w.now();
    c.pause(None, &mut w.env, now);
    assert_eq!(seqs(&w.poll(&mut c)), vec![2]);
}

#[test]
fn push_inactivity_counts_from_lost_interest() {
    let mut w = World::new();
    w.listen("D");
    let mut cfg = push_cfg();
    cfg.inactive_threshold = 1_000_000_000;
    let mut c = w.consumer(cfg);
    w.advance(secs(5));
    assert!(!w.inactive(&c), "interest");
    w.tick_after(&mut c, ms(1));
    w.unlisten("D");
    w.advance(ms(900));
    assert!(!w.inactive(&c));
    assert!(c.next_deadline().unwrap() <= w.now() + ms(101));
    w.advance(ms(101));
    assert!(w.inactive(&c));
}

#[test]
fn update_config_applies_limits_and_filters() {
    let mut w = World::new();
    w.listen("D");
    for s in ["a", "b", "a", "b"] {
        w.store(s, b"1");
    }
    let mut cfg = push_cfg();
    cfg.max_ack_pending = 1;
    cfg.filter_subject = "a".into();
    let mut c = w.consumer(cfg.clone());
    assert_eq!(seqs(&w.poll(&mut c)), vec![1]);
    cfg.max_ack_pending = 10;
    cfg.filter_subject = String::new();
    let now = w.now();
    c.update_config(cfg.clone(), &mut w.env, now);
    assert_eq!(c.config(), &cfg);
    assert_eq!(seqs(&w.poll(&mut c)), vec![2, 3, 4]);
}

trait ClockNow {
    fn clock_now(&self) -> i64;
}
impl ClockNow for TestEnv {
    fn clock_now(&self) -> i64 {
        super::ConsumerEnv::now_ns(self)
    }
}
