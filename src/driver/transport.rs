//! The event loop's side of TLS and WebSocket connections: moving socket bytes through
//! a connection's [`Transport`](crate::transport::Transport) and protocol bytes between
//! it and the core, its deadlines, its failures (logged as nats-server logs them), and
//! connections that are not NATS clients yet (a WebSocket upgrade in progress or
//! refused). Protocol decisions stay in the transport and the core.

use super::event_loop::{EventLoop, Poller, FLUSH_GRACE};
use crate::core::auth::{ConnType, TransportInfo, WsCookies};
use crate::core::client::{ClosedState, ConnKey};
use crate::core::shard::{ConnSetup, ShardCore};
use crate::transport::websocket::upgrade::{Kind, Upgraded};
use crate::transport::{Expired, Transport, TransportError};
use std::cmp::Reverse;
use std::io;
use std::time::Instant;

/// A client's server-side TLS handshake begins (logged at debug, as the reference does).
pub(super) fn log_tls_start(core: &ShardCore, key: ConnKey) {
    if tracing::enabled!(tracing::Level::DEBUG) {
        tracing::debug!("{} - Starting TLS client connection handshake", core.conn_label(key));
    }
}

impl<P: Poller> EventLoop<P> {
    /// Put the transport's deadline in the heap if it changed.
    fn push_deadline(&mut self, t: usize) {
        let Some(c) = self.conns.get_mut(t) else { return };
        let d = c.transport.as_ref().and_then(|tr| tr.deadline());
        if d != c.deadline {
            c.deadline = d;
            if let Some(d) = d {
                self.deadlines.push(Reverse((d, t)));
            }
        }
    }

    /// `n` bytes in `self.buf` were read from a connection with a transport.
    pub(super) fn on_transport_read(&mut self, t: usize, n: usize, now: Instant) {
        let buf = std::mem::take(&mut self.buf);
        self.transport_step(t, now, |tr, app| tr.on_read(buf.get(..n).unwrap_or_default(), now, app));
        self.buf = buf;
    }

    /// Run `step` on a connection's transport (a read, or a verdict that arrived) and
    /// follow what it did.
    fn transport_step(
        &mut self,
        t: usize,
        now: Instant,
        step: impl FnOnce(&mut Transport, &mut Vec<u8>) -> Result<crate::transport::Events, TransportError>,
    ) {
        let Some(c) = self.conns.get_mut(t) else { return };
        let Some(mut tr) = c.transport.take() else { return };
        let mut app = std::mem::take(&mut self.app);
        app.clear();
        let r = step(&mut tr, &mut app);
        let mut key = c.key;
        let keep = match r {
            Err(e) => {
                c.transport = Some(tr);
                match key {
                    Some(k) => {
                        // What was decoded before the failure is protocol the client sent.
                        if !app.is_empty() {
                            self.core.input(k, &app, now);
                        }
                        self.app = app;
                        self.transport_failed(t, k, e, now);
                    }
                    None => {
                        self.app = app;
                        self.pre_failed(t, e, now);
                    }
                }
                return;
            }
            Ok(ev) => {
                if let (true, Some(k)) = (ev.tls_started, key) {
                    log_tls_start(&self.core, k);
                }
                if let Some(peer) = ev.tls_done {
                    // A client's handshake is logged; a WebSocket's (no client yet, the
                    // reference's HTTP server does it) is not.
                    if let (true, Some(k)) = (tracing::enabled!(tracing::Level::DEBUG), key) {
                        let label = self.core.conn_label(k);
                        tracing::debug!("{label} - TLS handshake complete");
                        tracing::debug!("{label} - TLS version {}, cipher suite {}", peer.version, peer.cipher);
                    }
                    // Always kept (also without a client certificate): monitoring shows
                    // the version and cipher suite.
                    match key {
                        Some(k) => self.core.set_tls_peer(k, Some(peer)),
                        None => c.tls_peer = Some(peer),
                    }
                }
                if let Some(up) = ev.upgraded {
                    if up.kind != Kind::Client {
                        // Leaf node and MQTT WebSocket paths: this server serves neither.
                        let what = match up.kind {
                            Kind::Leaf => "Not configured to accept leaf node connections",
                            _ => "Not configured to accept MQTT connections",
                        };
                        tracing::error!("{what}");
                        c.transport = Some(tr);
                        c.closing_since = Some(now);
                        self.app = app;
                        self.pre_wake.push(t);
                        return;
                    }
                    let k = self.upgraded(t, &mut tr, &up, now);
                    key = Some(k);
                }
                if let (Some(k), Some(tls)) = (key, ev.send_info) {
                    self.core.send_info(k, tls, now);
                }
                if let Some(k) = key {
                    if !app.is_empty() {
                        self.core.input(k, &app, now);
                    }
                    if ev.closed {
                        self.core.disconnected(k, ClosedState::ClientClosed, now);
                    }
                }
                !ev.passthrough
            }
        };
        self.app = app;
        if let Some(c) = self.conns.get_mut(t) {
            if keep {
                c.transport = Some(tr);
            }
        }
        self.push_deadline(t);
        self.flush_after_read(t, key, now);
    }

