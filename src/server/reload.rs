//! Configuration reload (SIGHUP, `--signal reload`): nats-server's `Reload`. The file is
//! read again, the command-line flags applied over it, the result validated and compared
//! field by field with the options in force, in the order of nats-server's `Options`
//! struct. Any change to an option that cannot be reloaded refuses the whole reload with
//! `config reload not supported for <Field>: old=<v>, new=<v>`; otherwise every change is
//! logged (`Reloaded: ...`) and applied: logging, limits, timers and authentication (the
//! shards re-check connected clients against it).

use super::config::{self, ConfigError};
use super::logging::{self, LogConfig, LogError};
use super::options::{go_duration, Options, OptionsError};

/// Why a reload changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("can only reload config when a file is provided using -c or --config")]
    NoConfigFile,
    #[error("{}", .0.to_string().trim_end())]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Options(#[from] OptionsError),
    #[error("config reload not supported for {field}: old={old}, new={new}")]
    NotSupported {
        field: &'static str,
        old: String,
        new: String,
    },
    #[error("{0}")]
    Log(#[from] LogError),
    #[error("{0}")]
    Security(#[from] super::security::SecurityError),
    #[error("{0}")]
    JetStream(#[from] super::jetstream_opts::JetStreamReloadError),
}

/// Read the config file again and apply `flags` over it, as at startup.
pub fn load(path: &str, flags: &[String]) -> Result<Options, ReloadError> {
    let mut file_opts = Options::default();
    // Warnings do not stop a reload (nats-server ignores them here).
    config::apply_file(path, &mut file_opts)?;
    let mut opts = match super::cli::parse_onto(flags, file_opts.clone()) {
        super::cli::Command::Run(o) => *o,
        _ => file_opts,
    };
    opts.apply_baseline();
    Ok(opts)
}

/// How one option is compared and reported.
struct Field {
    /// nats-server's `Options` field name.
    name: &'static str,
    /// The value as Go's `%v` prints it.
    value: fn(&Options) -> String,
    /// The `Reloaded: ...` line, or `None` when the option cannot be reloaded.
    reloaded: Option<fn(&Options) -> String>,
}

/// The options rnats has, in nats-server's `Options` field order. `Users` and `Accounts`
/// always report a reload, as in the reference.
const FIELDS: &[Field] = &[
    Field {
        name: "ServerName",
        value: |o| o.server_name.clone(),
        reloaded: None,
    },
    Field {
        name: "Host",
        value: |o| o.host.clone(),
        reloaded: None,
    },
    Field {
        name: "Port",
        value: |o| o.port.to_string(),
        reloaded: None,
    },
    Field {
        name: "ClientAdvertise",
        value: |o| o.client_advertise.clone(),
        reloaded: Some(|o| format!("Reload: client_advertise = {}", o.client_advertise)),
    },
    Field {
        name: "Trace",
        value: |o| o.trace.to_string(),
        reloaded: Some(|o| format!("Reloaded: trace = {}", o.trace)),
    },
    Field {
        name: "Debug",
        value: |o| o.debug.to_string(),
        reloaded: Some(|o| format!("Reloaded: debug = {}", o.debug)),
    },
    Field {
        name: "TraceVerbose",
        value: |o| o.trace_verbose.to_string(),
        reloaded: Some(|o| format!("Reloaded: trace_verbose = {}", o.trace_verbose)),
    },
    Field {
        name: "TraceHeaders",
        value: |o| o.trace_headers.to_string(),
        reloaded: Some(|o| format!("Reloaded: trace_headers = {}", o.trace_headers)),
    },
    Field {
        name: "NoSublistCache",
        value: |o| o.no_sublist_cache.to_string(),
        reloaded: None,
    },
    Field {
        name: "NoHeaderSupport",
        value: |o| o.no_header_support.to_string(),
        reloaded: None,
    },
    Field {
        name: "Logtime",
        value: |o| o.logtime.to_string(),
        reloaded: Some(|o| format!("Reloaded: logtime = {}", o.logtime)),
    },
    Field {
        name: "LogtimeUTC",
        value: |o| o.logtime_utc.to_string(),
        reloaded: Some(|o| format!("Reloaded: logtime_utc = {}", o.logtime_utc)),
    },
    Field {
        name: "MaxConn",
        value: |o| o.max_connections.to_string(),
        reloaded: Some(|o| format!("Reloaded: max_connections = {}", o.max_connections)),
    },
    Field {
        name: "MaxSubs",
        value: |o| o.max_subscriptions.to_string(),
        reloaded: None,
    },
    Field {
        name: "MaxSubTokens",
        value: |o| o.max_sub_tokens.to_string(),
        reloaded: None,
    },
    Field {
        name: "Users",
        value: |_| String::new(),
        reloaded: Some(|_| "Reloaded: authorization users".into()),
    },
    Field {
        name: "Accounts",
        value: |_| String::new(),
        reloaded: Some(|_| "Reloaded: accounts".into()),
    },
    Field {
        name: "Username",
        value: |o| o.username.clone(),
        reloaded: Some(|_| "Reloaded: authorization username".into()),
    },
    Field {
        name: "Password",
        value: |o| o.password.clone(),
        reloaded: Some(|_| "Reloaded: authorization password".into()),
    },
    Field {
        name: "Authorization",
        value: |o| o.authorization.clone(),
        reloaded: Some(|_| "Reloaded: authorization token".into()),
    },
    Field {
        name: "PingInterval",
        value: |o| go_duration(o.ping_interval),
        reloaded: Some(|o| format!("Reloaded: ping_interval = {}", go_duration(o.ping_interval))),
    },
    Field {
        name: "MaxPingsOut",
        value: |o| o.ping_max.to_string(),
        reloaded: Some(|o| format!("Reloaded: ping_max = {}", o.ping_max)),
    },
    Field {
        name: "HTTPHost",
        value: |o| {
            if o.http_host.is_empty() {
                o.host.clone()
            } else {
                o.http_host.clone()
            }
        },
        reloaded: None,
    },
    Field {
        name: "HTTPPort",
        value: |o| o.http_port.to_string(),
        reloaded: None,
    },
    Field {
        name: "AuthTimeout",
        value: |o| o.auth_timeout_secs().to_string(),
        reloaded: Some(|o| format!("Reloaded: authorization timeout = {}", o.auth_timeout_secs())),
    },
    Field {
        name: "MaxControlLine",
        value: |o| o.max_control_line.to_string(),
        reloaded: Some(|o| format!("Reloaded: max_control_line = {}", o.max_control_line)),
    },
    Field {
        name: "MaxPayload",
        value: |o| o.max_payload.to_string(),
        reloaded: Some(|o| format!("Reloaded: max_payload = {}", o.max_payload)),
    },
    Field {
        name: "MaxPending",
        value: |o| o.max_pending.to_string(),
        reloaded: None,
    },
    Field {
        name: "NoFastProducerStall",
        value: |o| o.no_fast_producer_stall.to_string(),
        reloaded: Some(|o| {
            let not = if o.no_fast_producer_stall { "not " } else { "" };
            format!("Reloaded: fast producers will {not}be stalled")
        }),
    },
    // The JetStream options (nats-server's `JetStream` to `SyncAlways`), compared by
    // `jetstream_opts::reload_diff`.
    Field {
        name: "JetStream",
        value: |_| String::new(),
        reloaded: None,
    },
    Field {
        name: "PidFile",
        value: |o| o.pid_file.clone(),
        reloaded: Some(|o| format!("Reloaded: pid_file = {}", o.pid_file)),
    },
    Field {
        name: "PortsFileDir",
        value: |o| o.ports_file_dir.clone(),
        reloaded: Some(|o| format!("Reloaded: ports_file_dir = {}", o.ports_file_dir)),
    },
    Field {
        name: "LogFile",
        value: |o| o.log_file.clone(),
        reloaded: Some(|o| format!("Reloaded: log_file = {}", o.log_file)),
    },
    Field {
        name: "LogSizeLimit",
        value: |o| o.log_size_limit.to_string(),
        reloaded: None,
    },
    Field {
        name: "LogMaxFiles",
        value: |o| o.log_max_num.to_string(),
        reloaded: None,
    },
    Field {
        name: "Syslog",
        value: |o| o.syslog.to_string(),
        reloaded: Some(|o| format!("Reloaded: syslog = {}", o.syslog)),
    },
    Field {
        name: "RemoteSyslog",
        value: |o| o.remote_syslog.clone(),
        reloaded: Some(|o| format!("Reloaded: remote_syslog = {}", o.remote_syslog)),
    },
    Field {
        name: "WriteDeadline",
        value: |o| go_duration(o.write_deadline),
        reloaded: Some(|o| format!("Reloaded: write_deadline = {}", go_duration(o.write_deadline))),
    },
    Field {
        name: "MaxClosedClients",
        value: |o| o.max_closed_clients.to_string(),
        reloaded: None,
    },
    Field {
        name: "LameDuckDuration",
        value: |o| go_duration(o.lame_duck_duration),
        reloaded: None,
    },
    Field {
        name: "LameDuckGracePeriod",
        value: |o| go_duration(o.lame_duck_grace_period),
        reloaded: None,
    },
    Field {
        name: "MaxTracedMsgLen",
        value: |o| o.max_traced_msg_len.to_string(),
        reloaded: Some(|o| format!("Reloaded: max_traced_msg_len = {}", o.max_traced_msg_len)),
    },
    Field {
        name: "ConnectErrorReports",
        value: |o| o.connect_error_reports.to_string(),
        reloaded: Some(|o| format!("Reloaded: connect_error_reports = {}", o.connect_error_reports)),
    },
    Field {
        name: "ReconnectErrorReports",
        value: |o| o.reconnect_error_reports.to_string(),
        reloaded: Some(|o| format!("Reloaded: reconnect_error_reports = {}", o.reconnect_error_reports)),
    },
];

/// A reload that can go ahead: what changed, in order.
#[derive(Debug)]
pub struct Plan {
    /// `Reloaded: ...` lines, in nats-server's order.
    pub messages: Vec<String>,
    pub logging_changed: bool,
    pub pid_file_changed: bool,
    pub ports_dir_changed: bool,
    /// What happens to JetStream (turned on or off, limits raised; its lines are in
    /// `messages`).
    pub jetstream: super::jetstream_opts::JetStreamReload,
}

/// Compare the options in force with new ones (already validated).
pub fn diff(old: &Options, new: &Options) -> Result<Plan, ReloadError> {
    let mut messages = Vec::new();
    let mut jetstream = Default::default();
    for f in FIELDS {
        if f.name == "JetStream" {
            // JetStream runs when it was on (it does not stop itself yet).
            jetstream = super::jetstream_opts::reload_diff(&old.jetstream, &new.jetstream, old.jetstream.enabled)?;
            messages.extend(std::mem::take(&mut jetstream.messages));
            continue;
        }
        let (a, b) = ((f.value)(old), (f.value)(new));
        let always = matches!(f.name, "Users" | "Accounts");
        if a == b && !always {
            continue;
        }
        let Some(msg) = f.reloaded else {
            return Err(ReloadError::NotSupported {
                field: f.name,
                old: a,
                new: b,
            });
        };
        if f.name == "PidFile" && new.pid_file.is_empty() {
            continue;
        }
        messages.push(msg(new));
    }
    messages.extend(proxies_messages(old, new));
    Ok(Plan {
        messages,
        logging_changed: LogConfig::from_options(old) != LogConfig::from_options(new),
        pid_file_changed: old.pid_file != new.pid_file,
        ports_dir_changed: old.ports_file_dir != new.ports_file_dir,
        jetstream,
    })
}

/// nats-server's `proxiesReload` lines: removed keys first, then added ones, each list
/// in file order and printed as Go's `%q` of a string slice.
fn proxies_messages(old: &Options, new: &Options) -> Vec<String> {
    let (a, b) = (
        old.security.proxies.as_deref().unwrap_or_default(),
        new.security.proxies.as_deref().unwrap_or_default(),
    );
    let quoted = |keys: Vec<&String>| {
        let q: Vec<String> = keys
            .iter()
            .map(|k| crate::proto::reply::go_quote(k.as_bytes()))
            .collect();
        format!("[{}]", q.join(" "))
    };
    let del: Vec<&String> = a.iter().filter(|k| !b.contains(k)).collect();
    let add: Vec<&String> = b.iter().filter(|k| !a.contains(k)).collect();
    let mut out = Vec::new();
    if !del.is_empty() {
        out.push(format!("Reloaded: proxies trusted keys {} were removed", quoted(del)));
    }
    if !add.is_empty() {
        out.push(format!("Reloaded: proxies trusted keys {} were added", quoted(add)));
    }
    out
}

/// Everything short of applying: load, validate, compare, and check that a new log
/// output can be opened.
pub fn prepare(current: &Options, flags: &[String], bound_port: u16) -> Result<(Options, Plan), ReloadError> {
    if current.config_file.is_empty() {
        return Err(ReloadError::NoConfigFile);
    }
    let mut new = load(&current.config_file, flags)?;
    new.validate()?;
    // A random port (-1) or none given keeps what was bound, as in nats-server.
    new.port = match new.port {
        -1 => i64::from(bound_port),
        0 => 4222,
        p => p,
    };
    // rnats-only settings come from the command line and cannot change.
    new.shards = current.shards;
    new.reactor = current.reactor;
    new.spin_us = current.spin_us;
    new.sqpoll_ms = current.sqpoll_ms;
    new.send_zc = current.send_zc;
    let plan = diff(current, &new)?;
    if plan.logging_changed {
        logging::check(&LogConfig::from_options(&new))?;
    }
    Ok((new, plan))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reloadable_changes_in_reference_order() {
        let old = Options::default();
        let new = Options {
            max_payload: 100,
            debug: true,
            ping_interval: std::time::Duration::from_secs(5),
            auth_timeout: 0.5,
            ..Options::default()
        };
        let plan = diff(&old, &new).unwrap();
        assert_eq!(
            plan.messages,
            [
                "Reloaded: debug = true",
                "Reloaded: authorization users",
                "Reloaded: accounts",
                "Reloaded: ping_interval = 5s",
                "Reloaded: authorization timeout = 0.5",
                "Reloaded: max_payload = 100",
            ]
        );
        assert!(plan.logging_changed);
    }

    #[test]
    fn first_unsupported_field_refuses() {
        let old = Options::default();
        let new = Options {
            server_name: "x".into(),
            max_pending: 5,
            ..Options::default()
        };
        assert_eq!(
            diff(&old, &new).unwrap_err().to_string(),
            "config reload not supported for ServerName: old=, new=x"
        );
        let new = Options {
            lame_duck_duration: std::time::Duration::from_secs(60),
            ..Options::default()
        };
        assert_eq!(
            diff(&old, &new).unwrap_err().to_string(),
            "config reload not supported for LameDuckDuration: old=2m0s, new=1m0s"
        );
    }

    #[test]
    fn jetstream_options_in_reference_order() {
        let mut old = Options::default();
        old.jetstream.enabled = true;
        old.jetstream.store_dir = "/js".into();
        old.jetstream.max_memory = 1000;
        old.apply_baseline();
        // Turned off, between MaxPayload and PidFile.
        let mut new = old.clone();
        new.jetstream.enabled = false;
        new.max_payload = 100;
        new.pid_file = "x.pid".into();
        let plan = diff(&old, &new).unwrap();
        assert_eq!(
            plan.messages.get(2..),
            Some(
                &[
                    "Reloaded: max_payload = 100".to_string(),
                    "Reloaded: JetStream".to_string(),
                    "Reloaded: pid_file = x.pid".to_string(),
                ][..]
            )
        );
        assert_eq!(plan.jetstream.enable, Some(false));
        // Raised limit.
        let mut new = old.clone();
        new.jetstream.max_memory = 2048;
        let plan = diff(&old, &new).unwrap();
        assert_eq!(plan.jetstream.max_memory, Some(2048));
        assert_eq!(
            plan.messages.last().map(String::as_str),
            Some("Reloaded: JetStream max_mem_store = 2.00 KB")
        );
        // A fixed option, reported before a later unsupported field (MaxClosedClients).
        let mut new = old.clone();
        new.jetstream.unique_tag = "az".into();
        new.max_closed_clients = 1;
        assert_eq!(
            diff(&old, &new).unwrap_err().to_string(),
            "config reload not supported for JetStreamUniqueTag: old=, new=az"
        );
    }
}
