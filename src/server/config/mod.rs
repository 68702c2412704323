//! The config file (`-c`): nats-server's keys, types, validation and messages, applied
//! to [`Options`]. Errors and warnings carry the reference's `file:line:col` positions
//! and wording; like the reference, every problem in a file is reported, warnings first.
//!
//! - `mod.rs`: loading, the top-level keys and typed accessors.
//! - `auth`: the `authorization { ... }` block; `users`: user lists and the auth
//!   callout; `permissions`: user and default permissions.
//! - `accounts`: `accounts { }`; `exports`: their exports and imports; `mappings`:
//!   subject mappings (accounts and top level); `links`: the checks across accounts.
//! - `trust`: operators, trusted keys and the account resolver; `jwt`: the JWT decoding
//!   those need.
//! - `subjects`: subject rules, and `check_mapping`, where mapping destinations are
//!   validated.
//! - `validate`: the startup checks of the security settings (not made by `-t`).
//! - `proxies`: the trusted proxies.
//! - `tls`: `tls { }`, `ocsp`, `allow_non_tls`; `websocket`: `websocket { }`.
//! - `jetstream`: the server's `jetstream` key.
//! - `unsupported`: reference keys that rnats does not implement yet.

mod accounts;
mod auth;
mod exports;
mod jetstream;
mod jwt;
mod links;
mod mappings;
mod permissions;
mod proxies;
mod subjects;
mod tls;
mod trust;
mod unsupported;
mod users;
mod validate;
mod websocket;

/// Subject subset matching, also used by JetStream's consumer checks.
pub(crate) use subjects::is_subset_match;
pub use validate::validate_security;

use super::options::Options;
use conf::{Entry, Map, Position, Value, ValueKind};
use std::path::Path;
use std::time::Duration;

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or parsed; the text is nats-server's.
    #[error("{0}")]
    Parse(String),
    /// The file parsed but has errors (or, with `-t`, warnings): each on its own line,
    /// warnings first, as nats-server prints them.
    #[error("{}", lines(.warnings, .errors))]
    Invalid { errors: Vec<String>, warnings: Vec<String> },
}

