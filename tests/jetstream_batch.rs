//! Message counters, atomic batch publish, fast batch publish and message schedules on a
//! real server with a real client (async-nats), on both reactors, on one shard and on
//! several (the stream and its publishers on different shards): totals and PubAcks, a
//! batch stored whole or not at all, flow control, schedules firing into their target
//! and surviving a hard restart.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use async_nats::jetstream::{self, consumer};
use async_nats::HeaderMap;
use common::{rt, Server};
use futures::StreamExt;
use serde_json::Value;
use std::time::Duration;

fn start(r: common::Reactor, shards: &str, dir: &std::path::Path) -> Server {
    Server::start(r, &["--shards", shards, "-js", "-sd", dir.to_str().unwrap()])
}

fn store_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rnats-jsb-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, *v);
    }
    h
}

/// A publish as a request; the reply parsed (an empty reply is `Null`).
async fn request(c: &async_nats::Client, subject: &str, h: &[(&str, &str)], body: &str) -> Value {
    let m = tokio::time::timeout(
        Duration::from_secs(5),
        c.request_with_headers(subject.to_string(), headers(h), body.to_string().into()),
    )
    .await
    .unwrap()
    .unwrap();
    if m.payload.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&m.payload).unwrap()
    }
}

async fn messages(js: &jetstream::Context, name: &str) -> u64 {
    js.get_stream(name).await.unwrap().info().await.unwrap().state.messages
}

/// Counters: totals per subject, big integers, the PubAck's `val`, the errors.
fn counters(r: common::Reactor, shards: &str) {
    let dir = store_dir("counters");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        create(
            &c,
            "CNT",
            r#"{"name":"CNT","subjects":["cnt.>"],"allow_msg_counter":true}"#,
        )
        .await;
        let mut total: i128 = 0;
        for (i, incr) in [5i128, -2, 1_000_000_000_000, -7].into_iter().enumerate() {
            total += incr;
            let ack = request(&c, "cnt.a", &[("Nats-Incr", &incr.to_string())], "").await;
            assert_eq!(ack["seq"], i as u64 + 1);
            assert_eq!(ack["val"], total.to_string());
        }
        // Another subject counts on its own.
        let ack = request(&c, "cnt.b", &[("Nats-Incr", "1")], "").await;
        assert_eq!(ack["val"], "1");
        // Beyond 128 bits.
        let big = "340282366920938463463374607431768211456";
        let ack = request(&c, "cnt.big", &[("Nats-Incr", big)], "").await;
        let ack2 = request(&c, "cnt.big", &[("Nats-Incr", big)], "").await;
        assert_eq!(ack["val"], big);
        assert_eq!(ack2["val"], "680564733841876926926749214863536422912");
        // The stored body is the total.
        let m = js
            .get_stream("CNT")
            .await
            .unwrap()
            .get_last_raw_message_by_subject("cnt.a")
            .await
            .unwrap();
        assert_eq!(&m.payload[..], format!("{{\"val\":\"{total}\"}}").as_bytes());
        for (h, body, code) in [
            (vec![("Nats-Incr", "x")], "", 10171),
            (vec![("Nats-Incr", "1")], "body", 10170),
            (vec![], "", 10169),
            (vec![("Nats-Incr", "1"), ("Nats-Rollup", "sub")], "", 10171),
        ] {
            let ack = request(&c, "cnt.a", &h, body).await;
            assert_eq!(ack["error"]["err_code"], code, "{h:?}");
        }
        assert_eq!(messages(&js, "CNT").await, 7);
    });
}

