//! Transports between a socket and the plaintext NATS protocol: TLS (rustls) and
//! WebSocket, as sans-IO state machines. Nothing here touches a socket: the driver hands
//! in what it read and drains what is to be written ([`Transport::write_to`] takes any
//! `io::Write`), so the same code runs on the io_uring shards and on mio.
//!
//! Module map:
//! - [`tls`]: the rustls session, the TLS options and `ServerConfig`, the client
//!   certificate as authentication sees it (`verify_and_map`).
//! - [`websocket`]: the upgrade request, the frame codec, permessage-deflate.
//! - here: [`ListenerTransport`] (how a listener's connections start, from the options)
//!   and [`Transport`] (one connection's stack: TLS, WebSocket, or both, plus the
//!   phases before the protocol flows: `allow_non_tls` sniffing, `handshake_first` and
//!   its fallback delay, the TLS handshake with its timeout, the WebSocket upgrade).
//!
//! Ownership: a `Transport` is per-connection state of one shard and is owned by the
//! driver's connection entry, next to the socket it wraps. The core keeps its contract
//! (plaintext in `input`, plaintext out of `output`); the few things it must know (the
//! client certificate, a deferred INFO, the WebSocket connection type) go through
//! `ShardCore::accept_with`, `send_info` and `set_tls_peer`. Keeping the transport out
//! of the core keeps ciphertext, frames and their buffers out of the core's memory and
//! out of its tests, and lets a WebSocket connection exist before it is a NATS client
//! (the upgrade comes first; a refused upgrade never becomes one, as in nats-server).
//! Plain TCP clients have no `Transport` at all.

pub mod ocsp;
pub mod tls;
pub mod websocket;

use crate::core::client::ClosedState;
use std::collections::BTreeSet;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tls::{TlsPeer, TlsSession};
use websocket::upgrade::{self, RequestParser, UpgradePolicy, Upgraded};
use websocket::WsSession;

/// Ciphertext or frames waiting beyond this stop the driver from taking more protocol
/// bytes from the core (the core's own buffer, with its limits, holds the rest).
const OUT_HIGH_WATER: usize = 64 * 1024;

/// TLS as a listener offers it.
#[derive(Debug, Clone)]
pub struct TlsMode {
    pub config: Arc<rustls::ServerConfig>,
    /// Handshake timeout.
    pub timeout: Duration,
    /// The handshake comes before the INFO.
    pub handshake_first: bool,
    /// With `handshake_first`: send the INFO after this long without data.
    pub fallback: Option<Duration>,
    /// Plaintext clients are served too (the first byte tells).
    pub allow_non_tls: bool,
    /// Accepted client keys (hex SHA-256 of the SubjectPublicKeyInfo).
    pub pinned: Option<BTreeSet<String>>,
    /// OCSP checks of client certificates (`ocsp_peer`).
    pub ocsp_peer: Option<Arc<crate::transport::ocsp::peer::PeerChecker>>,
    /// `connection_rate_limit` (client listener only, as in the reference).
    pub rate: Option<Arc<crate::transport::tls::rate::ConnRate>>,
}

/// WebSocket as a listener offers it.
#[derive(Debug, Clone, Default)]
pub struct WsMode {
    pub policy: UpgradePolicy,
    /// The whole opening handshake (TLS included) must finish within this.
    pub handshake_timeout: Option<Duration>,
    /// Cookie names: `jwt_cookie`, `user_cookie`, `pass_cookie`, `token_cookie`.
    pub cookies: [String; 4],
}

/// How the connections of one listener start.
#[derive(Debug, Clone, Default)]
pub struct ListenerTransport {
    pub tls: Option<TlsMode>,
    pub ws: Option<WsMode>,
}