fn lines(warnings: &[String], errors: &[String]) -> String {
    let mut out = String::new();
    for l in warnings.iter().chain(errors) {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// What loading a file produced besides the options.
#[derive(Debug, Default)]
pub struct Report {
    /// nats-server's warnings (printed to stderr at startup; fatal for `-t`).
    pub warnings: Vec<String>,
    /// rnats's own notes: keys accepted without effect yet (logged as warnings).
    pub notes: Vec<String>,
}

impl Report {
    /// The warnings as nats-server prints them at startup (each line ends with `\n`).
    pub fn warnings_text(&self) -> String {
        lines(&self.warnings, &[])
    }
}

/// Read `path` and apply it to `opts`. `opts.config_file` and `opts.config_digest` are
/// set. On error `opts` may be partly changed: use a copy.
pub fn apply_file(path: &str, opts: &mut Options) -> Result<Report, ConfigError> {
    opts.config_file = path.to_string();
    let map = conf::parse_file(Path::new(path)).map_err(|e| ConfigError::Parse(e.reference_text()))?;
    opts.config_digest = conf::config_digest(&map);
    let mut cx = Cx::default();
    if map.is_empty() {
        cx.warnings.push(format!("{path}: config has no values or is empty"));
    }
    system_account(&mut cx, opts, &map);
    for (key, entry) in map.iter() {
        top_level(&mut cx, opts, key, entry);
    }
    if let Some(ac) = &opts.security.auth_callout {
        for a in &ac.allowed_accounts {
            if !opts.security.accounts.iter().any(|x| &x.name == a) {
                cx.error_bare(format!(
                    "auth_callout allowed account {a:?} not found in configured accounts"
                ));
            }
        }
    }
    if !cx.errors.is_empty() {
        return Err(ConfigError::Invalid {
            errors: cx.errors,
            warnings: cx.warnings,
        });
    }
    Ok(Report {
        warnings: cx.warnings,
        notes: cx.notes,
    })
}

/// Errors, warnings and notes collected while applying a file.
#[derive(Default)]
pub(crate) struct Cx {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
    /// A top-level `mappings` key made the reference define the global account among
    /// the configured ones (imports can then name it).
    pub global_account_defined: bool,
}

/// `system_account`/`system`, read before every other key as the reference does (by
/// their exact names).
fn system_account(cx: &mut Cx, o: &mut Options, map: &Map) {
    let Some(e) = map.get_entry("system_account").or_else(|| map.get_entry("system")) else {
        return;
    };
    match e.value.as_str() {
        Some(s) => o.security.system_account = s.to_string(),
        None => cx.error(&e.key_pos, "system account name must be a string"),
    }
}

impl Cx {
    pub fn error(&mut self, pos: &Position, msg: impl std::fmt::Display) {
        self.errors.push(format!("{pos}: {msg}"));
    }

    /// nats-server's `unknown field "x"`.
    pub fn unknown(&mut self, key: &str, e: &Entry) {
        if !e.value.used_as_variable {
            self.error(&e.key_pos, format!("unknown field {key:?}"));
        }
    }

    /// nats-server's `invalid use of field "x": reason` warning.
    pub fn warn_field(&mut self, field: &str, pos: &Position, reason: &str) {
        self.warnings
            .push(format!("{pos}: invalid use of field {field:?}: {reason}"));
    }

    /// An error whose token the reference lost: the message alone, without a position.
    pub fn error_bare(&mut self, msg: impl std::fmt::Display) {
        self.errors.push(msg.to_string());
    }

    /// A warning at a position.
    pub fn warning(&mut self, pos: &Position, msg: impl std::fmt::Display) {
        self.warnings.push(format!("{pos}: {msg}"));
    }

    /// The error nats-server's failed type assertions produce.
    fn conversion(&mut self, e: &Entry, want: &str) {
        self.conversion_at(&e.key_pos, &e.value, want);
    }

    /// The failed type assertion of a value at `pos` (an array item, or an entry's key).
    pub fn conversion_at(&mut self, pos: &Position, v: &Value, want: &str) {
        let msg = format!(
            "interface conversion: interface {{}} is {}, not {want}",
            v.go_type_name()
        );
        self.error(pos, msg);
    }

    /// A string array item (the reference's type assertion on it).
    pub fn item_string<'a>(&mut self, v: &'a Value) -> Option<&'a str> {
        let s = v.as_str();
        if s.is_none() {
            self.conversion_at(&v.pos, v, "string");
        }
        s
    }

    pub fn string<'a>(&mut self, e: &'a Entry) -> Option<&'a str> {
        let s = e.value.as_str();
        if s.is_none() {
            self.conversion(e, "string");
        }
        s
    }

    pub fn int(&mut self, e: &Entry) -> Option<i64> {
        let n = e.value.as_i64();
        if n.is_none() {
            self.conversion(e, "int64");
        }
        n
    }

    pub fn bool(&mut self, e: &Entry) -> Option<bool> {
        let b = e.value.as_bool();
        if b.is_none() {
            self.conversion(e, "bool");
        }
        b
    }

    pub fn map<'a>(&mut self, e: &'a Entry) -> Option<&'a Map> {
        let m = e.value.as_map();
        if m.is_none() {
            self.conversion(e, "map[string]interface {}");
        }
        m
    }

    /// nats-server's `parseDuration`: a Go duration string, or (with a warning) an
    /// integer number of seconds.
    pub(crate) fn duration(&mut self, field: &str, e: &Entry) -> Option<Duration> {
        match &e.value.kind {
            ValueKind::String(s) => match conf::parse_duration_nanos(s) {
                Ok(n) => Some(Duration::from_nanos(n.max(0) as u64)),
                Err(err) => {
                    self.error(&e.key_pos, format!("error parsing {field}: {err}"));
                    None
                }
            },
            _ => {
                self.warn_field(field, &e.key_pos, &format!("{field} should be converted to a duration"));
                self.int(e).map(|n| Duration::from_secs(n.max(0) as u64))
            }
        }
    }
}

/// Go's `%v` of a config value, for messages that print one.
pub(crate) fn go_value(v: &Value) -> String {
    match &v.kind {
        ValueKind::String(s) => s.clone(),
        ValueKind::Integer(i) => i.to_string(),
        ValueKind::Float(f) => f.to_string(),
        ValueKind::Bool(b) => b.to_string(),
        ValueKind::DateTime(d) => d.to_string(),
        ValueKind::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_value).collect();
            format!("[{}]", parts.join(" "))
        }
        ValueKind::Map(m) => {
            let mut parts: Vec<String> = m.iter().map(|(k, e)| format!("{k}:{}", go_value(&e.value))).collect();
            parts.sort();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// `host:port` (Go's `net.SplitHostPort`, then `strconv.Atoi`) or a bare port.
fn listen(cx: &mut Cx, e: &Entry) -> Option<(Option<String>, i64)> {
    match &e.value.kind {
        ValueKind::Integer(p) => Some((None, *p)),
        ValueKind::String(s) => {
            let Some((host, port)) = split_host_port(s) else {
                cx.error(&e.key_pos, format!("could not parse address string {s:?}"));
                return None;
            };
            match port.parse::<i64>() {
                Ok(p) if !port.starts_with('+') => Some((Some(host), p)),
                _ => {
                    cx.error(&e.key_pos, format!("could not parse port {port:?}"));
                    None
                }
            }
        }
        _ => {
            cx.error(
                &e.key_pos,
                format!("expected port or host:port, got {}", e.value.go_type_name()),
            );
            None
        }
    }
}

/// Go's `net.SplitHostPort`: `host:port` or `[v6host]:port`.
fn split_host_port(s: &str) -> Option<(String, String)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = after.strip_prefix(':')?;
        if port.contains(':') || host.contains('[') {
            return None;
        }
        return Some((host.to_string(), port.to_string()));
    }
    let (host, port) = s.rsplit_once(':')?;
    if host.contains(':') || host.contains('[') || host.contains(']') || port.contains(']') {
        return None;
    }
    Some((host.to_string(), port.to_string()))
}

