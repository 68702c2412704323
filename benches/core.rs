//! Criterion micro-benchmarks of rnats' hot paths, one module per concern:
//! - `parse`: the client protocol parser over buffers of PUB/HPUB frames;
//! - `sublist`: interest tree insert/remove/match at 10 to 1 000 000 subscriptions;
//! - `outbuf`: appending MSG frames to a connection's outbound buffer;
//! - `mesh`: one push/pop on a shard-to-shard ring;
//! - `pipeline`: per-message cost of parse + match, and of the whole sans-IO publish path;
//! - `reqrep`: one request/reply round trip, in one account and through a service import;
//! - `scaling`: a message from one shard to another with 2, 4, 8 and 16 shards wired.
//!
//! Every benchmark reports per-element throughput (frames, operations or messages), so
//! criterion's "thrpt" reads as elements per second and "time" per iteration divided by
//! the element count is the cost of one.
//!
//! `cargo bench` runs them all (about 6 minutes on 2 cores); `cargo bench -- sublist`
//! runs a subset; `cargo bench -- --test` checks that each runs once.

use criterion::{criterion_group, criterion_main, Criterion};
use std::time::Duration;

#[path = "core/mesh.rs"]
mod mesh;
#[path = "core/outbuf.rs"]
mod outbuf;
#[path = "core/parse.rs"]
mod parse;
#[path = "core/pipeline.rs"]
mod pipeline;
#[path = "core/reqrep.rs"]
mod reqrep;
#[path = "core/scaling.rs"]
mod scaling;
#[path = "core/sublist.rs"]
mod sublist;

/// Short warm-up and measurement: the machine is small and shared; the numbers are
/// stable to a few percent at this length.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(40)
}

criterion_group! {
    name = benches;
    config = config();
    targets = parse::bench, sublist::bench, outbuf::bench, mesh::bench, pipeline::bench, reqrep::bench, scaling::bench
}
criterion_main!(benches);
