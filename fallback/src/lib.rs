//! The portable reactor: one OS thread per shard (spawned and pinned by
//! `shards::cpus::spawn_pinned`), each with its own `mio::Poll`. It runs on Linux without io_uring, macOS, the BSDs and
//! Windows. Like `shards`, it knows nothing of NATS: the root package's `driver::mio`
//! glue runs the shared event loop and calls the same sans-IO core as the io_uring shards.
//!
//! Module map:
//! - [`reactor`]: a shard's `Poll` with a mesh wake-up token,
//!   and [`reactor::MioNotify`], the mesh `Notify` implementation over `mio::Waker`.

pub mod reactor;
