//! `$JS.API.STREAM.SNAPSHOT` and `$JS.API.STREAM.RESTORE` with a real client over the raw
//! API (async-nats has no snapshot API): a round trip through rnats with a durable
//! consumer, snapshots moving between rnats and the reference nats-server in both
//! directions, the request validation answers next to the reference's, and an abandoned
//! restore that must leave nothing behind. Both reactors, one shard and several.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use async_nats::jetstream::{self, consumer, stream};
use common::{rt, Server};
use futures::StreamExt;
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn start(r: common::Reactor, shards: &str, dir: &std::path::Path) -> Server {
    Server::start(r, &["--shards", shards, "-js", "-sd", dir.to_str().unwrap()])
}

fn reference(dir: &std::path::Path) -> Server {
    let bin = common::reference_server();
    Server::start_cmd(
        &bin,
        &["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", dir.to_str().unwrap()],
    )
}

fn store_dir(name: &str) -> std::path::PathBuf {
    let d = common::scratch_dir().join(format!("snap-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    d
}

async fn api(c: &async_nats::Client, subject: &str, body: &str) -> Value {
    let m = tokio::time::timeout(WAIT, c.request(subject.to_string(), body.to_string().into()))
        .await
        .unwrap()
        .unwrap();
    serde_json::from_slice(&m.payload).unwrap()
}

/// Take a snapshot: the response and the archive's bytes, and the end-of-stream header.
async fn snapshot(c: &async_nats::Client, stream: &str, extra: Value) -> (Value, Vec<u8>, Option<String>) {
    let inbox = c.new_inbox();
    let mut sub = c.subscribe(inbox.clone()).await.unwrap();
    let mut req = json!({ "deliver_subject": inbox, "chunk_size": 1024 });
    if let (Value::Object(r), Value::Object(x)) = (&mut req, extra) {
        r.extend(x);
    }
    let resp = api(c, &format!("$JS.API.STREAM.SNAPSHOT.{stream}"), &req.to_string()).await;
    if resp.get("error").is_some() {
        return (resp, Vec::new(), None);
    }
    let mut data = Vec::new();
    loop {
        let m = tokio::time::timeout(WAIT, sub.next()).await.unwrap().unwrap();
        if m.payload.is_empty() {
            let status = m.status.map(|s| s.as_u16().to_string());
            return (resp, data, status);
        }
        data.extend_from_slice(&m.payload);
        if let Some(reply) = m.reply {
            c.publish(reply, "".into()).await.unwrap();
        }
    }
}

/// Restore `data` as `stream` with `config`: the last reply (the stream's info or the error).
async fn restore(c: &async_nats::Client, stream: &str, config: &Value, data: &[u8]) -> Value {
    let resp = api(
        c,
        &format!("$JS.API.STREAM.RESTORE.{stream}"),
        &json!({"config": config, "state": {}}).to_string(),
    )
    .await;
    let Some(deliver) = resp["deliver_subject"].as_str() else {
        return resp;
    };
    for chunk in data.chunks(2048) {
        let m = tokio::time::timeout(WAIT, c.request(deliver.to_string(), chunk.to_vec().into()))
            .await
            .unwrap()
            .unwrap();
        if !m.payload.is_empty() {
            return serde_json::from_slice(&m.payload).unwrap();
        }
    }
    let m = tokio::time::timeout(WAIT, c.request(deliver.to_string(), "".into()))
        .await
        .unwrap()
        .unwrap();
    serde_json::from_slice(&m.payload).unwrap()
}

/// A stream with 60 messages (one deleted) and a durable that acked the first 3.
async fn populate(c: &async_nats::Client, name: &str, storage: stream::StorageType) {
    let js = jetstream::new(c.clone());
    let st = js
        .create_stream(stream::Config {
            name: name.into(),
            subjects: vec![format!("{name}.>")],
            storage,
            ..Default::default()
        })
        .await
        .unwrap();
    for i in 0..60u32 {
        // Varied payloads so the archive spans several chunks.
        let body: String = (0..150)
            .map(|k| char::from(b'a' + ((i * 7 + k * 13) % 26) as u8))
            .collect();
        js.publish(format!("{name}.{}", i % 5), body.into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    st.delete_message(5).await.unwrap();
    let cons: consumer::PullConsumer = st
        .create_consumer(consumer::pull::Config {
            durable_name: Some("D".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut b = cons.fetch().max_messages(3).messages().await.unwrap();
    while let Some(m) = b.next().await {
        m.unwrap().double_ack().await.unwrap();
    }
}

/// The restored stream holds what the snapshot had and the consumer's place.
async fn check_restored(c: &async_nats::Client, name: &str, info: &Value) {
    assert!(info.get("error").is_none(), "{info}");
    assert_eq!(
        info["type"], "io.nats.jetstream.api.v1.stream_create_response",
        "{info}"
    );
    assert_eq!(info["config"]["name"], name);
    // The metadata as given, plus the server's dynamic fields.
    assert_eq!(info["config"]["metadata"]["_nats.ver"], "2.14.0", "{info}");
    assert_eq!(info["state"]["messages"], 59, "{info}");
    assert_eq!(info["state"]["last_seq"], 60, "{info}");
    let got = api(c, &format!("$JS.API.STREAM.MSG.GET.{name}"), r#"{"seq":5}"#).await;
    assert_eq!(got["error"]["err_code"], 10037, "{got}");
    let got = api(c, &format!("$JS.API.STREAM.MSG.GET.{name}"), r#"{"seq":6}"#).await;
    assert_eq!(got["message"]["subject"], format!("{name}.0"), "{got}");
    let ci = api(c, &format!("$JS.API.CONSUMER.INFO.{name}.D"), "").await;
    assert_eq!(ci["ack_floor"]["stream_seq"], 3, "{ci}");
    assert_eq!(ci["num_pending"], 56, "{ci}");
}

fn round_trip(r: common::Reactor, shards: &str) {
    let dir = store_dir(&format!("rt-{shards}-{}", r.flag()));
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        populate(&c, "F", stream::StorageType::File).await;
        let mut advisories = c.subscribe("$JS.EVENT.ADVISORY.STREAM.*.F").await.unwrap();
        c.flush().await.unwrap();
        let (resp, data, eof) = snapshot(&c, "F", json!({})).await;
        assert_eq!(resp["type"], "io.nats.jetstream.api.v1.stream_snapshot_response");
        assert_eq!(resp["config"]["name"], "F", "{resp}");
        assert_eq!(resp["state"]["messages"], 59, "{resp}");
        assert_eq!(resp["state"]["consumer_count"], 1, "{resp}");
        assert!(data.len() > 2048, "{}", data.len());
        assert_eq!(eof.as_deref(), Some("204"));
        // A stream that exists is not restored over.
        let again = api(
            &c,
            "$JS.API.STREAM.RESTORE.F",
            &json!({"config": resp["config"]}).to_string(),
        )
        .await;
        assert_eq!(again["error"]["err_code"], 10130, "{again}");
        let del = api(&c, "$JS.API.STREAM.DELETE.F", "").await;
        assert_eq!(del["success"], true);
        let info = restore(&c, "F", &resp["config"], &data).await;
        check_restored(&c, "F", &info).await;
        // The restored stream's directory holds rnats's store only.
        let sdir = dir.join("jetstream/$G/streams/F");
        assert!(sdir.join("meta.inf").exists());
        assert!(!sdir.join(".nats-server").exists());
        assert!(!sdir.join("msgs/1.blk").exists());
        // The snapshot's and the restore's advisories, naming the client.
        let mut kinds = Vec::new();
        while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(500), advisories.next()).await {
            let v: Value = serde_json::from_slice(&m.payload).unwrap();
            let kind = v["type"].as_str().unwrap().rsplit('.').next().unwrap().to_string();
            if kind != "stream_action" {
                let want = format!("$JS.EVENT.ADVISORY.STREAM.{}.F", kind.to_uppercase());
                assert_eq!(m.subject.as_str(), want);
                assert_eq!(v["client"]["acc"], "$G", "{v}");
            }
            kinds.push(m.subject.to_string());
        }
        let want = [
            "SNAPSHOT_CREATE",
            "SNAPSHOT_COMPLETE",
            "DELETED",
            "RESTORE_CREATE",
            "CREATED",
            "RESTORE_COMPLETE",
        ];
        for k in want {
            assert!(kinds.iter().any(|x| x.contains(&format!(".{k}."))), "{kinds:?}");
        }
        assert_eq!(kinds.len(), want.len(), "{kinds:?}");
        drop(advisories);
        let (_, bare, _) = snapshot(&c, "F", json!({"no_consumers": true})).await;
        // Memory streams have no snapshots, as in the reference.
        populate(&c, "M", stream::StorageType::Memory).await;
        let (resp, _, _) = snapshot(&c, "M", json!({})).await;
        assert_eq!(resp["error"]["description"], "snapshot failed: no impl", "{resp}");
        // A file stream's snapshot restored as a memory stream keeps its messages and
        // consumer (the reference's comes back without its messages).
        let _ = api(&c, "$JS.API.STREAM.DELETE.F", "").await;
        let cfg = json!({"name": "F", "subjects": ["F.>"], "storage": "memory"});
        let info = restore(&c, "F", &cfg, &data).await;
        assert_eq!(info["config"]["storage"], "memory", "{info}");
        check_restored(&c, "F", &info).await;
        let _ = api(&c, "$JS.API.STREAM.DELETE.F", "").await;
        // Without consumers; and a small snapshot ends with an empty message, no header.
        let cfg = json!({"name": "F", "subjects": ["F.>"]});
        let info = restore(&c, "F", &cfg, &bare).await;
        assert_eq!(info["state"]["messages"], 59, "{info}");
        assert_eq!(info["state"]["consumer_count"], 0, "{info}");
        let js = jetstream::new(c.clone());
        js.create_stream(stream::Config {
            name: "TINY".into(),
            ..Default::default()
        })
        .await
        .unwrap();
        let (_, data, eof) = snapshot(&c, "TINY", json!({})).await;
        assert!(!data.is_empty() && data.len() < 1024);
        assert_eq!(eof, None);
        // Nothing left in the spool directory.
        let snaps = dir.join("jetstream/$G/__snapshots__");
        let left: Vec<_> = std::fs::read_dir(&snaps)
            .map(|d| d.flatten().collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
    });
}

/// A window of one chunk: each chunk waits for the ack of the one before; a receiver that
/// stops acknowledging gets `408 No Flow Response`.
fn flow_control(r: common::Reactor, shards: &str) {
    let dir = store_dir(&format!("flow-{shards}-{}", r.flag()));
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        populate(&c, "W", stream::StorageType::File).await;
        let (resp, data, eof) = snapshot(&c, "W", json!({"window_size": 1024})).await;
        assert!(resp.get("error").is_none(), "{resp}");
        assert!(data.len() > 2048, "{}", data.len());
        assert_eq!(eof.as_deref(), Some("204"));
        // No acks: one chunk, then the end with 408.
        let inbox = c.new_inbox();
        let mut sub = c.subscribe(inbox.clone()).await.unwrap();
        let req = json!({"deliver_subject": inbox, "chunk_size": 1024, "window_size": 1024});
        let resp = api(&c, "$JS.API.STREAM.SNAPSHOT.W", &req.to_string()).await;
        assert!(resp.get("error").is_none(), "{resp}");
        let first = tokio::time::timeout(WAIT, sub.next()).await.unwrap().unwrap();
        assert_eq!(first.payload.len(), 1024);
        let reply = first.reply.unwrap();
        assert!(reply.as_str().starts_with("$JS.SNAPSHOT.ACK.W."), "{reply}");
        assert!(reply.as_str().ends_with(".1024.1"), "{reply}");
        let last = tokio::time::timeout(WAIT, sub.next()).await.unwrap().unwrap();
        assert!(last.payload.is_empty());
        assert_eq!(last.status.map(|s| s.as_u16()), Some(408));
        assert_eq!(last.description.as_deref(), Some("No Flow Response"));
        // What came through the narrow window restores.
        let _ = api(&c, "$JS.API.STREAM.DELETE.W", "").await;
        let info = restore(&c, "W", &resp["config"], &data).await;
        assert_eq!(info["state"]["messages"], 59, "{info}");
    });
}

/// A stream larger than one batch of the writer and many default chunks: restored whole.
fn large(r: common::Reactor, shards: &str) {
    let dir = store_dir(&format!("large-{shards}-{}", r.flag()));
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let js = jetstream::new(c.clone());
        js.create_stream(stream::Config {
            name: "L".into(),
            subjects: vec!["L.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        let mut acks = Vec::new();
        for i in 0..4000u32 {
            // Pseudo-random: it does not compress.
            let mut x = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let body: Vec<u8> = (0..1000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            acks.push(js.publish(format!("L.{}", i % 10), body.into()).await.unwrap());
        }
        for a in acks {
            a.await.unwrap();
        }
        let before = api(&c, "$JS.API.STREAM.INFO.L", "").await;
        let inbox = c.new_inbox();
        let mut sub = c.subscribe(inbox.clone()).await.unwrap();
        let req = json!({ "deliver_subject": inbox });
        let resp = api(&c, "$JS.API.STREAM.SNAPSHOT.L", &req.to_string()).await;
        let mut data = Vec::new();
        let mut chunks = 0;
        loop {
            let m = tokio::time::timeout(WAIT, sub.next()).await.unwrap().unwrap();
            if m.payload.is_empty() {
                assert_eq!(m.status.map(|s| s.as_u16()), Some(204));
                break;
            }
            chunks += 1;
            data.extend_from_slice(&m.payload);
            if let Some(reply) = m.reply {
                c.publish(reply, "".into()).await.unwrap();
            }
        }
        assert!(chunks > 8, "{chunks} chunks");
        let _ = api(&c, "$JS.API.STREAM.DELETE.L", "").await;
        let info = restore(&c, "L", &resp["config"], &data).await;
        for k in [
            "messages",
            "bytes",
            "first_seq",
            "last_seq",
            "first_ts",
            "last_ts",
            "num_subjects",
        ] {
            assert_eq!(info["state"][k], before["state"][k], "{k}: {info}");
        }
        let got = api(&c, "$JS.API.STREAM.MSG.GET.L", r#"{"seq":2345}"#).await;
        assert_eq!(got["message"]["subject"], "L.4", "{got}");
    });
}

/// A restored stream and its consumer are recovered after a restart.
fn survives_restart(r: common::Reactor, shards: &str) {
    let dir = store_dir(&format!("restart-{shards}-{}", r.flag()));
    let s = start(r, shards, &dir);
    let runtime = rt();
    runtime.block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        populate(&c, "R", stream::StorageType::File).await;
        let (resp, data, _) = snapshot(&c, "R", json!({})).await;
        let _ = api(&c, "$JS.API.STREAM.DELETE.R", "").await;
        let info = restore(&c, "R", &resp["config"], &data).await;
        check_restored(&c, "R", &info).await;
    });
    drop(s);
    let s = start(r, shards, &dir);
    runtime.block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let mut info = api(&c, "$JS.API.STREAM.INFO.R", "").await;
        // The info's envelope as the restore's, to check it the same way.
        info["type"] = json!("io.nats.jetstream.api.v1.stream_create_response");
        check_restored(&c, "R", &info).await;
    });
}

/// Snapshots move between rnats and the reference in both directions.
fn with_reference(r: common::Reactor, shards: &str) {
    let dir = store_dir(&format!("xr-{shards}-{}", r.flag()));
    let s = start(r, shards, &dir.join("rnats"));
    let g = reference(&dir.join("ref"));
    rt().block_on(async {
        let ours = async_nats::connect(s.url()).await.unwrap();
        let theirs = async_nats::connect(g.url()).await.unwrap();
        // rnats → reference.
        populate(&ours, "A", stream::StorageType::File).await;
        let (mine, data, _) = snapshot(&ours, "A", json!({})).await;
        let info = restore(&theirs, "A", &mine["config"], &data).await;
        check_restored(&theirs, "A", &info).await;
        // reference → rnats.
        populate(&theirs, "B", stream::StorageType::File).await;
        let (resp, data, eof) = snapshot(&theirs, "B", json!({})).await;
        assert_eq!(eof.as_deref(), Some("204"));
        // The two snapshot responses of the same contents agree (but for names and times).
        let (mut a, mut b) = (mine.clone(), resp.clone());
        for v in [&mut a, &mut b] {
            for k in ["first_ts", "last_ts"] {
                v["state"][k] = Value::Null;
            }
            v["config"]["name"] = Value::Null;
            v["config"]["subjects"] = Value::Null;
        }
        assert_eq!(a, b);
        let info = restore(&ours, "B", &resp["config"], &data).await;
        check_restored(&ours, "B", &info).await;
        // The same archive and config restored by both: the same config and state.
        for cfg in [resp["config"].clone(), json!({"name": "B", "subjects": ["B.>"]})] {
            let mut infos = Vec::new();
            for c in [&ours, &theirs] {
                let _ = api(c, "$JS.API.STREAM.DELETE.B", "").await;
                infos.push(restore(c, "B", &cfg, &data).await);
            }
            assert_eq!(infos[0]["config"], infos[1]["config"]);
            assert_eq!(infos[0]["state"], infos[1]["state"]);
            assert_eq!(infos[0]["created"], infos[1]["created"]);
        }
    });
}

/// The answers to bad snapshot and restore requests, error objects only.
async fn validation(c: &async_nats::Client) -> Vec<Value> {
    let js = jetstream::new(c.clone());
    js.create_stream(stream::Config {
        name: "V".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let cases: &[(&str, &str)] = &[
        ("$JS.API.STREAM.SNAPSHOT.V", ""),
        ("$JS.API.STREAM.SNAPSHOT.V", "{}"),
        ("$JS.API.STREAM.SNAPSHOT.NOPE", r#"{"deliver_subject":"x"}"#),
        ("$JS.API.STREAM.SNAPSHOT.V", r#"{"deliver_subject":"x""#),
        ("$JS.API.STREAM.SNAPSHOT.V", r#"{"deliver_subject":5}"#),
        ("$JS.API.STREAM.SNAPSHOT.V", r#"{"deliver_subject":"x","bogus":1}"#),
        ("$JS.API.STREAM.SNAPSHOT.V", r#"{"deliver_subject":""}"#),
        ("$JS.API.STREAM.SNAPSHOT.V", r#"{"deliver_subject":"a..b"}"#),
        ("$JS.API.STREAM.RESTORE.V", ""),
        ("$JS.API.STREAM.RESTORE.V", "nope"),
        ("$JS.API.STREAM.RESTORE.V", r#"{"config":{"name":"V"}}"#),
        ("$JS.API.STREAM.RESTORE.W", r#"{"config":{"name":"V"}}"#),
        ("$JS.API.STREAM.RESTORE.W", r#"{"config":{"name":"W","max_msgs":"x"}}"#),
        (
            "$JS.API.STREAM.RESTORE.W",
            r#"{"config":{"name":"W","retention":"bogus"}}"#,
        ),
        (
            "$JS.API.STREAM.RESTORE.W",
            r#"{"config":{"name":"W","storage":"file","replicas":-1,"max_age":-5}}"#,
        ),
    ];
    let mut out = Vec::new();
    for (subject, body) in cases {
        let v = api(c, subject, body).await;
        out.push(json!({"case": format!("{subject} {body}"), "type": v["type"], "error": v["error"]}));
    }
    out
}

fn errors_match_reference(r: common::Reactor, shards: &str) {
    let dir = store_dir(&format!("val-{shards}-{}", r.flag()));
    let s = start(r, shards, &dir.join("rnats"));
    let g = reference(&dir.join("ref"));
    rt().block_on(async {
        let ours = validation(&async_nats::connect(s.url()).await.unwrap()).await;
        let theirs = validation(&async_nats::connect(g.url()).await.unwrap()).await;
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(a, b);
        }
        assert_eq!(ours[0]["error"]["err_code"], 10003);
        assert_eq!(ours[2]["error"]["err_code"], 10059);
        assert_eq!(ours[10]["error"]["err_code"], 10130);
    });
}

/// Garbage in place of an archive fails the restore; an abandoned one cleans up.
fn bad_uploads(r: common::Reactor, shards: &str) {
    let dir = store_dir(&format!("bad-{shards}-{}", r.flag()));
    let s = start(r, shards, &dir);
    rt().block_on(async {
        let c = async_nats::connect(s.url()).await.unwrap();
        let cfg = json!({"name": "G"});
        let info = restore(&c, "G", &cfg, &[7u8; 5000]).await;
        assert_eq!(
            info["type"], "io.nats.jetstream.api.v1.stream_create_response",
            "{info}"
        );
        assert_eq!(info["error"]["err_code"], 10062, "{info}");
        assert_eq!(
            info["error"]["description"], "restore failed: s2: corrupt input",
            "{info}"
        );
        let gone = api(&c, "$JS.API.STREAM.INFO.G", "").await;
        assert_eq!(gone["error"]["err_code"], 10059, "{gone}");
        // Another stream's archive.
        let js = jetstream::new(c.clone());
        js.create_stream(stream::Config {
            name: "OTHER".into(),
            ..Default::default()
        })
        .await
        .unwrap();
        js.publish("OTHER", "x".into()).await.unwrap().await.unwrap();
        let (_, other, _) = snapshot(&c, "OTHER", json!({})).await;
        let info = restore(&c, "G", &cfg, &other).await;
        assert_eq!(
            info["error"]["description"], "restore failed: stream names do not match",
            "{info}"
        );
        // Subjects another stream has: refused when the stream would be created.
        let _ = api(&c, "$JS.API.STREAM.DELETE.OTHER", "").await;
        js.create_stream(stream::Config {
            name: "TAKEN".into(),
            subjects: vec!["OTHER".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        let info = restore(&c, "OTHER", &json!({"name": "OTHER"}), &other).await;
        assert_eq!(info["error"]["err_code"], 10065, "{info}");
        let gone = api(&c, "$JS.API.STREAM.INFO.OTHER", "").await;
        assert_eq!(gone["error"]["err_code"], 10059, "{gone}");
        // A chunk without a reply subject ends the restore.
        let resp = api(&c, "$JS.API.STREAM.RESTORE.NR", r#"{"config":{"name":"NR"}}"#).await;
        let deliver = resp["deliver_subject"].as_str().unwrap().to_string();
        c.publish(deliver.clone(), b"\xff\x06\x00\x00S2sTwO".to_vec().into())
            .await
            .unwrap();
        c.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let after = c.request(deliver, "".into()).await;
        assert!(after.is_err(), "the restore still answers");
        // A good start that then is no archive.
        let mut bogus = b"\xff\x06\x00\x00S2sTwO".to_vec();
        bogus.extend_from_slice(&[0x01, 0x05, 0x00, 0x00, 1, 2, 3, 4, 5]);
        let info = restore(&c, "G", &cfg, &bogus).await;
        assert_eq!(info["error"]["err_code"], 10062, "{info}");
        let want = "restore failed: s2: corrupt input, crc mismatch";
        assert_eq!(info["error"]["description"], want, "{info}");
        // Abandoned after one chunk: after the stall timeout, nothing remains and the
        // deliver subject no longer answers.
        let resp = api(&c, "$JS.API.STREAM.RESTORE.H", r#"{"config":{"name":"H"}}"#).await;
        let deliver = resp["deliver_subject"].as_str().unwrap().to_string();
        assert!(deliver.starts_with("$JS.SNAPSHOT.RESTORE.H."), "{deliver}");
        // The s2 stream identifier: a good start.
        let start = b"\xff\x06\x00\x00S2sTwO".to_vec();
        let ack = c.request(deliver.clone(), start.into()).await.unwrap();
        assert!(ack.payload.is_empty(), "{:?}", ack.payload);
        tokio::time::sleep(Duration::from_secs(7)).await;
        let after = c.request(deliver, vec![1u8; 100].into()).await;
        assert!(after.is_err(), "the abandoned restore still answers");
        let snaps = dir.join("jetstream/$G/__snapshots__");
        let left: Vec<_> = std::fs::read_dir(&snaps)
            .map(|d| d.flatten().collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
        let gone = api(&c, "$JS.API.STREAM.INFO.H", "").await;
        assert_eq!(gone["error"]["err_code"], 10059, "{gone}");
    });
}

macro_rules! snap_tests {
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

snap_tests!(
    round_trip,
    flow_control,
    large,
    survives_restart,
    with_reference,
    errors_match_reference,
    bad_uploads
);
