//! Stream snapshots both ways with the real reference server (nats-server 2.14.0): a
//! snapshot taken by the reference (`$JS.API.STREAM.SNAPSHOT`) restores into a `MemStore`
//! with every message intact, and a snapshot written by `MemStore::snapshot` restores into
//! the reference (`$JS.API.STREAM.RESTORE`), which then serves the same messages.

mod reference_util;

use reference_util::*;
use serde_json::json;
use storage::crypto::{Cipher, EncryptionConfig};
use storage::reference::dir::StreamDir;
use storage::reference::snapshot::restore;
use storage::{MemStore, SnapshotMeta, Store, StoreConfig};

/// Take a snapshot of `stream` from the reference: the chunks, concatenated.
fn take_snapshot(c: &mut Client, stream: &str) -> Vec<u8> {
    let deliver = format!("snap.deliver.{stream}");
    c.subscribe(&deliver);
    let v = c.api(
        &format!("$JS.API.STREAM.SNAPSHOT.{stream}"),
        &json!({ "deliver_subject": deliver, "chunk_size": 4096 }),
    );
    assert!(v.get("config").is_some(), "{v}");
    let mut out = Vec::new();
    let mut chunks = 0;
    loop {
        let m = c.next_msg();
        if m.subject != deliver {
            continue;
        }
        if m.payload.is_empty() {
            assert_eq!(
                m.status(),
                Some(204),
                "snapshot ended with {:?}",
                String::from_utf8_lossy(&m.headers)
            );
            break;
        }
        out.extend_from_slice(&m.payload);
        chunks += 1;
        // Full chunks carry an ack subject (the last, short one has none).
        if let Some(reply) = m.reply.clone() {
            assert!(reply.starts_with(&format!("$JS.SNAPSHOT.ACK.{stream}.")), "{reply}");
            c.publish(&reply, None, b"", b"");
        }
    }
    assert!(chunks > 1, "a multi-chunk snapshot");
    out
}

/// Restore `data` into the reference as stream `cfg.name`.
fn send_restore(c: &mut Client, cfg: &serde_json::Value, data: &[u8]) -> serde_json::Value {
    let name = cfg["name"].as_str().unwrap();
    let v = c.api(&format!("$JS.API.STREAM.RESTORE.{name}"), &json!({ "config": cfg }));
    let deliver = v["deliver_subject"].as_str().expect("deliver subject").to_string();
    for chunk in data.chunks(8192) {
        let r = c.request(&deliver, b"", chunk);
        assert!(
            r.payload.is_empty(),
            "chunk ack: {:?}",
            String::from_utf8_lossy(&r.payload)
        );
    }
    let done = c.request(&deliver, b"", b"");
    let v = done.json();
    assert!(v.get("error").is_none(), "restore: {v}");
    v
}

fn workload(c: &mut Client, n: usize) {
    for i in 0..n {
        let h = if i % 3 == 0 {
            format!("NATS/1.0\r\nX-I: {i}\r\n\r\n").into_bytes()
        } else {
            Vec::new()
        };
        let payload: Vec<u8> = (0..(i * 53) % 700).map(|j| (i * 7 + j) as u8).collect();
        c.js_publish(&format!("s.{}", i % 6), &h, &payload);
    }
    for seq in [2u64, 9, 40] {
        c.api(
            "$JS.API.STREAM.MSG.DELETE.S",
            &json!({ "seq": seq, "no_erase": seq != 9 }),
        );
    }
    c.api("$JS.API.STREAM.PURGE.S", &json!({ "filter": "s.5" }));
    // A durable consumer, so the snapshot carries obs/ files.
    c.api(
        "$JS.API.CONSUMER.CREATE.S.C",
        &json!({ "stream_name": "S", "config": { "durable_name": "C", "ack_policy": "explicit" } }),
    );
}

fn as_ref_msgs(s: &MemStore) -> Vec<RefMsg> {
    s.messages()
        .map(|m| RefMsg {
            seq: m.seq,
            subject: m.subject.clone(),
            headers: m.headers.to_vec(),
            payload: m.payload.to_vec(),
            ts: m.ts,
        })
        .collect()
}

