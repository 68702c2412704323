//! Work for a shard from anywhere: a [`Job`] runs on the shard that owns the state it
//! touches, with that shard's [`ShardCore`] and clock. This is how other threads (the
//! monitoring server, resolvers, the auth callout) and other shards ask a shard for
//! something without sharing its state (ARCHITECTURE.md, invariant 1): a job computes
//! its part there and posts the result back the same way.

use super::shard::ShardCore;
use std::time::Instant;

/// A closure to run on one shard.
pub type Job = Box<dyn FnOnce(&mut ShardCore, Instant) + Send>;

/// Delivers jobs to shards (implemented by the reactor glue over its control queues).
pub trait Post: Send + Sync {
    /// Queue `job` for `shard` and wake it. False if the shard is gone (shutdown).
    fn post(&self, shard: usize, job: Job) -> bool;
    /// Number of shards.
    fn shards(&self) -> usize;
}
