//! Server options: nats-server's names and defaults, filled from the config file and the
//! command line (flags override the file), then turned into the core's configuration.

use crate::auth::config::SecurityConfig;
use crate::core::config::{Auth, CoreConfig, UserEntry};
use crate::server::jetstream_opts::{JetStreamOptions, JetStreamOptionsError};
use crate::transport::tls::TlsOptions;
use std::time::Duration;

/// OCSP stapling policy (`ocsp { mode }`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OcspMode {
    #[default]
    Auto,
    Always,
    Must,
    Never,
}

/// `ocsp { mode, url(s) }` (or `ocsp: true/false`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OcspConfig {
    pub mode: OcspMode,
    pub override_urls: Vec<String>,
}

/// The `websocket { }` block (nats-server's `WebsocketOpts`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct WebsocketOptions {
    pub host: String,
    /// 0: no WebSocket listener; -1: a random port.
    pub port: i64,
    pub advertise: String,
    pub no_tls: bool,
    pub tls: Option<TlsOptions>,
    pub same_origin: bool,
    pub allowed_origins: Vec<String>,
    pub handshake_timeout: Duration,
    pub compression: bool,
    pub username: String,
    pub password: String,
    pub token: String,
    /// Seconds (0: the server's).
    pub auth_timeout: f64,
    pub no_auth_user: String,
    pub jwt_cookie: String,
    pub user_cookie: String,
    pub pass_cookie: String,
    pub token_cookie: String,
    /// Extra headers of the upgrade response, in file order.
    pub headers: Vec<(String, String)>,
    pub ping_interval: Duration,
}

/// Which reactor drives the shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReactorChoice {
    /// io_uring when it can really be set up, otherwise mio.
    #[default]
    Auto,
    /// io_uring, with completion I/O where the kernel has it.
    Uring,
    /// io_uring readiness polls only (as on a kernel without completion I/O).
    UringPoll,
    Mio,
}

/// Values of reference flags whose feature rnats lacks (nats-server's names). They are
/// accepted by the command line so that the error names the feature.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlagsNotYet {
    /// `--routes`.
    pub routes: String,
    /// `--cluster`/`--cluster_listen`.
    pub cluster_listen: String,
    /// `--cluster_name`.
    pub cluster_name: String,
    /// `--cluster_advertise`.
    pub cluster_advertise: String,
    /// `--no_advertise`.
    pub no_advertise: bool,
    /// `--connect_retries`.
    pub connect_retries: i64,
    /// `--tls`, `--tlsverify` (applied by the command line over the file's `tls`).
    pub tls: bool,
    pub tls_verify: bool,
    /// `--tlscert`, `--tlskey`, `--tlscacert`.
    pub tls_cert: String,
    pub tls_key: String,
    pub tls_ca_cert: String,
    /// `--profile`.
    pub prof_port: i64,
}

impl FlagsNotYet {
    /// The first feature these flags turn on (as the error names it), if any. The
    /// cluster's tuning flags (`--cluster_name`, `--cluster_advertise`, `--no_advertise`,
    /// `--connect_retries`) turn nothing on by themselves.
    pub fn feature(&self) -> Option<&'static str> {
        if !self.cluster_listen.is_empty() || !self.routes.is_empty() {
            return Some("clustering (--cluster, --cluster_listen, --routes)");
        }
        if self.prof_port != 0 {
            return Some("profiling (--profile)");
        }
        None
    }
}

/// The default of [`Options::spin_us`].
pub const DEFAULT_SPIN_US: u64 = 100;

