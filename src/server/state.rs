//! What the server knows about itself, shared with the monitoring thread. The options
//! and INFO template change on reload, so they sit behind a lock.

use super::options::Options;
use crate::core::stats::Shared;
use crate::proto::info::ServerInfo;
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::SystemTime;

/// What a reload replaces.
pub struct Live {
    pub opts: Options,
    pub info: ServerInfo,
    pub config_load_time: SystemTime,
}

pub struct ServerState {
    pub live: RwLock<Live>,
    pub shared: Arc<Shared>,
    pub start: SystemTime,
    pub nshards: usize,
    pub reactor: String,
    pub http_host: String,
    pub http_port: i64,
    /// The OCSP peer response cache, when peer checks are on (`/varz` `ocsp_peer_cache`).
    pub ocsp_cache: RwLock<Option<Arc<crate::transport::ocsp::cache::ResponseCache>>>,
}

impl ServerState {
    /// The options and INFO in force.
    pub fn live(&self) -> RwLockReadGuard<'_, Live> {
        self.live.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_live(&self, live: Live) {
        *self.live.write().unwrap_or_else(|p| p.into_inner()) = live;
    }
}
