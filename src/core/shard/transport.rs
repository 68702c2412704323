//! What TLS and WebSocket connections need of the core. The transports themselves live
//! in `crate::transport` and run in the driver; the core keeps seeing plaintext NATS
//! protocol. Here: accepting with a [`ConnSetup`] (WebSocket clients get their own INFO
//! template, authenticator, authentication timeout and `wid:` label; `handshake_first`
//! defers the INFO until the handshake is done, or the fallback delay passed), sending a
//! deferred INFO, attaching the client certificate, and the reason a connection is
//! closing (the WebSocket close frame's status depends on it).

use super::ShardCore;
use crate::core::auth::{Authenticator, ConnType, TransportInfo};
use crate::core::client::{Client, ClosedState, ConnKey};
use crate::transport::tls::TlsPeer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// How a connection starts.
#[derive(Debug, Default)]
pub struct ConnSetup {
    /// Transport details (`None`: a plain TCP client). A `Websocket` connection type
    /// selects the WebSocket settings of the configuration.
    pub transport: Option<Box<TransportInfo>>,
    /// Do not queue the INFO yet: [`ShardCore::send_info`] will (TLS handshake first).
    pub defer_info: bool,
    /// `tls_required` of this connection's INFO, when it differs from the template.
    pub tls_required: Option<bool>,
    /// The client's address as a proxy reported it (WebSocket `X-Forwarded-For`).
    pub forwarded_ip: Option<String>,
    /// `connection_rate_limit` refused the TLS handshake: after the INFO (if not
    /// deferred) the client gets the reference's error and is closed.
    pub throttled: bool,
}

impl ShardCore {
    /// The ping interval of this client (WebSocket clients may have their own).
    pub(super) fn ping_interval_of(&self, c: &Client) -> std::time::Duration {
        match (&self.cfg.websocket, Self::is_ws(c)) {
            (Some(ws), true) => ws.ping_interval.unwrap_or(self.cfg.ping_interval),
            _ => self.cfg.ping_interval,
        }
    }

    fn is_ws(c: &Client) -> bool {
        c.transport.as_ref().is_some_and(|t| t.conn_type == ConnType::Websocket)
    }

    /// The authenticator that decides for this client.
    pub(super) fn authenticator_of(&self, c: &Client) -> Arc<dyn Authenticator> {
        match (&self.cfg.websocket, Self::is_ws(c)) {
            (Some(ws), true) => ws.authenticator.clone(),
            _ => self.cfg.authenticator.clone(),
        }
    }

    /// The connection type authentication checks (`allowed_connection_types`).
    pub(super) fn conn_type_of(c: &Client) -> ConnType {
        c.transport.as_ref().map_or(ConnType::Standard, |t| t.conn_type)
    }

