//! The system account's services and events (FEATURES.md §19): internal subscriptions in
//! the system account that answer `$SYS.REQ.*` requests, and the events the server
//! publishes there.
//!
//! - [`envelope`]: the `{"server": ..., "data": ..., "error": ...}` response envelope and
//!   the server description every response and event carries.
//! - [`user_info`]: `$SYS.REQ.USER.INFO`, answered on the requester's own shard.
//! - [`claims`]: operator mode's account JWT services (`$SYS.REQ.CLAIMS.*`, account claim
//!   updates and lookups), server-wide on shard 0.
//!
//! Ownership: services are internal subscriptions of the shards (`core::shard::internal`);
//! per-connection services subscribe locally on every shard, server-wide ones on shard 0
//! (the one that also hosts the meta group later). [`install`] posts the subscriptions.

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

/// Subscribe the system services on every shard. Without a system account nothing is
/// installed.
pub fn install(post: &dyn Post, ctx: Arc<SystemContext>) {
    for shard in 0..post.shards() {
        let ctx = ctx.clone();
        let job: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
            let Some(sys) = core.account_table().system() else {
                return;
            };
            user_info::subscribe(core, sys, ctx.clone(), now);
        });
        post.post(shard, job);
    }
}
