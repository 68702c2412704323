//! The sans-IO core: everything that decides, nothing that waits. It takes bytes and
//! `now`, and returns bytes to write, records for other shards, and deadlines.

pub mod accounts;
pub mod auth;
pub mod bits;
pub mod client;
pub mod config;
pub mod fill;
pub mod mesh_codec;
pub mod mesh_run;
pub mod outbuf;
pub mod perms;
pub mod post;
pub mod remote;
pub mod report;
pub mod shard;
pub mod stats;
pub mod subject;
pub mod sublist;
pub mod trace;
pub mod transform;

/// The hash map of the core's hot paths (ahash: fast on short byte keys; keys are
/// client-chosen, but each map is per shard and bounded by the connection's limits).
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<ahash::AHasher>>;
