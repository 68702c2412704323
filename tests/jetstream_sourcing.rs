//! JetStream mirrors and sources with a real client (async-nats), on both reactors, on
//! one shard and on several (origin and sourcing stream on different shards): catch-up
//! and follow, gaps kept, restart without duplicates, sources with filters and
//! transforms and the `Nats-Stream-Source` header, a source in another account through
//! `external`, promotion of a mirror by update, sources added and removed by update,
//! `opt_start_time`, the `mirror`/`sources` of stream info, and a kill -9 in the middle of
//! catch-up. The cases follow the
//! official clients' tests (nats.rs `mirrors`, `mirrors_remove`, `sources`; nats.py
//! `test_stream_mirror_removal`, `test_stream_source_opt_start_time`).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use async_nats::jetstream::{self, consumer, stream};
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
        "rnats-jss-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Wait (up to 10 s) until the stream's info satisfies `ok`; its last info.
async fn wait_info(js: &jetstream::Context, name: &str, ok: impl Fn(&stream::Info) -> bool) -> stream::Info {
    let mut last = None;
    for _ in 0..200 {
        let mut st = js.get_stream(name).await.unwrap();
        let info = st.info().await.unwrap().clone();
        if ok(&info) {
            return info;
        }
        last = Some(info);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "stream {name} never got there: {:?}",
        last.map(|i| (i.state, i.mirror, i.sources))
    );
}

async fn publish(js: &jetstream::Context, subject: &str, payload: &str) -> u64 {
    js.publish(subject.to_string(), payload.to_string().into())
        .await
        .unwrap()
        .await
        .unwrap()
        .sequence
}

async fn payload_at(js: &jetstream::Context, stream: &str, seq: u64) -> Option<(String, String)> {
    let st = js.get_stream(stream).await.unwrap();
    st.get_raw_message(seq)
        .await
        .ok()
        .map(|m| (m.subject.to_string(), String::from_utf8_lossy(&m.payload).to_string()))
}

