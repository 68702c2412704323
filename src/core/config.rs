//! What the core needs to know about the server: limits, timers, authentication and the
//! INFO template. Built once from the options (and rebuilt on reload); shared read-only
//! by all shards through an `Arc`.

use crate::proto::info::ServerInfo;
use std::time::Duration;

/// One entry of `authorization { users = [...] }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserEntry {
    pub user: String,
    /// Plain text, or a bcrypt hash (`$2a$...`) as nats-server accepts.
    pub pass: String,
}

/// Client authentication: a token, a single user (`--user/--pass`, `authorization
/// { user, password }`) or a list of users. Passwords and tokens may be bcrypt hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    None,
    Token(String),
    User { user: String, pass: String },
    Users(Vec<UserEntry>),
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
    /// `no_fast_producer_stall`: a message for a consumer past three quarters of
    /// `max_pending` is not delivered to it, instead of the producer being held back.
    pub no_fast_producer_stall: bool,
    /// Negative: reject every connection (`max_connections: 0` in a config file).
    pub max_connections: i64,
    /// Zero: unlimited.
    pub max_subscriptions: usize,
    /// Zero: unlimited.
    pub max_sub_tokens: usize,
    pub ping_interval: Duration,
    pub ping_max: u32,
    pub write_deadline: Duration,
    /// Decides every CONNECT (built by the server from `auth` and the security settings).
    pub authenticator: std::sync::Arc<dyn crate::core::auth::Authenticator>,
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
    /// Closed connections each shard keeps for `/connz?state=closed`.
    pub max_closed_clients: usize,
    /// WebSocket clients' settings, when a `websocket` listener is configured.
    pub websocket: Option<std::sync::Arc<WsSettings>>,
}

/// What differs for WebSocket clients (nats-server's `websocket { }` block).
#[derive(Clone, Debug)]
pub struct WsSettings {
    /// INFO template: the WebSocket listener's host, port and TLS, its connect URLs.
    pub info: ServerInfo,
    /// Decides their CONNECTs (the `websocket { authorization }` override and its own
    /// `verify_and_map`).
    pub authenticator: std::sync::Arc<dyn crate::core::auth::Authenticator>,
    pub auth_timeout: Duration,
    /// `ping_interval` of the block (`None`: the server's).
    pub ping_interval: Option<Duration>,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            max_control_line: 4096,
            max_payload: 1024 * 1024,
            max_pending: 64 * 1024 * 1024,
            no_fast_producer_stall: false,
            max_connections: 64 * 1024,
            max_subscriptions: 0,
            max_sub_tokens: 0,
            ping_interval: Duration::from_secs(120),
            ping_max: 2,
            write_deadline: Duration::from_secs(10),
            authenticator: std::sync::Arc::new(crate::core::auth::NoAuth),
            auth_timeout: Duration::from_secs(2),
            headers: true,
            sublist_cache: true,
            trace: false,
            debug: false,
            max_traced_msg_len: 0,
            info: ServerInfo::default(),
            max_closed_clients: 10_000,
            websocket: None,
        }
    }
}
