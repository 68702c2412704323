//! The core's side of authentication: what a connection presents, what an authenticator
//! decides, and the identity a connection is bound to. The decisions themselves live in
//! `crate::auth` (users, nkeys, JWTs, auth callout), which implements [`Authenticator`];
//! the core only asks and applies the answer.
//!
//! An authenticator may answer later ([`AuthVerdict::Pending`]): a URL resolver fetching an
//! account JWT or an auth callout waiting for its service. The connection then waits,
//! paused, until [`AuthLater::complete`] posts the verdict back to its shard.

use super::accounts::AccountId;
use super::client::ConnKey;
use super::perms::PermSpec;
use super::post::{Job, Post};
use crate::proto::connect::ClientOpts;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

/// The kinds of connection `allowed_connection_types` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConnType {
    #[default]
    Standard,
    Websocket,
    Mqtt,
    MqttWs,
    Leafnode,
    LeafnodeWs,
    InProcess,
}

impl ConnType {
    /// The name used in configuration and JWTs.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnType::Standard => "STANDARD",
            ConnType::Websocket => "WEBSOCKET",
            ConnType::Mqtt => "MQTT",
            ConnType::MqttWs => "MQTT_WS",
            ConnType::Leafnode => "LEAFNODE",
            ConnType::LeafnodeWs => "LEAFNODE_WS",
            ConnType::InProcess => "IN_PROCESS",
        }
    }
}

/// What the transport learned about a connection before its CONNECT: the TLS client
/// certificate and the WebSocket upgrade. Absent for plain TCP clients.
#[derive(Clone, Debug, Default)]
pub struct TransportInfo {
    /// `Websocket` for WebSocket clients.
    pub conn_type: ConnType,
    /// The verified client certificate (TLS with `verify`), for `verify_and_map`.
    pub tls: Option<Arc<crate::transport::tls::TlsPeer>>,
    /// TLS was negotiated (with or without a client certificate).
    pub tls_on: bool,
    /// Credentials a WebSocket client sent as cookies (the configured cookie names).
    pub ws_cookies: WsCookies,
}

/// `jwt_cookie`, `user_cookie`, `pass_cookie`, `token_cookie` values of a WebSocket
/// upgrade (empty when absent). CONNECT fields that are empty take them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WsCookies {
    pub jwt: String,
    pub user: String,
    pub pass: String,
    pub token: String,
}

/// Everything a connection presented, as the authenticator sees it.
pub struct AuthRequest<'a> {
    pub opts: &'a ClientOpts,
    /// The nonce sent in INFO (empty when none was).
    pub nonce: &'a str,
    pub peer: SocketAddr,
    pub conn_type: ConnType,
    pub cid: u64,
    /// The shard and handle of the connection (for answers that come later).
    pub shard: usize,
    pub key: ConnKey,
    /// The public key of the trusted proxy that vouched for the connection (its
    /// `proxy_sig` over the nonce verified), if any: users with `proxy_required` need it.
    pub trusted_proxy: Option<&'a str>,
    /// The client's certificate, when TLS verified one (`verify_and_map`).
    pub tls: Option<&'a crate::transport::tls::TlsPeer>,
}

/// Per-user limits (user JWTs); -1 is unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserLimits {
    pub max_subscriptions: i64,
    pub max_payload: i64,
    pub max_data: i64,
}

impl Default for UserLimits {
    fn default() -> Self {
        UserLimits {
            max_subscriptions: -1,
            max_payload: -1,
            max_data: -1,
        }
    }
}

/// Who an authenticated connection is.
#[derive(Clone, Debug)]
pub struct Identity {
    pub account: AccountId,
    /// The user name or public nkey (logs, `/connz`, events); empty for anonymous.
    pub user: String,
    pub permissions: Option<PermSpec>,
    pub limits: UserLimits,
    /// The connection is closed when this passes (user JWT `exp`).
    pub expires: Option<SystemTime>,
    /// The user's JWT name and tags (`/connz`, events).
    pub name_tag: String,
    pub tags: Vec<String>,
    /// The key that signed the user JWT, when it was a signing key.
    pub issuer_key: String,
    /// A user JWT presented with it, if any.
    pub jwt: Option<String>,
    /// The trusted proxy the connection came through (`/connz` `proxy`; removing the key
    /// on reload closes the connection).
    pub proxy_key: Option<String>,
}

impl Identity {
    /// An identity in `account` with no restrictions.
    pub fn in_account(account: AccountId, user: &str) -> Identity {
        Identity {
            account,
            user: user.to_string(),
            permissions: None,
            limits: UserLimits::default(),
            expires: None,
            name_tag: String::new(),
            tags: Vec::new(),
            issuer_key: String::new(),
            jwt: None,
            proxy_key: None,
        }
    }
}

/// Why authentication failed: what the server logs (the client always gets just
/// `-ERR 'Authorization Violation'`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// A debug-level detail ("Signature not verified", ...), empty for none.
    pub detail: String,
    /// The account a JWT user would have joined (its connection limit may be the reason).
    pub account_limit: bool,
    /// A trusted-proxy failure (its own close reason in `/connz`).
    pub proxy: Option<ProxyFailure>,
}

