//! JetStream with a real client (async-nats' `jetstream`, KV and object store APIs) on
//! both reactors, on one shard and on several (streams and their clients on different
//! shards), including a restart that must keep streams, messages and consumer state.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use common::{rt, Server};
use futures::StreamExt;
use std::time::Duration;

fn start(r: common::Reactor, shards: &str, dir: &std::path::Path) -> Server {
    Server::start(r, &["--shards", shards, "-js", "-sd", dir.to_str().unwrap()])
}

async fn js(s: &Server) -> (async_nats::Client, jetstream::Context) {
    let c = async_nats::connect(s.url()).await.unwrap();
    let ctx = jetstream::new(c.clone());
    (c, ctx)
}

fn store_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rnats-js-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Streams, publish acks, dedupe, expected headers, info, purge.
fn streams_and_publish(r: common::Reactor, shards: &str) {
    let dir = store_dir("streams");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let st = js
            .create_stream(stream::Config {
                name: "ORDERS".into(),
                subjects: vec!["orders.>".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(st.cached_info().config.name, "ORDERS");
        for i in 0..10 {
            let ack = js
                .publish(format!("orders.{i}"), "x".into())
                .await
                .unwrap()
                .await
                .unwrap();
            assert_eq!(ack.sequence, i + 1);
            assert_eq!(ack.stream, "ORDERS");
        }
        // Dedupe within the window: the original sequence, flagged duplicate.
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", "one");
        let a1 = js
            .publish_with_headers("orders.d", h.clone(), "d".into())
            .await
            .unwrap()
            .await
            .unwrap();
        let a2 = js
            .publish_with_headers("orders.d", h, "d".into())
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(a1.sequence, 11);
        assert_eq!(a2.sequence, 11);
        assert!(a2.duplicate);
        // Expected last sequence: wrong → error 10071.
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Expected-Last-Sequence", "5");
        let err = js
            .publish_with_headers("orders.x", h, "x".into())
            .await
            .unwrap()
            .await
            .unwrap_err();
        assert!(err.to_string().contains("wrong last sequence: 11"), "{err}");
        let mut st = js.get_stream("ORDERS").await.unwrap();
        let info = st.info().await.unwrap();
        assert_eq!(info.state.messages, 11);
        assert_eq!(info.state.last_sequence, 11);
        let m = st.get_raw_message(3).await.unwrap();
        assert_eq!(m.subject.as_str(), "orders.2");
        st.purge().await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages, 0);
        // Unknown stream: 10059.
        let err = js.get_stream("NOPE").await.unwrap_err();
        assert!(err.to_string().contains("stream not found"), "{err}");
        js.delete_stream("ORDERS").await.unwrap();
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pull consumers: fetch, ack, redelivery after a nak; push consumers.
fn consumers(r: common::Reactor, shards: &str) {
    let dir = store_dir("consumers");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (c, js) = js(&s).await;
        let st = js
            .create_stream(stream::Config {
                name: "EV".into(),
                subjects: vec!["ev.*".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        for i in 0..20 {
            js.publish(format!("ev.{}", i % 2), format!("m{i}").into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
        let pull = st
            .create_consumer(consumer::pull::Config {
                durable_name: Some("P".into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ..Default::default()
            })
            .await
            .unwrap();
        let mut batch = pull.fetch().max_messages(5).messages().await.unwrap();
        let mut got = Vec::new();
        while let Some(m) = batch.next().await {
            let m = m.unwrap();
            got.push(String::from_utf8(m.payload.to_vec()).unwrap());
            if got.len() == 1 {
                m.ack_with(jetstream::AckKind::Nak(None)).await.unwrap();
            } else {
                m.double_ack().await.unwrap();
            }
        }
        assert_eq!(got, ["m0", "m1", "m2", "m3", "m4"]);
        // The nak'ed message comes first again.
        let mut batch = pull.fetch().max_messages(1).messages().await.unwrap();
        let m = batch.next().await.unwrap().unwrap();
        assert_eq!(&m.payload[..], b"m0");
        assert_eq!(m.info().unwrap().delivered, 2);
        m.double_ack().await.unwrap();
        let mut info = pull.clone();
        let i = info.info().await.unwrap();
        assert_eq!(i.ack_floor.stream_sequence, 5);
        assert_eq!(i.num_pending, 15);
        // Filtered push consumer with a deliver subject.
        let inbox = c.new_inbox();
        let push = st
            .create_consumer(consumer::push::Config {
                deliver_subject: inbox,
                filter_subject: "ev.1".into(),
                ack_policy: consumer::AckPolicy::None,
                ..Default::default()
            })
            .await
            .unwrap();
        let mut msgs = push.messages().await.unwrap();
        for i in 0..10 {
            let m = tokio::time::timeout(Duration::from_secs(5), msgs.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            assert_eq!(m.subject.as_str(), "ev.1");
            assert_eq!(
                String::from_utf8(m.payload.to_vec()).unwrap(),
                format!("m{}", 2 * i + 1)
            );
        }
        let names: Vec<String> = st.consumer_names().map(|n| n.unwrap()).collect().await;
        assert_eq!(names.len(), 2);
        st.delete_consumer("P").await.unwrap();
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Key-value buckets: put, get, history, delete, watch, keys.
fn key_value(r: common::Reactor, shards: &str) {
    let dir = store_dir("kv");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let kv = js
            .create_key_value(kv::Config {
                bucket: "cfg".into(),
                history: 5,
                ..Default::default()
            })
            .await
            .unwrap();
        let mut watch = kv.watch("a.>").await.unwrap();
        kv.put("a.x", "1".into()).await.unwrap();
        kv.put("a.x", "2".into()).await.unwrap();
        kv.put("b", "3".into()).await.unwrap();
        assert_eq!(&kv.get("a.x").await.unwrap().unwrap()[..], b"2");
        assert!(kv.get("nope").await.unwrap().is_none());
        let e = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!((e.key.as_str(), &e.value[..]), ("a.x", &b"1"[..]));
        let hist: Vec<_> = kv
            .history("a.x")
            .await
            .unwrap()
            .map(|e| e.unwrap().revision)
            .collect()
            .await;
        assert_eq!(hist, [1, 2]);
        kv.delete("a.x").await.unwrap();
        assert!(kv.get("a.x").await.unwrap().is_none());
        let mut keys: Vec<String> = kv.keys().await.unwrap().map(|k| k.unwrap()).collect().await;
        keys.sort();
        assert_eq!(keys, ["b"]);
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Object store: an object of several chunks round-trips.
fn object_store_round_trip(r: common::Reactor, shards: &str) {
    let dir = store_dir("obj");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let os = js
            .create_object_store(object_store::Config {
                bucket: "files".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let data: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        os.put("big.bin", &mut &data[..]).await.unwrap();
        let mut obj = os.get("big.bin").await.unwrap();
        let mut back = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut obj, &mut back).await.unwrap();
        assert_eq!(back.len(), data.len());
        assert!(back == data);
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stream `name` on `subject` holding the payloads "0".."n-1" (each publish acked) and
/// a durable pull consumer `durable` on it with explicit acks.
async fn filled_with_durable(
    js: &jetstream::Context,
    name: &str,
    subject: &str,
    n: usize,
    durable: &str,
) -> consumer::Consumer<consumer::pull::Config> {
    let st = js
        .create_stream(stream::Config {
            name: name.into(),
            subjects: vec![subject.into()],
            ..Default::default()
        })
        .await
        .unwrap();
    for i in 0..n {
        js.publish(subject.to_string(), format!("{i}").into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    st.create_consumer(consumer::pull::Config {
        durable_name: Some(durable.into()),
        ack_policy: consumer::AckPolicy::Explicit,
        ..Default::default()
    })
    .await
    .unwrap()
}

/// A restart keeps streams, messages and a durable consumer's ack floor.
fn restart_keeps_state(r: common::Reactor, shards: &str) {
    let dir = store_dir("restart");
    {
        let s = start(r, shards, &dir);
        rt().block_on(async {
            let (_c, js) = js(&s).await;
            let c = filled_with_durable(&js, "KEEP", "keep", 5, "D").await;
            let mut b = c.fetch().max_messages(2).messages().await.unwrap();
            while let Some(m) = b.next().await {
                m.unwrap().double_ack().await.unwrap();
            }
        });
    }
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let mut st = js.get_stream("KEEP").await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages, 5);
        let c: consumer::PullConsumer = st.get_consumer("D").await.unwrap();
        let mut b = c.fetch().max_messages(1).messages().await.unwrap();
        let m = b.next().await.unwrap().unwrap();
        assert_eq!(&m.payload[..], b"2");
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A consumer's `o.dat` follows its state down as well as up: 40 deliveries awaiting
/// acks make it long, acking them all makes it short again (the file is cut to the new
/// state), and a restart reads that state.
fn consumer_state_shrinks(r: common::Reactor, shards: &str) {
    let dir = store_dir("shrink");
    {
        let s = start(r, shards, &dir);
        rt().block_on(async {
            let (_c, js) = js(&s).await;
            let c = filled_with_durable(&js, "SHRINK", "shrink", 40, "D").await;
            let mut held = Vec::new();
            let mut b = c.fetch().max_messages(40).messages().await.unwrap();
            while let Some(m) = b.next().await {
                held.push(m.unwrap());
            }
            assert_eq!(held.len(), 40);
            // Deliveries are written within the consumer's state interval (20 ms).
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            let odat = loop {
                let f = find_file(&dir, "o.dat");
                if let Some(f) = f.filter(|f| std::fs::metadata(f).map_or(0, |m| m.len()) >= 40 * 3) {
                    break f;
                }
                assert!(std::time::Instant::now() < deadline, "o.dat never held 40 pending");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            for m in held {
                m.double_ack().await.unwrap();
            }
            let len = std::fs::metadata(&odat).unwrap().len();
            assert!(len < 20, "o.dat is {len} bytes with nothing pending");
        });
    }
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let st = js.get_stream("SHRINK").await.unwrap();
        let mut c: consumer::PullConsumer = st.get_consumer("D").await.unwrap();
        let info = c.info().await.unwrap();
        assert_eq!(info.num_ack_pending, 0);
        assert_eq!(info.ack_floor.stream_sequence, 40);
        assert_eq!(info.delivered.stream_sequence, 40);
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Plain acks (no confirmation asked) are written within the consumer's state interval:
/// right after a burst of them a clean stop (SIGTERM) still writes them, and the restarted
/// consumer redelivers nothing.
fn plain_acks_survive_a_clean_stop(r: common::Reactor, shards: &str) {
    let dir = store_dir("plainacks");
    {
        let s = start(r, shards, &dir);
        rt().block_on(async {
            let (_c, js) = js(&s).await;
            let cons = filled_with_durable(&js, "PLAIN", "plain", 30, "P").await;
            let mut b = cons.fetch().max_messages(30).messages().await.unwrap();
            let mut n = 0;
            while let Some(m) = b.next().await {
                m.unwrap().ack().await.unwrap();
                n += 1;
            }
            assert_eq!(n, 30);
            // The client's flush only empties its socket buffer (no PING): wait until the
            // consumer has applied every ack, so that the stop comes after them and before
            // the state interval writes them.
            let mut p: consumer::PullConsumer = js.get_stream("PLAIN").await.unwrap().get_consumer("P").await.unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while p.info().await.unwrap().ack_floor.stream_sequence < 30 {
                assert!(std::time::Instant::now() < deadline, "the acks were never applied");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    }
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let mut st = js.get_stream("PLAIN").await.unwrap();
        let state = st.info().await.unwrap().state.clone();
        assert_eq!(
            (state.messages, state.last_sequence),
            (30, 30),
            "messages lost in a clean stop"
        );
        let mut c: consumer::PullConsumer = st.get_consumer("P").await.unwrap();
        let info = c.info().await.unwrap();
        assert_eq!(info.ack_floor.stream_sequence, 30, "acks lost in a clean stop");
        assert_eq!(info.num_ack_pending, 0);
        assert_eq!(info.num_pending, 0);
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first file called `name` under `dir`.
fn find_file(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find_file(&p, name) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
    }
    None
}

/// Work-queue and interest retention: acknowledged messages leave the stream.
fn retention(r: common::Reactor, shards: &str) {
    let dir = store_dir("retention");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let mut wq = js
            .create_stream(stream::Config {
                name: "WQ".into(),
                subjects: vec!["wq".into()],
                retention: stream::RetentionPolicy::WorkQueue,
                ..Default::default()
            })
            .await
            .unwrap();
        for i in 0..5 {
            js.publish("wq", format!("{i}").into()).await.unwrap().await.unwrap();
        }
        let c = wq
            .create_consumer(consumer::pull::Config {
                durable_name: Some("W".into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ..Default::default()
            })
            .await
            .unwrap();
        let mut b = c.fetch().max_messages(2).messages().await.unwrap();
        while let Some(m) = b.next().await {
            m.unwrap().double_ack().await.unwrap();
        }
        assert_eq!(wq.info().await.unwrap().state.messages, 3);

        let mut st = js
            .create_stream(stream::Config {
                name: "INT".into(),
                subjects: vec!["int".into()],
                retention: stream::RetentionPolicy::Interest,
                ..Default::default()
            })
            .await
            .unwrap();
        // Nobody interested yet: the sequence is taken, nothing kept.
        let ack = js.publish("int", "lost".into()).await.unwrap().await.unwrap();
        assert_eq!(ack.sequence, 1);
        assert_eq!(st.info().await.unwrap().state.messages, 0);
        let mut cs = Vec::new();
        for name in ["A", "B"] {
            cs.push(
                st.create_consumer(consumer::pull::Config {
                    durable_name: Some(name.into()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ..Default::default()
                })
                .await
                .unwrap(),
            );
        }
        js.publish("int", "kept".into()).await.unwrap().await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages, 1);
        let ack_one = |c: consumer::PullConsumer| async move {
            let mut b = c.fetch().max_messages(1).messages().await.unwrap();
            let m = b.next().await.unwrap().unwrap();
            assert_eq!(&m.payload[..], b"kept");
            m.double_ack().await.unwrap();
        };
        ack_one(cs[0].clone()).await;
        assert_eq!(st.info().await.unwrap().state.messages, 1);
        ack_one(cs[1].clone()).await;
        assert_eq!(st.info().await.unwrap().state.messages, 0);
        // A message only a deleted consumer still needed goes with it.
        js.publish("int", "again".into()).await.unwrap().await.unwrap();
        ack_one_payload(cs[0].clone(), b"again").await;
        assert_eq!(st.info().await.unwrap().state.messages, 1);
        st.delete_consumer("B").await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages, 0);
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

async fn ack_one_payload(c: consumer::PullConsumer, want: &[u8]) {
    let mut b = c.fetch().max_messages(1).messages().await.unwrap();
    let m = b.next().await.unwrap().unwrap();
    assert_eq!(&m.payload[..], want);
    m.double_ack().await.unwrap();
}

/// Direct gets and pull requests are answered by the stream's and consumer's own
/// subscriptions while those exist, and get "no responders" while they do not, through
/// every change in between (each shard remembers which are served until the registry
/// changes: a stale memory shows as a request that gets no answer at all).
fn served_requests_follow_changes(r: common::Reactor, shards: &str) {
    use async_nats::RequestErrorKind;
    let dir = store_dir("served");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (c, js) = js(&s).await;
        // Served first, so a memory that outlived a change would skip requests that
        // nobody serves any more (they would get no answer).
        let mut cfg = stream::Config {
            name: "DG".into(),
            subjects: vec!["dg.>".into()],
            allow_direct: true,
            ..Default::default()
        };
        js.create_stream(cfg.clone()).await.unwrap();
        js.publish("dg.a", "one".into()).await.unwrap().await.unwrap();
        let get = || c.request("$JS.API.DIRECT.GET.DG.dg.a", "".into());
        let no_responders = |r: Result<async_nats::Message, async_nats::RequestError>| {
            matches!(r, Err(e) if e.kind() == RequestErrorKind::NoResponders)
        };
        for _ in 0..3 {
            assert_eq!(&get().await.unwrap().payload[..], b"one");
        }
        for allow in [false, true, false] {
            cfg.allow_direct = allow;
            js.update_stream(cfg.clone()).await.unwrap();
            for _ in 0..3 {
                let got = get().await;
                if allow {
                    assert_eq!(&got.unwrap().payload[..], b"one");
                } else {
                    assert!(no_responders(got), "allow_direct turned off again");
                }
            }
        }
        // A pull request's messages keep their stored subject (not the reply's), so they
        // are read on a subscription of the reply subject, not through `request`.
        let mut inbox = c.subscribe("pull.inbox").await.unwrap();
        c.flush().await.unwrap();
        let next = || c.request("$JS.API.CONSUMER.MSG.NEXT.DG.C", r#"{"batch":1,"no_wait":true}"#.into());
        let st = js.get_stream("DG").await.unwrap();
        for _ in 0..2 {
            st.create_consumer(consumer::pull::Config {
                durable_name: Some("C".into()),
                ..Default::default()
            })
            .await
            .unwrap();
            c.publish_with_reply("$JS.API.CONSUMER.MSG.NEXT.DG.C", "pull.inbox", r#"{"batch":1}"#.into())
                .await
                .unwrap();
            let m = tokio::time::timeout(Duration::from_secs(5), inbox.next())
                .await
                .expect("the consumer serves its pull request")
                .unwrap();
            assert_eq!((m.subject.as_str(), &m.payload[..]), ("dg.a", &b"one"[..]));
            st.delete_consumer("C").await.unwrap();
            assert!(no_responders(next().await), "the consumer is gone");
        }
        js.delete_stream("DG").await.unwrap();
        assert!(no_responders(get().await), "the stream is gone");
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

macro_rules! js_tests {
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

js_tests!(
    streams_and_publish,
    consumers,
    key_value,
    object_store_round_trip,
    restart_keeps_state,
    consumer_state_shrinks,
    plain_acks_survive_a_clean_stop,
    retention,
    served_requests_follow_changes
);

/// A store directory written by nats-server 2.14 opens in rnats with its stream, every
/// message and the durable consumer's ack floor.
fn reference_store_opens(r: common::Reactor, shards: &str) {
    let dir = store_dir("fromref");
    let sd = dir.to_str().unwrap().to_string();
    {
        let reference = common::reference_server();
        let s = Server::start_cmd(&reference, &["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", &sd]);
        rt().block_on(async {
            let (_c, js) = js(&s).await;
            let st = js
                .create_stream(stream::Config {
                    name: "OLD".into(),
                    subjects: vec!["old.*".into()],
                    ..Default::default()
                })
                .await
                .unwrap();
            for i in 0..50 {
                js.publish(format!("old.{}", i % 5), format!("v{i}").into())
                    .await
                    .unwrap()
                    .await
                    .unwrap();
            }
            let c = st
                .create_consumer(consumer::pull::Config {
                    durable_name: Some("DUR".into()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ..Default::default()
                })
                .await
                .unwrap();
            let mut b = c.fetch().max_messages(10).messages().await.unwrap();
            while let Some(m) = b.next().await {
                m.unwrap().double_ack().await.unwrap();
            }
        });
    }
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let mut st = js.get_stream("OLD").await.unwrap();
        let info = st.info().await.unwrap();
        assert_eq!(info.state.messages, 50);
        assert_eq!(info.config.subjects, ["old.*"]);
        for seq in [1u64, 25, 50] {
            let m = st.get_raw_message(seq).await.unwrap();
            assert_eq!(&m.payload[..], format!("v{}", seq - 1).as_bytes());
        }
        let mut c: consumer::PullConsumer = st.get_consumer("DUR").await.unwrap();
        assert_eq!(c.info().await.unwrap().ack_floor.stream_sequence, 10);
        let mut b = c.fetch().max_messages(1).messages().await.unwrap();
        let m = b.next().await.unwrap().unwrap();
        assert_eq!(&m.payload[..], b"v10");
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

mod reference_store {
    use super::*;
    both_reactors!(opens, |r| super::reference_store_opens(r, "2"));
}

/// Encryption at rest (`jetstream { key }`): no plaintext in the stream's files, and the
/// messages read back after a restart.
fn encrypted_at_rest(r: common::Reactor) {
    let dir = store_dir("enc");
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("js.conf");
    std::fs::write(
        &conf,
        format!(
            "jetstream {{ store_dir: {:?}, key: \"s3cr3t-key\", cipher: aes }}\n",
            dir.join("sd")
        ),
    )
    .unwrap();
    let args = ["--shards", "2", "-c", conf.to_str().unwrap()];
    const MARK: &str = "plaintext-marker-that-must-not-be-on-disk";
    {
        let s = Server::start(r, &args);
        rt().block_on(async {
            let (_c, js) = js(&s).await;
            js.create_stream(stream::Config {
                name: "SEC".into(),
                subjects: vec!["sec".into()],
                ..Default::default()
            })
            .await
            .unwrap();
            for i in 0..20 {
                js.publish("sec", format!("{MARK} {i}").into())
                    .await
                    .unwrap()
                    .await
                    .unwrap();
            }
        });
    }
    let msgs = dir.join("sd/jetstream/$G/streams/SEC/msgs");
    let mut files = 0;
    for e in std::fs::read_dir(&msgs).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        files += 1;
        assert!(
            !bytes.windows(MARK.len()).any(|w| w == MARK.as_bytes()),
            "plaintext on disk"
        );
    }
    assert!(files > 0);
    let s = Server::start(r, &args);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let st = js.get_stream("SEC").await.unwrap();
        let m = st.get_raw_message(20).await.unwrap();
        assert_eq!(&m.payload[..], format!("{MARK} 19").as_bytes());
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(encryption_at_rest, |r| encrypted_at_rest(r));

/// Max age and per-message TTLs expire messages without further traffic.
fn expiry(r: common::Reactor) {
    let dir = store_dir("expiry");
    let s = start(r, "2", &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let mut st = js
            .create_stream(stream::Config {
                name: "AGE".into(),
                subjects: vec!["age".into()],
                max_age: Duration::from_millis(500),
                ..Default::default()
            })
            .await
            .unwrap();
        js.publish("age", "x".into()).await.unwrap().await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages, 1);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(st.info().await.unwrap().state.messages, 0);
        let mut ttl = js
            .create_stream(stream::Config {
                name: "TTL".into(),
                subjects: vec!["ttl".into()],
                allow_message_ttl: true,
                ..Default::default()
            })
            .await
            .unwrap();
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-TTL", "1s");
        js.publish_with_headers("ttl", h, "short".into())
            .await
            .unwrap()
            .await
            .unwrap();
        js.publish("ttl", "kept".into()).await.unwrap().await.unwrap();
        tokio::time::sleep(Duration::from_millis(2200)).await;
        let info = ttl.info().await.unwrap();
        assert_eq!(info.state.messages, 1);
        assert_eq!(info.state.first_sequence, 2);
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(expiry_without_traffic, |r| expiry(r));

/// Operator mode: an account whose JWT has JetStream limits gets JetStream, one without
/// gets `10039 JetStream not enabled for account`.
fn operator_accounts(r: common::Reactor) {
    use nkeys::KeyPair;
    use rnats::auth::jwt::{AccountClaims, Encode, OperatorClaims, UserClaims};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let op = KeyPair::new_operator();
    let sys = KeyPair::new_account();
    let with_js = KeyPair::new_account();
    let without = KeyPair::new_account();
    let mut oc = OperatorClaims::new(op.public_key());
    oc.claims.name = "OP".into();
    oc.nats.system_account = sys.public_key();
    let op_jwt = oc.encode(&op, now).unwrap();
    let acc_jwt = |kp: &KeyPair, js: bool| {
        let mut c = AccountClaims::new(kp.public_key());
        c.claims.name = "acc".into();
        if js {
            c.nats.limits.jetstream.mem_storage = -1;
            c.nats.limits.jetstream.disk_storage = -1;
            c.nats.limits.jetstream.streams = 2;
        }
        c.encode(&op, now).unwrap()
    };
    let dir = store_dir("operator");
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("op.conf");
    std::fs::write(
        &conf,
        format!(
            "operator: {op_jwt}\nsystem_account: {}\nresolver: MEMORY\nresolver_preload: {{\n {}: {}\n {}: {}\n {}: {}\n}}\njetstream {{ store_dir: {:?} }}\n",
            sys.public_key(),
            sys.public_key(),
            acc_jwt(&sys, false),
            with_js.public_key(),
            acc_jwt(&with_js, true),
            without.public_key(),
            acc_jwt(&without, false),
            dir.join("sd"),
        ),
    )
    .unwrap();
    let s = Server::start(r, &["--shards", "2", "-c", conf.to_str().unwrap()]);
    let connect = |acc: &KeyPair| {
        let u = KeyPair::new_user();
        let jwt = UserClaims::new(u.public_key()).encode(acc, now).unwrap();
        let u = std::sync::Arc::new(u);
        let url = s.url();
        async move {
            async_nats::ConnectOptions::with_jwt(jwt, move |nonce| {
                let u = u.clone();
                async move { u.sign(&nonce).map_err(async_nats::AuthError::new) }
            })
            .connect(url)
            .await
            .unwrap()
        }
    };
    rt().block_on(async {
        let js = jetstream::new(connect(&with_js).await);
        js.create_stream(stream::Config {
            name: "OPS".into(),
            subjects: vec!["ops".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        let ack = js.publish("ops", "x".into()).await.unwrap().await.unwrap();
        assert_eq!(ack.sequence, 1);
        js.create_stream(stream::Config {
            name: "OPS2".into(),
            ..Default::default()
        })
        .await
        .unwrap();
        // The JWT allows two streams.
        let err = js
            .create_stream(stream::Config {
                name: "OPS3".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("maximum number of streams reached"), "{err}");
        let none = jetstream::new(connect(&without).await);
        let err = none.query_account().await.unwrap_err();
        assert!(err.to_string().contains("not enabled for account"), "{err}");
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(operator_mode_accounts, |r| operator_accounts(r));

/// A client that subscribes its inbox and sends an API request in the same write gets the
/// answer, whichever shard its stream lives on (the answer leaves from the shard the
/// request arrived on, which has heard of the inbox).
fn new_inbox_answers(r: common::Reactor) {
    use std::io::{Read, Write};
    let dir = store_dir("newinbox");
    let s = start(r, "4", &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        for i in 0..4 {
            js.create_stream(stream::Config {
                name: format!("N{i}"),
                subjects: vec![format!("n{i}")],
                ..Default::default()
            })
            .await
            .unwrap();
        }
    });
    for conn in 0..8 {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let stream = conn % 4;
        let out = format!(
            "CONNECT {{\"verbose\":false,\"headers\":true}}\r\nSUB _INBOX.x{conn}.* 1\r\nPUB $JS.API.STREAM.INFO.N{stream} _INBOX.x{conn}.1 0\r\n\r\n"
        );
        c.write_all(out.as_bytes()).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while std::time::Instant::now() < deadline && !String::from_utf8_lossy(&got).contains("stream_info_response") {
            if let Ok(n) = c.read(&mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
        }
        let text = String::from_utf8_lossy(&got);
        assert!(
            text.contains("stream_info_response"),
            "connection {conn}: no answer: {text}"
        );
    }
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(answers_reach_a_brand_new_inbox, |r| new_inbox_answers(r));
