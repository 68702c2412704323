//! Store directories written by the real reference server (nats-server 2.14.0), read back
//! with `storage::reference::dir` and replayed into a `MemStore`: every message (subject,
//! headers, payload, sequence, timestamp) and every delete must match what the reference
//! itself serves. Covers plain, many-block, s2-compressed and encrypted (chachapoly, aes,
//! rotated keys) streams, deletes (erase and no-erase), purges, TTL headers, and both a
//! clean stop and kill -9.

mod reference_util;

use reference_util::*;
use serde_json::json;
use storage::crypto::{Cipher, EncryptionConfig};
use storage::reference::dir::{list_streams, StreamDir};
use storage::{MemStore, Store, StoreConfig, StoreError};

#[derive(Clone)]
struct Case {
    name: &'static str,
    /// Inside `jetstream { }`.
    js: &'static str,
    enc: Option<EncryptionConfig>,
    stream: serde_json::Value,
    kill9: bool,
    msgs: usize,
}

fn stream_cfg(extra: serde_json::Value) -> serde_json::Value {
    let mut v = json!({
        "name": "S",
        "subjects": ["s.>"],
        "storage": "file",
        "allow_msg_ttl": true,
        // Small max_bytes makes the reference pick 32 KB blocks (many blocks).
        "max_bytes": 120_000,
    });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            o.insert(k.clone(), x.clone());
        }
    }
    v
}

/// Publish a varied workload and apply deletes and purges.
fn workload(c: &mut Client, n: usize) {
    for i in 0..n {
        let subject = match i % 5 {
            0 => "s.a".to_string(),
            1 => format!("s.b.{}", i % 7),
            2 => "s.p.x".to_string(),
            3 => "s.k".to_string(),
            _ => format!("s.c.{i}"),
        };
        let payload: Vec<u8> = (0..(i * 37) % 300).map(|j| (i + j) as u8).collect();
        let headers: Vec<u8> = match i % 4 {
            0 => Vec::new(),
            1 => format!("NATS/1.0\r\nX-I: {i}\r\n\r\n").into_bytes(),
            2 => b"NATS/1.0\r\nNats-TTL: 1h\r\n\r\n".to_vec(),
            _ => b"NATS/1.0\r\nA: b\r\nC: d\r\n\r\n".to_vec(),
        };
        let seq = c.js_publish(&subject, &headers, &payload);
        assert_eq!(seq, i as u64 + 1);
    }
    // Deletes: secure erase (the default) and plain.
    // (Late enough to be still there when a max_msgs limit of 200 dropped the oldest.)
    let base = n as u64 - 150;
    for (seq, no_erase) in [
        (base + 3, true),
        (base + 10, false),
        (base + 11, true),
        (base + 50, false),
        (n as u64 - 5, true),
    ] {
        let v = c.api(
            "$JS.API.STREAM.MSG.DELETE.S",
            &json!({ "seq": seq, "no_erase": no_erase }),
        );
        assert_eq!(v["success"], true, "{v}");
    }
    // Purges: by subject, and keep-last on another.
    c.api("$JS.API.STREAM.PURGE.S", &json!({ "filter": "s.p.x" }));
    c.api("$JS.API.STREAM.PURGE.S", &json!({ "filter": "s.k", "keep": 3 }));
    // The last message deleted too (the last sequence must survive).
    let last = n as u64;
    c.api("$JS.API.STREAM.MSG.DELETE.S", &json!({ "seq": last, "no_erase": true }));
}

fn import(dir: &std::path::Path, enc: Option<&EncryptionConfig>) -> (MemStore, Vec<String>, StreamDir) {
    let (s, r, d, _) = import_stats(dir, enc);
    (s, r, d)
}

fn import_stats(
    dir: &std::path::Path,
    enc: Option<&EncryptionConfig>,
) -> (
    MemStore,
    Vec<String>,
    StreamDir,
    storage::reference::import::ImportStats,
) {
    let sd = StreamDir::open(dir, "$G", enc).expect("open stream dir");
    let mut cfg = StoreConfig::new(&sd.name);
    cfg.allow_msg_ttl = true;
    let mut store = MemStore::new(cfg);
    let mut reports = Vec::new();
    let stats = sd.import_into(&mut store, &mut |r| reports.push(r)).expect("import");
    (store, reports, sd, stats)
}

