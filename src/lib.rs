//! rnats: a NATS server with a thread-per-core, shared-nothing inside and nats-server
//! 2.14's outside (wire protocol, CLI, monitoring JSON).
//!
//! Module map:
//! - [`core`]: the sans-IO state machine of a shard: subjects, sublist, client protocol
//!   state, publish routing, interest replication, timers, statistics. No sockets, no
//!   reactor; time comes in as `now`.
//! - [`proto`]: the wire format: parser, INFO/CONNECT JSON, reply texts.
//! - [`driver`]: thin glue that runs the core on a reactor: io_uring shards (`uring`
//!   feature, Linux) or the portable mio reactor (one shared event loop), plus the
//!   acceptor thread.
//! - [`transport`]: TLS (rustls) and WebSocket, sans-IO state machines between the
//!   socket's bytes and the plaintext protocol the core sees; the driver runs them.
//! - [`auth`]: authentication and authorization: users, nkeys, JWT claims, permissions.
//! - [`jetstream`]: streams, consumers and the `$JS.API` services on the storage crate.
//! - [`system`]: the system account's services and events (internal clients).
//! - [`monitor`]: HTTP monitoring (nats-server's endpoints, `/shardz`, `/metrics`) and
//!   the answers the system account's services reuse.
//! - [`server`]: options, command line, logging, startup and shutdown.
//!
//! The core never imports `driver`; `driver` never decides protocol behaviour.

pub mod auth;
pub mod core;
pub mod driver;
pub mod jetstream;
pub mod monitor;
pub mod proto;
pub mod server;
pub mod system;
pub mod transport;