/// All options. Field names follow nats-server's.
#[derive(Clone, Debug)]
pub struct Options {
    pub host: String,
    /// 0 means the default port 4222; -1 picks a random free port.
    pub port: i64,
    pub server_name: String,
    pub client_advertise: String,
    pub pid_file: String,
    pub ports_file_dir: String,
    pub log_file: String,
    pub logtime: bool,
    pub logtime_utc: bool,
    pub debug: bool,
    pub trace: bool,
    pub trace_verbose: bool,
    pub trace_headers: bool,
    pub max_traced_msg_len: i64,
    /// Rotate the log file past this many bytes (0: never).
    pub log_size_limit: i64,
    /// Rotated log files to keep, the current one included (0: all).
    pub log_max_num: i64,
    pub syslog: bool,
    /// `udp://host:port`, `tcp://host:port` or `unix:///path`.
    pub remote_syslog: String,
    pub username: String,
    pub password: String,
    pub authorization: String,
    /// Users, nkeys, accounts, operators, resolver... (the config file's security
    /// settings; `username`/`password`/`authorization` above hold the single user and
    /// the token, which flags can also set).
    pub security: SecurityConfig,
    /// `-js`, `-sd`, `store_dir` and the `jetstream` key: the server's JetStream options
    /// (`jetstream.store_dir` is also where OCSP staples are kept).
    pub jetstream: JetStreamOptions,
    /// Flags of features rnats does not have yet, kept to refuse them at startup by name
    /// (and the `--tls*` flags' values, applied over the file's `tls` block).
    pub flags_not_yet: FlagsNotYet,
    /// The `tls { }` block (or the `--tls*` flags): TLS for client connections.
    pub tls: Option<TlsOptions>,
    /// `allow_non_tls`: plaintext clients are served on the TLS port too.
    pub allow_non_tls: bool,
    /// `ocsp`: stapling of the server certificate's status.
    pub ocsp: Option<OcspConfig>,
    /// `ocsp_cache`: the OCSP peer checks' response cache (`None`: the default, local).
    pub ocsp_cache: Option<crate::transport::ocsp::cache::CacheConfig>,
    /// The `websocket { }` block.
    pub websocket: WebsocketOptions,
    /// `https`/`https_port`/`-ms`: HTTPS monitoring (0: off; -1: random port).
    pub https_host: String,
    pub https_port: i64,
    pub http_host: String,
    /// 0: monitoring off; -1: random port.
    pub http_port: i64,
    /// Prefix of every monitoring endpoint (`http_base_path`), as written.
    pub http_base_path: String,
    pub max_control_line: i64,
    pub max_payload: i64,
    pub max_pending: i64,
    /// `no_fast_producer_stall`: never hold a fast producer back for a slow consumer.
    pub no_fast_producer_stall: bool,
    pub max_connections: i64,
    pub max_subscriptions: i64,
    pub ping_interval: Duration,
    pub ping_max: i64,
    pub write_deadline: Duration,
    /// Seconds; 0 means the default (2 s).
    pub auth_timeout: f64,
    pub lame_duck_duration: Duration,
    pub lame_duck_grace_period: Duration,
    pub max_sub_tokens: i64,
    pub max_closed_clients: i64,
    pub connect_error_reports: i64,
    pub reconnect_error_reports: i64,
    /// The config file given with `-c` (empty: none).
    pub config_file: String,
    /// `sha256:` digest of the config file, as nats-server reports it.
    pub config_digest: String,
    /// `-t`: check the config file and exit.
    pub check_config: bool,
    pub no_header_support: bool,
    pub no_sublist_cache: bool,
    /// rnats: number of shards (0: one per usable CPU).
    pub shards: usize,
    /// rnats: which reactor to use.
    pub reactor: ReactorChoice,
    /// rnats: how long an idle shard busy-polls before sleeping (microseconds), and only
    /// while request/reply traffic flows: its last work came back within this long of the
    /// work before it, and it saw a message with a reply subject within 10 ms; a shard
    /// whose traffic pauses longer, or carries one-way streams only, sleeps at once. 0:
    /// never. Default [`DEFAULT_SPIN_US`] (see perf/RESULTS.md: it halves a cross-shard
    /// round trip; one-way streams pay less CPU per message sleeping).
    pub spin_us: u64,
    /// rnats only (`--sqpoll_ms`), io_uring only: when positive, a kernel thread per shard
    /// takes the shard's submissions and runs its completions, polling for this many
    /// milliseconds after its last work before it sleeps, so busy shards make almost no
    /// system calls. 0 (the default): no such thread.
    pub sqpoll_ms: u64,
    /// rnats only (`--send_zc`), io_uring completion I/O only: sends of at least this
    /// many bytes go zero-copy (`SEND_ZC`: the NIC reads the outbound buffer instead of
    /// the kernel copying it). 0 (the default): never; over loopback the kernel copies
    /// anyway (see perf/RESULTS.md).
    pub send_zc: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            host: "0.0.0.0".into(),
            port: 0,
            server_name: String::new(),
            client_advertise: String::new(),
            pid_file: String::new(),
            ports_file_dir: String::new(),
            log_file: String::new(),
            logtime: true,
            logtime_utc: false,
            debug: false,
            trace: false,
            trace_verbose: false,
            trace_headers: false,
            max_traced_msg_len: 0,
            log_size_limit: 0,
            log_max_num: 0,
            syslog: false,
            remote_syslog: String::new(),
            username: String::new(),
            password: String::new(),
            authorization: String::new(),
            security: SecurityConfig::default(),
            jetstream: JetStreamOptions::default(),
            flags_not_yet: FlagsNotYet::default(),
            tls: None,
            allow_non_tls: false,
            ocsp: None,
            ocsp_cache: None,
            websocket: WebsocketOptions::default(),
            https_host: String::new(),
            https_port: 0,
            http_host: String::new(),
            http_port: 0,
            http_base_path: String::new(),
            max_control_line: 4096,
            max_payload: 1024 * 1024,
            max_pending: 64 * 1024 * 1024,
            no_fast_producer_stall: false,
            max_connections: 64 * 1024,
            max_subscriptions: 0,
            ping_interval: Duration::from_secs(120),
            ping_max: 2,
            write_deadline: Duration::from_secs(10),
            auth_timeout: 0.0,
            lame_duck_duration: Duration::from_secs(120),
            lame_duck_grace_period: Duration::from_secs(10),
            max_sub_tokens: 0,
            max_closed_clients: 10_000,
            connect_error_reports: 3600,
            reconnect_error_reports: 1,
            config_file: String::new(),
            config_digest: String::new(),
            check_config: false,
            no_header_support: false,
            no_sublist_cache: false,
            shards: 0,
            reactor: ReactorChoice::Auto,
            spin_us: DEFAULT_SPIN_US,
            sqpoll_ms: 0,
            send_zc: 0,
        }
    }
}