fn check_same(store: &mut MemStore, st: &serde_json::Value, want: &[RefMsg]) {
    let fs = store.fast_state();
    assert_eq!(fs.msgs, st["messages"].as_u64().unwrap(), "message count");
    assert_eq!(fs.msgs, want.len() as u64);
    assert_eq!(fs.last_seq, st["last_seq"].as_u64().unwrap(), "last seq");
    if fs.msgs > 0 {
        assert_eq!(fs.first_seq, st["first_seq"].as_u64().unwrap(), "first seq");
    }
    let got: Vec<RefMsg> = store
        .messages()
        .map(|m| RefMsg {
            seq: m.seq,
            subject: m.subject.clone(),
            headers: m.headers.to_vec(),
            payload: m.payload.to_vec(),
            ts: m.ts,
        })
        .collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g, w);
    }
}

fn run(case: &Case) {
    if !reference_available() {
        return;
    }
    let tmp = TempDir::new(case.name);
    let mut srv = RefServer::start(&tmp.0, case.js);
    let mut c = srv.client();
    c.api("$JS.API.STREAM.CREATE.S", &case.stream);
    workload(&mut c, case.msgs);
    let (st, want) = reference_messages(&mut c, "S");
    assert!(want.len() > 100, "{}: workload kept too little", case.name);
    drop(c);
    if case.kill9 {
        srv.kill();
    } else {
        srv.stop();
    }
    let dir = srv.stream_dir("S");
    let blocks = std::fs::read_dir(dir.join("msgs"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".blk"))
        .count();
    assert!(blocks >= 2, "{}: wanted several blocks, got {blocks}", case.name);
    // The files really are what the case claims: compressed blocks carry the `cmp`
    // header, encrypted ones have key files and no plaintext.
    let raw: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.join("msgs"))
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    for (name, data) in &raw {
        if let Some(n) = name.strip_suffix(".blk") {
            if case.enc.is_some() {
                assert!(
                    raw.iter().any(|(k, _)| *k == format!("{n}.key")),
                    "{name} has a key file"
                );
                assert!(!data.windows(4).any(|w| w == b"s.b."), "{name} is encrypted");
            } else {
                assert!(data.windows(4).any(|w| w == b"s.b.") || data.starts_with(b"cmp"));
            }
        }
    }
    let compressed = case.stream["compression"] == "s2";
    if compressed && case.enc.is_none() {
        assert!(
            raw.iter().any(|(_, d)| d.starts_with(b"cmp")),
            "{}: no compressed block",
            case.name
        );
    }

    let (mut store, reports, sd, stats) = import_stats(&dir, case.enc.as_ref());
    assert_eq!(stats.corrupt, 0);
    assert_eq!(sd.encrypted(), case.enc.is_some());
    let meta: serde_json::Value = serde_json::from_slice(&sd.meta_inf).expect("meta.inf is JSON");
    assert_eq!(meta["name"], "S");
    for r in &reports {
        assert!(
            r.contains("index.db is outdated"),
            "{}: unexpected report {r}",
            case.name
        );
    }
    if !case.kill9 {
        assert!(reports.is_empty(), "{}: {reports:?}", case.name);
        assert!(sd.index_db().unwrap().is_some(), "a clean stop writes index.db");
        assert!(
            stats.index_applied,
            "{}: the index.db of a clean stop is current",
            case.name
        );
    }
    check_same(&mut store, &st, &want);
    if case.stream.get("max_msgs").is_some() {
        // Without index.db the limit-removed head would come back: the index did that work.
        let idx = dir.join("msgs").join("index.db");
        let aside = dir.join("index.db.aside");
        std::fs::rename(&idx, &aside).unwrap();
        let (bare, _, _) = import(&dir, case.enc.as_ref());
        assert!(bare.fast_state().msgs > want.len() as u64, "the index.db was needed");
        std::fs::rename(&aside, &idx).unwrap();
    }
    // TTL headers became TTLs.
    assert!(
        store.next_expiry().is_some(),
        "{}: Nats-TTL headers imported as TTLs",
        case.name
    );

    // The server reads its own directory back to the same state (sanity of the setup).
    srv.restart();
    let mut c = srv.client();
    let (st2, want2) = reference_messages(&mut c, "S");
    assert_eq!(st2["messages"], st["messages"]);
    assert_eq!(want2, want);
    drop(c);
    srv.stop();
    assert_eq!(list_streams(&srv.store_dir).unwrap().len(), 1);
}

fn chacha() -> EncryptionConfig {
    EncryptionConfig::new("s3cr3t-key", Cipher::ChaCha)
}

fn aes() -> EncryptionConfig {
    EncryptionConfig::new("s3cr3t-key", Cipher::Aes)
}

#[test]
fn plain_clean_stop() {
    run(&Case {
        name: "plain",
        js: "",
        enc: None,
        stream: stream_cfg(json!({})),
        kill9: false,
        msgs: 400,
    });
}

