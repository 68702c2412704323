//! Reads on both backends: the io_uring backend reads with O_DIRECT through its ring and a
//! small chunk cache, the threaded one with buffered `pread`. Messages read back intact in
//! every access pattern the consumers have (in order, at random, last by subject, next by
//! filter) while the tail keeps growing under the cached chunks, across a block rewrite
//! (its file replaced and its offsets moved) and after a restart.

mod common;

use common::TempDir;
use rand::{Rng, SeedableRng};
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, Filter, Store, StoreConfig, StoreError};

fn payload(seq: u64) -> Vec<u8> {
    let len = 1 + (seq * 7919 % 3000) as usize;
    let mut v = format!("{seq}|").into_bytes();
    v.resize(len.max(v.len()), b'a' + (seq % 26) as u8);
    v
}

fn config(dir: &std::path::Path, io: &IoChoice) -> FileStoreConfig {
    let mut f = FileStoreConfig::new(dir);
    f.block_size = 256 * 1024;
    f.io = io.clone();
    f
}

fn check(s: &mut FileStore, seq: u64) {
    let m = s.load_msg(seq).unwrap_or_else(|e| panic!("seq {seq}: {e}"));
    assert_eq!(&m.payload[..], &payload(seq)[..], "seq {seq}");
    assert_eq!(m.subject, format!("r.{}", seq % 5), "seq {seq}");
}