impl ListenerTransport {
    /// Plain TCP: no transport object at all.
    pub fn is_plain(&self) -> bool {
        self.tls.is_none() && self.ws.is_none()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// `allow_non_tls`: the first byte tells TLS (0x16) from plaintext.
    Sniff,
    /// `handshake_first` with a fallback delay: waiting for the client to start.
    FirstWait,
    Handshake,
    /// The handshake is done and the client certificate's OCSP check is under way:
    /// what the client sends waits.
    PeerCheck,
    /// WebSocket: reading the upgrade request.
    Upgrade,
    Open,
    /// Failed or refused: only flushing what is queued.
    Done,
}

/// Why a connection's transport failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// TLS failed; `handshake` when it had not completed (the reference logs
    /// "TLS handshake error: ..." and closes with "TLS Handshake Failure").
    #[error("{text}")]
    Tls { text: String, handshake: bool },
    /// The WebSocket upgrade was refused (answered; logged as a handshake error).
    #[error("websocket handshake error: {0}")]
    Upgrade(String),
    /// The HTTP request could not be read (answered, not logged).
    #[error("bad request")]
    Http,
    /// A WebSocket frame error (a protocol error's close frame is queued).
    #[error("{0}")]
    Ws(websocket::frame::FrameError),
}

/// What one batch of input did, besides protocol bytes.
#[derive(Debug, Default)]
pub struct Events {
    /// The TLS handshake started with this batch (`allow_non_tls` saw a TLS record, or
    /// the `handshake_first` fallback wait got data); see [`Transport::in_tls_handshake`]
    /// for one that starts when the connection is accepted.
    pub tls_started: bool,
    /// The TLS handshake completed: the client's certificate (if it sent one).
    pub tls_done: Option<Arc<TlsPeer>>,
    /// The WebSocket upgrade was accepted: the connection becomes a NATS client now.
    pub upgraded: Option<Box<Upgraded>>,
    /// Queue the deferred INFO now (`Some(tls_required)` override).
    pub send_info: Option<Option<bool>>,
    /// `allow_non_tls` chose plaintext: drop the transport, the input is protocol.
    pub passthrough: bool,
    /// The client ended the session (TLS `close_notify`, WebSocket close).
    pub closed: bool,
}

/// What a passed deadline did.
#[derive(Debug, PartialEq, Eq)]
pub enum Expired {
    Nothing,
    /// The TLS handshake (or WebSocket opening handshake) took too long.
    HandshakeTimeout,
    /// `handshake_first` fallback: send the INFO (raw, `tls_required` as configured).
    SendInfo,
    /// `allow_non_tls`: no data within the timeout, serve as plaintext.
    Passthrough,
    /// The OCSP check of the client certificate has a verdict: call
    /// [`Transport::resume`].
    Resume,
}

/// How often a pending OCSP check is looked at, at first and at most.
const POLL_FIRST: Duration = Duration::from_millis(2);
const POLL_MAX: Duration = Duration::from_millis(20);
/// What a client may send while its OCSP check is under way.
const HELD_MAX: usize = 1024 * 1024;

/// One connection's transport stack.
pub struct Transport {
    phase: Phase,
    tls: Option<TlsSession>,
    tls_mode: Option<TlsMode>,
    ws: Option<WsSession>,
    ws_mode: Option<WsMode>,
    req: Option<RequestParser>,
    /// Socket bytes that do not go through TLS (a raw INFO, a plain WebSocket's frames).
    raw: Vec<u8>,
    raw_pos: usize,
    /// Decrypted bytes on their way to the WebSocket decoder / frames on their way to
    /// TLS.
    scratch: Vec<u8>,
    deadline: Option<Instant>,
    /// The next protocol bytes from the core go to the socket as they are (the INFO
    /// sent before the TLS handshake).
    raw_next: bool,
    /// Closing: the close frame / `close_notify` is queued, nothing more is taken.
    closed: bool,
    /// The core holds the INFO back until the handshake is done (`handshake_first`).
    info_deferred: bool,
    /// The handshake is (still) happening before the INFO.
    first: bool,
    /// The OCSP check under way, the peer it is about, what arrived meanwhile, and
    /// when to look at it next.
    check: Option<crate::transport::ocsp::peer::Pending>,
    checked_peer: Option<Arc<TlsPeer>>,
    held: Vec<u8>,
    poll_at: Option<Instant>,
    poll_step: Duration,
}

