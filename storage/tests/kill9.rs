//! The kill -9 loop: a writer process (this test binary re-run as `ackwriter_child`)
//! stores messages with group commit and acknowledges each one over a pipe once
//! `durable_seq` covers it; the parent kills it with SIGKILL at a random moment, reopens
//! the store and checks that every acknowledged message is there, intact, and that no
//! corruption is reported. The next writer continues the same store.
//!
//! `RNATS_KILL9_CYCLES` sets the number of cycles (default 10; the closing note of issue
//! 11 was measured with 100). `RNATS_KILL9_DIR` puts the store elsewhere (e.g. /dev/shm).
#![cfg(unix)]

mod common;

use common::TempDir;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use storage::{FileStore, FileStoreConfig, Store, StoreConfig};

fn config(dir: &Path) -> FileStoreConfig {
    let mut f = FileStoreConfig::new(dir);
    f.block_size = 64 * 1024;
    f
}

fn payload(seq: u64) -> Vec<u8> {
    let len = 1 + (seq * 2654435761 % 700) as usize;
    let mut v = format!("{seq}/").into_bytes();
    v.resize(len.max(v.len()), b'a' + (seq % 26) as u8);
    v
}

/// The writer: store, submit, poll; print `ack N` whenever the durable sequence moves.
#[test]
#[ignore = "the writer process of kill9_loop; run by it"]
fn ackwriter_child() {
    let Ok(dir) = std::env::var("RNATS_ACKWRITER_DIR") else {
        return;
    };
    let mut s = FileStore::open(config(Path::new(&dir)), StoreConfig::new("K")).expect("open");
    let out = std::io::stdout();
    let mut out = out.lock();
    writeln!(out, "ready {}", s.io_backend()).expect("pipe");
    out.flush().expect("pipe");
    let mut acked = s.durable_seq();
    let mut n = 0u64;
    // A safety net: a writer nobody kills stops by itself.
    let give_up = Instant::now() + Duration::from_secs(30);
    while Instant::now() < give_up {
        // Bursts of writes, as a stream receives them.
        for _ in 0..(1 + n % 17) {
            let seq = s.fast_state().last_seq + 1;
            let (got, _) = s
                .store_msg(&format!("k.{}", seq % 11), b"", &payload(seq), 0)
                .expect("store");
            assert_eq!(got, seq);
        }
        n += 1;
        s.submit().expect("submit");
        let d = s.poll_completions().expect("poll");
        if d > acked {
            acked = d;
            writeln!(out, "ack {acked}").expect("pipe");
            out.flush().expect("pipe");
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Reopen (through the buffered backend: an independent read path, and fast in debug
/// builds) and check every acknowledged message.
fn check(dir: &Path, acked: u64) -> u64 {
    let mut c = config(dir);
    c.io = storage::io::IoChoice::Buffered;
    let mut s = FileStore::open(c, StoreConfig::new("K")).expect("reopen");
    let st = s.fast_state();
    assert!(
        st.last_seq >= acked,
        "last seq {} below the acknowledged {acked}",
        st.last_seq
    );
    for seq in 1..=acked {
        let m = s
            .load_msg(seq)
            .unwrap_or_else(|e| panic!("acknowledged seq {seq} lost: {e}"));
        assert_eq!(&m.payload[..], &payload(seq)[..], "seq {seq} differs");
    }
    assert_eq!(s.corruptions(), 0, "a kill -9 must not look like corruption");
    s.stop().expect("stop");
    st.last_seq
}

#[test]
fn kill9_loop() {
    let cycles: u32 = std::env::var("RNATS_KILL9_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let base = std::env::var("RNATS_KILL9_DIR").ok().map(PathBuf::from);
    let dir = TempDir::new(base.as_deref(), "kill9");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x6b69_6c6c);
    let mut acked = 0u64;
    let mut backend = String::new();
    let started = Instant::now();
    for cycle in 0..cycles {
        let (mut child, rx, reader) = common::spawn_writer("ackwriter_child", "RNATS_ACKWRITER_DIR", dir.path());
        let run_for = Duration::from_millis(rng.gen_range(20..300));
        let mut until = Instant::now() + Duration::from_secs(20);
        let mut cycle_acks = 0;
        let mut take = |line: &str, acked: &mut u64| {
            if let Some(n) = line.strip_prefix("ack ").and_then(|n| n.parse::<u64>().ok()) {
                assert!(n >= *acked, "acks go forward");
                *acked = n;
                cycle_acks += 1;
            }
        };
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    // libtest's "test ackwriter_child ... " may lead the line.
                    if let Some((_, b)) = line.split_once("ready ") {
                        backend = b.to_string();
                        until = Instant::now() + run_for;
                    }
                    take(&line, &mut acked);
                }
                Err(_) => break,
            }
        }
        child.kill().expect("kill -9");
        let _ = child.wait();
        let _ = reader.join();
        // Acks still in the pipe were sent before the kill: they count.
        while let Ok(line) = rx.try_recv() {
            take(&line, &mut acked);
        }
        assert!(
            cycle_acks > 0 || cycle == 0 || acked > 0,
            "cycle {cycle}: the writer acknowledged nothing"
        );
        let last = check(dir.path(), acked);
        assert!(last >= acked);
    }
    eprintln!(
        "kill9: {cycles} cycles on {backend}, {acked} acknowledged messages, none lost ({:?})",
        started.elapsed()
    );
    assert!(acked > 0);
}
