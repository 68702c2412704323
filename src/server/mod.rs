//! Server assembly: options to a running server. Binds the listener exclusively, picks
//! the reactor, writes the PID and ports files, logs nats-server's startup lines, serves
//! monitoring, reloads its configuration, enters lame duck mode and shuts down cleanly.
//!
//! - `cli`: command-line parsing with Go `flag` rules.
//! - `config`: the config file (`-c`), applied to the options.
//! - `options`: the options and their defaults.
//! - `reload`: what a reload may change, and the messages it logs.
//! - `lame_duck`: closing clients gradually before exiting (SIGUSR2).
//! - `signals`: the signal loop and `--signal` commands.
//! - `logging`: nats-server's log format over `tracing`; files, rotation, syslog.
//! - `state`: what monitoring (`crate::monitor`) reads.

pub mod cli;
pub mod config;
pub mod jetstream_opts;
pub mod lame_duck;
pub mod logging;
pub mod operator;
pub mod options;
pub mod reload;
pub mod security;
pub mod signals;
pub mod state;
pub mod transport;

use crate::driver::{self, RuntimeConfig};
use crate::proto::info::ServerInfo;
use options::{Options, ReactorChoice};
use state::{Live, ServerState};
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

/// The nats-server version whose behaviour rnats implements (clients key features off it).
pub const NATS_VERSION: &str = "2.14.0";
/// rnats's own version.
pub const RNATS_VERSION: &str = env!("CARGO_PKG_VERSION");
/// JetStream API level advertised in INFO.
pub const API_LEVEL: i32 = 4;

/// Set by tests to pretend io_uring is unavailable (as under a seccomp profile).
pub const FORCE_NO_URING_ENV: &str = "RNATS_FORCE_NO_URING";

