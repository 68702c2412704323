//! Message tracing in the sans-IO core: one event per traced message however many
//! shards deliver it, the legs of a trace reported in any order, the wait for a missing
//! part, stream imports reported on shadow subjects from other shards, and bad header
//! blocks (FEATURES.md §20).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::super::tests::World;
use super::{Legs, PART_WAIT};
use crate::auth::users::{ConfigAuthenticator, PasswordUser, UserDirectory};
use crate::core::accounts::links::{Rewrite, StreamLink};
use crate::core::client::ConnKey;
use crate::core::config::CoreConfig;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A world whose table has a system account (trace events need one), `$G`, and
/// accounts A and B (A's `feed.>` imported by B under `a.`, allowing tracing), with users
/// `a` and `b`; `system: false` leaves the system account out.
fn world(n: usize, system: bool) -> World {
    let mut w = World::new(n, CoreConfig::default());
    let t = w.shared.accounts.install(|b| {
        let g = b.plain("$G");
        b.add(g);
        if system {
            let s = b.plain("$SYS");
            let id = s.id;
            b.add(s);
            b.set_system(Some(id));
        }
        let mut a = b.plain("A");
        let bb = b.plain("B");
        a.stream_links.push(StreamLink {
            from: b"feed.>".to_vec().into(),
            importer: bb.id,
            rewrite: Rewrite::Prefix(b"a.".to_vec().into()),
            allow_trace: true,
        });
        b.add(a);
        b.add(bb);
    });
    let mut dir = UserDirectory::default();
    for (name, acc) in [("a", "A"), ("b", "B")] {
        dir.users.insert(
            name.into(),
            PasswordUser {
                name: name.into(),
                password: "p".into(),
                account: t.by_name(acc).unwrap().id,
                permissions: None,
                conn_types: Vec::new(),
                proxy_required: false,
            },
        );
    }
    let cfg = Arc::new(CoreConfig {
        authenticator: Arc::new(ConfigAuthenticator::new(dir)),
        ..CoreConfig::default()
    });
    for s in &mut w.shards {
        s.reconfigure(cfg.clone(), w.now);
    }
    w
}

fn login(w: &mut World, shard: usize, user: &str, name: &str, subs: &str) -> ConnKey {
    let (_, k) = w.connect(
        shard,
        &format!(r#"{{"verbose":false,"pedantic":false,"headers":true,"user":"{user}","pass":"p","name":"{name}"}}"#),
    );
    w.send(shard, k, &format!("{subs}PING\r\n"));
    assert_eq!(w.take(shard, k), "PONG\r\n", "{user} logs in");
    k
}

fn hpub(subject: &str, hdrs: &[&str], payload: &str) -> String {
    let mut h = String::from("NATS/1.0\r\n");
    for l in hdrs {
        h.push_str(l);
        h.push_str("\r\n");
    }
    h.push_str("\r\n");
    format!(
        "HPUB {subject} {} {}\r\n{h}{payload}\r\n",
        h.len(),
        h.len() + payload.len()
    )
}

/// The trace events in a connection's output (`MSG <trace subject> ...` frames).
fn events(out: &str, subject: &str) -> Vec<Value> {
    let mut found = Vec::new();
    let mut rest = out;
    let head = format!("MSG {subject} ");
    while let Some(i) = rest.find(&head) {
        let after = &rest[i..];
        let nl = after.find("\r\n").unwrap();
        let body = &after[nl + 2..];
        let end = body.find("\r\n").unwrap();
        found.push(serde_json::from_str(&body[..end]).unwrap());
        rest = &body[end..];
    }
    found
}

/// (type, name or account, sub) of the steps of an event, sorted after the first.
fn steps(ev: &Value) -> Vec<String> {
    let mut v: Vec<String> = ev["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let t = e["type"].as_str().unwrap();
            match t {
                "eg" => format!(
                    "eg {} {} {}{}",
                    e["name"].as_str().unwrap_or(""),
                    e["sub"].as_str().unwrap_or(""),
                    e["acc"].as_str().unwrap_or(""),
                    e["error"].as_str().map(|x| format!(" ({x})")).unwrap_or_default()
                ),
                "se" => format!("se {} {}", e["acc"].as_str().unwrap(), e["to"].as_str().unwrap()),
                _ => format!("{t} {}", e["subj"].as_str().or(e["to"].as_str()).unwrap_or("")),
            }
        })
        .collect();
    v[1..].sort();
    v
}