#[test]
fn limits_remove_without_tombstones() {
    // Max msgs discards the oldest without tombstones: only index.db knows.
    run(&Case {
        name: "limits",
        js: "",
        enc: None,
        stream: stream_cfg(json!({ "max_msgs": 200 })),
        kill9: false,
        msgs: 400,
    });
}

#[test]
fn plain_kill9() {
    run(&Case {
        name: "plain-kill9",
        js: "",
        enc: None,
        stream: stream_cfg(json!({})),
        kill9: true,
        msgs: 400,
    });
}

#[test]
fn s2_compressed() {
    for kill9 in [false, true] {
        run(&Case {
            name: "s2",
            js: "",
            enc: None,
            stream: stream_cfg(json!({ "compression": "s2" })),
            kill9,
            msgs: 400,
        });
    }
}

#[test]
fn encrypted_chachapoly() {
    run(&Case {
        name: "chacha",
        js: "key: \"s3cr3t-key\"\n  cipher: chachapoly",
        enc: Some(chacha()),
        stream: stream_cfg(json!({})),
        kill9: false,
        msgs: 400,
    });
}

#[test]
fn encrypted_aes_compressed_kill9() {
    run(&Case {
        name: "aes",
        js: "key: \"s3cr3t-key\"\n  cipher: aes",
        enc: Some(aes()),
        stream: stream_cfg(json!({ "compression": "s2" })),
        kill9: true,
        msgs: 400,
    });
}

#[test]
fn encrypted_needs_the_key() {
    if !reference_available() {
        return;
    }
    let tmp = TempDir::new("nokey");
    let mut srv = RefServer::start(&tmp.0, "key: \"k1\"\n  cipher: chachapoly");
    let mut c = srv.client();
    c.api("$JS.API.STREAM.CREATE.S", &stream_cfg(json!({})));
    for i in 0..20 {
        c.js_publish("s.a", b"", format!("m{i}").as_bytes());
    }
    drop(c);
    srv.stop();
    let dir = srv.stream_dir("S");
    // No key: refused with the reference's words.
    let e = StreamDir::open(&dir, "$G", None).unwrap_err();
    assert!(
        e.to_string().contains("encrypted store encountered with no main key"),
        "{e}"
    );
    // A wrong key: refused.
    assert!(matches!(
        StreamDir::open(&dir, "$G", Some(&EncryptionConfig::new("other", Cipher::ChaCha))),
        Err(StoreError::Encryption(_))
    ));
    // The other cipher configured: the reference converts, so do we (both ciphers tried).
    let (store, _, _) = import(&dir, Some(&EncryptionConfig::new("k1", Cipher::Aes)));
    assert_eq!(store.fast_state().msgs, 20);
    // Rotated: key is new, prev_key is the old one.
    let rotated = EncryptionConfig {
        key: "k2".into(),
        cipher: Cipher::ChaCha,
        prev_key: Some("k1".into()),
    };
    let (store, _, _) = import(&dir, Some(&rotated));
    assert_eq!(store.fast_state().msgs, 20);
    // Another account's keys do not open it (the account is part of the derivation).
    assert!(StreamDir::open(&dir, "ACC", Some(&EncryptionConfig::new("k1", Cipher::ChaCha))).is_err());
}

#[test]
fn purges_of_everything_and_up_to_a_sequence() {
    for kill9 in [false, true] {
        let tmp = TempDir::new("purge-all");
        let mut srv = RefServer::start(&tmp.0, "");
        let mut c = srv.client();
        c.api("$JS.API.STREAM.CREATE.S", &stream_cfg(json!({})));
        let publish = |c: &mut Client, n: usize, tag: &str| {
            for i in 0..n {
                c.js_publish(
                    &format!("s.{tag}.{}", i % 4),
                    b"",
                    format!("{tag}-{i}").repeat(20).as_bytes(),
                );
            }
        };
        publish(&mut c, 200, "a");
        // Purge below a sequence (a compact), then everything, with writes between.
        c.api("$JS.API.STREAM.PURGE.S", &json!({ "seq": 120 }));
        publish(&mut c, 50, "b");
        c.api("$JS.API.STREAM.PURGE.S", &json!({}));
        publish(&mut c, 30, "c");
        c.api("$JS.API.STREAM.MSG.DELETE.S", &json!({ "seq": 265 }));
        let (st, want) = reference_messages(&mut c, "S");
        assert_eq!(st["first_seq"].as_u64(), Some(251));
        drop(c);
        if kill9 {
            srv.kill();
        } else {
            srv.stop();
        }
        let (mut store, reports, _) = import(&srv.stream_dir("S"), None);
        for r in &reports {
            assert!(r.contains("index.db is outdated"), "unexpected report {r}");
        }
        check_same(&mut store, &st, &want);
    }
}