/// Atomic batches: staged until the commit, stored whole; one failing at the commit
/// stores nothing; the consumers see the batch only once it is committed.
fn atomic(r: common::Reactor, shards: &str) {
    let dir = store_dir("atomic");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        create(&c, "AT", r#"{"name":"AT","subjects":["at.>"],"allow_atomic":true}"#).await;
        let st = js.get_stream("AT").await.unwrap();
        let cons = st
            .create_consumer(consumer::pull::Config {
                durable_name: Some("C".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        for i in 1..=9u64 {
            let seq = i.to_string();
            let ack = request(
                &c,
                "at.x",
                &[("Nats-Batch-Id", "one"), ("Nats-Batch-Sequence", &seq)],
                "m",
            )
            .await;
            assert_eq!(ack, Value::Null, "staged messages are answered empty");
        }
        assert_eq!(messages(&js, "AT").await, 0, "nothing stored before the commit");
        let ack = request(
            &c,
            "at.x",
            &[
                ("Nats-Batch-Id", "one"),
                ("Nats-Batch-Sequence", "10"),
                ("Nats-Batch-Commit", "1"),
            ],
            "last",
        )
        .await;
        assert_eq!(ack["seq"], 10);
        assert_eq!(ack["batch"], "one");
        assert_eq!(ack["count"], 10);
        assert_eq!(messages(&js, "AT").await, 10);
        let mut got = cons.fetch().max_messages(10).messages().await.unwrap();
        let mut n = 0;
        while let Some(m) = got.next().await {
            m.unwrap().ack().await.unwrap();
            n += 1;
        }
        assert_eq!(n, 10);

        // The third message expects a last sequence that is not: the batch is refused
        // at the commit and none of it is stored.
        for (i, extra) in [(1, None), (2, None), (3, Some(("Nats-Expected-Last-Sequence", "1")))] {
            let seq = i.to_string();
            let mut h = vec![("Nats-Batch-Id", "two"), ("Nats-Batch-Sequence", seq.as_str())];
            h.extend(extra);
            assert_eq!(request(&c, "at.y", &h, "m").await, Value::Null);
        }
        let ack = request(
            &c,
            "at.y",
            &[
                ("Nats-Batch-Id", "two"),
                ("Nats-Batch-Sequence", "4"),
                ("Nats-Batch-Commit", "1"),
            ],
            "m",
        )
        .await;
        assert_eq!(ack["error"]["err_code"], 10071);
        assert_eq!(ack["error"]["description"], "wrong last sequence: 12");
        assert_eq!(messages(&js, "AT").await, 10);

        // A gap abandons the batch.
        request(
            &c,
            "at.z",
            &[("Nats-Batch-Id", "three"), ("Nats-Batch-Sequence", "1")],
            "m",
        )
        .await;
        let ack = request(
            &c,
            "at.z",
            &[("Nats-Batch-Id", "three"), ("Nats-Batch-Sequence", "3")],
            "m",
        )
        .await;
        assert_eq!(ack["error"]["err_code"], 10176);
        let ack = request(
            &c,
            "at.z",
            &[
                ("Nats-Batch-Id", "three"),
                ("Nats-Batch-Sequence", "2"),
                ("Nats-Batch-Commit", "1"),
            ],
            "m",
        )
        .await;
        assert_eq!(ack["error"]["err_code"], 10176);
        // End of batch: the commit message is not stored.
        request(
            &c,
            "at.e",
            &[("Nats-Batch-Id", "eob"), ("Nats-Batch-Sequence", "1")],
            "m",
        )
        .await;
        let ack = request(
            &c,
            "at.e",
            &[
                ("Nats-Batch-Id", "eob"),
                ("Nats-Batch-Sequence", "2"),
                ("Nats-Batch-Commit", "eob"),
            ],
            "",
        )
        .await;
        assert_eq!((ack["seq"].as_u64(), ack["count"].as_u64()), (Some(11), Some(1)));
        assert_eq!(messages(&js, "AT").await, 11);
    });
}

/// Atomic batches on a server with small batch limits (`jetstream { limits { batch } }`)
/// and an inactivity timeout.
fn atomic_limits(r: common::Reactor, shards: &str) {
    let dir = store_dir("limits");
    let conf = dir.join("s.conf");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        &conf,
        format!(
            "jetstream {{ store_dir: {:?}, limits {{ batch {{ max_msgs: 3, max_inflight_per_stream: 1, timeout: 1s }} }} }}\n",
            dir.join("js")
        ),
    )
    .unwrap();
    let s = Server::start(r, &["--shards", shards, "-c", conf.to_str().unwrap()]);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        create(&c, "L", r#"{"name":"L","subjects":["l"],"allow_atomic":true}"#).await;
        let mut advisories = c
            .subscribe("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.L")
            .await
            .unwrap();
        c.flush().await.unwrap();
        request(&c, "l", &[("Nats-Batch-Id", "a"), ("Nats-Batch-Sequence", "1")], "m").await;
        let ack = request(&c, "l", &[("Nats-Batch-Id", "b"), ("Nats-Batch-Sequence", "1")], "m").await;
        assert_eq!(ack["error"]["err_code"], 10210);
        request(&c, "l", &[("Nats-Batch-Id", "a"), ("Nats-Batch-Sequence", "2")], "m").await;
        request(&c, "l", &[("Nats-Batch-Id", "a"), ("Nats-Batch-Sequence", "3")], "m").await;
        let ack = request(&c, "l", &[("Nats-Batch-Id", "a"), ("Nats-Batch-Sequence", "4")], "m").await;
        assert_eq!(ack["error"]["description"], "atomic publish batch is too large: 3");
        // Abandoned after the timeout: the slot is free again, the old batch is gone.
        request(&c, "l", &[("Nats-Batch-Id", "c"), ("Nats-Batch-Sequence", "1")], "m").await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let ack = request(
            &c,
            "l",
            &[
                ("Nats-Batch-Id", "c"),
                ("Nats-Batch-Sequence", "2"),
                ("Nats-Batch-Commit", "1"),
            ],
            "m",
        )
        .await;
        assert_eq!(ack["error"]["err_code"], 10176);
        let ack = request(
            &c,
            "l",
            &[
                ("Nats-Batch-Id", "d"),
                ("Nats-Batch-Sequence", "1"),
                ("Nats-Batch-Commit", "1"),
            ],
            "m",
        )
        .await;
        assert_eq!(ack["count"], 1);
        assert_eq!(messages(&js, "L").await, 1);
        let mut reasons = Vec::new();
        for _ in 0..2 {
            let m = tokio::time::timeout(Duration::from_secs(3), advisories.next())
                .await
                .unwrap()
                .unwrap();
            let v: Value = serde_json::from_slice(&m.payload).unwrap();
            assert_eq!(v["type"], "io.nats.jetstream.advisory.v1.stream_batch_abandoned");
            reasons.push((
                v["batch"].as_str().unwrap().to_string(),
                v["reason"].as_str().unwrap().to_string(),
            ));
        }
        assert_eq!(
            reasons,
            vec![("a".into(), "large".into()), ("c".into(), "timeout".into())]
        );
    });
}

