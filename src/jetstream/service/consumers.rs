//! The consumer APIs (`$JS.API.CONSUMER.*`).

use super::Request;
use crate::core::shard::ShardCore;
use crate::jetstream::JetStream;
use std::sync::Arc;
use std::time::Instant;

/// Dispatch one consumer request.
pub fn handle(_core: &mut ShardCore, _js: &Arc<JetStream>, _req: Request, _now: Instant) {}