/// How long a start waits for a client or WebSocket port that is in use to be released
/// (a killed server's io_uring rings let go of their listeners a few milliseconds after
/// the process is gone) before failing as nats-server fails at once.
pub const BIND_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Options(#[from] options::OptionsError),
    #[error("Error listening on port: {addr}, {err:?}")]
    Listen { addr: String, err: String },
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Reactor(String),
    #[error("Could not write pidfile: {0}")]
    PidFile(String),
    #[error("{0}")]
    Security(#[from] security::SecurityError),
    /// TLS or WebSocket settings that cannot be used.
    #[error("{0}")]
    Transport(String),
    /// OCSP stapling cannot start (the reference refuses to create the server: the
    /// message goes to stderr as `nats-server: <message>`, before any log line).
    #[error("{0}")]
    Ocsp(String),
    /// JetStream cannot start (`Can't start JetStream: ...`).
    #[error("Can't start JetStream: {0}")]
    JetStream(String),
}

/// What authenticates clients, operator mode's accounts when it is on, and what
/// authenticates WebSocket clients.
type Security = (
    Arc<dyn crate::core::auth::Authenticator>,
    Option<Arc<crate::auth::operator::accounts::OperatorAccounts>>,
    Arc<dyn crate::core::auth::Authenticator>,
);

/// Put the security configuration of `opts` in place (accounts, users) and return the
/// authenticators for it (see [`Security`]).
fn apply_security(
    shared: &Arc<crate::core::stats::Shared>,
    keys: &Arc<crate::auth::callout::ServerKeys>,
    opts: &Options,
) -> Result<Security, security::SecurityError> {
    if operator::enabled(&opts.security) {
        let (accounts, auth) = operator::apply(shared, &opts.security, keys, opts.auth_timeout_duration())?;
        let auth: Arc<dyn crate::core::auth::Authenticator> = Arc::new(auth);
        return Ok((auth.clone(), Some(accounts), auth));
    }
    let simple = security::SimpleAuth {
        username: &opts.username,
        password: &opts.password,
        token: &opts.authorization,
        tls_map: opts.tls.as_ref().is_some_and(|t| t.map),
    };
    let applied = security::apply(&shared.accounts, &opts.security, &simple)?;
    let directory = applied.directory.clone();
    let auth = match &opts.security.auth_callout {
        Some(c) => security::with_callout(applied, c, shared, keys, opts.auth_timeout_duration())?,
        None => applied.authenticator,
    };
    let ws = transport::ws_authenticator(opts, directory, &auth);
    Ok((auth, None, ws))
}

/// Payloads above this draw nats-server's startup warning.
const MAX_PAYLOAD_MAX_SIZE: i64 = 8 * 1024 * 1024;

/// nats-server's `checkAuthforWarnings`.
fn check_auth_for_warnings(o: &Options) {
    let plain = |p: &str| !crate::auth::secret::is_bcrypt(p);
    if (!o.password.is_empty() && plain(&o.password)) || o.security.users.iter().any(|u| plain(&u.password)) {
        tracing::warn!("Plaintext passwords detected, use nkeys or bcrypt");
    }
}

fn write_pid_file(path: &str) -> io::Result<()> {
    std::fs::write(path, std::process::id().to_string())
}

/// Which reactor runs, and why.
struct Chosen {
    uring: bool,
    /// io_uring with completion I/O (multishot receives, submitted sends); otherwise
    /// readiness polls. (Read only where io_uring is built.)
    #[cfg_attr(not(all(target_os = "linux", feature = "uring")), allow(dead_code))]
    completion: bool,
    note: Option<String>,
}

fn choose_reactor(choice: ReactorChoice) -> Result<Chosen, StartError> {
    let forced_off = std::env::var_os(FORCE_NO_URING_ENV).is_some_and(|v| !v.is_empty() && v != "0");
    let probe = || -> Result<(), String> {
        if forced_off {
            return Err(format!("disabled by {FORCE_NO_URING_ENV}"));
        }
        #[cfg(all(target_os = "linux", feature = "uring"))]
        {
            shards::uring::probe(crate::driver::uring::RING_ENTRIES).map_err(|e| match e.raw_os_error() {
                Some(libc::EPERM) => "EPERM".to_string(),
                Some(libc::ENOSYS) => "ENOSYS".to_string(),
                Some(libc::ENOMEM) => "ENOMEM".to_string(),
                _ => e.to_string(),
            })?;
            Ok(())
        }
        #[cfg(not(all(target_os = "linux", feature = "uring")))]
        {
            Err("not built with the uring feature".into())
        }
    };
    // Completion I/O needs newer opcodes than the ring itself (provided-buffer rings,
    // multishot receive: Linux 6.0); without them the ring serves readiness polls.
    let completion = || -> Result<(), String> {
        #[cfg(all(target_os = "linux", feature = "uring"))]
        {
            shards::uring_io::probe_completion().map_err(|e| e.to_string())
        }
        #[cfg(not(all(target_os = "linux", feature = "uring")))]
        {
            Err("not built with the uring feature".into())
        }
    };
    let uring = || match completion() {
        Ok(()) => Chosen {
            uring: true,
            completion: true,
            note: None,
        },
        Err(why) => Chosen {
            uring: true,
            completion: false,
            note: Some(format!(
                "io_uring completion I/O unavailable ({why}), using readiness polls"
            )),
        },
    };
    match choice {
        ReactorChoice::Mio => Ok(Chosen {
            uring: false,
            completion: false,
            note: None,
        }),
        ReactorChoice::UringPoll => match probe() {
            Ok(()) => Ok(Chosen {
                uring: true,
                completion: false,
                note: None,
            }),
            Err(why) => Err(StartError::Reactor(format!(
                "io_uring reactor requested but unavailable ({why})"
            ))),
        },
        ReactorChoice::Uring => match probe() {
            Ok(()) => Ok(uring()),
            Err(why) => Err(StartError::Reactor(format!(
                "io_uring reactor requested but unavailable ({why})"
            ))),
        },
        ReactorChoice::Auto => match probe() {
            Ok(()) => Ok(uring()),
            Err(why) => Ok(Chosen {
                uring: false,
                completion: false,
                note: Some(format!("io_uring unavailable ({why}), using mio")),
            }),
        },
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, StartError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| StartError::Listen {
            addr: format!("{host}:{port}"),
            err: format!("listen tcp: lookup {host}: no such host"),
        })
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A started server.
pub struct Server {
    state: Arc<ServerState>,
    running: Option<driver::Running>,
    _monitor: Option<crate::monitor::http::HttpServer>,
    /// What monitoring answers from (also for the system account's services).
    monitor: Arc<crate::monitor::Context>,
    pid_file: Option<String>,
    ports_file: Option<String>,
    /// The options in force (the port is the one bound).
    opts: Options,
    /// The INFO template (a reload updates what depends on options).
    info: ServerInfo,
    /// Lame duck mode entered.
    ldm: bool,
    /// Where clients connect.
    pub client_addr: SocketAddr,
    /// The server's keys (auth callout requests are signed and sealed with them).
    keys: Arc<crate::auth::callout::ServerKeys>,
    /// Operator mode's accounts (they live as long as the server: a reload keeps them).
    operator_accounts: Option<Arc<crate::auth::operator::accounts::OperatorAccounts>>,
    /// The authenticator of the security configuration (trusted proxies are put in front
    /// of it for the shards).
    authenticator: Arc<dyn crate::core::auth::Authenticator>,
    /// TLS and WebSocket settings of the listeners (replaced on reload).
    transports: driver::Transports,
    /// OCSP: stapled certificates, their monitors, peer checks (restarted on reload).
    ocsp: transport::Ocsp,
    /// `connection_rate_limit`'s counter, if any.
    tls_rate: Option<Arc<crate::transport::tls::rate::ConnRate>>,
    /// HTTPS monitoring's TLS (replaced on reload).
    https: Option<Arc<crate::monitor::https::HttpsConfig>>,
    /// The bound WebSocket port, if any.
    pub ws_port: Option<u16>,
    /// The system account's services and events.
    system: Arc<crate::system::System>,
}

/// `auth` with the trusted proxies of `opts` in front.
fn with_proxies(
    auth: &Arc<dyn crate::core::auth::Authenticator>,
    opts: &Options,
) -> Arc<dyn crate::core::auth::Authenticator> {
    crate::auth::proxies::TrustedProxies::wrap(auth.clone(), opts.security.proxies.as_deref().unwrap_or_default())
}

impl Server {
    /// Bind, start the shards and log the startup lines. Logging must be set up.
    pub fn start(opts: Options) -> Result<Server, StartError> {
        opts.validate()?;
        let ocsp = transport::prepare_ocsp(&opts).map_err(StartError::Ocsp)?;
        let chosen = choose_reactor(opts.reactor)?;
        let nshards = if opts.shards > 0 {
            opts.shards
        } else {
            shards::cpus::default_shard_count()
        };
        let cpus = shards::cpus::allowed_cpus();
        let kp = nkeys::KeyPair::new_server();
        let server_id = kp.public_key();
        let xkp = nkeys::XKey::new();
        let xkey = xkp.public_key();
        let server_name = if opts.server_name.is_empty() {
            server_id.clone()
        } else {
            opts.server_name.clone()
        };
        let keys = Arc::new(crate::auth::callout::ServerKeys {
            signer: kp,
            xkey: xkp,
            id: server_id.clone(),
            name: server_name.clone(),
            host: opts.host.clone(),
            version: NATS_VERSION.into(),
        });

        tracing::info!("Starting nats-server");
        tracing::info!("  Version:  {NATS_VERSION}");
        tracing::info!("  rnats:    {RNATS_VERSION}");
        tracing::info!("  Name:     {server_name}");
        tracing::info!("  ID:       {server_id}");
        if let Some(note) = &chosen.note {
            tracing::warn!("{note}");
        }
        check_auth_for_warnings(&opts);
        if !opts.config_file.is_empty() {
            tracing::info!(
                "Using configuration file: {} ({})",
                opts.config_file,
                opts.config_digest
            );
        }
        if opts.max_payload > MAX_PAYLOAD_MAX_SIZE {
            tracing::warn!(
                "Maximum payloads over 8.00 MB are generally discouraged and could lead to poor performance"
            );
        }

        // Accounts and the resolver's first fetches come before anything listens (a
        // resolver that cannot be reached refuses the start, as in the reference).
        let shared = Arc::new(crate::core::stats::Shared::new(nshards));
        let mut core = opts.core_config();
        let (authenticator, operator_accounts, ws_authenticator) = apply_security(&shared, &keys, &opts)?;
        ocsp.announce();
        let port = opts.bind_port()?;
        let addr = resolve(&opts.host, port)?;
        // Patiently: a server killed just before may still hold the port for a moment.
        let listener =
            shards::listener::bind_exclusive_patiently(addr, 4096, BIND_PATIENCE).map_err(|e| StartError::Listen {
                addr: host_port(&opts.host, port),
                err: format!(
                    "listen tcp {}: bind: {}",
                    host_port(&opts.host, port),
                    go_errno_text(&e)
                ),
            })?;
        let bound = listener.local_addr()?;
        let ws = transport::bind_websocket(&opts).map_err(StartError::Transport)?;
        let ws_port = ws.as_ref().map(|(_, p)| *p);
        // `connection_rate_limit`: one counter for the server's life (not changed by reload).
        let tls_rate = opts
            .tls
            .as_ref()
            .filter(|t| t.rate_limit > 0)
            .map(|t| Arc::new(crate::transport::tls::rate::ConnRate::new(t.rate_limit)));
        if let Some(r) = &tls_rate {
            crate::transport::tls::rate::ConnRate::spawn_reporter(r);
        }
        let transports: driver::Transports = Arc::new(RwLock::new(
            transport::listener_transports(&opts, &ocsp, tls_rate.as_ref()).map_err(StartError::Transport)?,
        ));
        let auth_in_force = authenticator.clone();
        core.authenticator = with_proxies(&authenticator, &opts);
        core.info = ServerInfo {
            server_id: server_id.clone(),
            server_name,
            version: NATS_VERSION.into(),
            proto: 1,
            go: format!("rust{}", env!("CARGO_PKG_RUST_VERSION")),
            host: opts.host.clone(),
            port: bound.port(),
            headers: !opts.no_header_support,
            auth_required: core.authenticator.advertised(),
            max_payload: opts.max_payload.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
            api_lvl: API_LEVEL,
            jetstream: opts.jetstream.enabled,
            xkey,
            rnats_version: RNATS_VERSION.into(),
            ..Default::default()
        };
        transport::apply_core(&opts, &mut core, ws_port, with_proxies(&ws_authenticator, &opts));
        let info = core.info.clone();
        let rt = RuntimeConfig {
            nshards,
            cpus,
            core: Arc::new(core),
            shared: shared.clone(),
            spin_us: opts.spin_us,
            sqpoll_ms: opts.sqpoll_ms,
            send_zc: usize::try_from(opts.send_zc).unwrap_or(usize::MAX),
            transports: transports.clone(),
        };
        let mut running_opts = opts.clone();
        running_opts.port = i64::from(bound.port());
        let mut state = ServerState {
            live: RwLock::new(Live {
                opts: running_opts.clone(),
                info: info.clone(),
                config_load_time: SystemTime::now(),
            }),
            shared,
            start: SystemTime::now(),
            nshards,
            reactor: if chosen.uring { "io_uring".into() } else { "mio".into() },
            http_host: String::new(),
            http_port: 0,
            ocsp_cache: RwLock::new(ocsp.cache.clone()),
        };

        let mut mon_addr = None;
        if opts.http_port != 0 && opts.https_port != 0 {
            return Err(StartError::Transport(format!(
                "Can't start monitoring: can't specify both HTTP ({}) and HTTPs ({}) ports",
                opts.http_port, opts.https_port
            )));
        }
        let mut https = None;
        if opts.https_port != 0 {
            let (cfg, peer) = transport::monitor_tls(&opts, &ocsp)
                .map_err(|e| StartError::Transport(format!("Can't start monitoring: {e}")))?;
            https = Some(crate::monitor::https::HttpsConfig::new(cfg, peer));
        }
        let mon_port = if https.is_some() {
            opts.https_port
        } else {
            opts.http_port
        };
        if mon_port != 0 {
            let http_host = if !opts.http_host.is_empty() {
                opts.http_host.clone()
            } else if https.is_some() && !opts.https_host.is_empty() {
                opts.https_host.clone()
            } else {
                opts.host.clone()
            };
            let hport = if mon_port < 0 { 0 } else { mon_port as u16 };
            let a = resolve(&http_host, hport)?;
            state.http_host = http_host;
            state.http_port = opts.http_port;
            mon_addr = Some(a);
        }
        let state = Arc::new(state);
        let mon_ctx = crate::monitor::Context::new(state.clone());
        let monitor = match mon_addr {
            Some(a) => {
                let base = &opts.http_base_path;
                let started = match &https {
                    Some(t) => crate::monitor::http::HttpServer::start_https(a, mon_ctx.clone(), base, t.clone()),
                    None => crate::monitor::http::HttpServer::start(a, mon_ctx.clone(), base),
                };
                let m = started.map_err(|e| StartError::Listen {
                    addr: host_port(&state.http_host, a.port()),
                    err: format!(
                        "listen tcp {}: bind: {}",
                        host_port(&state.http_host, a.port()),
                        go_errno_text(&e)
                    ),
                })?;
                tracing::info!(
                    "Starting {} monitor on {}",
                    if https.is_some() { "https" } else { "http" },
                    host_port(&state.http_host, m.addr.port())
                );
                Some(m)
            }
            None => None,
        };

        let js_settings = jetstream_settings(&opts, operator_accounts.clone())?;
        let mut running = if chosen.uring {
            #[cfg(all(target_os = "linux", feature = "uring"))]
            {
                driver::uring::start(rt, listener, chosen.completion)?
            }
            #[cfg(not(all(target_os = "linux", feature = "uring")))]
            {
                return Err(StartError::Reactor("io_uring support not built".into()));
            }
        } else {
            driver::mio::start(rt, listener)?
        };
        if let Some((l, _)) = ws {
            running.add_listener(l, driver::WEBSOCKET_LISTENER)?;
        }
        tracing::info!("Using the {} reactor on {} shards", running.name, nshards);
        mon_ctx.set_post(Arc::new(running.controls.clone()));
        let system = Arc::new(crate::system::SystemContext {
            server: crate::system::envelope::ServerIdentity {
                name: info.server_name.clone(),
                host: opts.host.clone(),
                id: info.server_id.clone(),
                version: NATS_VERSION.into(),
                jetstream: opts.jetstream.enabled,
                ..Default::default()
            },
        });
        if let Some(accounts) = &operator_accounts {
            let post: Arc<dyn crate::core::post::Post> = Arc::new(running.controls.clone());
            let ctx = operator::claims_context(accounts, system.clone(), post)?;
            crate::system::claims::install(&running.controls, ctx);
        }
        let system = crate::system::System::new(system, mon_ctx.clone(), operator_accounts.is_some());
        crate::system::install(Arc::new(running.controls.clone()), system.clone());
        if let Some(settings) = js_settings {
            let js =
                crate::jetstream::JetStream::new(settings, nshards, info.server_name.clone(), info.server_id.clone());
            crate::jetstream::service::install(Arc::new(running.controls.clone()), js.clone());
            mon_ctx.set_jetstream(js);
        }

        let pid_file = if opts.pid_file.is_empty() {
            None
        } else {
            write_pid_file(&opts.pid_file)
                .map_err(|e| StartError::PidFile(format!("open {}: {}", opts.pid_file, logging::go_os_error(&e))))?;
            Some(opts.pid_file.clone())
        };
        tracing::info!(
            "Listening for client connections on {}",
            host_port(&opts.host, bound.port())
        );
        transport::log_client_tls(&opts);
        let mut srv = Server {
            transports,
            ws_port,
            state,
            running: Some(running),
            _monitor: monitor,
            monitor: mon_ctx,
            pid_file,
            ports_file: None,
            opts: running_opts,
            info,
            ldm: false,
            client_addr: bound,
            keys,
            operator_accounts,
            authenticator: auth_in_force,
            system,
            ocsp,
            tls_rate,
            https,
        };
        srv.write_ports_file();
        srv.ocsp.start_cache();
        tracing::info!("Server is ready");
        srv.ocsp.start(Arc::new(signals::request_shutdown));
        Ok(srv)
    }

    /// Write `<exe>_<pid>.ports` in `ports_file_dir` (if set), as nats-server does.
    fn write_ports_file(&mut self) {
        if self.opts.ports_file_dir.is_empty() {
            self.ports_file = None;
            return;
        }
        let exe = std::env::args()
            .next()
            .and_then(|a| {
                std::path::Path::new(&a)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "rnats".into());
        let path = std::path::Path::new(&self.opts.ports_file_dir).join(format!("{exe}_{}.ports", std::process::id()));
        let mut ports = serde_json::json!({
            "nats": urls("nats", &self.opts.host, self.client_addr.port()),
            "monitoring": self._monitor.as_ref().map(|m| {
                let scheme = if self.https.is_some() { "https" } else { "http" };
                urls(scheme, &self.state.http_host, m.addr.port())
            }),
        });
        if let Some(o) = ports.as_object_mut() {
            o.retain(|_, val| !val.is_null());
        }
        let shown = path.display().to_string();
        match std::fs::write(&path, serde_json::to_vec(&ports).unwrap_or_default()) {
            Ok(()) => self.ports_file = Some(shown),
            Err(e) => {
                tracing::error!("Error writing ports file ({shown}): {}", logging::go_os_error(&e));
                self.ports_file = None;
            }
        }
    }

    /// Monitoring's view of this server: build `/varz`, `/connz`, ... answers with
    /// `crate::monitor` (the system account's services use it too).
    pub fn monitor(&self) -> &Arc<crate::monitor::Context> {
        &self.monitor
    }

    /// The options in force.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Reload the config file (SIGHUP). `flags` are the command-line arguments, applied
    /// over the file as at startup. On error nothing changed.
    pub fn reload(&mut self, flags: &[String]) -> Result<(), reload::ReloadError> {
        let (new, plan) = reload::prepare(&self.opts, flags, self.client_addr.port())?;
        // Operator mode keeps its accounts and authenticator across reloads (the reference
        // cannot switch resolvers on reload either).
        let (authenticator, ws_authenticator) = match &self.operator_accounts {
            Some(_) => (self.authenticator.clone(), self.authenticator.clone()),
            None => {
                let s = apply_security(&self.state.shared, &self.keys, &new)?;
                (s.0, s.2)
            }
        };
        self.authenticator = authenticator.clone();
        // A lower `max_connections` closes what is over it (the shards do, when they take
        // the new configuration below), as nats-server does.
        let trim = if new.max_connections != self.opts.max_connections {
            let open = self.state.shared.open_conns.load(std::sync::atomic::Ordering::Acquire);
            (open - new.max_connections.max(0)).max(0)
        } else {
            0
        };
        self.state
            .shared
            .conn_trim
            .store(trim, std::sync::atomic::Ordering::Release);
        for m in &plan.messages {
            if m.starts_with("Reloaded: max_connections") && trim > 0 {
                tracing::info!("Closed {trim} connections to fall within max_connections");
            }
            if m.starts_with("Reloaded: pid_file") {
                if let Err(e) = write_pid_file(&new.pid_file) {
                    tracing::error!(
                        "Failed to write pidfile: open {}: {}",
                        new.pid_file,
                        logging::go_os_error(&e)
                    );
                }
            }
            tracing::info!("{m}");
        }
        if plan.pid_file_changed {
            self.pid_file = (!new.pid_file.is_empty()).then(|| new.pid_file.clone());
        }
        let old_ports = self.ports_file.take();
        self.opts = new;
        if plan.ports_dir_changed {
            if let Some(p) = old_ports {
                if let Err(e) = std::fs::remove_file(&p) {
                    tracing::error!("Error cleaning up ports file {p}: {}", logging::go_os_error(&e));
                }
            }
            self.write_ports_file();
        } else {
            self.ports_file = old_ports;
        }
        if plan.logging_changed {
            if let Err(e) = logging::configure(&logging::LogConfig::from_options(&self.opts)) {
                tracing::error!("{e}");
            }
        }
        self.info.max_payload = self.opts.max_payload.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
        let mut core = self.opts.core_config();
        core.authenticator = with_proxies(&authenticator, &self.opts);
        self.info.auth_required = core.authenticator.advertised();
        core.info = self.info.clone();
        transport::apply_core(
            &self.opts,
            &mut core,
            self.ws_port,
            with_proxies(&ws_authenticator, &self.opts),
        );
        self.info = core.info.clone();
        // As the reference: OCSP monitoring always restarts on reload.
        self.ocsp.stop();
        match transport::prepare_ocsp(&self.opts) {
            Ok(mut s) => {
                s.announce();
                s.start_cache();
                s.start(Arc::new(signals::request_shutdown));
                *self.state.ocsp_cache.write().unwrap_or_else(|p| p.into_inner()) = s.cache.clone();
                self.ocsp = s;
            }
            Err(e) => tracing::warn!("Can't restart OCSP features: {e}"),
        }
        if let Some(h) = &self.https {
            match transport::monitor_tls(&self.opts, &self.ocsp) {
                Ok((cfg, peer)) => h.replace(cfg, peer),
                Err(e) => tracing::error!("{e}"),
            }
        }
        match transport::listener_transports(&self.opts, &self.ocsp, self.tls_rate.as_ref()) {
            Ok(t) => {
                if let Ok(mut w) = self.transports.write() {
                    *w = t;
                }
            }
            Err(e) => tracing::error!("{e}"),
        }
        if let Some(r) = &self.running {
            r.reconfigure(Arc::new(core));
        }
        self.state.set_live(Live {
            opts: self.opts.clone(),
            info: self.info.clone(),
            config_load_time: SystemTime::now(),
        });
        tracing::info!("Reloaded server configuration ({})", self.opts.config_digest);
        Ok(())
    }

    /// Lame duck mode, first step: stop accepting and tell clients. False when already in
    /// lame duck mode.
    pub fn enter_lame_duck(&mut self) -> bool {
        if self.ldm {
            return false;
        }
        self.ldm = true;
        tracing::info!("Entering lame duck mode, stop accepting new clients");
        if let Some(r) = &mut self.running {
            crate::system::announce_stop(&r.controls, &self.system, "LAMEDUCK");
            r.enter_lame_duck();
        }
        true
    }

    /// Let `$SYS.REQ.SERVER.<id>.RELOAD` reach whoever runs [`Server::reload`].
    pub fn set_reloader(&self, r: crate::system::Reloader) {
        self.system.set_reloader(r);
    }

    /// In lame duck mode.
    pub fn in_lame_duck(&self) -> bool {
        self.ldm
    }

    /// Close `n` clients of `shard` (oldest first).
    pub fn close_clients(&self, shard: usize, n: usize) {
        if let Some(r) = &self.running {
            r.close_clients(shard, n);
        }
    }

    /// Open client connections per shard.
    pub fn shard_connections(&self) -> Vec<u64> {
        self.state
            .shared
            .shards
            .iter()
            .map(|s| s.connections.load(std::sync::atomic::Ordering::Relaxed))
            .collect()
    }

    /// Open client connections, all shards.
    pub fn open_connections(&self) -> i64 {
        self.state.shared.open_conns.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stop accepting, close every client and wait for the shards.
    pub fn shutdown(mut self) {
        if let Some(r) = &self.running {
            crate::system::announce_stop(&r.controls, &self.system, "SHUTDOWN");
            crate::jetstream::service::shutdown(&r.controls);
        }
        tracing::info!("Initiating Shutdown...");
        if let Some(r) = self.running.take() {
            r.shutdown();
        }
        self._monitor = None;
        if let Some(p) = self.pid_file.take() {
            let _ = std::fs::remove_file(p);
        }
        if let Some(p) = self.ports_file.take() {
            let _ = std::fs::remove_file(p);
        }
        tracing::info!("Server Exiting..");
        self.ocsp.stop();
    }
}

/// Listen URLs as nats-server writes them to the ports file: every local address when
/// bound to the unspecified address.
fn urls(scheme: &str, host: &str, port: u16) -> Vec<String> {
    let ip: Option<IpAddr> = host.parse().ok();
    let mut hosts = Vec::new();
    if ip.is_some_and(|i| i.is_unspecified()) {
        hosts = local_ips();
    }
    if hosts.is_empty() {
        hosts.push(host.to_string());
    }
    hosts
        .into_iter()
        .map(|h| format!("{scheme}://{}", host_port(&h, port)))
        .collect()
}

fn local_ips() -> Vec<String> {
    #[cfg(unix)]
    {
        let mut out = Vec::new();
        let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
        // SAFETY: getifaddrs allocates a list we walk read-only and free with freeifaddrs.
        unsafe {
            if libc::getifaddrs(&mut ifap) != 0 {
                return out;
            }
            let mut p = ifap;
            while !p.is_null() {
                let a = (*p).ifa_addr;
                if !a.is_null() {
                    match i32::from((*a).sa_family) {
                        libc::AF_INET => {
                            let sin = &*(a as *const libc::sockaddr_in);
                            out.push(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).to_string());
                        }
                        libc::AF_INET6 => {
                            let sin6 = &*(a as *const libc::sockaddr_in6);
                            out.push(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).to_string());
                        }
                        _ => {}
                    }
                }
                p = (*p).ifa_next;
            }
            libc::freeifaddrs(ifap);
        }
        out
    }
    #[cfg(not(unix))]
    {
        Vec::new()
    }
}

/// Go's wording for common socket errors.
fn go_errno_text(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::AddrInUse => "address already in use".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        io::ErrorKind::AddrNotAvailable => "cannot assign requested address".into(),
        _ => e.to_string(),
    }
}

/// JetStream's settings when it is enabled, with its store directory prepared and the
/// reference's startup lines logged.
fn jetstream_settings(
    opts: &Options,
    operator: Option<Arc<crate::auth::operator::accounts::OperatorAccounts>>,
) -> Result<Option<crate::jetstream::JsSettings>, StartError> {
    use crate::server::jetstream_opts as jo;
    let o = &opts.jetstream;
    if !o.enabled {
        return Ok(None);
    }
    let r = jo::resolve(o);
    jo::prepare_store(o, &r).map_err(|e| StartError::JetStream(e.to_string()))?;
    for (level, line) in jo::startup_log(&r) {
        match level {
            jo::LogLevel::Info => tracing::info!("{line}"),
            jo::LogLevel::Warn => tracing::warn!("{line}"),
            jo::LogLevel::Debug => tracing::debug!("{line}"),
        }
    }
    let accounts = if opts.security.accounts.is_empty() {
        None
    } else {
        Some(
            opts.security
                .accounts
                .iter()
                .map(|a| (a.name.clone(), a.jetstream.clone()))
                .collect(),
        )
    };
    let sync = o.store_sync();
    Ok(Some(crate::jetstream::JsSettings {
        root: r.store_root.clone(),
        max_memory: r.max_memory,
        max_store: r.max_store,
        domain: r.domain.clone(),
        strict: r.strict,
        store: crate::jetstream::stream::StoreOptions {
            sync,
            ..Default::default()
        },
        accounts,
        max_ack_pending: if o.limits.max_ack_pending > 0 {
            o.limits.max_ack_pending
        } else {
            -1
        },
        max_duplicate_window: i64::try_from(o.limits.duplicate_window.as_nanos()).unwrap_or(0),
        max_request_batch: o.limits.max_request_batch,
        request_queue_limit: o.request_queue_limit,
        info_queue_limit: o.info_queue_limit,
        batch: crate::jetstream::stream::batch::BatchLimits {
            inflight_per_stream: o.limits.max_batch_inflight_per_stream,
            inflight_total: o.limits.max_batch_inflight_total,
            max_size: o.limits.max_batch_size,
            timeout: o.limits.max_batch_timeout,
        },
        encryption: (!o.key.is_empty()).then(|| storage::crypto::EncryptionConfig {
            key: o.key.clone(),
            cipher: match o.cipher {
                jo::StoreCipher::ChaCha => storage::crypto::Cipher::ChaCha,
                jo::StoreCipher::Aes => storage::crypto::Cipher::Aes,
            },
            prev_key: (!o.prev_key.is_empty()).then(|| o.prev_key.clone()),
        }),
        operator,
    }))
}