/// Fast batches over the wire: flow-control acks every N messages, the commit's PubAck.
fn fast(r: common::Reactor, shards: &str) {
    let dir = store_dir("fast");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        let info = create(&c, "FB", r#"{"name":"FB","subjects":["fb.>"],"allow_batched":true}"#).await;
        assert_eq!(info["config"]["allow_batched"], true);
        let mut inbox = c.subscribe("_FB.>").await.unwrap();
        c.flush().await.unwrap();
        let n = 25u64;
        for i in 1..=n {
            let op = if i == 1 {
                0
            } else if i == n {
                2
            } else {
                1
            };
            let reply = format!("_FB.id1.10.fail.{i}.{op}.$FI");
            c.publish_with_reply("fb.x", reply, "m".into()).await.unwrap();
        }
        c.flush().await.unwrap();
        let mut acks = Vec::new();
        let done = loop {
            let m = tokio::time::timeout(Duration::from_secs(5), inbox.next())
                .await
                .unwrap()
                .unwrap();
            let v: Value = serde_json::from_slice(&m.payload).unwrap();
            if v.get("batch").is_some() {
                break v;
            }
            acks.push((v["type"].as_str().unwrap().to_string(), v["seq"].as_u64().unwrap()));
        };
        assert_eq!(
            acks,
            vec![("ack".to_string(), 0), ("ack".into(), 10), ("ack".into(), 20)]
        );
        assert_eq!((done["seq"].as_u64(), done["count"].as_u64()), (Some(n), Some(n)));
        assert_eq!(done["batch"], "id1");
        assert_eq!(messages(&js, "FB").await, n);
    });
}