/// One top-level key (nats-server's `processConfigFileLine`, for the keys rnats knows).
fn top_level(cx: &mut Cx, o: &mut Options, key: &str, e: &Entry) {
    let lower = key.to_ascii_lowercase();
    let pos = &e.key_pos;
    match lower.as_str() {
        "listen" => {
            if let Some((host, port)) = listen(cx, e) {
                o.host = host.unwrap_or_default();
                o.port = port;
            }
        }
        "client_advertise" => set(cx.string(e), |v| o.client_advertise = v.into()),
        "port" => set(cx.int(e), |v| o.port = v),
        "server_name" => {
            if let Some(v) = cx.string(e) {
                if v.contains(' ') {
                    cx.error(pos, "server name cannot contain spaces");
                } else {
                    o.server_name = v.into();
                }
            }
        }
        "host" | "net" => set(cx.string(e), |v| o.host = v.into()),
        "debug" => set(cx.bool(e), |v| o.debug = v),
        "trace" => set(cx.bool(e), |v| o.trace = v),
        "trace_verbose" => set(cx.bool(e), |v| {
            o.trace_verbose = v;
            o.trace = v;
        }),
        "trace_headers" => set(cx.bool(e), |v| {
            o.trace_headers = v;
            o.trace = v;
        }),
        "logtime" => set(cx.bool(e), |v| o.logtime = v),
        "logtime_utc" => set(cx.bool(e), |v| o.logtime_utc = v),
        "disable_sublist_cache" | "no_sublist_cache" => set(cx.bool(e), |v| o.no_sublist_cache = v),
        "authorization" => auth::authorization(cx, o, e),
        "accounts" => accounts::accounts(cx, o, e),
        "mappings" | "maps" => {
            cx.global_account_defined = true;
            if let Some(m) = mappings::mappings(cx, e) {
                o.security.global_mappings.extend(m);
            }
        }
        "default_sentinel" => set(cx.string(e), |v| o.security.default_sentinel = v.into()),
        "no_auth_user" => set(cx.string(e), |v| o.security.no_auth_user = v.into()),
        "proxies" => set(proxies::proxies(cx, e), |v| o.security.proxies = Some(v)),
        // Read first, by `system_account()`.
        "system_account" | "system" => {}
        "no_system_account" | "no_system" | "no_sys_acc" => {
            if let Some(v) = cx.bool(e) {
                o.security.no_system_account = v;
            }
        }
        "operator" | "operators" | "roots" | "root" | "root_operators" | "root_operator" => trust::operators(cx, o, e),
        "resolver" | "account_resolver" | "accounts_resolver" => trust::resolver(cx, o, e),
        "resolver_tls" => {
            if let Some(t) = tls::parse_tls(cx, e, true) {
                o.security.resolver_tls = Some(t);
            }
        }
        "resolver_preload" => trust::preload(cx, o, e),
        "resolver_pinned_accounts" => trust::pinned(cx, o, e),
        "trusted" | "trusted_keys" => trust::trusted(cx, o, e),
        "store_dir" | "storedir" => {
            if !o.jetstream.store_dir.is_empty() {
                cx.error(pos, "Duplicate 'store_dir' configuration");
            } else {
                set(cx.string(e), |v| o.jetstream.store_dir = v.into());
            }
        }
        "jetstream" => jetstream::jetstream(cx, o, e),
        "http" => {
            if let Some((host, port)) = listen(cx, e) {
                o.http_host = host.unwrap_or_default();
                o.http_port = port;
            }
        }
        "http_port" | "monitor_port" => set(cx.int(e), |v| o.http_port = v),
        "http_base_path" => set(cx.string(e), |v| o.http_base_path = v.into()),
        "logfile" | "log_file" => set(cx.string(e), |v| o.log_file = v.into()),
        "logfile_size_limit" | "log_size_limit" => set(cx.int(e), |v| o.log_size_limit = v),
        "logfile_max_num" | "log_max_num" => set(cx.int(e), |v| o.log_max_num = v),
        "syslog" => set(cx.bool(e), |v| o.syslog = v),
        "remote_syslog" => set(cx.string(e), |v| o.remote_syslog = v.into()),
        "pidfile" | "pid_file" => set(cx.string(e), |v| o.pid_file = v.into()),
        "ports_file_dir" => set(cx.string(e), |v| o.ports_file_dir = v.into()),
        "max_control_line" | "max_payload" => {
            if let Some(v) = cx.int(e) {
                if v > i64::from(i32::MAX) {
                    cx.error(pos, format!("{key} value is too big"));
                } else if lower == "max_control_line" {
                    o.max_control_line = i64::from(v as i32);
                } else {
                    o.max_payload = i64::from(v as i32);
                }
            }
        }
        "max_pending" => set(cx.int(e), |v| o.max_pending = v),
        "no_fast_producer_stall" => set(cx.bool(e), |v| o.no_fast_producer_stall = v),
        "max_connections" | "max_conn" => set(cx.int(e), |v| o.max_connections = if v == 0 { -1 } else { v }),
        "max_traced_msg_len" => set(cx.int(e), |v| o.max_traced_msg_len = v),
        "max_subscriptions" | "max_subs" => set(cx.int(e), |v| o.max_subscriptions = v),
        "max_sub_tokens" | "max_subscription_tokens" => {
            if let Some(n) = cx.int(e) {
                if n > 255 {
                    cx.error(pos, format!("{key} value is too big"));
                } else if n <= 0 {
                    cx.error(pos, format!("{key} value can not be negative"));
                } else {
                    o.max_sub_tokens = n;
                }
            }
        }
        "ping_interval" => set(cx.duration("ping_interval", e), |v| o.ping_interval = v),
        "ping_max" => set(cx.int(e), |v| o.ping_max = v),
        "write_deadline" => set(cx.duration("write_deadline", e), |v| o.write_deadline = v),
        "lame_duck_duration" => {
            if let Some(s) = cx.string(e) {
                match conf::parse_duration_nanos(s) {
                    Err(err) => cx.error(pos, format!("error parsing lame_duck_duration: {err}")),
                    Ok(n) if n < 30_000_000_000 => cx.error(
                        pos,
                        format!(
                            "invalid lame_duck_duration of {}, minimum is 30 seconds",
                            conf::format_duration_nanos(n)
                        ),
                    ),
                    Ok(n) => o.lame_duck_duration = Duration::from_nanos(n as u64),
                }
            }
        }
        "lame_duck_grace_period" => {
            if let Some(s) = cx.string(e) {
                match conf::parse_duration_nanos(s) {
                    Err(err) => cx.error(pos, format!("error parsing lame_duck_grace_period: {err}")),
                    Ok(n) if n < 0 => cx.error(pos, "invalid lame_duck_grace_period, needs to be positive"),
                    // 0 means the default, as in nats-server (`apply_baseline`).
                    Ok(n) => o.lame_duck_grace_period = Duration::from_nanos(n as u64),
                }
            }
        }
        "no_header_support" => set(cx.bool(e), |v| o.no_header_support = v),
        "connect_error_reports" => set(cx.int(e), |v| o.connect_error_reports = v),
        "reconnect_error_reports" => set(cx.int(e), |v| o.reconnect_error_reports = v),
        "max_closed_clients" => set(cx.int(e), |v| o.max_closed_clients = v),
        "tls" => {
            if let Some(t) = tls::parse_tls(cx, e, true) {
                o.tls = Some(t);
            }
        }
        "allow_non_tls" => set(cx.bool(e), |v| o.allow_non_tls = v),
        "ocsp" => tls::ocsp(cx, o, e),
        "ocsp_cache" => tls::ocsp_cache(cx, o, e),
        "websocket" | "ws" => websocket::websocket(cx, o, e),
        "https_port" => set(cx.int(e), |v| o.https_port = v),
        "https" => {
            if let Some((host, port)) = listen(cx, e) {
                o.https_host = host.unwrap_or_default();
                o.https_port = port;
            }
        }
        _ => unsupported::top_level(cx, key, &lower, e),
    }
}

fn set<T>(v: Option<T>, f: impl FnOnce(T)) {
    if let Some(v) = v {
        f(v)
    }
}

#[cfg(test)]
mod tests;
