//! File store benchmarks (criterion): appends of 16 B, 1 KiB and 64 KiB with group commit
//! (the default) and with the reference's lazy sync, against the same bytes written with
//! plain buffered writes + one fdatasync per group; sequential and random reads; load last
//! by subject among 1 M subjects; restart time. Runs on the system temp dir (ext4 here,
//! io_uring + O_DIRECT); `RNATS_BENCH_DIR` puts it elsewhere.
//!
//! cargo bench -p storage --bench store -- --quick

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;
use storage::{FileStore, FileStoreConfig, Store, StoreConfig, SyncMode};

/// Messages per measured group (the writes in flight at once).
const GROUP: u64 = 256;

fn base() -> PathBuf {
    std::env::var("RNATS_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir())
}

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let p = base().join(format!("rnats-bench-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("dir");
        Dir(p)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(dir: &Dir, sync: SyncMode) -> FileStore {
    let mut f = FileStoreConfig::new(&dir.0);
    f.sync = sync;
    FileStore::open(f, StoreConfig::new("B")).expect("open")
}

fn append(c: &mut Criterion) {
    let mut g = c.benchmark_group("append");
    g.measurement_time(Duration::from_secs(5));
    for size in [16usize, 1024, 65536] {
        let payload = vec![0x42u8; size];
        g.throughput(Throughput::Elements(GROUP));
        for (name, sync) in [
            ("group_commit", SyncMode::GroupCommit),
            ("lazy", SyncMode::Interval(Duration::from_secs(120))),
        ] {
            let dir = Dir::new(name);
            let mut s = open(&dir, sync);
            g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
                b.iter(|| {
                    let mut last = 0;
                    // One loop turn: a burst of publishes, then one submit.
                    for _ in 0..GROUP {
                        last = s.store_msg("bench.append", b"", &payload, 0).expect("store").0;
                    }
                    s.submit().expect("submit");
                    while s.poll_completions().expect("poll") < last {
                        std::hint::spin_loop();
                    }
                });
            });
            s.stop().expect("stop");
            // Keep the disk use bounded between sizes.
            drop(s);
        }
        // The comparison: the same bytes through a plain file, one fdatasync per group.
        let dir = Dir::new("plain");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.0.join("plain.log"))
            .expect("file");
        g.bench_with_input(BenchmarkId::new("plain_write_fdatasync", size), &size, |b, _| {
            b.iter(|| {
                for _ in 0..GROUP {
                    f.write_all(&(size as u32).to_le_bytes()).expect("write");
                    f.write_all(b"bench.append").expect("write");
                    f.write_all(&payload).expect("write");
                }
                f.sync_data().expect("fdatasync");
            });
        });
    }
    g.finish();
}

fn fill(dir: &Dir, n: u64, size: usize, subjects: u64) -> FileStore {
    let mut s = open(dir, SyncMode::Interval(Duration::from_secs(120)));
    let payload = vec![7u8; size];
    for i in 0..n {
        s.store_msg(&format!("sub.{}", i % subjects), b"", &payload, 0)
            .expect("store");
        if i % 1024 == 0 {
            s.submit().expect("submit");
        }
    }
    s.sync().expect("sync");
    s
}

fn reads(c: &mut Criterion) {
    let mut g = c.benchmark_group("read");
    let dir = Dir::new("reads");
    let n = 200_000u64;
    let mut s = fill(&dir, n, 128, 1000);
    s.stop().expect("stop");
    drop(s);
    let mut s = open(&dir, SyncMode::GroupCommit);
    g.throughput(Throughput::Elements(1));
    let mut seq = 0u64;
    g.bench_function("sequential_128B", |b| {
        b.iter(|| {
            seq = seq % n + 1;
            s.load_msg(seq).expect("load")
        })
    });
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    g.bench_function("random_128B", |b| {
        b.iter(|| s.load_msg(rng.gen_range(1..=n)).expect("load"))
    });
    g.finish();
}

fn last_by_subject(c: &mut Criterion) {
    let mut g = c.benchmark_group("load_last_by_subject");
    g.sample_size(20);
    let dir = Dir::new("subjects");
    let subjects = 1_000_000u64;
    let mut s = fill(&dir, subjects, 16, subjects);
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    g.bench_function("1M_subjects", |b| {
        b.iter(|| {
            s.load_last_msg(&format!("sub.{}", rng.gen_range(0..subjects)))
                .expect("last")
        })
    });
    g.finish();
}

fn restart(c: &mut Criterion) {
    let mut g = c.benchmark_group("restart");
    g.sample_size(10);
    let n = 1_000_000u64;
    let dir = Dir::new("restart");
    let mut s = fill(&dir, n, 64, 10_000);
    s.stop().expect("stop");
    drop(s);
    g.throughput(Throughput::Elements(n));
    g.bench_function("1M_msgs_64B", |b| {
        b.iter_batched(
            || (),
            |_| {
                let mut s = open(&dir, SyncMode::GroupCommit);
                assert_eq!(s.fast_state().msgs, n);
                s.stop().expect("stop");
            },
            BatchSize::PerIteration,
        )
    });
    // The same after a crash: no state file, every block scanned.
    g.bench_function("1M_msgs_64B_scan", |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_file(dir.0.join("state.rns"));
            },
            |_| {
                let mut s = open(&dir, SyncMode::GroupCommit);
                assert_eq!(s.fast_state().msgs, n);
                s.stop().expect("stop");
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, append, reads, last_by_subject, restart);
criterion_main!(benches);