    /// A new connection (see [`ShardCore::accept`]), set up as `setup` says.
    pub fn accept_with(&mut self, peer: SocketAddr, setup: ConnSetup, now: Instant) -> ConnKey {
        self.sync_accounts();
        let cid = self.shared.next_cid();
        let gen = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1).max(1);
        let ws = setup
            .transport
            .as_ref()
            .filter(|t| t.conn_type == ConnType::Websocket)
            .and(self.cfg.websocket.clone());
        let ping = ws
            .as_ref()
            .and_then(|w| w.ping_interval)
            .unwrap_or(self.cfg.ping_interval);
        let mut c = Client::new(cid, gen, peer, now, ping);
        if ws.is_some() {
            let addr = match peer {
                SocketAddr::V4(a) => format!("{}:{}", a.ip(), a.port()),
                SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
            };
            c.label = match &setup.forwarded_ip {
                Some(ip) if ip.contains(':') => format!("[{ip}]/{addr} - wid:{cid}"),
                Some(ip) => format!("{ip}/{addr} - wid:{cid}"),
                None => format!("{addr} - wid:{cid}"),
            };
        }
        c.transport = setup.transport;
        let open = self
            .shared
            .open_conns
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let auth = self.authenticator_of(&c);
        if auth.nonce_required() {
            c.nonce = super::new_nonce(&mut self.rng);
        }
        c.awaiting_auth = auth.required();
        let idx = self.clients.insert(c) as u32;
        let key = ConnKey { idx, gen };
        self.counters.connections += 1;
        self.counters.total_connections += 1;
        if self.cfg.debug {
            if let Some(c) = self.client(key) {
                tracing::debug!("{} - Client connection created", c.label);
            }
        }
        if !setup.defer_info {
            self.write_info(key, setup.tls_required, now);
        }
        if setup.throttled {
            self.send_err(key, crate::proto::reply::ERR_THROTTLED, now);
            self.close(key, ClosedState::MaxConnectionsExceeded);
        } else if self.cfg.max_connections < 0 || open > self.cfg.max_connections {
            self.max_connections_exceeded(key, now);
        }
        self.schedule(key);
        self.wake(key);
        self.finish(now);
        key
    }

    /// Refuse a connection over `max_connections`: the error, then the close.
    pub(super) fn max_connections_exceeded(&mut self, key: ConnKey, now: Instant) {
        tracing::error!("{} - maximum connections exceeded", self.label(key));
        self.send_err(key, crate::proto::reply::ERR_MAX_CONNECTIONS, now);
        self.close(key, ClosedState::MaxConnectionsExceeded);
    }

    /// Queue the INFO of a connection accepted with `defer_info` (the TLS handshake is
    /// done, or the client did not start one within the fallback delay), and start its
    /// authentication timer.
    pub fn send_info(&mut self, key: ConnKey, tls_required: Option<bool>, now: Instant) {
        if self.client(key).is_none_or(|c| c.closing.is_some()) {
            return;
        }
        self.write_info(key, tls_required, now);
        self.schedule(key);
        self.wake(key);
        self.finish(now);
    }

    fn write_info(&mut self, key: ConnKey, tls_required: Option<bool>, now: Instant) {
        let ws = self.cfg.websocket.clone();
        let Some(c) = self.client(key) else { return };
        let auth = self.authenticator_of(c);
        let timeout = match (&ws, Self::is_ws(c)) {
            (Some(w), true) => w.auth_timeout,
            _ => self.cfg.auth_timeout,
        };
        let mut info = match (&ws, Self::is_ws(c)) {
            (Some(w), true) => w.info.clone(),
            _ => self.cfg.info.clone(),
        };
        info.client_id = c.cid;
        info.client_ip = c.peer.ip().to_string();
        info.auth_required = auth.advertised();
        info.nonce = c.nonce.clone();
        if let Some(t) = tls_required {
            // As the reference: `tls_available` stays as the template has it.
            info.tls_required = t;
        }
        let required = auth.required();
        let Some(c) = self.client_mut(key) else { return };
        info.write_line(&mut c.out.writer(now));
        if required && c.auth_deadline.is_none() && !c.connect_received {
            c.awaiting_auth = true;
            c.auth_deadline = Some(now + timeout);
        }
        self.queued(key);
    }

    /// The TLS handshake finished: remember what the client proved (its certificate
    /// for `verify_and_map`).
    pub fn set_tls_peer(&mut self, key: ConnKey, peer: Option<Arc<TlsPeer>>) {
        let Some(c) = self.client_mut(key) else { return };
        let t = c.transport.get_or_insert_with(Default::default);
        t.tls_on = true;
        t.tls = peer;
    }

    /// Why a connection is closing (`None` while open or unknown).
    pub fn closing_reason(&self, key: ConnKey) -> Option<ClosedState> {
        self.client(key).and_then(|c| c.closing)
    }

    /// The connection's label (`ip:port - cid:N`), for the driver's log lines.
    pub fn conn_label(&self, key: ConnKey) -> String {
        self.label(key)
    }

    /// The connection's max payload (a WebSocket decoder bounds inflated messages by it).
    pub fn max_payload_of(&self, key: ConnKey) -> i64 {
        match self.client(key) {
            Some(c) if c.max_payload >= 0 => c.max_payload.min(self.cfg.max_payload),
            _ => self.cfg.max_payload,
        }
    }
}
