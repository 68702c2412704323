//! Per-connection state of a client, owned by the shard that accepted the connection.

use super::accounts::{AccountId, GLOBAL};
use super::auth::Identity;
use super::outbuf::OutBuf;
use super::perms::Perms;
use super::FastMap;
use crate::proto::connect::ClientOpts;
use crate::proto::parser::Parser;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A connection's handle within its shard: slab index plus generation, so a stale handle
/// held by a driver never reaches a newer connection in the same slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnKey {
    pub idx: u32,
    pub gen: u32,
}

/// A local subscription's handle (slab index in its shard).
pub type SubId = u32;

/// Why a connection closed (nats-server's `ClosedState` names, as logged and reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClosedState {
    ClientClosed,
    AuthenticationTimeout,
    AuthenticationViolation,
    SlowConsumerPendingBytes,
    SlowConsumerWriteDeadline,
    WriteError,
    ReadError,
    ParseError,
    StaleConnection,
    ProtocolViolation,
    BadClientProtocolVersion,
    MaxConnectionsExceeded,
    MaxPayloadExceeded,
    MaxControlLineExceeded,
    ServerShutdown,
    NoRespondersRequiresHeaders,
    MaxAccountConnectionsExceeded,
    MaxSubscriptionsExceeded,
    AuthenticationExpired,
    Revocation,
    ProxyNotTrusted,
    ProxyRequired,
    TlsHandshakeError,
    /// Closed by a `$SYS.REQ.SERVER.<id>.KICK` request.
    Kicked,
}

impl ClosedState {
    pub fn as_str(self) -> &'static str {
        match self {
            ClosedState::ClientClosed => "Client Closed",
            ClosedState::AuthenticationTimeout => "Authentication Timeout",
            ClosedState::AuthenticationViolation => "Authentication Failure",
            ClosedState::SlowConsumerPendingBytes => "Slow Consumer (Pending Bytes)",
            ClosedState::SlowConsumerWriteDeadline => "Slow Consumer (Write Deadline)",
            ClosedState::WriteError => "Write Error",
            ClosedState::ReadError => "Read Error",
            ClosedState::ParseError => "Parse Error",
            ClosedState::StaleConnection => "Stale Connection",
            ClosedState::ProtocolViolation => "Protocol Violation",
            ClosedState::BadClientProtocolVersion => "Bad Client Protocol Version",
            ClosedState::MaxConnectionsExceeded => "Maximum Connections Exceeded",
            ClosedState::MaxPayloadExceeded => "Maximum Message Payload Exceeded",
            ClosedState::MaxControlLineExceeded => "Maximum Control Line Exceeded",
            ClosedState::ServerShutdown => "Server Shutdown",
            ClosedState::NoRespondersRequiresHeaders => "No Responders Requires Headers",
            ClosedState::MaxAccountConnectionsExceeded => "Maximum Account Connections Exceeded",
            ClosedState::MaxSubscriptionsExceeded => "Maximum Subscriptions Exceeded",
            ClosedState::AuthenticationExpired => "Authentication Expired",
            ClosedState::Revocation => "Credentials Revoked",
            ClosedState::ProxyNotTrusted => "Proxy Not Trusted",
            ClosedState::ProxyRequired => "Proxy Required",
            ClosedState::TlsHandshakeError => "TLS Handshake Failure",
            ClosedState::Kicked => "Kicked",
        }
    }

    /// Queued output is dropped instead of flushed (the peer is gone or too slow).
    pub fn skips_flush(self) -> bool {
        matches!(
            self,
            ClosedState::ReadError
                | ClosedState::WriteError
                | ClosedState::SlowConsumerPendingBytes
                | ClosedState::SlowConsumerWriteDeadline
                | ClosedState::TlsHandshakeError
        )
    }
}

/// Why a connection's input is not being processed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
    Running,
    /// Waiting for every shard to acknowledge interest changes before a PONG.
    Barrier(u64),
    /// The mesh to some shard is backed up.
    Mesh,
    /// Waiting for the authenticator's verdict on CONNECT.
    Auth,
    /// A producer held back while a consumer it delivered to catches up (module `stall`).
    Stall,
}

/// A local subscription.
pub struct Subscription {
    pub conn: ConnKey,
    /// The account whose sublist holds it (its connection's account when it was made).
    pub account: AccountId,
    pub subject: Box<[u8]>,
    pub queue: Option<Box<[u8]>>,
    pub sid: Box<[u8]>,
    /// Auto-unsubscribe after this many deliveries (0: never).
    pub max: u64,
    pub delivered: u64,
}