/// Schedules: a one-shot publishes into its target and is purged; a repeating one keeps
/// publishing; a consumer on the target receives the scheduled messages.
fn schedules(r: common::Reactor, shards: &str) {
    let dir = store_dir("sched");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        create(
            &c,
            "SCH",
            r#"{"name":"SCH","subjects":["sch.>"],"allow_msg_schedules":true,"allow_msg_ttl":true}"#,
        )
        .await;
        let st = js.get_stream("SCH").await.unwrap();
        let cons = st
            .create_consumer(consumer::pull::Config {
                durable_name: Some("OUT".into()),
                filter_subject: "sch.out".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let at = rfc3339_in(1);
        let ack = request(
            &c,
            "sch.once",
            &[
                ("Nats-Schedule", &format!("@at {at}")),
                ("Nats-Schedule-Target", "sch.out"),
                ("Keep", "me"),
            ],
            "hello",
        )
        .await;
        assert_eq!(ack["seq"], 1);
        let mut got = cons
            .fetch()
            .max_messages(1)
            .expires(Duration::from_secs(4))
            .messages()
            .await
            .unwrap();
        let m = got.next().await.unwrap().unwrap();
        assert_eq!(&m.payload[..], b"hello");
        let h = m.headers.clone().unwrap();
        assert_eq!(h.get("Nats-Scheduler").unwrap().as_str(), "sch.once");
        assert_eq!(h.get("Nats-Schedule-Next").unwrap().as_str(), "purge");
        assert_eq!(h.get("Keep").unwrap().as_str(), "me");
        m.ack().await.unwrap();
        let raw = js.get_stream("SCH").await.unwrap();
        assert!(
            raw.get_last_raw_message_by_subject("sch.once").await.is_err(),
            "the schedule was purged"
        );

        // Repeating, with a TTL on what it publishes.
        request(
            &c,
            "sch.every",
            &[
                ("Nats-Schedule", "@every 1s"),
                ("Nats-Schedule-Target", "sch.tick"),
                ("Nats-Schedule-TTL", "1m"),
            ],
            "tick",
        )
        .await;
        tokio::time::sleep(Duration::from_millis(3500)).await;
        let info = js.get_stream("SCH").await.unwrap().info().await.unwrap().clone();
        let ticks = info.state.messages - 2; // the output of the one-shot and the schedule
        assert!((2..=5).contains(&ticks), "{ticks} ticks");
        let last = raw.get_last_raw_message_by_subject("sch.tick").await.unwrap();
        let hdrs = String::from_utf8_lossy(&base64_headers(&last)).to_string();
        assert!(hdrs.contains("Nats-TTL: 1m"), "{hdrs}");
        assert!(hdrs.contains("Nats-Schedule-Next: 20"), "{hdrs}");
        // A plain message on the schedule's subject ends it.
        request(&c, "sch.every", &[], "stop").await;
        let before = js.get_stream("SCH").await.unwrap().info().await.unwrap().state.messages;
        tokio::time::sleep(Duration::from_millis(2000)).await;
        let after = js.get_stream("SCH").await.unwrap().info().await.unwrap().state.messages;
        assert_eq!(before, after);
    });
}