/// Options that cannot work together.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OptionsError {
    #[error("max_payload ({payload}) cannot be higher than max_pending ({pending})")]
    PayloadOverPending { payload: i64, pending: i64 },
    #[error("invalid port: {0}")]
    BadPort(i64),
    #[error("lame duck grace period ({grace}) should be strictly lower than lame duck duration ({duration})")]
    LameDuckGrace { grace: String, duration: String },
    #[error("server name cannot contain spaces")]
    ServerNameSpaces,
    /// A cross-check of the security settings (nats-server's `validateOptions`).
    #[error("{0}")]
    Security(String),
    #[error("solicited routes require cluster capabilities, e.g. --cluster")]
    RoutesWithoutCluster,
    /// A JetStream option the reference refuses at startup.
    #[error("{0}")]
    JetStream(#[from] JetStreamOptionsError),
    /// A setting whose feature rnats does not implement yet.
    #[error("{0} is not supported by rnats yet")]
    NotYet(String),
}

impl Options {
    /// The client port to bind: 0 means 4222, -1 means any free port.
    pub fn bind_port(&self) -> Result<u16, OptionsError> {
        match self.port {
            0 => Ok(4222),
            -1 => Ok(0),
            p if (1..=65535).contains(&p) => Ok(p as u16),
            p => Err(OptionsError::BadPort(p)),
        }
    }

    /// nats-server's `setBaselineOptions`: zero values mean the defaults.
    pub fn apply_baseline(&mut self) {
        let d = Options::default();
        if self.host.is_empty() {
            self.host = d.host;
        }
        if self.ping_interval.is_zero() {
            self.ping_interval = d.ping_interval;
        }
        if self.ping_max == 0 {
            self.ping_max = d.ping_max;
        }
        if self.max_control_line == 0 {
            self.max_control_line = d.max_control_line;
        }
        if self.max_payload == 0 {
            self.max_payload = d.max_payload;
        }
        if self.max_pending == 0 {
            self.max_pending = d.max_pending;
        }
        if self.write_deadline.is_zero() {
            self.write_deadline = d.write_deadline;
        }
        if self.max_closed_clients == 0 {
            self.max_closed_clients = d.max_closed_clients;
        }
        if self.lame_duck_duration.is_zero() {
            self.lame_duck_duration = d.lame_duck_duration;
        }
        if self.lame_duck_grace_period.is_zero() {
            self.lame_duck_grace_period = d.lame_duck_grace_period;
        }
        if self.connect_error_reports == 0 {
            self.connect_error_reports = d.connect_error_reports;
        }
        if self.reconnect_error_reports == 0 {
            self.reconnect_error_reports = d.reconnect_error_reports;
        }
        self.jetstream.apply_baseline();
    }

