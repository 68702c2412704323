//! Encryption at rest in the file store with the reference's settings: bodies sealed by the
//! stream's record sealer (chachapoly and aes), nothing of them in plaintext on disk, a
//! restart reads them back, a rotated key opens them through `prev_key`, and a wrong key
//! serves nothing and reports every record as corrupt.

mod common;

use common::TempDir;
use std::sync::Arc;
use storage::crypto::{Cipher, EncryptionConfig, StreamKeys};
use storage::filestore::Compression;
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, Store, StoreConfig};

const SECRET: &[u8] = b"the-plaintext-marker";

fn open(dir: &std::path::Path, enc: &EncryptionConfig, s2: bool) -> FileStore {
    let keys = StreamKeys::new(enc, "ACC", "S");
    let mut f = FileStoreConfig::new(dir);
    f.io = IoChoice::Auto;
    f.cipher = Some(Arc::new(keys.record_sealer()));
    if s2 {
        f.compression = Compression::S2;
    }
    FileStore::open(f, StoreConfig::new("S")).expect("open")
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
        s.store_msg("enc.x", b"NATS/1.0\r\nH: v\r\n\r\n", &body(i), 0)
            .expect("store");
    }
    s.stop().expect("stop");
    assert!(!files_contain(dir.path(), SECRET), "plaintext on disk");

    // The same key reads everything back.
    let mut s = open(dir.path(), &enc, s2);
    for i in 1..=50u64 {
        let m = s.load_msg(i).expect("load");
        assert_eq!(m.payload, body(i));
        assert_eq!(m.subject, "enc.x");
    }
    assert_eq!(s.corruptions(), 0);
    s.stop().expect("stop");

    // Rotated: the new key with the old one as prev_key.
    let mut rotated = EncryptionConfig::new("another-key", cipher);
    rotated.prev_key = Some("s3cr3t-key".into());
    let mut s = open(dir.path(), &rotated, s2);
    assert_eq!(s.load_msg(7).expect("load through prev_key").payload, body(7));
    s.stop().expect("stop");

    // A wrong key serves nothing and reports the records.
    let wrong = EncryptionConfig::new("wrong-key", cipher);
    let mut s = open(dir.path(), &wrong, s2);
    assert!(s.load_msg(7).is_err());
    assert!(s.corruptions() > 0);
}

#[test]
fn chachapoly() {
    run(Cipher::ChaCha, false);
}

#[test]
fn aes_with_s2() {
    run(Cipher::Aes, true);
}