/// A schedule is a stored message: it fires after the server was killed and restarted.
fn schedule_restart(r: common::Reactor, shards: &str) {
    let dir = store_dir("sched-restart");
    let mut s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        create(
            &c,
            "SR",
            r#"{"name":"SR","subjects":["sr.>"],"allow_msg_schedules":true}"#,
        )
        .await;
        let at = rfc3339_in(3);
        let ack = request(
            &c,
            "sr.s",
            &[
                ("Nats-Schedule", &format!("@at {at}")),
                ("Nats-Schedule-Target", "sr.out"),
            ],
            "later",
        )
        .await;
        assert_eq!(ack["seq"], 1);
    });
    s.stop_with(9);
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        let st = js.get_stream("SR").await.unwrap();
        assert!(st.get_last_raw_message_by_subject("sr.out").await.is_err());
        let deadline = std::time::Instant::now() + Duration::from_secs(8);
        loop {
            if let Ok(m) = st.get_last_raw_message_by_subject("sr.out").await {
                assert_eq!(&m.payload[..], b"later");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the schedule did not fire");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(st.get_last_raw_message_by_subject("sr.s").await.is_err());
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// A committed batch was acknowledged after its write was durable: all of it is there
/// after a hard kill; a batch still staged at the kill is gone.
fn batch_restart(r: common::Reactor, shards: &str) {
    let dir = store_dir("batch-restart");
    let mut s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        create(&c, "BR", r#"{"name":"BR","subjects":["br"],"allow_atomic":true}"#).await;
        for i in 1..=50u64 {
            let seq = i.to_string();
            let mut h = vec![("Nats-Batch-Id", "all"), ("Nats-Batch-Sequence", seq.as_str())];
            if i == 50 {
                h.push(("Nats-Batch-Commit", "1"));
            }
            let ack = request(&c, "br", &h, "payload").await;
            if i == 50 {
                assert_eq!(ack["count"], 50);
            }
        }
        request(
            &c,
            "br",
            &[("Nats-Batch-Id", "open"), ("Nats-Batch-Sequence", "1")],
            "p",
        )
        .await;
    });
    s.stop_with(9);
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        assert_eq!(messages(&js, "BR").await, 50);
        let ack = request(
            &c,
            "br",
            &[
                ("Nats-Batch-Id", "open"),
                ("Nats-Batch-Sequence", "2"),
                ("Nats-Batch-Commit", "1"),
            ],
            "p",
        )
        .await;
        assert_eq!(ack["error"]["err_code"], 10176);
        assert_eq!(messages(&js, "BR").await, 50);
    });
    let _ = std::fs::remove_dir_all(&dir);
}

fn base64_headers(m: &async_nats::jetstream::message::StreamMessage) -> Vec<u8> {
    let mut out = b"NATS/1.0\r\n".to_vec();
    for (k, vs) in m.headers.iter() {
        for v in vs {
            out.extend_from_slice(format!("{k}: {}\r\n", v.as_str()).as_bytes());
        }
    }
    out
}

/// `secs` seconds from now as `YYYY-MM-DDTHH:MM:SSZ`.
fn rfc3339_in(secs: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Create a stream with a raw configuration (the client's config lacks the 2.12+
/// fields); the response.
async fn create(c: &async_nats::Client, name: &str, cfg: &str) -> Value {
    let v = request(c, &format!("$JS.API.STREAM.CREATE.{name}"), &[], cfg).await;
    assert!(v.get("error").is_none(), "{v}");
    v
}

macro_rules! batch_tests {
    ($($name:ident),*) => {
        $(
            mod $name {
                use super::*;
                both_reactors!(one_shard, |r| super::super::$name(r, "1"));
                both_reactors!(four_shards, |r| super::super::$name(r, "4"));
            }
        )*
    };
}

batch_tests!(
    counters,
    atomic,
    atomic_limits,
    fast,
    schedules,
    schedule_restart,
    batch_restart
);
