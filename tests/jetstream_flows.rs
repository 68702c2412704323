//! Stream data flows with a real client (async-nats): the input subject transform,
//! republish (to plain subscribers on every shard's connections, headers only, into
//! another stream) and subject delete markers (max age and TTL markers, KV
//! `limit_markers`, KV purge markers with a TTL, watchers seeing markers), on both
//! reactors, one shard and four.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use async_nats::jetstream::{self, consumer, kv, stream};
use common::{rt, Server};
use futures::StreamExt;
use std::time::Duration;

fn start(r: common::Reactor, shards: &str, dir: &std::path::Path) -> Server {
    Server::start(r, &["--shards", shards, "-js", "-sd", dir.to_str().unwrap()])
}

fn store_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rnats-jsflows-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

async fn next_msg(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("no message within 5 s")
        .unwrap()
}

async fn next_entry(w: &mut kv::Watch) -> kv::Entry {
    tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .expect("no entry within 5 s")
        .unwrap()
        .unwrap()
}

/// Let a new subscription's interest reach the stream's shard. A flush on the
/// subscriber's connection orders its interest before that connection's later input,
/// but a republish is published by the stream's shard after a publish that came from a
/// third connection's shard, which may not have seen the interest record yet.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// A header of `h` by name (parsed, so that the client's standard names match).
fn hv<'a>(h: &'a async_nats::HeaderMap, key: &str) -> &'a str {
    h.get(key.parse::<async_nats::HeaderName>().unwrap())
        .map_or("", |v| v.as_str())
}

fn header<'a>(m: &'a async_nats::Message, key: &str) -> &'a str {
    m.headers.as_ref().map_or("", |h| hv(h, key))
}