impl Transport {
    /// The transport for a connection accepted on a listener with `lt` (not plain).
    pub fn new(lt: &ListenerTransport, now: Instant) -> Transport {
        let mut t = Transport {
            phase: Phase::Open,
            tls: None,
            tls_mode: lt.tls.clone(),
            ws: None,
            ws_mode: lt.ws.clone(),
            req: None,
            raw: Vec::new(),
            raw_pos: 0,
            scratch: Vec::new(),
            deadline: None,
            raw_next: false,
            closed: false,
            info_deferred: false,
            first: false,
            check: None,
            checked_peer: None,
            held: Vec::new(),
            poll_at: None,
            poll_step: POLL_FIRST,
        };
        if let Some(ws) = &lt.ws {
            t.deadline = ws.handshake_timeout.map(|d| now + d);
            t.req = Some(RequestParser::default());
            t.phase = if lt.tls.is_some() {
                Phase::Handshake
            } else {
                Phase::Upgrade
            };
            if lt.tls.is_some() {
                t.start_tls();
            }
            return t;
        }
        if let Some(m) = &lt.tls {
            t.info_deferred = m.handshake_first;
            t.first = m.handshake_first;
            if m.handshake_first {
                match m.fallback {
                    Some(d) if !d.is_zero() => {
                        t.phase = Phase::FirstWait;
                        t.deadline = Some(now + d);
                    }
                    _ => {
                        t.phase = Phase::Handshake;
                        t.deadline = Some(now + m.timeout);
                        t.start_tls();
                    }
                }
            } else if m.allow_non_tls {
                t.phase = Phase::Sniff;
                t.deadline = Some(now + m.timeout);
                t.raw_next = true;
            } else {
                t.phase = Phase::Handshake;
                t.deadline = Some(now + m.timeout);
                t.raw_next = true;
                t.start_tls();
            }
        }
        t
    }

    fn start_tls(&mut self) {
        if let Some(m) = &self.tls_mode {
            match TlsSession::new(m.config.clone()) {
                Ok(s) => self.tls = Some(s),
                Err(e) => {
                    tracing::error!("TLS session: {e}");
                    self.phase = Phase::Done;
                }
            }
        }
    }

    /// The core's INFO waits for the handshake (`handshake_first`).
    pub fn defers_info(&self) -> bool {
        self.tls_mode.as_ref().is_some_and(|m| m.handshake_first) && self.ws_mode.is_none()
    }

    /// A WebSocket connection becomes a NATS client only once upgraded.
    pub fn is_websocket(&self) -> bool {
        self.ws_mode.is_some()
    }

    /// The driver must hand the next protocol bytes over with [`Transport::push_raw`]
    /// (they go out before TLS starts).
    pub fn wants_raw(&self) -> bool {
        self.raw_next
    }

    /// Queue protocol bytes to go out as they are (the INFO before the handshake).
    pub fn push_raw(&mut self, data: &[u8]) {
        self.raw_next = false;
        self.raw.extend_from_slice(data);
    }