#[test]
fn one_event_for_deliveries_on_every_shard() {
    for n in [1, 3] {
        let mut w = world(n, true);
        let mon = login(&mut w, 0, "b", "mon", "SUB trc 1\r\n");
        let subs: Vec<(usize, ConnKey)> = (0..3)
            .map(|i| (i % n, login(&mut w, i % n, "b", &format!("s{i}"), "SUB foo 1\r\n")))
            .collect();
        let p = login(&mut w, n - 1, "b", "pub", "");
        w.send(n - 1, p, &hpub("foo", &["Nats-Trace-Dest: trc"], "hi"));
        for (s, k) in &subs {
            assert!(
                w.take(*s, *k).contains("Nats-Trace-Dest: trc\r\n\r\nhi"),
                "{n} shards: delivered"
            );
        }
        let evs = events(&w.take(0, mon), "trc");
        assert_eq!(evs.len(), 1, "{n} shards: one event");
        assert_eq!(
            steps(&evs[0]),
            ["in foo", "eg s0 foo ", "eg s1 foo ", "eg s2 foo "],
            "{n} shards"
        );
        assert_eq!(evs[0]["events"][0]["name"], "pub");
        assert_eq!(evs[0]["request"]["msgsize"], 36);
    }
}

#[test]
fn trace_only_delivers_nowhere_and_reports_everywhere() {
    let mut w = world(3, true);
    let mon = login(&mut w, 1, "b", "mon", "SUB trc 1\r\n");
    let s0 = login(&mut w, 0, "b", "s0", "SUB foo 1\r\n");
    let s2 = login(&mut w, 2, "b", "s2", "SUB foo q 1\r\n");
    let p = login(&mut w, 1, "b", "pub", "");
    w.send(
        1,
        p,
        &hpub("foo", &["Nats-Trace-Dest: trc", "Nats-Trace-Only: true"], "x"),
    );
    assert_eq!(w.take(0, s0), "");
    assert_eq!(w.take(2, s2), "");
    let evs = events(&w.take(1, mon), "trc");
    assert_eq!(evs.len(), 1);
    assert_eq!(steps(&evs[0]), ["in foo", "eg s0 foo ", "eg s2 foo "]);
}

#[test]
fn a_queue_message_picked_again_on_a_third_shard_is_in_the_event() {
    let mut w = world(3, true);
    let mon = login(&mut w, 1, "b", "mon", "SUB trc 1\r\n");
    let gone = login(&mut w, 1, "b", "gone", "SUB foo q 1\r\n");
    let p = login(&mut w, 2, "b", "pub", "");
    // Shard 2 knows one member (on shard 1) and sends the message there; meanwhile a
    // member joins on shard 0 and the one on shard 1 leaves, before shard 1 reads the
    // message: shard 1 picks again (shard 0) and the trace gets a leg more, whose part
    // reaches the owner before the part of the leg that made it.
    let now = w.now;
    w.shards[2].input(p, hpub("foo", &["Nats-Trace-Dest: trc"], "q").as_bytes(), now);
    let m = w.shards[0].accept(super::super::tests::peer(), now);
    let connect = r#"CONNECT {"verbose":false,"pedantic":false,"headers":true,"user":"b","pass":"p","name":"m0"}"#;
    w.shards[0].input(m, format!("{connect}\r\nSUB foo q 1\r\n").as_bytes(), now);
    w.shards[1].disconnected(gone, crate::core::client::ClosedState::ClientClosed, now);
    w.shards[1].poll_mesh(now);
    w.pump();
    assert!(w.take(0, m).contains("Nats-Trace-Dest: trc\r\n\r\nq"), "picked again");
    let evs = events(&w.take(1, mon), "trc");
    assert_eq!(evs.len(), 1);
    assert_eq!(steps(&evs[0]), ["in foo", "eg m0 foo "], "the second pick reported");
}

#[test]
fn a_missing_part_is_waited_for_then_left_out() {
    let mut w = world(2, true);
    let mon = login(&mut w, 0, "b", "mon", "SUB trc 1\r\n");
    let _ = login(&mut w, 1, "b", "far", "SUB foo 1\r\n");
    let p = login(&mut w, 0, "b", "pub", "");
    // Shard 1 does not run: its part cannot come.
    w.shards[0].input(p, hpub("foo", &["Nats-Trace-Dest: trc"], "x").as_bytes(), w.now);
    assert_eq!(w.take(0, mon), "", "waiting for shard 1");
    let deadline = w.shards[0].next_deadline().unwrap();
    assert!(deadline <= w.now + PART_WAIT);
    let later = w.now + PART_WAIT + Duration::from_millis(1);
    w.shards[0].tick(later);
    let evs = events(&w.take(0, mon), "trc");
    assert_eq!(evs.len(), 1);
    assert_eq!(steps(&evs[0]), ["in foo"]);
    // The late part finds nothing to join.
    w.now = later;
    w.pump();
    assert_eq!(w.take(0, mon), "");
}