/// A client connection's protocol state.
pub struct Client {
    pub cid: u64,
    pub gen: u32,
    pub peer: SocketAddr,
    /// The account the connection is bound to (`$G` until authentication says otherwise).
    pub account: AccountId,
    pub opts: ClientOpts,
    /// Headers negotiated (server supports them and the client asked).
    pub headers: bool,
    pub connect_received: bool,
    pub first_pong_sent: bool,
    pub awaiting_auth: bool,
    pub closing: Option<ClosedState>,
    pub parser: Parser,
    pub out: OutBuf,
    pub subs: FastMap<Box<[u8]>, SubId>,
    pub pause: Pause,
    /// Times a producer was stalled waiting for this connection to catch up.
    pub stalls: u64,
    /// How long this connection was stalled as a producer since its last read.
    pub stall_total: std::time::Duration,
    /// Input that arrived while paused, processed on resume.
    pub stash: Vec<u8>,
    /// SUB/UNSUB since the last PING: the next PONG waits for every shard.
    pub interest_changed: bool,
    /// Queued for the driver's attention.
    pub woken: bool,
    pub pings_out: u32,
    pub start: Instant,
    /// When the connection was accepted, by the wall clock (`/connz`, events).
    pub started: std::time::SystemTime,
    pub last_in: Instant,
    pub rtt: Option<Duration>,
    pub rtt_start: Option<Instant>,
    pub ping_at: Instant,
    pub auth_deadline: Option<Instant>,
    /// The deadline this client currently has in the shard's timer heap.
    pub timer_at: Option<Instant>,
    pub in_msgs: u64,
    pub in_bytes: u64,
    pub out_msgs: u64,
    pub out_bytes: u64,
    /// Trace prefix `ip:port - cid:N`.
    pub label: String,
    /// The nonce sent in INFO (empty when none was).
    pub nonce: String,
    /// The trusted proxy whose `proxy_sig` verified (kept even if authentication then
    /// failed, for `/connz`).
    pub proxy_key: Option<String>,
    /// Who the connection authenticated as (set once CONNECT is accepted).
    pub identity: Option<Box<Identity>>,
    /// Counted in its account's connections (undone on close).
    pub account_bound: bool,
    /// Publish/subscribe permissions, if restricted.
    pub perms: Option<Box<Perms>>,
    /// The user's and account's limits (negative: none); the server's own limits are
    /// applied on top where they are used.
    pub max_payload: i64,
    pub max_subs: i64,
    /// Closed with `User Authentication Expired` at this moment.
    pub expires_at: Option<Instant>,
    /// The pending verdict is for the first CONNECT.
    pub auth_first: bool,
    /// A server-side client without a socket (system services, JetStream, ...).
    pub internal: bool,
    /// TLS and WebSocket details (`None` for a plain TCP client).
    pub transport: Option<Box<super::auth::TransportInfo>>,
    /// What this connection's last publish was routed by (module `shard::memo`).
    pub route_memo: Option<super::shard::memo::RouteMemo>,
}

impl Client {
    pub fn new(cid: u64, gen: u32, peer: SocketAddr, now: Instant, ping_interval: Duration) -> Self {
        Client {
            cid,
            gen,
            peer,
            account: GLOBAL,
            opts: ClientOpts::default(),
            headers: false,
            connect_received: false,
            first_pong_sent: false,
            awaiting_auth: false,
            closing: None,
            parser: Parser::default(),
            out: OutBuf::default(),
            subs: FastMap::default(),
            pause: Pause::Running,
            stalls: 0,
            stall_total: std::time::Duration::ZERO,
            stash: Vec::new(),
            interest_changed: false,
            woken: false,
            pings_out: 0,
            start: now,
            started: std::time::SystemTime::now(),
            last_in: now,
            rtt: None,
            rtt_start: None,
            ping_at: now + ping_interval,
            auth_deadline: None,
            timer_at: None,
            in_msgs: 0,
            in_bytes: 0,
            out_msgs: 0,
            out_bytes: 0,
            label: format_label(peer, cid),
            nonce: String::new(),
            proxy_key: None,
            identity: None,
            account_bound: false,
            perms: None,
            max_payload: -1,
            max_subs: -1,
            expires_at: None,
            auth_first: true,
            internal: false,
            transport: None,
            route_memo: None,
        }
    }

    /// The earliest moment this client's timers need attention.
    pub fn next_deadline(&self, write_deadline: Duration) -> Instant {
        let mut t = self.ping_at;
        if let Some(a) = self.auth_deadline {
            t = t.min(a);
        }
        if let Some(e) = self.expires_at {
            t = t.min(e);
        }
        if let Some(s) = self.out.stalled_since() {
            t = t.min(s + write_deadline);
        }
        t
    }
}

fn format_label(peer: SocketAddr, cid: u64) -> String {
    match peer {
        SocketAddr::V4(a) => format!("{}:{} - cid:{cid}", a.ip(), a.port()),
        SocketAddr::V6(a) => format!("[{}]:{} - cid:{cid}", a.ip(), a.port()),
    }
}
