//! Does a cross-shard message cost more when there are more shards? `scaling/cross_shard_N`
//! wires N shard cores with a real mesh (`shards::mesh`, as the reactors build it), puts a
//! subscriber to `foo.bar` on shard 1 and a publisher on shard 0, and per iteration hands
//! the publisher one read's worth of PUB frames (parse, match the remote interest, stage
//! and push the records), lets shard 1 take them off its ring and deliver them to the
//! subscriber's output, drains that output, and lets shard 0 take back the emptied
//! batches. The other N-2 shards exist (rings, interest tables) but carry no traffic, as
//! in a server where one pair talks across shards. Per element: one message.
//!
//! `scaling/cross_shard_2_{copied,blob}_64KiB` do the same on two shards with payloads
//! just under and at `BLOB_MIN` (64 KiB): copied into the batch and again into the
//! output, or carried in a blob that the output sends from and that goes back to be
//! refilled (`core::shard::blob`).

use super::parse::{frames, pub_frame};
use super::pipeline::drain;
use criterion::{black_box, Criterion, Throughput};
use rnats::core::client::ConnKey;
use rnats::core::config::CoreConfig;
use rnats::core::shard::ShardCore;
use rnats::core::stats::Shared;
use rnats::driver::MeshAdapter;
use shards::mesh::Notify;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

struct Nop;
impl Notify for Nop {
    fn notify(&self) {}
}

struct Mesh {
    shards: Vec<ShardCore>,
    publisher: ConnKey,
    subscriber: ConnKey,
}

/// Move mesh traffic until every shard is quiet.
fn settle(shards: &mut [ShardCore], now: Instant) {
    for _ in 0..1000 {
        let mut moved = 0;
        for s in shards.iter_mut() {
            s.flush_mesh(now);
            moved += s.poll_mesh(now);
        }
        if moved == 0 {
            return;
        }
    }
    panic!("mesh did not settle");
}

impl Mesh {
    fn new(n: usize) -> Mesh {
        let cfg = Arc::new(CoreConfig::default());
        let shared = Arc::new(Shared::new(n));
        let eps = shards::mesh::build::<rnats::driver::Batch>(
            (0..n).map(|_| Box::new(Nop) as Box<dyn Notify>).collect(),
            rnats::driver::MESH_RING_CAPACITY,
        );
        let mut shards: Vec<ShardCore> = eps
            .into_iter()
            .enumerate()
            .map(|(i, ep)| ShardCore::new(i, n, cfg.clone(), shared.clone(), Box::new(MeshAdapter(ep))))
            .collect();
        let now = Instant::now();
        let peer: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 40000));
        let conn = |shards: &mut Vec<ShardCore>, i: usize, extra: &str| {
            let core = shards.get_mut(i).expect("shard");
            let k = core.accept(peer, now);
            let line = format!("CONNECT {{\"verbose\":false,\"pedantic\":false}}\r\n{extra}");
            core.input(k, line.as_bytes(), now);
            settle(shards, now);
            let core = shards.get_mut(i).expect("shard");
            drain(core, k, now);
            k
        };
        let subscriber = conn(&mut shards, 1, "SUB foo.bar 1\r\n");
        let publisher = conn(&mut shards, 0, "");
        for s in shards.iter_mut() {
            s.drain_wakeups(|_| {});
        }
        Mesh {
            shards,
            publisher,
            subscriber,
        }
    }

    /// One read of frames in on shard 0, delivered on shard 1. Returns bytes delivered.
    fn step(&mut self, buf: &[u8], now: Instant) -> usize {
        let [s0, s1, ..] = self.shards.as_mut_slice() else {
            return 0;
        };
        s0.input(self.publisher, buf, now);
        s0.drain_wakeups(|k| {
            black_box(k);
        });
        let mut out = 0;
        loop {
            s1.poll_mesh(now);
            s1.drain_wakeups(|k| {
                black_box(k);
            });
            out += drain(s1, self.subscriber, now);
            // Emptied batches back, and the publisher resumed if the ring had filled.
            s0.poll_mesh(now);
            s0.drain_wakeups(|k| {
                black_box(k);
            });
            if !s0.mesh_pending() && !s0.has_wakeups() {
                return out;
            }
            s0.flush_mesh(now);
        }
    }
}

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("scaling");
    const N: usize = 1000;
    let buf = frames(&pub_frame("foo.bar", 16), N);
    let frame = "MSG foo.bar 1 16\r\nxxxxxxxxxxxxxxxx\r\n".len();
    g.throughput(Throughput::Elements(N as u64));
    for n in [2usize, 4, 8, 16] {
        let mut m = Mesh::new(n);
        let now = Instant::now();
        assert_eq!(m.step(&buf, now), N * frame, "every message delivered across shards");
        g.bench_function(format!("cross_shard_{n}"), |b| b.iter(|| m.step(black_box(&buf), now)));
    }
    const BIG: usize = 16;
    for (name, size) in [("copied", 64 * 1024 - 64), ("blob", 64 * 1024)] {
        let buf = frames(&pub_frame("foo.bar", size), BIG);
        let frame = format!("MSG foo.bar 1 {size}\r\n").len() + size + 2;
        let mut m = Mesh::new(2);
        let now = Instant::now();
        g.throughput(Throughput::Elements(BIG as u64));
        assert_eq!(m.step(&buf, now), BIG * frame, "every large message delivered");
        g.bench_function(format!("cross_shard_2_{name}_64KiB"), |b| {
            b.iter(|| m.step(black_box(&buf), now))
        });
    }
    g.finish();
}
