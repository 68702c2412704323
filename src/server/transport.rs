//! Server assembly of the transports: the startup checks of the `tls` and `websocket`
//! settings (nats-server's `validateOptions` parts), the per-listener
//! [`ListenerTransport`]s built from the options (rebuilt on reload, so new connections
//! use reloaded certificates), the INFO template fields TLS sets, and what the core
//! needs for WebSocket clients (their INFO, authenticator and timers).

use super::options::{OcspMode, Options, WebsocketOptions};
use crate::core::auth::Authenticator;
use crate::core::config::WsSettings;
use crate::proto::info::ServerInfo;
use crate::transport::ocsp::cache::ResponseCache;
use crate::transport::ocsp::peer::PeerChecker;
use crate::transport::ocsp::staple::{self, Monitor, StapleMode, StapledKey};
use crate::transport::tls::config::{build_stapled_config, first_key};
use crate::transport::tls::rate::ConnRate;
use crate::transport::tls::TlsOptions;
use crate::transport::websocket::upgrade::{host_and_port, Origins, UpgradePolicy};
use crate::transport::{ListenerTransport, TlsMode, WsMode};
use std::sync::Arc;
use std::time::Duration;

impl Options {
    /// nats-server's startup checks of the WebSocket block (not made by `-t`).
    pub fn validate_websocket(&self) -> Result<(), String> {
        let wo = &self.websocket;
        if wo.port == 0 {
            return Ok(());
        }
        if wo.tls.is_none() && !wo.no_tls {
            return Err("websocket requires TLS configuration".into());
        }
        for ao in &wo.allowed_origins {
            validate_origin(ao)?;
        }
        if !wo.no_auth_user.is_empty() {
            let s = &self.security;
            if !s.operators.is_empty() {
                return Err("no_auth_user not compatible with Trusted Operator".into());
            }
            if s.users.is_empty() && s.nkeys.is_empty() {
                return Err(format!(
                    "no_auth_user: {:?} present, but users/nkeys are not defined",
                    wo.no_auth_user
                ));
            }
            let found = s.users.iter().any(|u| u.username == wo.no_auth_user)
                || s.nkeys.iter().any(|u| u.nkey == wo.no_auth_user);
            if !found {
                return Err(format!(
                    "no_auth_user: {:?} not present as user or nkey in authorization block or account configuration",
                    wo.no_auth_user
                ));
            }
        }
        if !self.security.users.is_empty() || !self.security.nkeys.is_empty() {
            if !wo.username.is_empty() {
                return Err("websocket authentication username not compatible with presence of users/nkeys".into());
            }
            if !wo.token.is_empty() {
                return Err("websocket authentication token not compatible with presence of users/nkeys".into());
            }
        }
        if !wo.jwt_cookie.is_empty() && self.security.operators.is_empty() && self.security.trusted_keys.is_empty() {
            return Err(format!(
                "trusted operators or trusted keys configuration is required for JWT authentication via cookie {:?}",
                wo.jwt_cookie
            ));
        }
        for (key, _) in &wo.headers {
            let k = key.to_ascii_lowercase();
            if matches!(
                k.as_str(),
                "host" | "content-length" | "connection" | "upgrade" | "nats-no-masking"
            ) {
                return Err(format!("websocket: invalid header {key:?} not allowed"));
            }
            if k.starts_with("sec-websocket-") {
                return Err(format!(
                    "websocket: invalid header {key:?}, \"Sec-WebSocket-\" prefix not allowed"
                ));
            }
        }
        Ok(())
    }
}

