//! Server options: nats-server's names and defaults, filled from the command line (and,
//! later, the config file), then turned into the core's configuration.

use crate::core::config::{Auth, CoreConfig};
use std::time::Duration;

/// Which reactor drives the shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReactorChoice {
    /// io_uring (glommio) when it can really be set up, otherwise mio.
    #[default]
    Auto,
    Uring,
    Mio,
}

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
    pub max_traced_msg_len: i64,
    pub username: String,
    pub password: String,
    pub authorization: String,
    pub http_host: String,
    /// 0: monitoring off; -1: random port.
    pub http_port: i64,
    pub max_control_line: i64,
    pub max_payload: i64,
    pub max_pending: i64,
    pub max_connections: i64,
    pub max_subscriptions: i64,
    pub ping_interval: Duration,
    pub ping_max: i64,
    pub write_deadline: Duration,
    pub auth_timeout: Duration,
    pub no_header_support: bool,
    pub no_sublist_cache: bool,
    /// rnats: number of shards (0: one per usable CPU).
    pub shards: usize,
    /// rnats: which reactor to use.
    pub reactor: ReactorChoice,
    /// rnats: busy-poll an idle shard this long before sleeping (microseconds); `None`
    /// picks the reactor's default (see [`Options::spin_for`]).
    pub spin_us: Option<u64>,
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
            max_traced_msg_len: 0,
            username: String::new(),
            password: String::new(),
            authorization: String::new(),
            http_host: String::new(),
            http_port: 0,
            max_control_line: 4096,
            max_payload: 1024 * 1024,
            max_pending: 64 * 1024 * 1024,
            max_connections: 64 * 1024,
            max_subscriptions: 0,
            ping_interval: Duration::from_secs(120),
            ping_max: 2,
            write_deadline: Duration::from_secs(10),
            auth_timeout: Duration::from_secs(2),
            no_header_support: false,
            no_sublist_cache: false,
            shards: 0,
            reactor: ReactorChoice::Auto,
            spin_us: None,
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

    /// Check cross-option rules, as nats-server does at startup.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.max_payload > self.max_pending {
            return Err(OptionsError::PayloadOverPending {
                payload: self.max_payload,
                pending: self.max_pending,
            });
        }
        self.bind_port().map(|_| ())
    }

    /// Busy-poll time before an idle shard sleeps. glommio shards default to 30 µs: a
    /// sleeping executor takes ~40 µs to wake here, which doubles cross-shard
    /// request/reply latency; the mio reactor wakes faster and does not spin by default.
    pub fn spin_for(&self, uring: bool) -> u64 {
        self.spin_us.unwrap_or(if uring && self.shards != 1 { 30 } else { 0 })
    }

    /// The core's view of these options (without the INFO template).
    pub fn core_config(&self) -> CoreConfig {
        let auth = if !self.authorization.is_empty() {
            Auth::Token(self.authorization.clone())
        } else if !self.username.is_empty() {
            Auth::User {
                user: self.username.clone(),
                pass: self.password.clone(),
            }
        } else {
            Auth::None
        };
        CoreConfig {
            max_control_line: self.max_control_line.max(1) as usize,
            max_payload: self.max_payload,
            max_pending: self.max_pending.max(1) as usize,
            max_connections: if self.max_connections == 0 {
                -1
            } else {
                self.max_connections
            },
            max_subscriptions: self.max_subscriptions.max(0) as usize,
            max_sub_tokens: 0,
            ping_interval: self.ping_interval,
            ping_max: self.ping_max.max(0) as u32,
            write_deadline: self.write_deadline,
            auth,
            auth_timeout: self.auth_timeout,
            headers: !self.no_header_support,
            sublist_cache: !self.no_sublist_cache,
            trace: self.trace,
            debug: self.debug,
            max_traced_msg_len: self.max_traced_msg_len.max(0) as usize,
            info: Default::default(),
        }
    }
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
