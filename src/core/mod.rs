//! The sans-IO core: everything that decides, nothing that waits. It takes bytes and
//! `now`, and returns bytes to write, records for other shards, and deadlines.

pub mod client;
pub mod config;
pub mod mesh_codec;
pub mod outbuf;
pub mod remote;
pub mod shard;
pub mod stats;
pub mod subject;
pub mod sublist;
