//! The system account's services and events (FEATURES.md §19): internal subscriptions in
//! the system account that answer `$SYS.REQ.*` requests, and the events the server
//! publishes there.
//!
//! - [`accounts`]: the system account's exports and every account's imports from it.
//! - [`envelope`]: the `{"server": ..., "data": ..., "error": ...}` response envelope and
//!   the server description every response and event carries.
//! - [`user_info`]: `$SYS.REQ.USER.INFO`, answered on the requester's own shard.
//! - [`claims`]: operator mode's account JWT services (`$SYS.REQ.CLAIMS.*`, account claim
//!   updates and lookups), server-wide on shard 0.
//!
//! Ownership: services are internal subscriptions of the shards (`core::shard::internal`);
//! per-connection services subscribe locally on every shard, server-wide ones on shard 0
//! (the one that also hosts the meta group later). [`install`] posts the subscriptions.

pub mod accounts;
pub mod claims;
pub mod envelope;
pub mod user_info;

use crate::core::post::{Job, Post};
use crate::core::shard::ShardCore;
use envelope::ServerIdentity;
use std::sync::Arc;
use std::time::Instant;

/// What the services need to know about the server.
pub struct SystemContext {
    pub server: ServerIdentity,
}

/// Subscribe the system services on every shard and wait until every shard has them
/// (so that the first client can use them). Without a system account nothing is
/// installed.
pub fn install(post: &dyn Post, ctx: Arc<SystemContext>) {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let n = post.shards();
    for shard in 0..n {
        let ctx = ctx.clone();
        let job: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
            if let Some(sys) = core.account_table().system() {
                user_info::subscribe(core, sys, ctx.clone(), now);
            }
        });
        post.post(shard, job);
        // Acknowledged by a second job: it runs after the first one's step has finished
        // (its statistics published).
        let tx = tx.clone();
        let ack: Job = Box::new(move |_core: &mut ShardCore, _now: Instant| {
            let _ = tx.send(());
        });
        post.post(shard, ack);
    }
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    for _ in 0..n {
        let left = deadline.saturating_duration_since(Instant::now());
        if rx.recv_timeout(left).is_err() {
            tracing::warn!("system services not installed on every shard");
            break;
        }
    }
}
