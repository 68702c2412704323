//! Encryption at rest in the file store with the reference's settings: messages sealed by
//! the stream's record sealer (chachapoly and aes), nothing of their subjects, headers or
//! payloads in plaintext in any file of the store (blocks, state file), a restart reads
//! them back (from the state file, and by scanning the blocks), a rotated key opens them
//! through `prev_key`, and a wrong key (or none) is refused at open.

mod common;

use common::TempDir;
use std::sync::Arc;
use storage::crypto::{Cipher, EncryptionConfig, StreamKeys};
use storage::filestore::Compression;
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, Store, StoreConfig, StoreError};

const SECRET: &[u8] = b"the-plaintext-marker";
const SUBJECT: &str = "enc.distinctive-subject-marker";
const HEADERS: &[u8] = b"NATS/1.0\r\nX-Distinctive-Header: header-marker-value\r\n\r\n";

fn try_open(dir: &std::path::Path, enc: Option<&EncryptionConfig>, s2: bool) -> storage::Result<FileStore> {
    let mut f = FileStoreConfig::new(dir);
    f.io = IoChoice::Auto;
    f.cipher = enc.map(|enc| Arc::new(StreamKeys::new(enc, "ACC", "S").record_sealer()) as _);
    if s2 {
        f.compression = Compression::S2;
    }
    FileStore::open(f, StoreConfig::new("S"))
}

fn open(dir: &std::path::Path, enc: &EncryptionConfig, s2: bool) -> FileStore {
    try_open(dir, Some(enc), s2).expect("open")
}

/// No file of the store holds the subject, a header, or a payload in plaintext.
fn assert_sealed(dir: &std::path::Path, what: &str) {
    let needles: [&[u8]; 4] = [
        SECRET,
        SUBJECT.as_bytes(),
        b"distinctive-subject",
        b"header-marker-value",
    ];
    for n in needles {
        assert!(
            !files_contain(dir, n),
            "{what}: {:?} in plaintext on disk",
            String::from_utf8_lossy(n)
        );
    }
}

fn check_all(s: &mut FileStore, n: u64, what: &str) {
    for i in 1..=n {
        let m = s.load_msg(i).unwrap_or_else(|e| panic!("{what}: load {i}: {e}"));
        assert_eq!(m.payload, body(i), "{what}");
        assert_eq!(m.subject, SUBJECT, "{what}");
        assert_eq!(&m.headers[..], HEADERS, "{what}");
    }
    assert_eq!(s.corruptions(), 0, "{what}");
    assert_eq!(s.subjects_totals(">").get(SUBJECT), Some(&n), "{what}");
}

fn files_contain(dir: &std::path::Path, needle: &[u8]) -> bool {
    std::fs::read_dir(dir).expect("dir").any(|e| {
        let p = e.expect("entry").path();
        std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
    })
}

fn body(i: u64) -> Vec<u8> {
    let mut v = SECRET.to_vec();
    v.extend_from_slice(format!(" {i}").as_bytes());
    v
}

fn run(cipher: Cipher, s2: bool) {
    let dir = TempDir::new(None, "encryption");
    let enc = EncryptionConfig::new("s3cr3t-key", cipher);
    let mut s = open(dir.path(), &enc, s2);
    for i in 1..=50u64 {
        s.store_msg(SUBJECT, HEADERS, &body(i), 0).expect("store");
    }
    // Running (no state file yet), everything synced: the blocks alone.
    s.sync().expect("sync");
    assert_sealed(dir.path(), "running");
    s.stop().expect("stop");
    assert!(
        dir.path().join("state.rns").exists(),
        "a clean stop writes the state file"
    );
    assert_sealed(dir.path(), "stopped (blocks and state file)");

    // The same key reads everything back: from the state file, then by scanning.
    let mut s = open(dir.path(), &enc, s2);
    assert!(s.opened_from_state());
    check_all(&mut s, 50, "from the state file");
    s.stop().expect("stop");
    std::fs::remove_file(dir.path().join("state.rns")).expect("rm state");
    let mut s = open(dir.path(), &enc, s2);
    assert!(!s.opened_from_state());
    check_all(&mut s, 50, "scanned");
    s.stop().expect("stop");

    // A wrong key, the other cipher, or no key at all: refused, with or without the
    // state file, and nothing is changed by trying.
    let before = snapshot(dir.path());
    let wrong = EncryptionConfig::new("wrong-key", cipher);
    for (what, enc) in [("wrong key", Some(&wrong)), ("no key", None)] {
        match try_open(dir.path(), enc, s2) {
            Err(StoreError::Encryption(_)) => {}
            Err(e) => panic!("{what}: {e}"),
            Ok(_) => panic!("{what}: opened"),
        }
    }
    assert!(before == snapshot(dir.path()), "a refused open changed the blocks");

    // Rotated: the new key with the old one as prev_key opens everything; what is written
    // now is sealed under the new key, and the new key alone then refuses the old records.
    let mut rotated = EncryptionConfig::new("another-key", cipher);
    rotated.prev_key = Some("s3cr3t-key".into());
    let mut s = open(dir.path(), &rotated, s2);
    check_all(&mut s, 50, "rotated");
    s.store_msg(SUBJECT, HEADERS, &body(51), 0).expect("store");
    s.stop().expect("stop");
    assert_sealed(dir.path(), "rotated");
    let mut s = open(dir.path(), &rotated, s2);
    check_all(&mut s, 51, "rotated, reopened");
    s.stop().expect("stop");
    std::fs::remove_file(dir.path().join("state.rns")).expect("rm state");
    let mut s = open(dir.path(), &rotated, s2);
    check_all(&mut s, 51, "rotated, scanned");
    drop(s);
    let new_only = EncryptionConfig::new("another-key", cipher);
    assert!(matches!(
        try_open(dir.path(), Some(&new_only), s2),
        Err(StoreError::Encryption(_))
    ));
}

/// The store's block files and their contents.
fn snapshot(dir: &std::path::Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "blk"))
        })
        .map(|e| {
            let e = e.expect("entry");
            (e.file_name(), std::fs::read(e.path()).expect("read"))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn chachapoly() {
    run(Cipher::ChaCha, false);
}

#[test]
fn aes_with_s2() {
    run(Cipher::Aes, true);
}