/// Why a connection failed the trusted-proxy rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyFailure {
    /// A `proxy_sig` that no trusted proxy key verifies ("proxy is not trusted").
    NotTrusted,
    /// A `proxy_required` user not connected through a trusted proxy ("proxy connection
    /// required").
    Required,
}

impl ProxyFailure {
    /// nats-server's error text (logged at debug level).
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyFailure::NotTrusted => "proxy is not trusted",
            ProxyFailure::Required => "proxy connection required",
        }
    }
}

impl Denied {
    pub fn because(detail: impl Into<String>) -> Denied {
        Denied {
            detail: detail.into(),
            account_limit: false,
            proxy: None,
        }
    }

    /// A trusted-proxy failure.
    pub fn proxy(f: ProxyFailure) -> Denied {
        Denied {
            detail: f.as_str().to_string(),
            account_limit: false,
            proxy: Some(f),
        }
    }
}

/// An authenticator's answer.
pub enum AuthVerdict {
    Allow(Box<Identity>),
    Deny(Denied),
    /// The answer comes later through the [`AuthLater`] handed over with the request.
    Pending,
}

/// Decides who a connection is. Shared by all shards; must not block (slow work goes to
/// another thread and answers through [`AuthLater`]).
pub trait Authenticator: Send + Sync + std::fmt::Debug {
    /// Clients must authenticate (send CONNECT first, within the auth timeout).
    fn required(&self) -> bool;
    /// INFO `auth_required` (false with a `no_auth_user`, as nats-server says).
    fn advertised(&self) -> bool {
        self.required()
    }
    /// INFO carries a `nonce` (nkeys, JWTs or auth callout configured).
    fn nonce_required(&self) -> bool;
    /// Decide for a CONNECT.
    fn authenticate(&self, req: &AuthRequest<'_>, later: AuthLater) -> AuthVerdict;
    /// After a reload or an account update: is an authenticated connection still
    /// allowed, and as whom? `None` keeps it as it is.
    fn recheck(&self, _opts: &ClientOpts, _current: &Identity) -> Option<Recheck> {
        None
    }
    /// The trusted-proxy check, made before anything else (nats-server's `proxyCheck`):
    /// `Ok(Some(key))` when a trusted proxy's `proxy_sig` over `nonce` verifies,
    /// `Ok(None)` when the connection is not proxied (no signature, or no trusted
    /// proxies configured), `Err` when the signature verifies with no trusted key.
    fn proxy_check(&self, _opts: &ClientOpts, _nonce: &str) -> Result<Option<String>, ProxyFailure> {
        Ok(None)
    }
    /// Is `key` one of the trusted proxies? Connections that came through a proxy whose
    /// key is no longer trusted are closed on reload.
    fn proxy_trusted(&self, _key: &str) -> bool {
        false
    }
}

/// A reload's verdict on a connected client.
#[derive(Clone, Debug)]
pub enum Recheck {
    /// Credentials no longer valid: `-ERR 'Authorization Violation'` and close.
    Violation,
    /// The user is gone: close without an error.
    Removed,
    /// Still allowed, with these (possibly new) settings.
    Rebind(Box<Identity>),
    /// The user's JWT was revoked: `-ERR 'User Authentication Revoked'` and close.
    Revoked,
    /// The account's JWT expired: `-ERR 'Account Authentication Expired'` and close.
    AccountExpired,
    /// The trusted-proxy rules no longer admit it: `-ERR 'Authorization Violation'` and
    /// close, with the proxy close reason.
    Proxy(ProxyFailure),
}

/// Where a pending verdict goes: the connection's own shard.
pub struct AuthLater {
    shard: usize,
    key: ConnKey,
    post: Option<Arc<dyn Post>>,
}

impl AuthLater {
    pub fn new(shard: usize, key: ConnKey, post: Option<Arc<dyn Post>>) -> AuthLater {
        AuthLater { shard, key, post }
    }

    /// True if a verdict can be delivered later (a shard runtime is attached).
    pub fn can_wait(&self) -> bool {
        self.post.is_some()
    }

    /// Run `job` on the connection's shard (a callout request is made there). False
    /// without a runtime.
    pub fn run_on_shard(self, job: Job) -> bool {
        match self.post {
            Some(p) => p.post(self.shard, job),
            None => false,
        }
    }

    /// Hand the verdict to the connection's shard.
    pub fn complete(self, verdict: AuthVerdict) {
        let key = self.key;
        if let Some(p) = self.post {
            let job: Job = Box::new(move |core, now| core.auth_completed(key, verdict, now));
            p.post(self.shard, job);
        }
    }
}

/// The authenticator of a server without authentication.
#[derive(Debug, Default)]
pub struct NoAuth;

impl Authenticator for NoAuth {
    fn required(&self) -> bool {
        false
    }
    fn nonce_required(&self) -> bool {
        false
    }
    fn authenticate(&self, req: &AuthRequest<'_>, _later: AuthLater) -> AuthVerdict {
        let _ = req;
        AuthVerdict::Allow(Box::new(Identity::in_account(super::accounts::GLOBAL, "")))
    }
}