/// Stored under the transformed subject; republished (with the reference's headers) to
/// subscribers on several connections (so on other shards than the stream's).
fn transform_and_republish(r: common::Reactor, shards: &str) {
    let dir = store_dir("republish");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        let st = js
            .create_stream(stream::Config {
                name: "T".into(),
                subjects: vec!["t.>".into()],
                subject_transform: Some(stream::SubjectTransform {
                    source: "t.*".into(),
                    destination: "x.$1".into(),
                }),
                republish: Some(stream::Republish {
                    source: ">".into(),
                    destination: "rp.>".into(),
                    headers_only: false,
                }),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut subs = Vec::new();
        for _ in 0..4 {
            let sc = async_nats::connect(s.url()).await.unwrap();
            let sub = sc.subscribe("rp.>").await.unwrap();
            sc.flush().await.unwrap();
            subs.push((sc, sub));
        }
        settle().await;
        for body in ["one", "two"] {
            js.publish("t.a", body.into()).await.unwrap().await.unwrap();
        }
        let mut h = async_nats::HeaderMap::new();
        h.insert("K", "v");
        js.publish_with_headers("t.b.c", h, "three".into())
            .await
            .unwrap()
            .await
            .unwrap();
        // Stored under the mapped subject; a subject the source does not match keeps its own.
        let mut st2 = st.clone();
        let info = st2.info().await.unwrap();
        assert_eq!(info.state.messages, 3);
        assert_eq!(st.get_last_raw_message_by_subject("x.a").await.unwrap().sequence, 2);
        assert!(st.get_last_raw_message_by_subject("t.a").await.is_err());
        assert_eq!(st.get_last_raw_message_by_subject("t.b.c").await.unwrap().sequence, 3);
        for (_c, sub) in &mut subs {
            let want = [("rp.x.a", "x.a", "1", "0", "one"), ("rp.x.a", "x.a", "2", "1", "two")];
            for (subject, stored, seq, last, body) in want {
                let m = next_msg(sub).await;
                assert_eq!(m.subject.as_str(), subject);
                assert_eq!(&m.payload[..], body.as_bytes());
                assert_eq!(header(&m, "Nats-Stream"), "T");
                assert_eq!(header(&m, "Nats-Subject"), stored);
                assert_eq!(header(&m, "Nats-Sequence"), seq);
                assert_eq!(header(&m, "Nats-Last-Sequence"), last);
                assert!(header(&m, "Nats-Time-Stamp").ends_with('Z'));
                assert_eq!(header(&m, "Nats-Msg-Size"), "");
            }
            let m = next_msg(sub).await;
            assert_eq!(m.subject.as_str(), "rp.t.b.c");
            assert_eq!(header(&m, "K"), "v");
            assert_eq!(header(&m, "Nats-Sequence"), "3");
        }
        // Headers only: no payload, its size instead.
        js.create_stream(stream::Config {
            name: "H".into(),
            subjects: vec!["h.>".into()],
            republish: Some(stream::Republish {
                source: "h.>".into(),
                destination: "hp.>".into(),
                headers_only: true,
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        let sc = async_nats::connect(s.url()).await.unwrap();
        let mut sub = sc.subscribe("hp.>").await.unwrap();
        sc.flush().await.unwrap();
        settle().await;
        js.publish("h.x", "twelve bytes".into()).await.unwrap().await.unwrap();
        let m = next_msg(&mut sub).await;
        assert_eq!(m.subject.as_str(), "hp.x");
        assert!(m.payload.is_empty());
        assert_eq!(header(&m, "Nats-Msg-Size"), "12");
        assert_eq!(header(&m, "Nats-Stream"), "H");
        // A KV bucket's republish (rsjs `kv::republish`).
        let kv = js
            .create_key_value(kv::Config {
                bucket: "test".into(),
                history: 10,
                republish: Some(stream::Republish {
                    source: ">".into(),
                    destination: "bar.>".into(),
                    headers_only: false,
                }),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut sub = sc.subscribe("bar.>").await.unwrap();
        sc.flush().await.unwrap();
        settle().await;
        kv.put("key", "data".into()).await.unwrap();
        let m = next_msg(&mut sub).await;
        assert_eq!(m.subject.as_str(), "bar.$KV.test.key");
        assert_eq!(&m.payload[..], b"data");
        assert_eq!(header(&m, "Nats-Stream"), "KV_test");
        // A destination that overlaps the stream's own subjects is a cycle.
        let err = js
            .create_stream(stream::Config {
                name: "C".into(),
                subjects: vec!["c.>".into()],
                republish: Some(stream::Republish {
                    source: ">".into(),
                    destination: "c.x.>".into(),
                    headers_only: false,
                }),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("forms a cycle"), "{err}");
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Republished into another stream (rsjs `republish`) and into a KV bucket's stream
/// (rsjs `republish_headers_handling`).
fn republish_into_streams(r: common::Reactor, shards: &str) {
    let dir = store_dir("into");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        js.create_stream(stream::Config {
            name: "source".into(),
            subjects: vec!["source.>".into()],
            republish: Some(stream::Republish {
                source: ">".into(),
                destination: "dest.>".into(),
                headers_only: false,
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        let dest = js
            .create_stream(stream::Config {
                name: "dest".into(),
                subjects: vec!["dest.>".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        let cons = dest
            .create_consumer(consumer::pull::Config {
                durable_name: Some("dest".into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ..Default::default()
            })
            .await
            .unwrap();
        for i in 0..50 {
            js.publish(format!("source.{i}"), format!("{i}").into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
        let mut msgs = cons.messages().await.unwrap().take(50).enumerate();
        while let Some((i, m)) = tokio::time::timeout(Duration::from_secs(5), msgs.next())
            .await
            .expect("republished messages reach the other stream")
        {
            let m = m.unwrap();
            assert_eq!(m.subject.as_str(), format!("dest.source.{i}"));
            assert_eq!(&m.payload[..], i.to_string().as_bytes());
            m.ack().await.unwrap();
        }
        // Into a KV bucket: the keys' revisions are the bucket's own sequences.
        js.create_stream(stream::Config {
            name: "src2".into(),
            subjects: vec!["A.>".into(), "B.>".into()],
            republish: Some(stream::Republish {
                source: "A.>".into(),
                destination: "$KV.test.>".into(),
                headers_only: false,
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        js.create_stream(stream::Config {
            name: "KV_test".into(),
            subjects: vec!["$KV.test.>".into()],
            max_messages_per_subject: 10,
            ..Default::default()
        })
        .await
        .unwrap();
        for subject in ["B.foo", "B.bar", "A.orange", "A.tomato"] {
            js.publish(subject, "v".into()).await.unwrap().await.unwrap();
        }
        let kv = js.get_key_value("test").await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let orange = kv.entry("orange").await.unwrap();
            let tomato = kv.entry("tomato").await.unwrap();
            if let (Some(o), Some(t)) = (orange, tomato) {
                assert_eq!((o.revision, t.revision), (1, 2));
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "keys never arrived");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Max age on a stream with markers (rsjs `message_with_ttl`): the subject's last
/// message is replaced by a marker with the reference's headers; the others just go.
fn max_age_markers(r: common::Reactor, shards: &str) {
    let dir = store_dir("markers");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        let mut st = js
            .create_stream(stream::Config {
                name: "events".into(),
                subjects: vec!["events.>".into()],
                allow_message_ttl: true,
                allow_direct: true,
                subject_delete_marker_ttl: Some(Duration::from_secs(2)),
                max_age: Duration::from_secs(1),
                republish: Some(stream::Republish {
                    source: ">".into(),
                    destination: "copy.>".into(),
                    headers_only: false,
                }),
                ..Default::default()
            })
            .await
            .unwrap();
        // The markers are republished too (from the expiry timer), here into a stream.
        let mut copy = js
            .create_stream(stream::Config {
                name: "COPY".into(),
                subjects: vec!["copy.>".into()],
                // The copies keep their Nats-TTL and Nats-Rollup headers.
                allow_message_ttl: true,
                allow_rollup: true,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            st.cached_info().config.subject_delete_marker_ttl,
            Some(Duration::from_secs(2))
        );
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-TTL", "20");
        js.publish_with_headers("events.data", h, "data".into())
            .await
            .unwrap()
            .await
            .unwrap();
        js.publish("events.data", "data".into()).await.unwrap().await.unwrap();
        // A TTL below the marker TTL is raised to it.
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-TTL", "1s");
        js.publish_with_headers("events.short", h, "x".into())
            .await
            .unwrap()
            .await
            .unwrap();
        let m = st.direct_get(3).await.unwrap();
        assert_eq!(hv(&m.headers, "Nats-TTL"), "2");
        assert_eq!(st.info().await.unwrap().state.messages, 3);
        tokio::time::sleep(Duration::from_millis(1600)).await;
        for (subject, seq) in [("events.data", 4), ("events.short", 5)] {
            let m = st.get_last_raw_message_by_subject(subject).await.unwrap();
            assert_eq!(m.sequence, seq, "{subject}");
            assert!(m.payload.is_empty());
            assert_eq!(hv(&m.headers, "Nats-Marker-Reason"), "MaxAge");
            assert_eq!(hv(&m.headers, "Nats-TTL"), "2s");
            assert_eq!(hv(&m.headers, "Nats-Rollup"), "sub");
        }
        let info = st.info().await.unwrap();
        assert_eq!((info.state.messages, info.state.first_sequence), (2, 4));
        // Each marker's rollup left only itself on its subject.
        assert_eq!(copy.info().await.unwrap().state.messages, 2);
        let m = copy.get_last_raw_message_by_subject("copy.events.short").await.unwrap();
        assert_eq!(hv(&m.headers, "Nats-Marker-Reason"), "MaxAge");
        assert_eq!(hv(&m.headers, "Nats-Sequence"), "5");
        assert_eq!(hv(&m.headers, "Nats-Last-Sequence"), "3");
        // The markers age out in turn, without new markers.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let info = st.info().await.unwrap();
        assert_eq!((info.state.messages, info.state.last_sequence), (0, 5));
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// KV with `limit_markers`: the stream settings, a TTL'd create that expires, a purge
/// with a TTL that goes away, and watchers seeing purges and max-age markers.
fn kv_limit_markers(r: common::Reactor, shards: &str) {
    let dir = store_dir("kv");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        let kv = js
            .create_key_value(kv::Config {
                bucket: "ttl".into(),
                history: 15,
                storage: stream::StorageType::File,
                limit_markers: Some(Duration::from_secs(1)),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut st = js.get_stream("KV_ttl").await.unwrap();
        let cfg = &st.cached_info().config;
        assert_eq!(cfg.subject_delete_marker_ttl, Some(Duration::from_secs(1)));
        assert!(cfg.allow_message_ttl);
        kv.create_with_ttl("key", "value".into(), Duration::from_secs(1))
            .await
            .unwrap();
        assert!(kv.get("key").await.unwrap().is_some());
        for _ in 0..10 {
            kv.put("key1", "value".into()).await.unwrap();
            kv.put("key2", "value".into()).await.unwrap();
        }
        let mut watcher = kv.watch("key1").await.unwrap();
        kv.purge_with_ttl("key1", Duration::from_secs(1)).await.unwrap();
        let e = next_entry(&mut watcher).await;
        assert_eq!((e.key.as_str(), e.operation), ("key1", kv::Operation::Purge));
        // 1 (key, not expired yet) + 10 (key2) + 1 (purge marker).
        assert_eq!(st.info().await.unwrap().state.messages, 12);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        // The key's message became a max-age marker then expired as one; the purge marker
        // expired: only key2's history is left.
        assert!(kv.get("key").await.unwrap().is_none());
        assert_eq!(st.info().await.unwrap().state.messages, 10);

        // Max age: a watcher sees the put, then the marker as a purge.
        let kv = js
            .create_key_value(kv::Config {
                bucket: "maxage".into(),
                history: 10,
                max_age: Duration::from_millis(500),
                limit_markers: Some(Duration::from_secs(10)),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut watcher = kv.watch_all().await.unwrap();
        kv.put("expiring_key", "value".into()).await.unwrap();
        let e = next_entry(&mut watcher).await;
        assert_eq!((e.key.as_str(), e.operation), ("expiring_key", kv::Operation::Put));
        // async-nats 0.42's watcher reads the marker as a put (later versions map
        // `Nats-Marker-Reason` to a purge); its direct get reads it as a purge.
        let e = next_entry(&mut watcher).await;
        assert_eq!((e.key.as_str(), e.revision), ("expiring_key", 2));
        assert!(e.value.is_empty());
        let e = kv.entry("expiring_key").await.unwrap().unwrap();
        assert_eq!((e.revision, e.operation), (2, kv::Operation::Purge));
        assert!(kv.get("expiring_key").await.unwrap().is_none());
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

macro_rules! flow_tests {
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

flow_tests!(
    transform_and_republish,
    republish_into_streams,
    max_age_markers,
    kv_limit_markers
);
