//! Preformatting: the tail block's file runs ahead of its records in zeros, so appends
//! overwrite allocated space. The file grows in steps (not with every batch), never past
//! the block size, and a store opens the same whether its tail was preformatted or not,
//! after a clean stop or with the tail's zeros still ahead of the last records.

mod common;

use common::{blocks, TempDir};
use std::collections::BTreeMap;
use std::path::Path;
use storage::filestore::{block_header, scan_block};
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, Store, StoreConfig};

const BLOCK: u64 = 256 * 1024;

fn config(dir: &Path, io: IoChoice, preformat: bool) -> FileStoreConfig {
    let mut f = FileStoreConfig::new(dir);
    f.block_size = BLOCK;
    f.io = io;
    f.preformat = preformat;
    f
}

/// (file length, logical end) of a block file.
fn lengths(path: &Path) -> (u64, u64) {
    let bytes = std::fs::read(path).expect("read");
    let hdr = block_header(&bytes).expect("header");
    let scan = scan_block(&bytes, &hdr, None, |_, _, _| {});
    assert!(scan.corruptions.is_empty(), "{path:?}: {:?}", scan.corruptions);
    (bytes.len() as u64, scan.end)
}

fn store(s: &mut FileStore, msgs: &mut BTreeMap<u64, Vec<u8>>, n: usize) {
    for _ in 0..n {
        let seq = s.fast_state().last_seq + 1;
        let body = format!("message {seq} ").repeat(8).into_bytes();
        let (got, _) = s.store_msg("pre.fmt", b"", &body, 0).expect("store");
        assert_eq!(got, seq);
        msgs.insert(seq, body);
        // One synced batch per message, as a synchronous publisher makes them.
        s.sync().expect("sync");
    }
}

fn check(dir: &Path, io: IoChoice, preformat: bool, msgs: &BTreeMap<u64, Vec<u8>>) -> FileStore {
    let mut s = FileStore::open(config(dir, io, preformat), StoreConfig::new("P")).expect("reopen");
    assert_eq!(s.corruptions(), 0);
    assert_eq!(s.fast_state().msgs, msgs.len() as u64);
    for (seq, body) in msgs {
        assert_eq!(&s.load_msg(*seq).expect("load").payload[..], &body[..], "seq {seq}");
    }
    s
}

fn grows_in_steps(io: IoChoice) {
    let dir = TempDir::new(None, "preformat-steps");
    let mut s = FileStore::open(config(dir.path(), io.clone(), true), StoreConfig::new("P")).expect("open");
    let mut msgs = BTreeMap::new();
    let mut sizes = Vec::new();
    for _ in 0..40 {
        store(&mut s, &mut msgs, 100);
        let tail = blocks(dir.path()).pop().expect("a block");
        let (file, end) = lengths(&tail);
        assert!(file >= end, "file {file} shorter than its records {end}");
        assert!(file <= BLOCK, "preformatted past the block size: {file}");
        if sizes.last() != Some(&(tail.clone(), file)) {
            sizes.push((tail, file));
        }
    }
    let n = blocks(dir.path()).len();
    assert!(n >= 3, "{n} blocks: the test should cross block boundaries");
    // 4,000 synced batches; the file grew a few times per block, not with each batch.
    assert!(
        sizes.len() <= 8 * n,
        "{} file sizes over {n} blocks: {sizes:?}",
        sizes.len()
    );
    // Every block but the tail ends at the block size or below, and each is preformatted
    // at least one step ahead of where it started.
    for (_, size) in &sizes {
        assert!(*size >= 64 * 1024, "{sizes:?}");
    }
    s.stop().expect("stop");
    drop(s);
    let _ = std::fs::remove_file(dir.path().join("state.rns"));
    // Scanned (no state file), preformatted or not, the log is the same.
    drop(check(dir.path(), io.clone(), true, &msgs));
    let _ = std::fs::remove_file(dir.path().join("state.rns"));
    drop(check(dir.path(), io, false, &msgs));
}

#[test]
fn the_tail_grows_in_steps_buffered() {
    grows_in_steps(IoChoice::Buffered);
}

