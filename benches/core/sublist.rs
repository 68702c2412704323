//! Interest tree (`Sublist`) at 10, 1 000, 100 000 and 1 000 000 subscriptions, with two
//! populations:
//! - `literal`: `bench.t<a>.t<b>.t<c>` (a, b, c < 100: a 100-way tree three levels deep);
//! - `wildcard`: half `bench.t<a>.*.t<b>.t<c>`, half `bench.t<a>.t<b>.t<c>.>`, all unique,
//!   so matching walks both a literal path and `*` / `>` branches.
//!
//! Each tree is built once per population and size and reused by every operation:
//! - `insert` / `remove`: a batch of 1 000 new patterns inserted (then removed outside the
//!   timing), or removed (after being inserted outside the timing); the tree size is
//!   unchanged between iterations. The match cache is empty.
//! - `insert_warm_cache` / `remove_warm_cache`: the same with the match cache full (1 024
//!   subjects, as on a server that has been publishing), which every change scans to
//!   invalidate the subjects it affects.
//! - `match_hit`: 256 subjects that each match one subscription, repeated: after the first
//!   round every lookup is a cache hit (hash of the subject and an `Rc` clone).
//! - `match_miss`: a stream of 65 536 distinct subjects, so the 1 024-entry cache never has
//!   the answer: the tree walk plus inserting into and sweeping the cache, which is what a
//!   miss costs with the cache on. Half of them match one subscription (for literal trees
//!   smaller than 32 768, only as many as there are subscriptions); the others follow a
//!   subscription's path and differ in its last literal token.
//!
//! Per element: one operation.

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use rnats::core::sublist::Sublist;
use std::time::{Duration, Instant};

const SIZES: [usize; 4] = [10, 1_000, 100_000, 1_000_000];
const BATCH: usize = 1_000;
const HIT_SUBJECTS: usize = 256;
const MISS_SUBJECTS: usize = 65_536;
/// The sublist's match cache size (`CACHE_MAX` in `core::sublist`).
const CACHE: usize = 1024;

#[derive(Clone, Copy)]
enum Kind {
    Literal,
    Wildcard,
}

fn digits(i: usize) -> (usize, usize, usize) {
    (i / 10_000, (i / 100) % 100, i % 100)
}

/// The `i`-th subscription pattern of a population.
fn pattern(kind: Kind, i: usize) -> Vec<u8> {
    let mut p = Vec::new();
    write_pattern(&mut p, kind, i);
    p
}

fn write_pattern(out: &mut Vec<u8>, kind: Kind, i: usize) {
    use std::io::Write;
    let (a, b, c) = digits(i);
    let _ = match kind {
        Kind::Literal => write!(out, "bench.t{a}.t{b}.t{c}"),
        Kind::Wildcard if i % 2 == 0 => write!(out, "bench.t{a}.*.t{b}.t{c}"),
        Kind::Wildcard => write!(out, "bench.t{a}.t{b}.t{c}.>"),
    };
}

/// A subject published to that matches exactly pattern `i`; `k` varies the token under a
/// wildcard (literal patterns have only one matching subject).
fn subject_for(kind: Kind, i: usize, k: usize) -> Vec<u8> {
    let (a, b, c) = digits(i);
    match kind {
        Kind::Literal => format!("bench.t{a}.t{b}.t{c}"),
        Kind::Wildcard if i % 2 == 0 => format!("bench.t{a}.x{k}.t{b}.t{c}"),
        Kind::Wildcard => format!("bench.t{a}.t{b}.t{c}.x{k}"),
    }
    .into_bytes()
}

/// A subject that follows pattern `i`'s path but differs in its last literal token.
fn near_miss(kind: Kind, i: usize, k: usize) -> Vec<u8> {
    let (a, b, _) = digits(i);
    match kind {
        Kind::Literal => format!("bench.t{a}.t{b}.u{k}"),
        Kind::Wildcard if i % 2 == 0 => format!("bench.t{a}.x.t{b}.u{k}"),
        Kind::Wildcard => format!("bench.t{a}.t{b}.u{k}.x"),
    }
    .into_bytes()
}

/// Spread `n` picks over `0..size` (a fixed odd stride: distinct while `n <= size`).
fn spread(n: usize, size: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (k.wrapping_mul(7_919) + 13) % size)
}

/// A tree of `size` subscriptions of `kind` (values are the pattern indexes).
fn build(kind: Kind, size: usize) -> Sublist<u32> {
    let mut sl = Sublist::new(true);
    let mut p = Vec::with_capacity(32);
    for i in 0..size {
        p.clear();
        write_pattern(&mut p, kind, i);
        sl.insert(&p, None, i as u32).expect("valid pattern");
    }
    sl
}

