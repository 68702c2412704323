//! kill -9 during automatic compaction: a writer process (this test binary re-run as
//! `compacting_writer_child`) stores messages, removes nine in ten of them, makes that
//! durable (`sync`) and reports it, then turns its loop (submit + poll_completions, which
//! rewrite mostly dead blocks a step at a time, dropping dead messages and tombstones).
//! The parent kills it with SIGKILL at a random moment, often in the middle of a rewrite,
//! reopens the store and checks that no reported removal came back, that every kept
//! message is there and intact, and that nothing looks corrupt. The next writer continues
//! the same store.
//!
//! `RNATS_KILL9_CYCLES` sets the number of cycles (default 10).
#![cfg(unix)]

mod common;

use common::TempDir;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use storage::{FileStore, FileStoreConfig, Store, StoreConfig, StoreError};

fn config(dir: &Path) -> FileStoreConfig {
    let mut f = FileStoreConfig::new(dir);
    f.block_size = 32 * 1024;
    f
}

fn payload(seq: u64) -> Vec<u8> {
    let len = 20 + (seq * 2654435761 % 300) as usize;
    let mut v = format!("{seq}/").into_bytes();
    v.resize(len, b'a' + (seq % 26) as u8);
    v
}

fn doomed(seq: u64) -> bool {
    seq % 10 != 0
}

/// The writer: print `ack S R C` once every message up to S is durable, every doomed one
/// up to R is durably removed, and C blocks were rewritten.
#[test]
#[ignore = "the writer process of kill9_during_compaction; run by it"]
fn compacting_writer_child() {
    let Ok(dir) = std::env::var("RNATS_COMPACTING_WRITER_DIR") else {
        return;
    };
    let mut s = FileStore::open(config(Path::new(&dir)), StoreConfig::new("K")).expect("open");
    // What the last writer stored but did not get to remove.
    let last = s.fast_state().last_seq;
    for seq in 1..=last {
        if doomed(seq) && s.load_msg(seq).is_ok() {
            s.remove_msg(seq).expect("remove");
        }
    }
    s.sync().expect("sync");
    let out = std::io::stdout();
    let mut out = out.lock();
    writeln!(out, "ready {}", s.io_backend()).expect("pipe");
    writeln!(out, "ack {last} {last} 0").expect("pipe");
    out.flush().expect("pipe");
    let give_up = Instant::now() + Duration::from_secs(30);
    let mut round = 0u64;
    while Instant::now() < give_up {
        let first = s.fast_state().last_seq + 1;
        for _ in 0..60 {
            let seq = s.fast_state().last_seq + 1;
            let (got, _) = s
                .store_msg(&format!("k.{}", seq % 7), b"", &payload(seq), 0)
                .expect("store");
            assert_eq!(got, seq);
        }
        let last = s.fast_state().last_seq;
        // Remove the doomed ones of this round in a shuffled order.
        let mut seqs: Vec<u64> = (first..=last).filter(|q| doomed(*q)).collect();
        seqs.sort_by_key(|q| q.wrapping_mul(0x9e37_79b9) % 97);
        for q in seqs {
            assert!(s.remove_msg(q).expect("remove"), "seq {q}");
        }
        s.sync().expect("sync");
        writeln!(out, "ack {last} {last} {}", s.stats().compactions).expect("pipe");
        out.flush().expect("pipe");
        round += 1;
        for _ in 0..(1 + round % 5) {
            s.submit().expect("submit");
            s.poll_completions().expect("poll");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn check(dir: &Path, stored: u64, removed: u64) -> u64 {
    let mut c = config(dir);
    c.io = storage::io::IoChoice::Buffered;
    let mut s = FileStore::open(c, StoreConfig::new("K")).expect("reopen");
    let st = s.fast_state();
    assert!(
        st.last_seq >= stored,
        "last seq {} below the acknowledged {stored}",
        st.last_seq
    );
    for seq in 1..=stored {
        match s.load_msg(seq) {
            Ok(m) => {
                assert!(!(doomed(seq) && seq <= removed), "removed seq {seq} came back");
                assert_eq!(&m.payload[..], &payload(seq)[..], "seq {seq} differs");
            }
            Err(StoreError::MsgNotFound) => {
                assert!(doomed(seq), "kept seq {seq} lost");
            }
            Err(e) => panic!("seq {seq}: {e}"),
        }
    }
    assert_eq!(s.corruptions(), 0, "a kill -9 must not look like corruption");
    s.stop().expect("stop");
    st.last_seq
}

#[test]
fn kill9_during_compaction() {
    let cycles: u32 = std::env::var("RNATS_KILL9_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let dir = TempDir::new(None, "kill9-compaction");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x636f_6d70);
    let (mut stored, mut removed, mut rewrites) = (0u64, 0u64, 0u64);
    let mut backend = String::new();
    for cycle in 0..cycles {
        let (mut child, rx, reader) =
            common::spawn_writer("compacting_writer_child", "RNATS_COMPACTING_WRITER_DIR", dir.path());
        let run_for = Duration::from_millis(rng.gen_range(50..400));
        let mut until = Instant::now() + Duration::from_secs(20);
        let mut cycle_rewrites = 0;
        let take = |line: &str, stored: &mut u64, removed: &mut u64, rw: &mut u64| {
            let Some(rest) = line.split_once("ack ").map(|(_, r)| r) else {
                return;
            };
            let v: Vec<u64> = rest.split(' ').filter_map(|x| x.parse().ok()).collect();
            if let [s, r, c] = v[..] {
                *stored = (*stored).max(s);
                *removed = (*removed).max(r);
                *rw = (*rw).max(c);
            }
        };
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some((_, b)) = line.split_once("ready ") {
                        backend = b.to_string();
                        until = Instant::now() + run_for;
                    }
                    take(&line, &mut stored, &mut removed, &mut cycle_rewrites);
                }
                Err(_) => break,
            }
        }
        child.kill().expect("kill -9");
        let _ = child.wait();
        let _ = reader.join();
        while let Ok(line) = rx.try_recv() {
            take(&line, &mut stored, &mut removed, &mut cycle_rewrites);
        }
        rewrites += cycle_rewrites;
        let last = check(dir.path(), stored, removed);
        assert!(last >= stored, "cycle {cycle}");
    }
    eprintln!("kill9 during compaction: {cycles} cycles on {backend}, {stored} messages, {rewrites} block rewrites");
    assert!(stored > 0);
    assert!(
        rewrites > 0,
        "no block was rewritten: the test does not exercise compaction"
    );
}