#[test]
fn the_tail_grows_in_steps_direct() {
    grows_in_steps(IoChoice::Auto);
}

/// A store dropped without stopping (no final commit record, no state file), its tail
/// running on in zeros: every synced message is there, and writing goes on in a new block.
#[test]
fn an_unstopped_preformatted_tail_opens() {
    for io in [IoChoice::Buffered, IoChoice::Auto] {
        let dir = TempDir::new(None, "preformat-crash");
        let mut s = FileStore::open(config(dir.path(), io.clone(), true), StoreConfig::new("P")).expect("open");
        let mut msgs = BTreeMap::new();
        store(&mut s, &mut msgs, 300);
        let tail = blocks(dir.path()).pop().expect("a block");
        // The files as the disk has them now, before any stop.
        let image = TempDir::new(None, "preformat-image");
        for b in blocks(dir.path()) {
            std::fs::copy(&b, image.path().join(b.file_name().expect("name"))).expect("copy");
        }
        let (file, end) = lengths(&image.path().join(tail.file_name().expect("name")));
        assert!(
            file > end + 4096,
            "the tail is preformatted ahead: file {file}, records {end}"
        );
        drop(s);
        let mut s = check(image.path(), io.clone(), true, &msgs);
        store(&mut s, &mut msgs, 50);
        s.stop().expect("stop");
        drop(s);
        drop(check(image.path(), io, false, &msgs));
    }
}

/// A store written without preformatting opens with it on, and the other way round.
#[test]
fn stores_move_between_settings() {
    let dir = TempDir::new(None, "preformat-mixed");
    let mut msgs = BTreeMap::new();
    for (round, preformat) in [false, true, false, true].into_iter().enumerate() {
        let mut s = check(dir.path(), IoChoice::Auto, preformat, &msgs);
        store(&mut s, &mut msgs, 200);
        let tail = blocks(dir.path()).pop().expect("a block");
        let (file, end) = lengths(&tail);
        if preformat {
            assert!(file > end, "round {round}: preformatted tail {file} vs {end}");
        } else {
            assert!(
                file < end + 4096,
                "round {round}: no preformatting, file {file} vs {end}"
            );
        }
        s.stop().expect("stop");
    }
    drop(check(dir.path(), IoChoice::Auto, true, &msgs));
}

/// A store whose batches hold 64 KiB or more of records on average appends without
/// zeros after them (they would double its bytes, and the journal commit each batch pays
/// is shared by its many records); once its batches are small again it preformats again.
/// Everything reads back either way.
#[test]
fn large_batches_append_without_zeros() {
    for io in [IoChoice::Buffered, IoChoice::Auto] {
        let dir = TempDir::new(None, "preformat-large");
        let mut f = config(dir.path(), io.clone(), true);
        f.block_size = 8 << 20;
        // No batch before each sync (under load, batches this large form while earlier
        // ones are in flight).
        f.early_batch = 0;
        let mut s = FileStore::open(f, StoreConfig::new("P")).expect("open");
        let mut msgs = BTreeMap::new();
        // Twelve batches of ~200 KiB of records each.
        for _ in 0..12 {
            for _ in 0..200 {
                let seq = s.fast_state().last_seq + 1;
                let body = vec![(seq % 251) as u8; 1000];
                s.store_msg("pre.big", b"", &body, 0).expect("store");
                msgs.insert(seq, body);
            }
            s.sync().expect("sync");
        }
        let tail = blocks(dir.path()).pop().expect("a block");
        let (file, end) = lengths(&tail);
        assert!(end > 12 * 200 * 1000, "test premise: all in one block ({end} bytes)");
        assert!(
            file < end + 4096,
            "no zeros after large batches: file {file}, records {end}"
        );
        // Small batches after them run ahead in zeros again.
        store(&mut s, &mut msgs, 40);
        let (file, end) = lengths(&tail);
        assert!(
            file >= end + 64 * 1024,
            "small batches preformat: file {file}, records {end}"
        );
        s.stop().expect("stop");
        drop(s);
        drop(check(dir.path(), io, true, &msgs));
    }
}