/// Subjects that each match one subscription, repeated by the benchmark (cache hits).
fn hit_subjects(kind: Kind, size: usize) -> Vec<Vec<u8>> {
    spread(HIT_SUBJECTS, size).map(|i| subject_for(kind, i, 0)).collect()
}

/// 65 536 distinct subjects; see the module documentation.
fn miss_subjects(kind: Kind, size: usize) -> Vec<Vec<u8>> {
    let misses: Vec<Vec<u8>> = spread(MISS_SUBJECTS, size)
        .enumerate()
        .map(|(k, i)| {
            let matching = k % 2 == 0 && (matches!(kind, Kind::Wildcard) || k / 2 < size);
            if matching {
                subject_for(kind, (k / 2).wrapping_mul(7_919) % size, k)
            } else {
                near_miss(kind, i, k)
            }
        })
        .collect();
    let distinct: std::collections::HashSet<&Vec<u8>> = misses.iter().collect();
    assert_eq!(distinct.len(), misses.len(), "miss subjects are distinct");
    misses
}

#[derive(Clone, Copy)]
enum Op {
    Insert,
    Remove,
}

/// `iters` times: insert the `fresh` patterns and remove them again, timing only `op`.
fn time_batches(sl: &mut Sublist<u32>, fresh: &[Vec<u8>], size: usize, op: Op, iters: u64) -> Duration {
    let mut t = Duration::ZERO;
    for _ in 0..iters {
        let start = Instant::now();
        for (j, p) in fresh.iter().enumerate() {
            sl.insert(black_box(p), None, (size + j) as u32).expect("valid");
        }
        if let Op::Insert = op {
            t += start.elapsed();
        }
        let start = Instant::now();
        for (j, p) in fresh.iter().enumerate() {
            assert!(sl.remove(black_box(p), None, (size + j) as u32));
        }
        if let Op::Remove = op {
            t += start.elapsed();
        }
    }
    t
}

pub fn bench(c: &mut Criterion) {
    for (kind, name) in [(Kind::Literal, "literal"), (Kind::Wildcard, "wildcard")] {
        let mut g = c.benchmark_group(format!("sublist_{name}"));
        g.warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        for size in SIZES {
            // Built on first use, so that a filter skipping these benchmarks skips the
            // set-up too, and shared by the four operations.
            let mut tree: Option<Sublist<u32>> = None;
            let fresh: Vec<Vec<u8>> = (size..size + BATCH).map(|i| pattern(kind, i)).collect();

            g.throughput(Throughput::Elements(BATCH as u64));
            for (op, warm) in [
                (Op::Insert, false),
                (Op::Remove, false),
                (Op::Insert, true),
                (Op::Remove, true),
            ] {
                let name = match (op, warm) {
                    (Op::Insert, false) => "insert",
                    (Op::Remove, false) => "remove",
                    (Op::Insert, true) => "insert_warm_cache",
                    (Op::Remove, true) => "remove_warm_cache",
                };
                g.bench_function(BenchmarkId::new(name, size), |b| {
                    let sl = tree.get_or_insert_with(|| build(kind, size));
                    if warm {
                        for s in miss_subjects(kind, size).iter().take(CACHE) {
                            sl.matches(s);
                        }
                        assert_eq!(sl.cache_len(), CACHE);
                    } else {
                        assert_eq!(sl.cache_len(), 0, "cold variants run before anything matches");
                    }
                    b.iter_custom(|iters| time_batches(sl, &fresh, size, op, iters))
                });
            }

            g.throughput(Throughput::Elements(HIT_SUBJECTS as u64));
            g.bench_function(BenchmarkId::new("match_hit", size), |b| {
                let sl = tree.get_or_insert_with(|| build(kind, size));
                let hits = hit_subjects(kind, size);
                for s in &hits {
                    assert_eq!(sl.matches(s).psubs.len(), 1, "{}", String::from_utf8_lossy(s));
                }
                b.iter(|| {
                    for s in &hits {
                        black_box(sl.matches(black_box(s)));
                    }
                })
            });

            g.throughput(Throughput::Elements(MISS_SUBJECTS as u64));
            g.bench_function(BenchmarkId::new("match_miss", size), |b| {
                let sl = tree.get_or_insert_with(|| build(kind, size));
                let misses = miss_subjects(kind, size);
                b.iter(|| {
                    for s in &misses {
                        black_box(sl.matches(black_box(s)));
                    }
                })
            });
            if let Some(sl) = &tree {
                assert_eq!(sl.count(), size, "insert/remove batches leave the tree as built");
            }
        }
        g.finish();
    }
}