#[test]
fn legs_may_report_in_any_order() {
    let mut l = Legs::new(vec![1]);
    assert!(!l.report(7, &[]), "a child before its parent");
    assert!(l.report(1, &[7]));
    let mut l = Legs::new(vec![1, 2]);
    assert!(!l.report(1, &[3, 4]));
    assert!(!l.report(4, &[]));
    assert!(!l.report(2, &[]));
    assert!(l.report(3, &[]));
}

#[test]
fn stream_import_on_another_shard_is_reported_on_the_shadow_subject() {
    for n in [1, 2] {
        let mut w = world(n, true);
        let mon = login(&mut w, 0, "a", "mon", "SUB trc 1\r\n");
        let b = login(&mut w, n - 1, "b", "imp", "SUB a.feed.> 1\r\nSUB a.feed.x 2\r\n");
        let a = login(&mut w, 0, "a", "pub", "");
        w.send(0, a, &hpub("feed.x", &["Nats-Trace-Dest: trc"], "f"));
        assert_eq!(w.take(n - 1, b).matches("HMSG a.feed.x").count(), 2);
        let evs = events(&w.take(0, mon), "trc");
        assert_eq!(evs.len(), 1, "{n} shards");
        assert_eq!(
            steps(&evs[0]),
            [
                "in feed.x",
                "eg imp feed.> B",
                "eg imp feed.x B",
                "se B a.feed.x",
                "se B a.feed.x"
            ],
            "{n} shards"
        );
    }
}

#[test]
fn without_a_system_account_no_event_but_trace_only_still_holds_back() {
    let mut w = world(2, false);
    let mon = login(&mut w, 0, "b", "mon", "SUB trc 1\r\nSUB foo 2\r\n");
    let p = login(&mut w, 1, "b", "pub", "");
    w.send(1, p, &hpub("foo", &["Nats-Trace-Dest: trc"], "1"));
    w.send(
        1,
        p,
        &hpub("foo", &["Nats-Trace-Dest: trc", "Nats-Trace-Only: true"], "2"),
    );
    let out = w.take(0, mon);
    assert_eq!(out.matches("HMSG foo").count(), 1, "{out}");
    assert!(!out.contains("MSG trc"), "{out}");
}

#[test]
fn untraced_messages_take_the_plain_path() {
    let mut w = world(2, true);
    let (s, s2) = (0, 1);
    let k = login(&mut w, s, "b", "s", "SUB foo 1\r\nSUB trc 2\r\n");
    let p = login(&mut w, s2, "b", "p", "");
    w.send(s2, p, &hpub("foo", &["Nats-Msg-Id: 1"], "a"));
    w.send(s2, p, "PUB foo 1\r\nb\r\n");
    let out = w.take(s, k);
    assert_eq!(
        out,
        "HMSG foo 1 28 29\r\nNATS/1.0\r\nNats-Msg-Id: 1\r\n\r\na\r\nMSG foo 1 1\r\nb\r\n"
    );
}

/// Mutated header blocks full of trace-like text, published across shards: nothing
/// panics, and every message that is not trace-only (or refused) reaches its subscriber.
#[test]
fn arbitrary_trace_headers_through_the_core() {
    let mut w = world(2, true);
    let sub = login(&mut w, 0, "b", "s", "SUB foo 1\r\nSUB trc 2\r\nSUB acc.trace 3\r\n");
    let p = login(&mut w, 1, "b", "p", "");
    let pieces = [
        "Nats-Trace-Dest: trc",
        "Nats-Trace-Dest: trace disabled",
        "Nats-Trace-Dest:",
        "Nats-Trace-Dest: _GR_.x",
        "Nats-Trace-Dest: a.*",
        "Nats-Trace-Only: true",
        "traceparent: 00-a-b-01",
        "TRACEPARENT: 00-a-b-+1",
        "Accept-Encoding: gzip",
        "Accept-Encoding: snappy",
        "Nats-Trace-Hop: 1",
        ":",
        "x",
    ];
    let mut x: u64 = 88172645463325252;
    for _ in 0..300 {
        let mut hdrs = Vec::new();
        for _ in 0..(x % 4 + 1) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            hdrs.push(pieces[(x % pieces.len() as u64) as usize]);
        }
        w.send(1, p, &hpub("foo", &hdrs, "m"));
    }
    w.advance(PART_WAIT * 2);
    let out = w.take(0, sub);
    assert!(out.contains("HMSG foo 1"), "some delivered");
    assert!(out.contains("MSG trc 2"), "some traced");
}
