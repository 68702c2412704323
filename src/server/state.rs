//! What the server knows about itself, shared read-only with the monitoring thread.

use super::options::Options;
use crate::core::stats::Shared;
use crate::proto::info::ServerInfo;
use std::sync::Arc;
use std::time::SystemTime;

pub struct ServerState {
    pub opts: Options,
    pub info: ServerInfo,
    pub shared: Arc<Shared>,
    pub start: SystemTime,
    pub nshards: usize,
    pub reactor: String,
    pub http_host: String,
    pub http_port: i64,
}