/// A mirror catches up (keeping the origin's gap), follows, starts where told, and
/// refuses subjects and changes of its mirror.
fn mirror_follows(r: common::Reactor, shards: &str) {
    let dir = store_dir("mirror");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (c, js) = js(&s).await;
        let origin = js
            .create_stream(stream::Config {
                name: "ORIGIN".into(),
                subjects: vec!["o.>".into()],
                allow_direct: true,
                ..Default::default()
            })
            .await
            .unwrap();
        for i in 1..=5 {
            publish(&js, &format!("o.{i}"), &format!("m{i}")).await;
        }
        origin.delete_message(3).await.unwrap();
        js.create_stream(stream::Config {
            name: "M".into(),
            mirror: Some(stream::Source {
                name: "ORIGIN".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        let info = wait_info(&js, "M", |i| i.state.last_sequence == 5).await;
        assert_eq!(info.state.messages, 4);
        assert_eq!(info.state.first_sequence, 1);
        assert_eq!(payload_at(&js, "M", 4).await, Some(("o.4".into(), "m4".into())));
        assert_eq!(payload_at(&js, "M", 3).await, None);
        let m = info.mirror.clone().unwrap();
        assert_eq!(m.name, "ORIGIN");
        assert_eq!(m.lag, 0);
        assert!(m.active.is_some());
        // mirror_direct follows the origin's allow_direct.
        assert!(info.config.mirror_direct);
        for i in 6..=8 {
            publish(&js, &format!("o.{i}"), &format!("m{i}")).await;
        }
        let info = wait_info(&js, "M", |i| i.state.last_sequence == 8).await;
        assert_eq!(info.state.messages, 7);
        assert_eq!(payload_at(&js, "M", 8).await, Some(("o.8".into(), "m8".into())));

        // A start sequence (nats.rs `mirrors`).
        js.create_stream(stream::Config {
            name: "FROM7".into(),
            mirror: Some(stream::Source {
                name: "ORIGIN".into(),
                start_sequence: Some(7),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        let info = wait_info(&js, "FROM7", |i| i.state.last_sequence == 8).await;
        assert_eq!(info.state.messages, 2);
        assert_eq!(info.state.first_sequence, 7);

        // A mirror with a subject transform keeps the origin's sequences under new
        // subjects.
        js.create_stream(stream::Config {
            name: "TR".into(),
            mirror: Some(stream::Source {
                name: "ORIGIN".into(),
                subject_transforms: vec![stream::SubjectTransform {
                    source: "o.>".into(),
                    destination: "t.>".into(),
                }],
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        let info = wait_info(&js, "TR", |i| i.state.last_sequence == 8).await;
        assert_eq!(info.state.messages, 7);
        assert_eq!(payload_at(&js, "TR", 8).await, Some(("t.8".into(), "m8".into())));
        assert_eq!(info.mirror.unwrap().subject_transforms[0].destination, "t.>");

        // A mirror has no subjects; its mirror cannot change.
        let err = js
            .create_stream(stream::Config {
                name: "BAD".into(),
                subjects: vec!["bad".into()],
                mirror: Some(stream::Source {
                    name: "ORIGIN".into(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("10034"), "{err}");
        let err = js
            .update_stream(stream::Config {
                name: "M".into(),
                mirror: Some(stream::Source {
                    name: "ORIGIN".into(),
                    filter_subject: Some("o.1".into()),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("10055"), "{err}");
        // Sourcing consumers are not the origin's public consumers.
        let mut origin = js.get_stream("ORIGIN").await.unwrap();
        assert_eq!(origin.info().await.unwrap().state.consumer_count, 0);
        // mirror_direct: with the origin gone, the mirror answers its direct gets.
        js.delete_stream("ORIGIN").await.unwrap();
        // (M, FROM7 and TR serve it, in one queue group: ask for what all have.)
        let m = c
            .request("$JS.API.DIRECT.GET.ORIGIN", r#"{"seq":8}"#.into())
            .await
            .unwrap();
        assert_eq!(&m.payload[..], b"m8");
        let hdrs = m.headers.unwrap();
        let by = hdrs
            .get(async_nats::header::NATS_STREAM)
            .map(|v| v.as_str().to_string())
            .unwrap_or_else(|| format!("{hdrs:?}"));
        assert!(["M", "FROM7", "TR"].contains(&by.as_str()), "{by}");
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A mirror and a source resume after a restart: everything exactly once.
fn restart_resumes(r: common::Reactor, shards: &str) {
    let dir = store_dir("restart");
    {
        let s = start(r, shards, &dir);
        rt().block_on(async {
            let (_c, js) = js(&s).await;
            js.create_stream(stream::Config {
                name: "ORIGIN".into(),
                subjects: vec!["o.>".into()],
                ..Default::default()
            })
            .await
            .unwrap();
            for i in 1..=5 {
                publish(&js, &format!("o.{i}"), &format!("m{i}")).await;
            }
            js.create_stream(stream::Config {
                name: "M".into(),
                mirror: Some(stream::Source {
                    name: "ORIGIN".into(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap();
            js.create_stream(stream::Config {
                name: "S".into(),
                sources: Some(vec![stream::Source {
                    name: "ORIGIN".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            })
            .await
            .unwrap();
            wait_info(&js, "M", |i| i.state.messages == 5).await;
            wait_info(&js, "S", |i| i.state.messages == 5).await;
        });
    }
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        for i in 6..=10 {
            publish(&js, &format!("o.{i}"), &format!("m{i}")).await;
        }
        let info = wait_info(&js, "M", |i| i.state.last_sequence >= 10).await;
        assert_eq!(info.state.messages, 10);
        let info = wait_info(&js, "S", |i| i.state.messages >= 10).await;
        // Give a duplicate the time to show up.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut st = js.get_stream("S").await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages, 10, "{:?}", info.state);
        for seq in 1..=10u64 {
            assert_eq!(payload_at(&js, "S", seq).await.map(|p| p.1), Some(format!("m{seq}")));
            assert_eq!(payload_at(&js, "M", seq).await.map(|p| p.1), Some(format!("m{seq}")));
        }
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two sources, one from a sequence, one with a subject transform, into a stream with
/// its own subject (nats.rs `sources`); the `Nats-Stream-Source` header; info.
fn sources_merge(r: common::Reactor, shards: &str) {
    let dir = store_dir("sources");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        for (name, subject) in [("TEST", "events"), ("TEST2", "events2.>")] {
            js.create_stream(stream::Config {
                name: name.into(),
                subjects: vec![subject.into()],
                ..Default::default()
            })
            .await
            .unwrap();
        }
        publish(&js, "events", "skipped").await;
        publish(&js, "events", "data").await;
        publish(&js, "events2.a", "two-a").await;
        publish(&js, "events2.b", "two-b").await;
        let src = js
            .create_stream(stream::Config {
                name: "SOURCE".into(),
                subjects: vec!["own".into()],
                sources: Some(vec![
                    stream::Source {
                        name: "TEST".into(),
                        start_sequence: Some(2),
                        ..Default::default()
                    },
                    stream::Source {
                        name: "TEST2".into(),
                        subject_transforms: vec![stream::SubjectTransform {
                            source: "events2.>".into(),
                            destination: "moved.>".into(),
                        }],
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            })
            .await
            .unwrap();
        let info = wait_info(&js, "SOURCE", |i| i.state.messages == 3).await;
        assert_eq!(info.sources.len(), 2);
        assert_eq!(info.sources[0].name, "TEST");
        assert_eq!(info.sources[1].name, "TEST2");
        assert_eq!(info.sources[1].subject_transforms[0].destination, "moved.>");
        // Our own subject still takes publishes.
        let seq = publish(&js, "own", "mine").await;
        assert_eq!(seq, 4);
        let mut subjects = Vec::new();
        for seq in 1..=3 {
            let m = src.get_raw_message(seq).await.unwrap();
            let h = m.headers.get("Nats-Stream-Source").unwrap().to_string();
            subjects.push((m.subject.to_string(), h));
        }
        subjects.sort();
        assert_eq!(subjects[0].0, "events");
        assert_eq!(subjects[0].1, "TEST 2 > > events");
        assert_eq!(subjects[1].0, "moved.a");
        assert_eq!(subjects[1].1, "TEST2 1 events2.> moved.> events2.a");
        assert_eq!(subjects[2].0, "moved.b");
        // A consumer on the sourcing stream sees them (nats.rs `sources`).
        let c = src
            .create_consumer(consumer::pull::Config {
                name: Some("consumer".into()),
                filter_subject: "events".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut msgs = c.messages().await.unwrap();
        let m = msgs.next().await.unwrap().unwrap();
        assert_eq!(&m.payload[..], b"data");
        // New messages follow.
        publish(&js, "events", "later").await;
        wait_info(&js, "SOURCE", |i| i.state.messages == 5).await;
        let m = msgs.next().await.unwrap().unwrap();
        assert_eq!(&m.payload[..], b"later");

        // Sources added and removed by update.
        js.create_stream(stream::Config {
            name: "TEST3".into(),
            subjects: vec!["three".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        publish(&js, "three", "3").await;
        js.update_stream(stream::Config {
            name: "SOURCE".into(),
            subjects: vec!["own".into()],
            sources: Some(vec![
                stream::Source {
                    name: "TEST".into(),
                    start_sequence: Some(2),
                    ..Default::default()
                },
                stream::Source {
                    name: "TEST3".into(),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        })
        .await
        .unwrap();
        let info = wait_info(&js, "SOURCE", |i| i.state.messages == 6).await;
        let names: Vec<&str> = info.sources.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["TEST", "TEST3"]);
        // TEST2 is no longer sourced; TEST resumes without repeating itself.
        publish(&js, "events2.c", "gone").await;
        publish(&js, "events", "again").await;
        let info = wait_info(&js, "SOURCE", |i| i.state.messages == 7).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut st = js.get_stream("SOURCE").await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages, 7, "{:?}", info.state);
        assert_eq!(payload_at(&js, "SOURCE", 7).await.map(|p| p.1), Some("again".into()));
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A source starting at a time (nats.py `test_stream_source_opt_start_time`).
fn source_start_time(r: common::Reactor, shards: &str) {
    let dir = store_dir("starttime");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        js.create_stream(stream::Config {
            name: "SOURCE_TIME".into(),
            subjects: vec!["src.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        publish(&js, "src.1", "before").await;
        publish(&js, "src.2", "before").await;
        // The midpoint is taken on the server's clock: 50 ms after the second message.
        let st = js.get_stream("SOURCE_TIME").await.unwrap();
        let midpoint = st.get_raw_message(2).await.unwrap().time + Duration::from_millis(50);
        tokio::time::sleep(Duration::from_millis(100)).await;
        publish(&js, "src.3", "after").await;
        publish(&js, "src.4", "after").await;
        js.create_stream(stream::Config {
            name: "DEST_TIME".into(),
            sources: Some(vec![stream::Source {
                name: "SOURCE_TIME".into(),
                start_time: Some(midpoint),
                ..Default::default()
            }]),
            ..Default::default()
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut st = js.get_stream("DEST_TIME").await.unwrap();
        let info = st.info().await.unwrap();
        assert_eq!(info.state.messages, 2);
        assert!(info.config.sources.as_ref().unwrap()[0].start_time.is_some());
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Promoting a mirror (nats.rs `mirrors_remove`, nats.py `test_stream_mirror_removal`).
fn mirror_removal(r: common::Reactor, shards: &str) {
    let dir = store_dir("promote");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        js.create_stream(stream::Config {
            name: "source".into(),
            subjects: vec!["test".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        for _ in 0..5 {
            publish(&js, "test", "data").await;
        }
        js.create_stream(stream::Config {
            name: "mirror".into(),
            mirror: Some(stream::Source {
                name: "source".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut st = js.get_stream("mirror").await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages, 5);
        js.delete_stream("source").await.unwrap();
        let err = js.publish("test", "data".into()).await.unwrap().await.unwrap_err();
        assert_eq!(err.kind(), jetstream::context::PublishErrorKind::StreamNotFound);
        let info = js
            .update_stream(stream::Config {
                name: "mirror".into(),
                subjects: vec!["test".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(info.config.mirror.is_none());
        assert_eq!(info.state.messages, 5);
        let seq = publish(&js, "test", "data").await;
        assert_eq!(seq, 6);
        let mut st = js.get_stream("mirror").await.unwrap();
        assert!(st.info().await.unwrap().mirror.is_none());
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An origin deleted and created again: the mirror reports the error, then resumes.
fn origin_recreated(r: common::Reactor, shards: &str) {
    let dir = store_dir("recreate");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let cfg = stream::Config {
            name: "O".into(),
            subjects: vec!["o".into()],
            ..Default::default()
        };
        js.create_stream(cfg.clone()).await.unwrap();
        publish(&js, "o", "1").await;
        js.create_stream(stream::Config {
            name: "S".into(),
            sources: Some(vec![stream::Source {
                name: "O".into(),
                ..Default::default()
            }]),
            ..Default::default()
        })
        .await
        .unwrap();
        wait_info(&js, "S", |i| i.state.messages == 1).await;
        js.delete_stream("O").await.unwrap();
        js.create_stream(cfg).await.unwrap();
        publish(&js, "o", "2").await;
        publish(&js, "o", "3").await;
        // The source notices within its health check and backoff (the reference's
        // timing: 10 s without heartbeats, then a new consumer).
        let mut ok = false;
        for _ in 0..300 {
            let mut st = js.get_stream("S").await.unwrap();
            let info = st.info().await.unwrap();
            // The new origin's sequences 1 and 2 were already taken (origin seq 1):
            // the source resumes after its last origin sequence, as the reference does.
            if info.state.messages >= 2 {
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ok, "source never resumed");
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A source and a mirror of a stream in another account, through `external` (the API
/// imported under a prefix, the deliver subjects imported as a stream, flow control as
/// a service), as the reference's own cross-account test sets it up.
fn cross_account(r: common::Reactor, shards: &str) {
    let dir = store_dir("xacc");
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("x.conf");
    std::fs::write(
        &conf,
        format!(
            r#"jetstream {{ store_dir: {:?} }}
no_auth_user: dlc
accounts {{
  JS {{
    jetstream: enabled
    users = [ {{ user: "rip", pass: "pass" }} ]
    exports [
      {{ service: "$JS.API.CONSUMER.>" }}
      {{ stream: "RI.DELIVER.SYNC.>" }}
      {{ service: "$JS.FC.>" }}
    ]
  }}
  IA {{
    jetstream: enabled
    users = [ {{ user: "dlc", pass: "pass" }} ]
    imports [
      {{ service: {{ account: JS, subject: "$JS.API.CONSUMER.>" }}, to: "RI.JS.API.CONSUMER.>" }}
      {{ stream: {{ account: JS, subject: "RI.DELIVER.SYNC.>" }} }}
      {{ service: {{ account: JS, subject: "$JS.FC.>" }} }}
    ]
  }}
}}
"#,
            dir.join("sd")
        ),
    )
    .unwrap();
    let s = Server::start(r, &["--shards", shards, "-c", conf.to_str().unwrap()]);
    rt().block_on(async {
        let owner = async_nats::ConnectOptions::with_user_and_password("rip".into(), "pass".into())
            .connect(s.url())
            .await
            .unwrap();
        let js_owner = jetstream::new(owner);
        let (_c, js_ia) = js(&s).await;
        js_owner
            .create_stream(stream::Config {
                name: "ORIGIN".into(),
                subjects: vec!["foo.*".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        for i in 0..3 {
            publish(&js_owner, &format!("foo.{i}"), "x").await;
        }
        let external = |deliver: &str| {
            Some(stream::External {
                api_prefix: "RI.JS.API".into(),
                delivery_prefix: Some(deliver.into()),
            })
        };
        js_ia
            .create_stream(stream::Config {
                name: "SCA".into(),
                sources: Some(vec![stream::Source {
                    name: "ORIGIN".into(),
                    external: external("RI.DELIVER.SYNC.SOURCES"),
                    ..Default::default()
                }]),
                ..Default::default()
            })
            .await
            .unwrap();
        js_ia
            .create_stream(stream::Config {
                name: "MCA".into(),
                mirror: Some(stream::Source {
                    name: "ORIGIN".into(),
                    external: external("RI.DELIVER.SYNC.MIRRORS"),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap();
        wait_info(&js_ia, "SCA", |i| i.state.messages == 3).await;
        wait_info(&js_ia, "MCA", |i| i.state.messages == 3).await;
        publish(&js_owner, "foo.9", "y").await;
        wait_info(&js_ia, "SCA", |i| i.state.messages == 4).await;
        wait_info(&js_ia, "MCA", |i| i.state.last_sequence == 4).await;
        let sca = js_ia.get_stream("SCA").await.unwrap();
        let m = sca.get_raw_message(1).await.unwrap();
        // The index name carries the hash of the API prefix (the reference's bytes).
        assert_eq!(
            m.headers.get("Nats-Stream-Source").unwrap().to_string(),
            "ORIGIN:dpDEksoe 1 > > foo.0"
        );
        // The origin account does not list the sourcing consumers.
        let mut origin = js_owner.get_stream("ORIGIN").await.unwrap();
        assert_eq!(origin.info().await.unwrap().state.consumer_count, 0);
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A source through a durable consumer of the origin's (2.14; nats.rs
/// `source_consumer_round_trip` checks the configuration, this the data too).
fn durable_consumer_source(r: common::Reactor, shards: &str) {
    let dir = store_dir("durable");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (c, js) = js(&s).await;
        js.create_stream(stream::Config {
            name: "ORIGIN".into(),
            subjects: vec!["origin.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        for i in 0..3 {
            publish(&js, &format!("origin.{i}"), "x").await;
        }
        let body = r#"{"stream_name":"ORIGIN","config":{"name":"agg-consumer","durable_name":"agg-consumer","deliver_subject":"agg.deliver","ack_policy":"flow_control","flow_control":true,"idle_heartbeat":1000000000}}"#;
        let resp = c
            .request("$JS.API.CONSUMER.CREATE.ORIGIN.agg-consumer", body.into())
            .await
            .unwrap();
        assert!(!String::from_utf8_lossy(&resp.payload).contains("error"));
        // async-nats 0.42 has no `consumer` in its sources: the raw request.
        let body = r#"{"name":"AGG","sources":[{"name":"ORIGIN","consumer":{"name":"agg-consumer","deliver_subject":"agg.deliver"}}]}"#;
        let resp = c.request("$JS.API.STREAM.CREATE.AGG", body.into()).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&resp.payload).unwrap();
        assert_eq!(v["config"]["sources"][0]["consumer"]["name"], "agg-consumer");
        assert_eq!(v["config"]["sources"][0]["consumer"]["deliver_subject"], "agg.deliver");
        let agg = js.get_stream("AGG").await.unwrap();
        wait_info(&js, "AGG", |i| i.state.messages == 3).await;
        publish(&js, "origin.9", "y").await;
        wait_info(&js, "AGG", |i| i.state.messages == 4).await;
        let m = agg.get_raw_message(1).await.unwrap();
        assert_eq!(
            m.headers.get("Nats-Stream-Source").unwrap().to_string(),
            "ORIGIN:C=y3r60E6r 1 > > origin.0"
        );
        // With `ack_policy: flow_control` the sourcing stream's flow-control replies
        // (sent at the latest with the 1 s idle heartbeat) acknowledge what it stored:
        // the origin's consumer's ack floor reaches the last message.
        // (async-nats 0.42 cannot decode `ack_policy: flow_control`: the raw request.)
        let floor = async {
            loop {
                let resp = c
                    .request("$JS.API.CONSUMER.INFO.ORIGIN.agg-consumer", "".into())
                    .await
                    .unwrap();
                let ci: serde_json::Value = serde_json::from_slice(&resp.payload).unwrap();
                if ci["ack_floor"]["stream_seq"] == 4 && ci["num_ack_pending"] == 0 {
                    return ci;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let ci = tokio::time::timeout(Duration::from_secs(10), floor)
            .await
            .expect("the origin consumer's ack floor never reached 4");
        assert_eq!(ci["ack_floor"]["consumer_seq"], 4);
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sourcing into a work queue with a limit and discard new (the reference's
/// `TestJetStreamSourceWorkingQueueWithLimit`): what does not fit is retried once the
/// queue drains, until every message went through exactly once.
fn work_queue_with_limit(r: common::Reactor, shards: &str) {
    let dir = store_dir("wq");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        js.create_stream(stream::Config {
            name: "test".into(),
            subjects: vec!["test".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        let wq = js
            .create_stream(stream::Config {
                name: "wq".into(),
                max_messages: 100,
                discard: stream::DiscardPolicy::New,
                retention: stream::RetentionPolicy::WorkQueue,
                sources: Some(vec![stream::Source {
                    name: "test".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            })
            .await
            .unwrap();
        for i in 0..300 {
            publish(&js, "test", &format!("{i}")).await;
        }
        wait_info(&js, "wq", |i| i.state.messages == 100).await;
        let c = wq
            .create_consumer(consumer::pull::Config {
                durable_name: Some("D".into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ..Default::default()
            })
            .await
            .unwrap();
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(40);
        while seen.len() < 300 && std::time::Instant::now() < deadline {
            let mut b = c
                .fetch()
                .max_messages(50)
                .expires(Duration::from_millis(500))
                .messages()
                .await
                .unwrap();
            while let Some(m) = b.next().await {
                let m = m.unwrap();
                seen.push(String::from_utf8_lossy(&m.payload).parse::<u32>().unwrap());
                m.double_ack().await.unwrap();
            }
        }
        let want: Vec<u32> = (0..300).collect();
        assert_eq!(seen, want);
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// [`wait_info`] for up to a minute (a debug build catching up on a large origin).
async fn wait_long(js: &jetstream::Context, name: &str, ok: impl Fn(&stream::Info) -> bool) -> stream::Info {
    for _ in 0..1200 {
        let mut st = js.get_stream(name).await.unwrap();
        let info = st.info().await.unwrap().clone();
        if ok(&info) {
            return info;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_info(js, name, ok).await
}

/// Every payload of a stream, read through an ephemeral consumer.
async fn payloads(js: &jetstream::Context, stream: &str, want: usize) -> Vec<String> {
    let st = js.get_stream(stream).await.unwrap();
    let c = st
        .create_consumer(consumer::pull::Config {
            ack_policy: consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while out.len() < want && std::time::Instant::now() < deadline {
        let mut batch = c.fetch().max_messages(1000).messages().await.unwrap();
        while let Some(Ok(m)) = batch.next().await {
            out.push(String::from_utf8_lossy(&m.payload).to_string());
        }
    }
    out
}

/// The server is killed (SIGKILL) while a mirror and a source are catching up on a large
/// origin; after the restart both converge to exactly the origin's messages, none
/// missing or duplicated.
fn killed_during_catch_up(r: common::Reactor, shards: &str) {
    const N: usize = 20_000;
    let dir = store_dir("catchup");
    let mut s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        js.create_stream(stream::Config {
            name: "ORIGIN".into(),
            subjects: vec!["o.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        let mut acks = Vec::new();
        for i in 0..N {
            acks.push(
                js.publish(format!("o.{}", i % 50), format!("m{i}").into())
                    .await
                    .unwrap(),
            );
            if acks.len() == 1000 {
                for a in acks.drain(..) {
                    a.await.unwrap();
                }
            }
        }
        for a in acks.drain(..) {
            a.await.unwrap();
        }
        for (name, mirror) in [("M", true), ("S", false)] {
            let src = stream::Source {
                name: "ORIGIN".into(),
                ..Default::default()
            };
            js.create_stream(stream::Config {
                name: name.into(),
                mirror: mirror.then(|| src.clone()),
                sources: (!mirror).then(|| vec![src]),
                ..Default::default()
            })
            .await
            .unwrap();
        }
        // Kill once both have started and neither is done (or as soon as one is done, if
        // the machine is fast: the restart still has to resume the other).
        wait_info(&js, "S", |i| i.state.messages > 0).await;
    });
    s.stop_with(libc::SIGKILL);
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        let m = wait_long(&js, "M", |i| i.state.messages as usize >= N).await;
        assert_eq!((m.state.messages as usize, m.state.last_sequence as usize), (N, N));
        wait_long(&js, "S", |i| i.state.messages as usize >= N).await;
        // Give a duplicate the time to show up.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut st = js.get_stream("S").await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages as usize, N);
        let want: std::collections::BTreeSet<String> = (0..N).map(|i| format!("m{i}")).collect();
        for name in ["M", "S"] {
            let got = payloads(&js, name, N).await;
            assert_eq!(got.len(), N, "{name}");
            let set: std::collections::BTreeSet<String> = got.into_iter().collect();
            assert!(set == want, "{name}: {} distinct of {N}", set.len());
        }
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stream with `republish` republishes what its source brings, as what is published to it.
fn sourced_messages_are_republished(r: common::Reactor, shards: &str) {
    let dir = store_dir("srcrepub");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (c, js) = js(&s).await;
        let mut sub = c.subscribe("copy.>").await.unwrap();
        c.flush().await.unwrap();
        js.create_stream(stream::Config {
            name: "ORIGIN".into(),
            subjects: vec!["o.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        js.create_stream(stream::Config {
            name: "S".into(),
            sources: Some(vec![stream::Source {
                name: "ORIGIN".into(),
                ..Default::default()
            }]),
            republish: Some(stream::Republish {
                source: ">".into(),
                destination: "copy.>".into(),
                headers_only: false,
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        // Interest on every shard before the first message.
        tokio::time::sleep(Duration::from_millis(200)).await;
        for i in 0..3 {
            publish(&js, &format!("o.{i}"), &format!("m{i}")).await;
        }
        for i in 0..3 {
            let m = tokio::time::timeout(Duration::from_secs(10), sub.next())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(m.subject.as_str(), format!("copy.o.{i}"));
            assert_eq!(m.payload.as_ref(), format!("m{i}").as_bytes());
            let h = m.headers.unwrap();
            assert_eq!(
                h.get("Nats-Stream".parse::<async_nats::HeaderName>().unwrap())
                    .map(|v| v.as_str()),
                Some("S")
            );
            assert_eq!(
                h.get("Nats-Sequence".parse::<async_nats::HeaderName>().unwrap())
                    .map(|v| v.as_str()),
                Some(format!("{}", i + 1).as_str())
            );
        }
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Memory storage: a mirror and a sourced stream of a memory origin, the source with its
/// own transform and the sourcing stream with an input `subject_transform`, which the
/// reference applies to sourced messages too (after the source's transform).
fn memory_streams_and_input_transform(r: common::Reactor, shards: &str) {
    let dir = store_dir("memflows");
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let (_c, js) = js(&s).await;
        js.create_stream(stream::Config {
            name: "ORIGIN".into(),
            subjects: vec!["o.>".into()],
            storage: stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .unwrap();
        js.create_stream(stream::Config {
            name: "M".into(),
            storage: stream::StorageType::Memory,
            mirror: Some(stream::Source {
                name: "ORIGIN".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        js.create_stream(stream::Config {
            name: "S".into(),
            storage: stream::StorageType::Memory,
            sources: Some(vec![stream::Source {
                name: "ORIGIN".into(),
                subject_transforms: vec![stream::SubjectTransform {
                    source: "o.>".into(),
                    destination: "src.>".into(),
                }],
                ..Default::default()
            }]),
            subject_transform: Some(stream::SubjectTransform {
                source: "src.*".into(),
                destination: "in.{{wildcard(1)}}".into(),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        for i in 0..5 {
            publish(&js, &format!("o.{i}"), &format!("p{i}")).await;
        }
        publish(&js, "o.deep.x", "deep").await;
        wait_info(&js, "M", |i| i.state.messages == 6).await;
        wait_info(&js, "S", |i| i.state.messages == 6).await;
        for seq in 1..=5u64 {
            let want = format!("p{}", seq - 1);
            assert_eq!(
                payload_at(&js, "M", seq).await,
                Some((format!("o.{}", seq - 1), want.clone()))
            );
            // `o.N` -> `src.N` (source) -> `in.N` (the stream's input transform).
            assert_eq!(payload_at(&js, "S", seq).await, Some((format!("in.{}", seq - 1), want)));
        }
        // `src.deep.x` does not match `src.*`: it keeps the source's subject.
        assert_eq!(
            payload_at(&js, "S", 6).await,
            Some(("src.deep.x".to_string(), "deep".to_string()))
        );
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
                both_reactors!(three_shards, |r| super::super::$name(r, "3"));
            }
        )*
    };
}

js_tests!(
    mirror_follows,
    restart_resumes,
    sources_merge,
    source_start_time,
    mirror_removal,
    origin_recreated,
    cross_account,
    durable_consumer_source,
    work_queue_with_limit,
    killed_during_catch_up,
    sourced_messages_are_republished,
    memory_streams_and_input_transform
);
