//! JetStream on one server: streams, consumers, the `$JS.API` services, KV and object
//! store support (FEATURES.md §14.1-14.3).
//!
//! - [`api`]: the API's wire shapes (configs, requests, responses, the error table).
//! - [`consumer`]: the sans-IO consumer engine a stream's shard drives (deliveries, acks,
//!   pull requests, redelivery, push heartbeats and flow control).
//!
//! Ownership: each stream and its consumers live on one shard (ARCHITECTURE.md invariant
//! 11), which opens its store and runs its consumers; publishes reach it through its
//! internal subscriptions like any subscriber, over the mesh from other shards.

pub mod api;
pub mod consumer;