    /// Whatever the transport has to say after a read (handshake records, pongs).
    fn flush_after_read(&mut self, t: usize, key: Option<ConnKey>, now: Instant) {
        let wants = self
            .conns
            .get(t)
            .and_then(|c| c.transport.as_ref())
            .is_some_and(|tr| tr.wants_write());
        if !wants {
            return;
        }
        match key {
            Some(k) => self.write_transport(t, k, now),
            None => self.pre_wake.push(t),
        }
    }

    /// A WebSocket upgrade succeeded: the connection becomes a NATS client.
    fn upgraded(&mut self, t: usize, tr: &mut Transport, up: &Upgraded, now: Instant) -> ConnKey {
        let (peer, tls_peer) = match self.conns.get_mut(t) {
            Some(c) => (c.peer, c.tls_peer.take()),
            None => (std::net::SocketAddr::from(([0, 0, 0, 0], 0)), None),
        };
        let names = tr.ws_cookie_names();
        let find = |name: &str| {
            if name.is_empty() {
                return String::new();
            }
            up.cookies
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let info = TransportInfo {
            conn_type: ConnType::Websocket,
            tls_on: tr.tls_on(),
            tls: tls_peer,
            ws_cookies: WsCookies {
                jwt: find(&names[0]),
                user: find(&names[1]),
                pass: find(&names[2]),
                token: find(&names[3]),
            },
        };
        let setup = ConnSetup {
            transport: Some(Box::new(info)),
            forwarded_ip: up.client_ip.clone(),
            ..Default::default()
        };
        let key = self.core.accept_with(peer, setup, now);
        let mp = self.core.max_payload_of(key);
        tr.set_max_payload(if mp > 0 { mp as usize } else { 1024 * 1024 });
        if let Some(c) = self.conns.get_mut(t) {
            c.key = Some(key);
        }
        self.map_token(key, t);
        key
    }

    /// A client's transport failed: log it as the reference does and close.
    pub(super) fn transport_failed(&mut self, t: usize, key: ConnKey, e: TransportError, now: Instant) {
        let label = self.core.conn_label(key);
        let reason = match &e {
            TransportError::Tls { text, handshake: true } => {
                tracing::error!("{label} - TLS handshake error: {text}");
                ClosedState::TlsHandshakeError
            }
            TransportError::Tls { text, handshake: false } => {
                tracing::debug!("{label} - read error: {text}");
                ClosedState::ReadError
            }
            other => {
                tracing::error!("{label} - read error: {other}");
                ClosedState::ReadError
            }
        };
        self.core.disconnected(key, reason, now);
        // The alert or close frame the transport queued still goes out (briefly).
        if let Some(c) = self.conns.get_mut(t) {
            c.closing_since.get_or_insert(now);
        }
    }

    /// A connection that is not a client yet failed (refused upgrade, bad request, TLS).
    fn pre_failed(&mut self, t: usize, e: TransportError, now: Instant) {
        let Some(c) = self.conns.get_mut(t) else { return };
        match &e {
            TransportError::Upgrade(reason) => {
                tracing::error!("{} - websocket handshake error: {reason}", c.peer);
            }
            TransportError::Tls { text, .. } => {
                tracing::error!("websocket: TLS handshake error from {}: {text}", c.peer);
            }
            _ => {}
        }
        c.closing_since = Some(now);
        self.pre_wake.push(t);
    }

    /// Write what the transport holds, then feed it more of the core's output.
    pub(super) fn write_transport(&mut self, t: usize, key: ConnKey, now: Instant) {
        loop {
            let Some(c) = self.conns.get_mut(t) else { return };
            let Some(tr) = c.transport.as_mut() else { return };
            if tr.wants_write() {
                if !c.writable {
                    self.core.written(key, 0, now);
                    return;
                }
                match tr.write_to(&mut c.stream) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        c.writable = false;
                        self.poller.want_write(&mut c.stream, t);
                        self.core.written(key, 0, now);
                        return;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        self.core.disconnected(key, ClosedState::WriteError, now);
                        return;
                    }
                }
                continue;
            }
            if tr.wants_raw() {
                let out = self.core.output(key);
                if out.is_empty() {
                    return;
                }
                tr.push_raw(out);
                let n = out.len();
                self.core.written(key, n, now);
                continue;
            }
            if !tr.accepts_output() {
                return;
            }
            let out = self.core.output(key);
            if out.is_empty() {
                return;
            }
            tr.push_output(out);
            let n = out.len();
            self.core.written(key, n, now);
        }
    }

    /// Connections without a core connection: write their answer, close them when done.
    pub(super) fn service_pre(&mut self, now: Instant) {
        if self.pre_wake.is_empty() {
            return;
        }
        let list = std::mem::take(&mut self.pre_wake);
        for t in list {
            let Some(c) = self.conns.get_mut(t) else { continue };
            if c.key.is_some() {
                continue;
            }
            let Some(tr) = c.transport.as_mut() else { continue };
            let mut failed = false;
            while tr.wants_write() && c.writable {
                match tr.write_to(&mut c.stream) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        c.writable = false;
                        self.poller.want_write(&mut c.stream, t);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            let pending = tr.wants_write();
            match c.closing_since {
                Some(since) if failed || !pending || now.duration_since(since) >= FLUSH_GRACE => self.drop_token(t),
                Some(_) => self.pre_wake.push(t),
                None if failed => self.drop_token(t),
                None => {}
            }
        }
    }

    /// Transport deadlines that passed.
    pub(super) fn transport_timers(&mut self, now: Instant) {
        while let Some(Reverse((at, t))) = self.deadlines.peek().copied() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            let Some(c) = self.conns.get_mut(t) else { continue };
            if c.deadline != Some(at) {
                continue;
            }
            c.deadline = None;
            let key = c.key;
            let Some(tr) = c.transport.as_mut() else { continue };
            let in_tls = tr.in_tls_handshake();
            match tr.expire(now) {
                Expired::Nothing => {}
                Expired::Resume => {
                    self.transport_step(t, now, |tr, app| tr.resume(now, app));
                    continue;
                }
                Expired::Passthrough => c.transport = None,
                Expired::SendInfo => {
                    if let Some(k) = key {
                        self.core.send_info(k, None, now);
                    }
                }
                Expired::HandshakeTimeout => match key {
                    Some(k) => {
                        let label = self.core.conn_label(k);
                        if let Some(local) = c.local {
                            tracing::error!(
                                "{label} - TLS handshake error: read tcp {local}->{}: i/o timeout",
                                c.peer
                            );
                        }
                        tracing::error!("{label} - TLS handshake timeout");
                        self.core.disconnected(k, ClosedState::TlsHandshakeError, now);
                    }
                    None => {
                        if in_tls {
                            let local = c.local.map(|l| l.to_string()).unwrap_or_default();
                            tracing::error!(
                                "websocket: TLS handshake error from {}: read tcp {local}->{}: i/o timeout",
                                c.peer,
                                c.peer
                            );
                        }
                        self.drop_token(t);
                        continue;
                    }
                },
            }
            self.push_deadline(t);
        }
    }
}
