//! What the core needs to know about the server: limits, timers, authentication and the
//! INFO template. Built once from the options (and rebuilt on reload); shared read-only
//! by all shards through an `Arc`.

use crate::proto::info::ServerInfo;
use std::time::Duration;

/// Single-user or token authentication (the `--user/--pass` and `--auth` flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    None,
    Token(String),
    User { user: String, pass: String },
}

impl Auth {
    pub fn required(&self) -> bool {
        !matches!(self, Auth::None)
    }
}

/// Core settings, with nats-server's defaults.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    pub max_control_line: usize,
    /// Negative: unlimited.
    pub max_payload: i64,
    pub max_pending: usize,
    /// Negative: reject every connection (`max_connections: 0` in a config file).
    pub max_connections: i64,
    /// Zero: unlimited.
    pub max_subscriptions: usize,
    /// Zero: unlimited.
    pub max_sub_tokens: usize,
    pub ping_interval: Duration,
    pub ping_max: u32,
    pub write_deadline: Duration,
    pub auth: Auth,
    pub auth_timeout: Duration,
    /// Headers supported (not `no_header_support`).
    pub headers: bool,
    pub sublist_cache: bool,
    pub trace: bool,
    pub debug: bool,
    /// Zero: unlimited.
    pub max_traced_msg_len: usize,
    /// Template for every INFO this server sends.
    pub info: ServerInfo,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            max_control_line: 4096,
            max_payload: 1024 * 1024,
            max_pending: 64 * 1024 * 1024,
            max_connections: 64 * 1024,
            max_subscriptions: 0,
            max_sub_tokens: 0,
            ping_interval: Duration::from_secs(120),
            ping_max: 2,
            write_deadline: Duration::from_secs(10),
            auth: Auth::None,
            auth_timeout: Duration::from_secs(2),
            headers: true,
            sublist_cache: true,
            trace: false,
            debug: false,
            max_traced_msg_len: 0,
            info: ServerInfo::default(),
        }
    }
}