/// nats-server's allowed-origin check (`url.ParseRequestURI`, http or https, a host).
fn validate_origin(ao: &str) -> Result<(), String> {
    let Some((scheme, rest)) = ao.split_once("://") else {
        if ao.starts_with('/') {
            return Err(format!(
                "unable to parse allowed origin {ao:?}: allowed origins must be absolute URLs with http or https scheme"
            ));
        }
        return Err(format!(
            "unable to parse allowed origin: parse {ao:?}: invalid URI for request"
        ));
    };
    if scheme != "http" && scheme != "https" {
        return Err(format!(
            "unable to parse allowed origin {ao:?}: allowed origins must be absolute URLs with http or https scheme"
        ));
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() {
        return Err(format!("unable to parse allowed origin {ao:?}: host is required"));
    }
    host_and_port(scheme == "https", host)
        .map(|_| ())
        .map_err(|e| format!("unable to parse allowed origin: {e}"))
}

/// OCSP for the listeners (client, WebSocket): their stapled certificates and the
/// monitors keeping the staples fresh, their client certificate checks and the peer
/// response cache those share.
#[derive(Default)]
pub struct Ocsp {
    pub client: Option<Arc<StapledKey>>,
    pub ws: Option<Arc<StapledKey>>,
    pub client_peer: Option<Arc<PeerChecker>>,
    pub ws_peer: Option<Arc<PeerChecker>>,
    pub cache: Option<Arc<ResponseCache>>,
    monitors: Vec<Monitor>,
    running: Vec<staple::Running>,
    saver: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Ocsp {
    /// nats-server's startup line for each stapled certificate.
    pub fn announce(&self) {
        for m in &self.monitors {
            tracing::info!("OCSP Stapling enabled for {} connections", m.kind());
        }
    }

    /// Bring the peer cache online (its log lines come before "Server is ready").
    pub fn start_cache(&mut self) {
        if let Some(c) = &self.cache {
            c.start();
            self.saver = c.spawn_saver();
        }
    }

    /// Start the monitors; `shutdown` stops the server when a status turns bad in
    /// `always`/`must` mode.
    pub fn start(&mut self, shutdown: Arc<dyn Fn() + Send + Sync>) {
        for m in self.monitors.drain(..) {
            self.running.push(m.spawn(shutdown.clone()));
        }
    }

    /// Stop the monitors and take the cache offline (saving it).
    pub fn stop(&mut self) {
        for r in &mut self.running {
            r.stop();
        }
        self.running.clear();
        self.saver = None;
        if let Some(c) = &self.cache {
            c.stop();
        }
    }
}

fn staple_mode(o: &Options) -> Option<StapleMode> {
    o.ocsp.as_ref().map(|c| match c.mode {
        OcspMode::Auto => StapleMode::Auto,
        OcspMode::Always => StapleMode::Always,
        OcspMode::Must => StapleMode::Must,
        OcspMode::Never => StapleMode::Never,
    })
}

/// nats-server's `enableOCSP` for the client and WebSocket TLS blocks: which certificate
/// is stapled (its first status fetched, blocking) and which blocks check client
/// certificates. Errors refuse the start.
pub fn prepare_ocsp(o: &Options) -> Result<Ocsp, String> {
    let mut out = Ocsp::default();
    let urls = o.ocsp.as_ref().map(|c| c.override_urls.clone()).unwrap_or_default();
    for (i, t) in [o.tls.as_ref(), o.websocket.tls.as_ref()].into_iter().enumerate() {
        let Some(t) = t else { continue };
        if i == 1 && o.websocket.port == 0 {
            continue;
        }
        let key = first_key(t).map_err(|e| e.0)?;
        let setup = staple::Setup {
            kind: "Client",
            cert_file: &t.cert_file,
            ca_file: &t.ca_file,
            key: &key,
            mode: staple_mode(o),
            override_urls: &urls,
            store_dir: &o.jetstream.store_dir,
        };
        if let Some(m) = Monitor::prepare(&setup)? {
            if i == 0 {
                out.client = Some(m.key());
            } else {
                out.ws = Some(m.key());
            }
            out.monitors.push(m);
        }
        let Some(p) = t.ocsp_peer.as_ref().filter(|p| p.verify) else {
            continue;
        };
        if !t.verify {
            return Err(
                "OCSP peer verification for client connections requires TLS verify (mTLS) to be enabled".into(),
            );
        }
        let roots = if t.ca_file.is_empty() {
            staple::system_ca_certs()
        } else {
            staple::pem_certs(&t.ca_file)?
        };
        let cache = out
            .cache
            .get_or_insert_with(|| Arc::new(ResponseCache::new(o.ocsp_cache.clone().unwrap_or_default())))
            .clone();
        let checker = Some(Arc::new(PeerChecker::new(p.clone(), roots, cache)));
        if i == 0 {
            out.client_peer = checker;
        } else {
            out.ws_peer = checker;
        }
    }
    Ok(out)
}

/// HTTPS monitoring's TLS: the client block's, asking for no client certificate unless
/// OCSP peer checks are on somewhere (then the client block's verification and checks
/// apply), as nats-server's `startMonitoring` does.
pub fn monitor_tls(o: &Options, ocsp: &Ocsp) -> Result<(Arc<rustls::ServerConfig>, Option<Arc<PeerChecker>>), String> {
    let Some(t) = &o.tls else {
        return Err("TLS cert and key required for HTTPS".into());
    };
    let peer_checks = ocsp.client_peer.is_some() || ocsp.ws_peer.is_some();
    let mut t = t.clone();
    if !peer_checks {
        t.verify = false;
    }
    let cfg = build_stapled_config(&t, ocsp.client.clone()).map_err(|e| e.0)?;
    Ok((cfg, ocsp.client_peer.clone().filter(|_| peer_checks)))
}

fn tls_mode(
    t: &TlsOptions,
    allow_non_tls: bool,
    stapled: Option<Arc<StapledKey>>,
    peer: Option<Arc<PeerChecker>>,
    rate: Option<Arc<ConnRate>>,
) -> Result<TlsMode, String> {
    Ok(TlsMode {
        config: build_stapled_config(t, stapled).map_err(|e| e.0)?,
        timeout: t.timeout_duration(),
        handshake_first: t.handshake_first,
        fallback: (t.handshake_first && !t.fallback_delay.is_zero()).then_some(t.fallback_delay),
        allow_non_tls,
        pinned: t.pinned_certs.clone(),
        ocsp_peer: peer,
        rate,
    })
}

/// The client listener's transport (`None`: plain TCP).
pub fn client_transport(
    o: &Options,
    ocsp: &Ocsp,
    rate: Option<&Arc<ConnRate>>,
) -> Result<Option<Arc<ListenerTransport>>, String> {
    let Some(t) = &o.tls else { return Ok(None) };
    Ok(Some(Arc::new(ListenerTransport {
        tls: Some(tls_mode(
            t,
            o.allow_non_tls,
            ocsp.client.clone(),
            ocsp.client_peer.clone(),
            rate.cloned(),
        )?),
        ws: None,
    })))
}

/// The WebSocket listener's transport.
pub fn websocket_transport(o: &Options, ocsp: &Ocsp) -> Result<Arc<ListenerTransport>, String> {
    let w = &o.websocket;
    let tls = match &w.tls {
        Some(t) => Some(tls_mode(t, false, ocsp.ws.clone(), ocsp.ws_peer.clone(), None)?),
        None => None,
    };
    let mut raw_headers = String::new();
    for (k, v) in &w.headers {
        raw_headers.push_str(&format!("{k}: {v}\r\n"));
    }
    Ok(Arc::new(ListenerTransport {
        ws: Some(WsMode {
            policy: UpgradePolicy {
                compression: w.compression,
                origins: Origins::new(w.same_origin, &w.allowed_origins),
                raw_headers,
                tls: tls.is_some(),
            },
            handshake_timeout: (!w.handshake_timeout.is_zero()).then_some(w.handshake_timeout),
            cookies: [
                w.jwt_cookie.clone(),
                w.user_cookie.clone(),
                w.pass_cookie.clone(),
                w.token_cookie.clone(),
            ],
        }),
        tls,
    }))
}

/// INFO `tls_required`, `tls_verify`, `tls_available` for the client port.
pub fn set_info_tls(o: &Options, info: &mut ServerInfo) {
    let Some(t) = &o.tls else { return };
    info.tls_required = !o.allow_non_tls;
    info.tls_verify = t.verify;
    info.tls_available = o.allow_non_tls;
}

/// What WebSocket clients see and are checked with: the INFO of the WebSocket listener
/// (its host and port, TLS required when it has TLS), the authenticator (`websocket {
/// authorization }` overrides the single user/token and `no_auth_user`, and its own
/// `verify_and_map`), its authentication timeout and ping interval.
pub fn ws_settings(
    o: &Options,
    base: &ServerInfo,
    port: u16,
    authenticator: Arc<dyn Authenticator>,
    auth_timeout: Duration,
) -> WsSettings {
    let w: &WebsocketOptions = &o.websocket;
    let mut info = base.clone();
    info.host = w.host.clone();
    info.port = port;
    let tls = w.tls.is_some();
    info.tls_required = tls;
    info.tls_available = tls;
    info.tls_verify = false;
    info.connect_urls = Vec::new();
    WsSettings {
        info,
        authenticator,
        auth_timeout: if w.auth_timeout > 0.0 {
            Duration::try_from_secs_f64(w.auth_timeout).unwrap_or(auth_timeout)
        } else {
            auth_timeout
        },
        ping_interval: (!w.ping_interval.is_zero()).then_some(w.ping_interval),
    }
}

/// The authenticator of WebSocket clients: the server's users, with the block's
/// `verify_and_map`, and its user, token and `no_auth_user` instead of the server's when
/// it sets any (nats-server's `authOverride`).
pub fn ws_authenticator(
    o: &Options,
    mut dir: crate::auth::users::UserDirectory,
    main: &Arc<dyn Authenticator>,
) -> Arc<dyn Authenticator> {
    let w = &o.websocket;
    let same_map = w.tls.as_ref().is_some_and(|t| t.map) == dir.tls_map;
    if o.security.auth_callout.is_some() || (same_map && !ws_auth_override(o)) {
        // The auth callout decides for every kind of client; without an override the
        // server's own authenticator does.
        return main.clone();
    }
    dir.tls_map = w.tls.as_ref().is_some_and(|t| t.map);
    if ws_auth_override(o) {
        dir.token = (!w.token.is_empty()).then(|| w.token.clone());
        dir.single = (!w.username.is_empty()).then(|| (w.username.clone(), w.password.clone()));
        dir.no_auth_user = (!w.no_auth_user.is_empty()).then(|| w.no_auth_user.clone());
        dir.hidden_no_auth_user = false;
    }
    Arc::new(crate::auth::users::ConfigAuthenticator::new(dir))
}

/// Whether the WebSocket block overrides authentication (a user, a token or a
/// `no_auth_user` of its own).
pub fn ws_auth_override(o: &Options) -> bool {
    let w = &o.websocket;
    !w.username.is_empty() || !w.token.is_empty() || !w.no_auth_user.is_empty()
}

/// The startup log lines about TLS on the client port.
pub fn log_client_tls(o: &Options) {
    if let Some(t) = &o.tls {
        tracing::info!("TLS required for client connections");
        if t.handshake_first && t.fallback_delay.is_zero() {
            tracing::warn!("Clients that are not using \"TLS Handshake First\" option will fail to connect");
        }
    }
}

/// The listeners' transports, by listener index (client, WebSocket). `rate` is the
/// server's `connection_rate_limit` counter (made once at startup, as the reference's).
pub fn listener_transports(
    o: &Options,
    ocsp: &Ocsp,
    rate: Option<&Arc<ConnRate>>,
) -> Result<Vec<Option<Arc<ListenerTransport>>>, String> {
    let client = client_transport(o, ocsp, rate)?;
    let ws = if o.websocket.port != 0 {
        Some(websocket_transport(o, ocsp)?)
    } else {
        None
    };
    Ok(vec![client, ws])
}

/// Bind the WebSocket listener (if configured) and log it as the reference does.
pub fn bind_websocket(o: &Options) -> Result<Option<(std::net::TcpListener, u16)>, String> {
    let w = &o.websocket;
    if w.port == 0 {
        return Ok(None);
    }
    let host = if w.host.is_empty() { "0.0.0.0" } else { w.host.as_str() };
    let port = if w.port < 0 { 0 } else { w.port as u16 };
    let addr = super::resolve(host, port).map_err(|e| format!("Unable to listen for websocket connections: {e}"))?;
    let l = shards::listener::bind_exclusive_patiently(addr, 4096, super::BIND_PATIENCE).map_err(|e| {
        format!(
            "Unable to listen for websocket connections: listen tcp {}: bind: {}",
            super::host_port(host, port),
            super::go_errno_text(&e)
        )
    })?;
    let bound = l.local_addr().map_err(|e| e.to_string())?.port();
    let proto = if w.tls.is_some() { "wss" } else { "ws" };
    tracing::info!(
        "Listening for websocket clients on {proto}://{}",
        super::host_port(host, bound)
    );
    if w.tls.is_none() {
        tracing::warn!("Websocket not configured with TLS. DO NOT USE IN PRODUCTION!");
    }
    Ok(Some((l, bound)))
}

/// Fill what TLS and WebSocket change in the core's configuration: INFO's TLS fields and
/// the WebSocket clients' settings (`ws_port`: the bound WebSocket port).
pub fn apply_core(
    o: &Options,
    core: &mut crate::core::config::CoreConfig,
    ws_port: Option<u16>,
    ws_authenticator: Arc<dyn Authenticator>,
) {
    core.info.tls_required = false;
    core.info.tls_verify = false;
    core.info.tls_available = false;
    set_info_tls(o, &mut core.info);
    core.websocket = ws_port.map(|port| {
        let mut wo = o.clone();
        if wo.websocket.host.is_empty() {
            wo.websocket.host = "0.0.0.0".into();
        }
        Arc::new(ws_settings(&wo, &core.info, port, ws_authenticator, core.auth_timeout))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn websocket_startup_checks() {
        let mut o = Options::default();
        o.websocket.port = 8080;
        assert_eq!(
            o.validate_websocket(),
            Err("websocket requires TLS configuration".into())
        );
        o.websocket.no_tls = true;
        assert_eq!(o.validate_websocket(), Ok(()));
        o.websocket.allowed_origins = vec!["nope".into()];
        assert_eq!(
            o.validate_websocket(),
            Err("unable to parse allowed origin: parse \"nope\": invalid URI for request".into())
        );
        o.websocket.allowed_origins = vec!["ftp://x".into()];
        assert!(o.validate_websocket().unwrap_err().contains("http or https scheme"));
        o.websocket.allowed_origins = vec!["https://x:443".into()];
        assert_eq!(o.validate_websocket(), Ok(()));
        o.websocket.headers = vec![("Host".into(), "x".into())];
        assert_eq!(
            o.validate_websocket(),
            Err("websocket: invalid header \"Host\" not allowed".into())
        );
        o.websocket.headers = vec![("Sec-WebSocket-Foo".into(), "x".into())];
        assert!(o.validate_websocket().unwrap_err().contains("prefix not allowed"));
    }
}