    /// Check cross-option rules, as nats-server does at startup.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if !self.lame_duck_duration.is_zero() && self.lame_duck_grace_period >= self.lame_duck_duration {
            return Err(OptionsError::LameDuckGrace {
                grace: go_duration(self.lame_duck_grace_period),
                duration: go_duration(self.lame_duck_duration),
            });
        }
        if self.max_payload > self.max_pending {
            return Err(OptionsError::PayloadOverPending {
                payload: self.max_payload,
                pending: self.max_pending,
            });
        }
        if self.server_name.contains(' ') {
            return Err(OptionsError::ServerNameSpaces);
        }
        crate::server::config::validate_security(&self.security).map_err(OptionsError::Security)?;
        self.jetstream.validate()?;
        self.validate_websocket().map_err(OptionsError::Security)?;
        self.refuse_missing_features()?;
        self.bind_port().map(|_| ())
    }

    /// Settings the file or the flags accept (as nats-server does) whose feature the
    /// server does not implement yet: refused at startup, so that a server never runs
    /// with less protection or a different behaviour than configured. The lead removes
    /// entries here as the features land.
    pub fn refuse_missing_features(&self) -> Result<(), OptionsError> {
        let flags = &self.flags_not_yet;
        if !flags.routes.is_empty() && flags.cluster_listen.is_empty() {
            return Err(OptionsError::RoutesWithoutCluster);
        }
        if let Some(f) = self.flags_not_yet.feature() {
            return Err(OptionsError::NotYet(f.to_string()));
        }
        Ok(())
    }

    /// The authorization timeout in force (nats-server's default: 2 s without TLS, the
    /// TLS timeout plus one second with it).
    pub fn auth_timeout_secs(&self) -> f64 {
        if self.auth_timeout > 0.0 {
            self.auth_timeout
        } else if let Some(t) = &self.tls {
            t.timeout_duration().as_secs_f64() + 1.0
        } else {
            2.0
        }
    }

    pub fn auth_timeout_duration(&self) -> Duration {
        Duration::try_from_secs_f64(self.auth_timeout_secs()).unwrap_or(Duration::from_secs(2))
    }

    /// The configured users as config mode's directory (token, single user, users).
    fn directory(&self) -> crate::auth::users::UserDirectory {
        // The users of the authorization block; nkeys, permissions and accounts are not
        // used by the core yet (see `refuse_missing_features`).
        let users: Vec<UserEntry> = self
            .security
            .users
            .iter()
            .filter(|u| u.account.is_none())
            .map(|u| UserEntry {
                user: u.username.clone(),
                pass: u.password.clone(),
            })
            .collect();
        let auth = if !users.is_empty() {
            Auth::Users(users)
        } else if !self.authorization.is_empty() {
            Auth::Token(self.authorization.clone())
        } else if !self.username.is_empty() {
            Auth::User {
                user: self.username.clone(),
                pass: self.password.clone(),
            }
        } else {
            Auth::None
        };
        let mut dir = legacy_directory(&auth);
        dir.tls_map = self.tls.as_ref().is_some_and(|t| t.map);
        dir
    }

    /// The core's view of these options (without the INFO template).
    pub fn core_config(&self) -> CoreConfig {
        let authenticator = std::sync::Arc::new(crate::auth::users::ConfigAuthenticator::new(self.directory()));
        CoreConfig {
            authenticator,
            max_control_line: self.max_control_line.max(1) as usize,
            max_payload: self.max_payload,
            max_pending: self.max_pending.max(1) as usize,
            no_fast_producer_stall: self.no_fast_producer_stall,
            // 0 from a file already became -1 (unlimited) there.
            max_connections: self.max_connections,
            max_subscriptions: self.max_subscriptions.max(0) as usize,
            max_sub_tokens: self.max_sub_tokens.clamp(0, 255) as usize,
            ping_interval: self.ping_interval,
            ping_max: self.ping_max.max(0) as u32,
            write_deadline: self.write_deadline,
            auth_timeout: self.auth_timeout_duration(),
            headers: !self.no_header_support,
            sublist_cache: !self.no_sublist_cache,
            trace: self.trace,
            debug: self.debug,
            max_traced_msg_len: self.max_traced_msg_len.max(0) as usize,
            info: Default::default(),
            max_closed_clients: self.max_closed_clients.max(0) as usize,
            websocket: None,
        }
    }
}

/// The user directory of a token, single user or users list.
fn legacy_directory(auth: &Auth) -> crate::auth::users::UserDirectory {
    use crate::auth::users::{PasswordUser, UserDirectory};
    let mut dir = UserDirectory::default();
    match auth {
        Auth::None => {}
        Auth::Token(t) => dir.token = Some(t.clone()),
        Auth::User { user, pass } => dir.single = Some((user.clone(), pass.clone())),
        Auth::Users(list) => {
            dir.listed = true;
            for u in list {
                dir.users.insert(
                    u.user.clone(),
                    PasswordUser {
                        name: u.user.clone(),
                        password: u.pass.clone(),
                        account: crate::core::accounts::GLOBAL,
                        permissions: None,
                        conn_types: Vec::new(),
                        proxy_required: false,
                    },
                );
            }
        }
    }
    dir
}

/// A duration as Go prints it (`2m0s`, `1.5s`).
pub fn go_duration(d: Duration) -> String {
    conf::format_duration_nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports() {
        let mut o = Options::default();
        assert_eq!(o.bind_port(), Ok(4222));
        o.port = -1;
        assert_eq!(o.bind_port(), Ok(0));
        o.port = 70000;
        assert!(o.validate().is_err());
    }

    #[test]
    fn payload_must_fit_pending() {
        let o = Options {
            max_payload: 10,
            max_pending: 5,
            ..Options::default()
        };
        assert_eq!(
            o.validate().unwrap_err().to_string(),
            "max_payload (10) cannot be higher than max_pending (5)"
        );
    }
}