    /// When [`Transport::expire`] wants to run.
    pub fn deadline(&self) -> Option<Instant> {
        match (self.deadline, self.poll_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Still negotiating (TLS handshake, upgrade, sniffing).
    pub fn negotiating(&self) -> bool {
        !matches!(self.phase, Phase::Open | Phase::Done)
    }

    /// The TLS handshake is what is pending (its failure is a "TLS handshake error").
    pub fn in_tls_handshake(&self) -> bool {
        matches!(self.phase, Phase::Handshake | Phase::PeerCheck)
    }

    /// A deadline passed.
    pub fn expire(&mut self, now: Instant) -> Expired {
        if self.phase == Phase::PeerCheck {
            if self.check.as_ref().is_some_and(|c| c.verdict().is_some()) {
                self.poll_at = None;
                return Expired::Resume;
            }
            if self.deadline.is_some_and(|d| d <= now) {
                self.deadline = None;
                self.poll_at = None;
                self.check = None;
                self.phase = Phase::Done;
                return Expired::HandshakeTimeout;
            }
            self.poll_step = (self.poll_step * 2).min(POLL_MAX);
            self.poll_at = Some(now + self.poll_step);
            return Expired::Nothing;
        }
        if self.deadline.is_none_or(|d| d > now) {
            return Expired::Nothing;
        }
        self.deadline = None;
        match self.phase {
            Phase::FirstWait => {
                let (timeout, allow) = self
                    .tls_mode
                    .as_ref()
                    .map_or((Duration::from_secs(2), false), |m| (m.timeout, m.allow_non_tls));
                self.raw_next = true;
                self.info_deferred = false;
                self.first = false;
                self.deadline = Some(now + timeout);
                if allow {
                    self.phase = Phase::Sniff;
                } else {
                    self.phase = Phase::Handshake;
                    self.start_tls();
                }
                Expired::SendInfo
            }
            Phase::Sniff => {
                self.phase = Phase::Done;
                Expired::Passthrough
            }
            Phase::Handshake | Phase::Upgrade => {
                self.phase = Phase::Done;
                Expired::HandshakeTimeout
            }
            Phase::PeerCheck | Phase::Open | Phase::Done => Expired::Nothing,
        }
    }

    /// Bytes read from the socket. Protocol bytes for the core are appended to `app`.
    pub fn on_read(&mut self, data: &[u8], now: Instant, app: &mut Vec<u8>) -> Result<Events, TransportError> {
        let mut ev = Events::default();
        if self.phase == Phase::Done || data.is_empty() {
            return Ok(ev);
        }
        if self.phase == Phase::Sniff {
            if data.first() == Some(&0x16) {
                self.phase = Phase::Handshake;
                let timeout = self.tls_mode.as_ref().map_or(Duration::from_secs(2), |m| m.timeout);
                self.deadline = Some(now + timeout);
                self.start_tls();
                ev.tls_started = true;
            } else {
                self.phase = Phase::Done;
                self.deadline = None;
                ev.passthrough = true;
                app.extend_from_slice(data);
                return Ok(ev);
            }
        }
        if self.phase == Phase::FirstWait {
            // Whatever arrives is taken as the start of the handshake.
            self.phase = Phase::Handshake;
            let timeout = self.tls_mode.as_ref().map_or(Duration::from_secs(2), |m| m.timeout);
            self.deadline = Some(now + timeout);
            self.start_tls();
            ev.tls_started = true;
        }
        // TLS first, if any: `plain` is what it decrypted.
        let mut plain = std::mem::take(&mut self.scratch);
        plain.clear();
        let decrypted = if let Some(tls) = &mut self.tls {
            let handshaking = self.phase == Phase::Handshake;
            let out = tls.read(data, &mut plain).map_err(|e| {
                self.phase = Phase::Done;
                TransportError::Tls {
                    text: e.0,
                    handshake: handshaking,
                }
            });
            let out = match out {
                Ok(o) => o,
                Err(e) => {
                    self.scratch = plain;
                    if matches!(&e, TransportError::Tls { text, .. } if text == tls::session::NOT_TLS) {
                        // Not a TLS client: the reference answers nothing (no alert).
                        self.tls = None;
                    }
                    return Err(e);
                }
            };
            if out.peer_closed {
                ev.closed = true;
            }
            if out.handshake_done {
                let mut peer = tls.peer();
                peer.first = self.first;
                if let Some(pins) = self.tls_mode.as_ref().and_then(|m| m.pinned.as_ref()) {
                    let ok = peer.spki_sha256().is_some_and(|k| pins.contains(&k));
                    if !ok {
                        self.phase = Phase::Done;
                        self.scratch = plain;
                        return Err(TransportError::Tls {
                            text: "certificate not pinned".into(),
                            handshake: true,
                        });
                    }
                }
                let peer = Arc::new(peer);
                match self.tls_mode.as_ref().and_then(|m| m.ocsp_peer.clone()) {
                    None => self.handshake_complete(peer, &mut ev),
                    Some(checker) => match checker.check(&peer.chain) {
                        ocsp::peer::Check::Done(true) => self.handshake_complete(peer, &mut ev),
                        ocsp::peer::Check::Done(false) => {
                            self.phase = Phase::Done;
                            self.scratch = plain;
                            return Err(TransportError::Tls {
                                text: ocsp::peer::REJECT.into(),
                                handshake: true,
                            });
                        }
                        ocsp::peer::Check::Pending(p) => {
                            self.phase = Phase::PeerCheck;
                            self.check = Some(p);
                            self.checked_peer = Some(peer);
                            self.poll_step = POLL_FIRST;
                            self.poll_at = Some(now + POLL_FIRST);
                        }
                    },
                }
            }
            if self.phase == Phase::PeerCheck {
                // The client's first protocol bytes wait for the verdict (bounded: the
                // reference does not read them before its handshake is done either).
                self.held.extend_from_slice(&plain);
                plain.clear();
                if self.held.len() > HELD_MAX {
                    self.phase = Phase::Done;
                    self.scratch = plain;
                    return Err(TransportError::Tls {
                        text: "too much data before the OCSP check completed".into(),
                        handshake: true,
                    });
                }
                if self.check.as_ref().is_some_and(|c| c.verdict().is_some()) {
                    self.scratch = plain;
                    return self.resume(now, app).map(|mut later| {
                        later.closed |= ev.closed;
                        later
                    });
                }
            }
            true
        } else {
            false
        };
        let result = self.after_tls(if decrypted { &plain } else { data }, app, &mut ev);
        plain.clear();
        if plain.capacity() <= 256 * 1024 {
            self.scratch = plain;
        }
        result.map(|()| ev)
    }

    /// The handshake (and any OCSP check) succeeded: the protocol, or the WebSocket
    /// upgrade, comes next.
    fn handshake_complete(&mut self, peer: Arc<TlsPeer>, ev: &mut Events) {
        ev.tls_done = Some(peer);
        if self.ws_mode.is_some() {
            self.phase = Phase::Upgrade;
            if self.ws_mode.as_ref().is_some_and(|w| w.handshake_timeout.is_none()) {
                self.deadline = None;
            }
        } else {
            self.phase = Phase::Open;
            self.deadline = None;
            if self.info_deferred {
                self.info_deferred = false;
                ev.send_info = Some(Some(true));
            }
        }
    }

    /// The OCSP check has its verdict (see [`Expired::Resume`]): go on with what the
    /// client sent meanwhile, or fail as the reference does ("client not OCSP valid").
    pub fn resume(&mut self, _now: Instant, app: &mut Vec<u8>) -> Result<Events, TransportError> {
        let mut ev = Events::default();
        if self.phase != Phase::PeerCheck {
            return Ok(ev);
        }
        let Some(verdict) = self.check.as_ref().and_then(|c| c.verdict()) else {
            return Ok(ev);
        };
        self.check = None;
        self.poll_at = None;
        let held = std::mem::take(&mut self.held);
        if !verdict {
            self.phase = Phase::Done;
            return Err(TransportError::Tls {
                text: ocsp::peer::REJECT.into(),
                handshake: true,
            });
        }
        let peer = self.checked_peer.take().unwrap_or_default();
        self.handshake_complete(peer, &mut ev);
        self.after_tls(&held, app, &mut ev).map(|()| ev)
    }

    /// The WebSocket layer (if any) over bytes that are past TLS.
    fn after_tls(&mut self, bytes: &[u8], app: &mut Vec<u8>, ev: &mut Events) -> Result<(), TransportError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.ws_mode.is_none() {
            if self.phase == Phase::Open {
                app.extend_from_slice(bytes);
            }
            return Ok(());
        }
        let mut bytes = bytes;
        if self.phase == Phase::Upgrade {
            let Some(parser) = &mut self.req else { return Ok(()) };
            match parser.feed(bytes) {
                Ok(None) => return Ok(()),
                Err(e) => {
                    self.phase = Phase::Done;
                    let resp = e.response();
                    self.send_socket(&resp);
                    return Err(TransportError::Http);
                }
                Ok(Some((request, used))) => {
                    self.req = None;
                    let extra = used < bytes.len();
                    let policy = self.ws_mode.as_ref().map(|w| w.policy.clone()).unwrap_or_default();
                    match upgrade::upgrade(&request, &policy, extra) {
                        Ok(up) => {
                            self.send_socket(&up.response);
                            self.ws = Some(WsSession::new(&up, 1024 * 1024));
                            self.phase = Phase::Open;
                            self.deadline = None;
                            ev.upgraded = Some(Box::new(up));
                            bytes = bytes.get(used..).unwrap_or_default();
                        }
                        Err(refused) => {
                            self.phase = Phase::Done;
                            let resp = refused.response(std::time::SystemTime::now());
                            self.send_socket(&resp);
                            return Err(TransportError::Upgrade(refused.reason));
                        }
                    }
                }
            }
        }
        if self.phase != Phase::Open || bytes.is_empty() {
            return Ok(());
        }
        let Some(ws) = &mut self.ws else { return Ok(()) };
        let mut reply = Vec::new();
        let r = ws.decode(bytes, app, &mut reply);
        if !reply.is_empty() {
            self.send_socket(&reply);
        }
        match r {
            Ok(d) => {
                if d.closed {
                    ev.closed = true;
                }
                Ok(())
            }
            Err(e) => {
                self.phase = Phase::Done;
                Err(TransportError::Ws(e))
            }
        }
    }

    /// Bytes for the socket from the layer above TLS: encrypted if TLS is on.
    fn send_socket(&mut self, bytes: &[u8]) {
        match &mut self.tls {
            Some(t) if !t.is_handshaking() => {
                if t.write_plain(bytes).is_err() {
                    self.phase = Phase::Done;
                }
            }
            _ => self.raw.extend_from_slice(bytes),
        }
    }

    /// The connection's max payload (bounds inflated WebSocket messages).
    pub fn set_max_payload(&mut self, n: usize) {
        if let Some(ws) = &mut self.ws {
            ws.set_max_payload(n);
        }
    }

    /// Bytes are waiting for the socket.
    pub fn wants_write(&self) -> bool {
        self.raw_pos < self.raw.len() || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    fn pending(&self) -> usize {
        self.raw.len() - self.raw_pos
            + if self.tls.as_ref().is_some_and(|t| t.wants_write()) {
                OUT_HIGH_WATER
            } else {
                0
            }
    }

    /// The core's protocol bytes may be taken now (the protocol flows and what was
    /// taken before is on its way).
    pub fn accepts_output(&self) -> bool {
        self.phase == Phase::Open && self.pending() < OUT_HIGH_WATER
    }

    /// Take protocol bytes from the core.
    pub fn push_output(&mut self, data: &[u8]) {
        match &mut self.ws {
            Some(ws) => {
                let mut frames = std::mem::take(&mut self.scratch);
                frames.clear();
                ws.encode(data, &mut frames);
                self.send_socket(&frames);
                frames.clear();
                if frames.capacity() <= 256 * 1024 {
                    self.scratch = frames;
                }
            }
            None => self.send_socket(data),
        }
    }

    /// Write what is queued to `w`. `WouldBlock` (nothing written) comes back as such.
    pub fn write_to(&mut self, w: &mut dyn Write) -> io::Result<usize> {
        let mut total = 0;
        while self.raw_pos < self.raw.len() {
            let chunk = self.raw.get(self.raw_pos..).unwrap_or_default();
            match w.write(chunk) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    self.raw_pos += n;
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && total > 0 => return Ok(total),
                Err(e) => return Err(e),
            }
        }
        self.raw.clear();
        self.raw_pos = 0;
        if self.raw.capacity() > 256 * 1024 {
            self.raw = Vec::new();
        }
        if let Some(t) = &mut self.tls {
            while t.wants_write() {
                match t.write_tls(w) {
                    Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                    Ok(n) => total += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && total > 0 => return Ok(total),
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(total)
    }

    /// The connection is closing for `reason`: queue the WebSocket close frame and the
    /// TLS `close_notify` (nothing for reasons that skip the flush).
    pub fn close(&mut self, reason: ClosedState) {
        if self.closed {
            return;
        }
        self.closed = true;
        if reason.skips_flush() {
            return;
        }
        if self.phase == Phase::Open {
            if let Some(ws) = &mut self.ws {
                let mut frame = Vec::new();
                ws.close(reason, &mut frame);
                self.send_socket(&frame);
            }
        }
        if let Some(t) = &mut self.tls {
            if !t.is_handshaking() {
                t.close_notify();
            }
        }
    }

    /// The socket reached end of file: a TLS handshake cut short is a handshake error
    /// ("EOF"), as the reference logs it.
    pub fn on_eof(&mut self) -> Option<TransportError> {
        if self.phase == Phase::Handshake {
            // (A client that hangs up during the OCSP check has completed its handshake:
            // that is a plain close.)
            self.phase = Phase::Done;
            return Some(TransportError::Tls {
                text: "EOF".into(),
                handshake: true,
            });
        }
        None
    }

    /// The configured cookie names (`jwt_cookie`, `user_cookie`, `pass_cookie`,
    /// `token_cookie`).
    pub fn ws_cookie_names(&self) -> [String; 4] {
        self.ws_mode.as_ref().map(|w| w.cookies.clone()).unwrap_or_default()
    }

    /// TLS is (or will be) in use on this connection.
    pub fn tls_on(&self) -> bool {
        self.tls.is_some()
    }
}

#[cfg(test)]
mod tests;