fn run(io: IoChoice, want_backend: Option<&str>) {
    let dir = TempDir::new(None, "reads");
    let mut s = FileStore::open(config(dir.path(), &io), StoreConfig::new("R")).expect("open");
    if let Some(b) = want_backend {
        if s.io_backend() != b {
            eprintln!("skipped: backend {} here", s.io_backend());
            return;
        }
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut last = 0u64;
    // The tail grows under what was read (and cached) before: reads between the batches.
    for round in 0..300 {
        for _ in 0..rng.gen_range(1..8) {
            let (seq, _) = s
                .store_msg(&format!("r.{}", (last + 1) % 5), b"", &payload(last + 1), 0)
                .expect("store");
            last = seq;
        }
        match round % 3 {
            0 => s.sync().expect("sync"),
            1 => {
                s.submit().expect("submit");
            }
            _ => {
                s.poll_completions().expect("poll");
            }
        }
        // The newest, a few at random, and the run before the newest in order.
        check(&mut s, last);
        for _ in 0..3 {
            let q = rng.gen_range(1..=last);
            check(&mut s, q);
        }
        for q in last.saturating_sub(10).max(1)..=last {
            check(&mut s, q);
        }
    }
    s.sync().expect("sync");
    assert!(s.stats().blocks > 3, "test premise: several blocks");
    let all_in_order = |s: &mut FileStore, live: &dyn Fn(u64) -> bool| {
        let mut seq = 1;
        let mut n = 0;
        while let Ok(m) = s.load_next_msg(&Filter::all(), seq) {
            assert!(live(m.seq), "seq {} is removed", m.seq);
            assert_eq!(&m.payload[..], &payload(m.seq)[..], "seq {}", m.seq);
            seq = m.seq + 1;
            n += 1;
        }
        n
    };
    assert_eq!(all_in_order(&mut s, &|_| true), last);
    for i in 0..5 {
        let m = s.load_last_msg(&format!("r.{i}")).expect("last");
        assert_eq!(m.seq % 5, i);
        assert!(m.seq + 5 > last);
        assert_eq!(&m.payload[..], &payload(m.seq)[..]);
    }
    let m = s.load_next_msg(&Filter::new("r.3"), 10).expect("next");
    assert_eq!(m.seq, 13);
    // Read everything (chunks cached), then remove most of the second block's messages so
    // that it is rewritten: its file is replaced and every offset in it moves.
    let removed = |q: u64| (q % 4 != 0) && q > 20 && q < last / 2;
    for q in 1..=last {
        if removed(q) {
            s.remove_msg(q).expect("remove");
        }
    }
    assert!(s.compact_blocks().expect("compact") > 0);
    let live = |q: u64| !removed(q);
    assert_eq!(
        all_in_order(&mut s, &live),
        (1..=last).filter(|q| live(*q)).count() as u64
    );
    for _ in 0..500 {
        let q = rng.gen_range(1..=last);
        if live(q) {
            check(&mut s, q);
        } else {
            assert!(matches!(s.load_msg(q), Err(StoreError::MsgNotFound)));
        }
    }
    s.stop().expect("stop");
    drop(s);
    let mut s = FileStore::open(config(dir.path(), &io), StoreConfig::new("R")).expect("reopen");
    assert_eq!(
        all_in_order(&mut s, &live),
        (1..=last).filter(|q| live(*q)).count() as u64
    );
    assert_eq!(s.corruptions(), 0);
}

/// The io_uring backend with its default reads (O_DIRECT through the ring, a chunk cache).
#[test]
fn reads_through_io_uring() {
    run(IoChoice::Auto, Some("uring+direct"));
}

/// The same with buffered reads (`pread` on a buffered descriptor, as with
/// `RNATS_STORAGE_READS=buffered`).
#[test]
fn reads_through_io_uring_with_buffered_reads() {
    run(IoChoice::AutoBufferedReads, Some("uring+direct"));
}

#[test]
fn reads_through_the_threaded_backend() {
    run(IoChoice::Buffered, Some("threaded"));
}

/// A record damaged on disk after the store opened is caught when read through the ring
/// (its checksum), never served.
#[test]
fn direct_reads_check_records() {
    let dir = TempDir::new(None, "reads-damage");
    let mut s = FileStore::open(config(dir.path(), &IoChoice::Auto), StoreConfig::new("R")).expect("open");
    for i in 1..=400u64 {
        s.store_msg(&format!("r.{}", i % 5), b"", &payload(i), 0)
            .expect("store");
    }
    s.sync().expect("sync");
    let p = dir.path().join("0000000001.blk");
    let mut bytes = std::fs::read(&p).expect("read");
    let needle = b"7|";
    let at = bytes.windows(2).position(|w| w == needle).expect("seq 7's payload");
    bytes[at + 10] ^= 0x40;
    std::fs::write(&p, &bytes).expect("write");
    assert!(matches!(s.load_msg(7), Err(StoreError::Corrupt(_))));
    assert_eq!(s.corruptions(), 1);
    check(&mut s, 8);
}

/// The backend alone: a read that spans a write still in flight returns the written
/// bytes, whether the device serves it before, during or after the write, and so does
/// the chunk it cached once the write's completion has been reaped.
#[test]
fn a_read_over_a_write_in_flight_sees_the_write() {
    use storage::io::{open_backend, Batch, Op};
    let dir = TempDir::new(None, "reads-inflight");
    let mut io = open_backend(dir.path(), &IoChoice::Auto).expect("backend");
    if io.name() != "uring+direct" {
        eprintln!("skipped: backend {} here", io.name());
        return;
    }
    const PAGE: usize = 4096;
    let (f, _) = io.open("t.blk", true).expect("open");
    let page = |i: usize| vec![(i % 250) as u8 + 1; PAGE];
    for i in 0..64usize {
        // Page i, then its sync, linked: the write stays in flight while the read runs.
        let ops = vec![
            Op::Write {
                file: f,
                off: (i * PAGE) as u64,
                data: page(i).into(),
            },
            Op::Sync { file: f },
        ];
        io.start(Batch { token: i as u64, ops }).expect("start");
        // In order from the start of the file: chunk reads through the cache.
        let all = io.read_at(f, 0, (i + 1) * PAGE).expect("read");
        assert_eq!(all.len(), (i + 1) * PAGE, "page {i}: short read");
        for j in 0..=i {
            assert!(
                all[j * PAGE..(j + 1) * PAGE] == page(j)[..],
                "page {j} read while page {i} was in flight"
            );
        }
        while io.in_flight() > 0 {
            let done = io.wait().expect("a batch in flight");
            done.result.expect("write");
        }
        let again = io.read_at(f, (i * PAGE) as u64, PAGE).expect("read again");
        assert!(again == page(i), "page {i} after its write completed");
    }
}
