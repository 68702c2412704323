//! Shard mesh: one item through a shard-to-shard ring (`shards::mesh`), on one thread so
//! only the ring and its fences are measured (no cache-line transfer between cores).
//! Per element: one `try_send` + `try_recv`; the `recycle` variant adds the return trip
//! of the emptied buffer (`recycle` + `take_recycled`), as the shard core does per batch.

use criterion::{black_box, Criterion, Throughput};
use shards::mesh::{build, Notify};

const BATCH: usize = 64;

struct Nop;
impl Notify for Nop {
    fn notify(&self) {}
}

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("mesh");
    g.throughput(Throughput::Elements(BATCH as u64));
    let mut eps = build::<Vec<u8>>(vec![Box::new(Nop), Box::new(Nop)], 1024);
    let mut b_ep = eps.pop().expect("two endpoints");
    let mut a_ep = eps.pop().expect("two endpoints");
    let mut items: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(64)).collect();

    g.bench_function("push_pop", |b| {
        b.iter(|| {
            for item in items.drain(..) {
                a_ep.try_send(1, item).expect("ring has room");
            }
            while let Some(item) = b_ep.try_recv(0) {
                items.push(black_box(item));
            }
        })
    });
    g.bench_function("push_pop_recycle", |b| {
        b.iter(|| {
            for item in items.drain(..) {
                a_ep.try_send(1, item).expect("ring has room");
            }
            while let Some(item) = b_ep.try_recv(0) {
                b_ep.recycle(0, black_box(item));
            }
            while let Some(item) = a_ep.take_recycled(1) {
                items.push(item);
            }
        })
    });
    assert_eq!(items.len(), BATCH, "every item came back");
    g.finish();
}