fn reference_to_memstore(js: &str, extra: serde_json::Value) {
    if !reference_available() {
        return;
    }
    let tmp = TempDir::new("snap-from-ref");
    let srv = RefServer::start(&tmp.0, js);
    let mut c = srv.client();
    let mut cfg = json!({ "name": "S", "subjects": ["s.>"], "storage": "file", "max_bytes": 120_000 });
    for (k, v) in extra.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    c.api("$JS.API.STREAM.CREATE.S", &cfg);
    workload(&mut c, 300);
    let (st, want) = reference_messages(&mut c, "S");
    let snap = take_snapshot(&mut c, "S");

    let mut store = MemStore::new(StoreConfig::new("S"));
    let mut reports = Vec::new();
    let r = restore(&mut &snap[..], &mut store, &mut |l| reports.push(l)).expect("restore the reference's snapshot");
    assert!(reports.is_empty(), "{reports:?}");
    assert!(
        r.stats.index_applied,
        "the reference's snapshot carries a current index.db"
    );
    let meta: serde_json::Value = serde_json::from_slice(&r.meta_inf).unwrap();
    assert_eq!(meta["name"], "S");
    assert!(
        r.extra.iter().any(|(p, _)| p == "obs/C/meta.inf"),
        "{:?}",
        r.extra.iter().map(|e| &e.0).collect::<Vec<_>>()
    );
    assert!(r.extra.iter().any(|(p, _)| p == "obs/C/o.dat"));
    let fs = store.fast_state();
    assert_eq!(fs.msgs, st["messages"].as_u64().unwrap());
    assert_eq!(fs.first_seq, st["first_seq"].as_u64().unwrap());
    assert_eq!(fs.last_seq, st["last_seq"].as_u64().unwrap());
    assert_eq!(as_ref_msgs(&store), want);
}

#[test]
fn reference_snapshot_into_memstore() {
    reference_to_memstore("", json!({}));
}

#[test]
fn reference_snapshot_of_encrypted_compressed_stream() {
    // The reference's snapshots hold plain blocks whatever the stream's storage does.
    reference_to_memstore("key: \"k\"\n  cipher: aes", json!({ "compression": "s2" }));
}

#[test]
fn memstore_snapshot_into_reference() {
    memstore_into_reference("", None);
}

#[test]
fn memstore_snapshot_into_encrypted_reference() {
    // The reference encrypts the plain blocks of the restored snapshot as it loads them.
    let enc = EncryptionConfig::new("k", Cipher::ChaCha);
    memstore_into_reference("key: \"k\"\n  cipher: chachapoly", Some(enc));
}

fn memstore_into_reference(js: &str, enc: Option<EncryptionConfig>) {
    if !reference_available() {
        return;
    }
    let mut store = MemStore::new(StoreConfig::new("R"));
    for i in 0..500u32 {
        let h = if i % 4 == 1 {
            b"NATS/1.0\r\nK: v\r\n\r\n".to_vec()
        } else {
            Vec::new()
        };
        let payload = vec![(i % 251) as u8; (i as usize * 31) % 2000];
        store
            .store_raw_msg(
                &format!("r.{}", i % 9),
                &h,
                &payload,
                0,
                1_700_000_000_000_000_000 + i64::from(i) * 1000,
                0,
                false,
            )
            .unwrap();
    }
    for seq in [1u64, 2, 77, 250, 500] {
        assert!(store.remove_msg(seq).unwrap());
    }
    let cfg = json!({ "name": "R", "subjects": ["r.>"], "storage": "file" });
    let meta = SnapshotMeta {
        meta_inf: json!({ "name": "R", "subjects": ["r.>"], "storage": "file", "created": "2026-01-02T03:04:05Z" })
            .to_string()
            .into_bytes(),
        extra: Vec::new(),
    };
    let mut snap = Vec::new();
    store.snapshot(&meta, &mut snap).unwrap();

    let tmp = TempDir::new("snap-to-ref");
    let mut srv = RefServer::start(&tmp.0, js);
    let mut c = srv.client();
    let v = send_restore(&mut c, &cfg, &snap);
    assert_eq!(v["config"]["name"], "R", "{v}");
    let (st, got) = reference_messages(&mut c, "R");
    assert_eq!(st["messages"].as_u64(), Some(495));
    assert_eq!(st["first_seq"].as_u64(), Some(3));
    assert_eq!(st["last_seq"].as_u64(), Some(500), "the deleted last sequence survives");
    assert_eq!(got, as_ref_msgs(&store));
    // And it survives the reference's own restart.
    drop(c);
    srv.stop();
    srv.restart();
    let mut c = srv.client();
    let (_, again) = reference_messages(&mut c, "R");
    assert_eq!(again, got);
    // Full circle: the directory the reference made of our snapshot reads back here too.
    drop(c);
    srv.stop();
    let sd = StreamDir::open(&srv.stream_dir("R"), "$G", enc.as_ref()).unwrap();
    assert_eq!(sd.encrypted(), enc.is_some());
    let mut back = MemStore::new(StoreConfig::new("R"));
    let stats = sd.import_into(&mut back, &mut |r| panic!("{r}")).unwrap();
    assert_eq!(stats.corrupt, 0);
    assert_eq!(as_ref_msgs(&back), got);
}
