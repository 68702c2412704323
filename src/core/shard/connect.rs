//! CONNECT and what follows it: asking the authenticator, binding the connection to its
//! account and identity (limits, permissions, expiry), a verdict that arrives later, and
//! re-checking connected clients after a reload (protocol.md §3; FEATURES.md §8).

use super::ShardCore;
use crate::core::auth::{AuthLater, AuthRequest, AuthVerdict, Denied, Identity, ProxyFailure, Recheck, WsCookies};
use crate::core::client::{ClosedState, ConnKey, Pause};
use crate::core::perms::Perms;
use crate::proto::reply;
use std::time::{Duration, Instant, SystemTime};

/// The first server PING goes out this long after CONNECT (plus up to 20%).
const FIRST_PING: Duration = Duration::from_secs(2);

pub const ERR_ACCOUNT_CONNECTIONS: &str = "maximum account active connections exceeded";
pub const ERR_AUTH_EXPIRED: &str = "User Authentication Expired";
pub const ERR_AUTH_REVOKED: &str = "User Authentication Revoked";
pub const ERR_ACCOUNT_EXPIRED: &str = "Account Authentication Expired";

/// The smaller of two limits where negative means unlimited.
pub(super) fn min_limit(a: i64, b: i64) -> i64 {
    match (a < 0, b < 0) {
        (true, _) => b,
        (_, true) => a,
        _ => a.min(b),
    }
}

/// A WebSocket client's cookies fill the CONNECT fields it left empty (nats-server's
/// `jwt_cookie`, `user_cookie`, `pass_cookie`, `token_cookie`).
fn apply_ws_cookies(opts: &mut crate::proto::connect::ClientOpts, c: &WsCookies) {
    for (field, cookie) in [
        (&mut opts.jwt, &c.jwt),
        (&mut opts.user, &c.user),
        (&mut opts.pass, &c.pass),
        (&mut opts.auth_token, &c.token),
    ] {
        if field.is_empty() && !cookie.is_empty() {
            cookie.clone_into(field);
        }
    }
}

impl ShardCore {
    pub(super) fn on_connect(&mut self, key: ConnKey, arg: &[u8], now: Instant) {
        let cfg = self.cfg.clone();
        let mut jitter = self.next_rand();
        let ping_interval = match self.client(key) {
            Some(c) => self.ping_interval_of(c),
            None => return,
        };
        let Some(c) = self.client_mut(key) else { return };
        c.rtt = Some(now.saturating_duration_since(c.start).max(Duration::from_nanos(1)));
        let first_ping = ping_interval.min(FIRST_PING);
        let fifth = (first_ping.as_nanos() / 5) as u64;
        if fifth > 0 {
            jitter %= fifth;
        } else {
            jitter = 0;
        }
        c.ping_at = now + first_ping + Duration::from_nanos(jitter);
        let first = !c.connect_received;
        c.connect_received = true;
        if let Err(e) = c.opts.apply_json(arg) {
            let label = c.label.clone();
            tracing::error!("{label} - {e}");
            self.close(key, ClosedState::ProtocolViolation);
            return;
        }
        c.headers = cfg.headers && c.opts.headers;
        if !first {
            // A second CONNECT drops the connection's subscriptions, as in nats-server.
            let sids: Vec<_> = c.subs.drain().map(|(_, s)| s).collect();
            for s in sids {
                self.remove_sub(s);
            }
        }
        if let Some(c) = self.client_mut(key) {
            if let Some(t) = c.transport.as_deref() {
                apply_ws_cookies(&mut c.opts, &t.ws_cookies);
            }
        }
        // A trusted proxy vouches first (nats-server's `proxyCheck`).
        let Some(c) = self.client(key) else { return };
        match self.authenticator_of(c).proxy_check(&c.opts, &c.nonce) {
            Ok(k) => {
                if let Some(c) = self.client_mut(key) {
                    c.proxy_key = k;
                }
            }
            Err(f) => {
                self.auth_denied(key, &Denied::proxy(f), now);
                return;
            }
        }
        let Some(c) = self.client(key) else { return };
        let later = AuthLater::new(self.idx, key, self.post.clone());
        let authenticator = self.authenticator_of(c);
        let req = AuthRequest {
            opts: &c.opts,
            nonce: &c.nonce,
            peer: c.peer,
            conn_type: Self::conn_type_of(c),
            cid: c.cid,
            shard: self.idx,
            key,
            trusted_proxy: c.proxy_key.as_deref(),
            tls: c.transport.as_deref().and_then(|t| t.tls.as_deref()),
        };
        match authenticator.authenticate(&req, later) {
            AuthVerdict::Allow(id) => self.connect_authorized(key, *id, first, now),
            AuthVerdict::Deny(d) => self.auth_denied(key, &d, now),
            AuthVerdict::Pending => {
                if let Some(c) = self.client_mut(key) {
                    // Input that follows waits for the verdict (see `auth_completed`).
                    // As in nats-server, CONNECT ends the authentication timeout: the
                    // pending verdict has its own deadline (the callout request's,
                    // the resolver fetch's).
                    c.pause = Pause::Auth;
                    c.auth_deadline = None;
                    c.auth_first = first;
                }
            }
        }
    }

    /// A verdict that came later (posted by [`AuthLater::complete`]).
    pub fn auth_completed(&mut self, key: ConnKey, verdict: AuthVerdict, now: Instant) {
        self.sync_accounts();
        let Some(c) = self.client_mut(key) else { return };
        if c.pause != Pause::Auth || c.closing.is_some() {
            return;
        }
        c.pause = Pause::Running;
        let first = c.auth_first;
        match verdict {
            AuthVerdict::Allow(id) => {
                self.connect_authorized(key, *id, first, now);
                if self.client(key).is_some_and(|c| c.closing.is_none()) {
                    self.resume(key, now);
                }
            }
            AuthVerdict::Deny(d) => self.auth_denied(key, &d, now),
            AuthVerdict::Pending => {
                if let Some(c) = self.client_mut(key) {
                    c.pause = Pause::Auth;
                }
            }
        }
        self.finish(now);
    }

    fn connect_authorized(&mut self, key: ConnKey, id: Identity, first: bool, now: Instant) {
        let Some(c) = self.client(key) else { return };
        if !c.opts.account.is_empty() || c.opts.new_account {
            self.auth_denied(key, &Denied::because(""), now);
            return;
        }
        if !self.bind_identity(key, id, now) {
            return;
        }
        let Some(c) = self.client_mut(key) else { return };
        c.awaiting_auth = false;
        c.auth_deadline = None;
        // As nats-server, the connect event goes out once authentication passed, before
        // the protocol checks below (which may close the connection again).
        self.notify_connected(key, now);
        let Some(c) = self.client(key) else { return };
        if c.closing.is_some() {
            return;
        }
        let opts = &c.opts;
        let (protocol, no_responders, verbose) = (opts.protocol, opts.no_responders, opts.verbose);
        if first {
            let account = self.table.get(c.account).map(|d| d.log_label()).unwrap_or_default();
            let label = connect_label(&c.label, opts, &account, auth_label(c).as_deref());
            if let (Some(label), Some(c)) = (label, self.client_mut(key)) {
                c.label = label;
            }
        }
        if !(0..=1).contains(&protocol) {
            self.send_err(key, reply::ERR_BAD_PROTOCOL, now);
            self.close(key, ClosedState::BadClientProtocolVersion);
            return;
        }
        let headers = self.client(key).is_some_and(|c| c.headers);
        if no_responders && !headers {
            self.send_err(key, reply::ERR_NO_RESPONDERS_HEADERS, now);
            self.close(key, ClosedState::NoRespondersRequiresHeaders);
            return;
        }
        if verbose {
            self.send_bytes(key, reply::OK, now);
        }
        self.schedule(key);
    }

    /// Bind the connection to `id`: its account (and that account's connection limit),
    /// limits, permissions and expiry. False if the connection was refused.
    fn bind_identity(&mut self, key: ConnKey, mut id: Identity, now: Instant) -> bool {
        id.proxy_key = self.client(key).and_then(|c| c.proxy_key.clone());
        // The authenticator may just have registered the account (operator mode).
        self.sync_accounts();
        let Some(def) = self.table.get(id.account).cloned() else {
            self.auth_denied(key, &Denied::because("Account not found"), now);
            return false;
        };
        if def.disabled {
            self.auth_denied(key, &Denied::because("Account disabled"), now);
            return false;
        }
        self.unbind_account(key);
        let n = def.conns.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
        if def.limits.max_connections >= 0 && n > def.limits.max_connections {
            def.conns.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            let label = self.label(key);
            tracing::error!("{label} - {ERR_ACCOUNT_CONNECTIONS}");
            self.send_err(key, ERR_ACCOUNT_CONNECTIONS, now);
            self.close(key, ClosedState::MaxAccountConnectionsExceeded);
            return false;
        }
        self.acct(id.account).conns += 1;
        let Some(c) = self.client_mut(key) else { return false };
        c.account = id.account;
        c.account_bound = true;
        // The server's own limits are applied where they are used (they may be reloaded).
        c.max_payload = min_limit(id.limits.max_payload, def.limits.max_payload);
        c.max_subs = min_limit(id.limits.max_subscriptions, def.limits.max_subscriptions);
        c.perms = id.permissions.clone().map(|p| Box::new(Perms::new(p)));
        c.expires_at = id.expires.map(|t| {
            let left = t.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO);
            now + left
        });
        c.identity = Some(Box::new(id));
        self.schedule(key);
        true
    }

    /// Undo [`Self::bind_identity`]'s accounting (close, or a second CONNECT).
    pub(super) fn unbind_account(&mut self, key: ConnKey) {
        let Some(c) = self.client_mut(key) else { return };
        if !c.account_bound {
            return;
        }
        c.account_bound = false;
        let acc = c.account;
        if let Some(def) = self.table.get(acc) {
            def.conns.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        } else if let Some(def) = self.shared.accounts.snapshot().get(acc) {
            def.conns.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        }
        let st = self.acct(acc);
        st.conns = st.conns.saturating_sub(1);
    }

    /// How nats-server names the credentials a client presented, in its logs.
    fn auth_user_text(&self, key: ConnKey) -> String {
        let Some(c) = self.client(key) else {
            return String::new();
        };
        let o = &c.opts;
        if !o.nkey.is_empty() {
            format!("Nkey {:?}", o.nkey)
        } else if !o.user.is_empty() {
            format!("User {:?}", o.user)
        } else if !o.jwt.is_empty() {
            let pk = c
                .identity
                .as_ref()
                .map(|i| i.user.clone())
                .unwrap_or_else(|| crate::proto::connect::jwt_subject(&o.jwt));
            format!("JWT User {pk:?}")
        } else if !o.auth_token.is_empty() {
            "Token \"[REDACTED]\"".to_string()
        } else {
            String::new()
        }
    }

    fn auth_denied(&mut self, key: ConnKey, d: &Denied, now: Instant) {
        if !d.detail.is_empty() && self.cfg.debug {
            let label = self.label(key);
            tracing::debug!("{label} - {}", d.detail);
        }
        if d.account_limit {
            let label = self.label(key);
            tracing::error!("{label} - {ERR_ACCOUNT_CONNECTIONS}");
            self.send_err(key, ERR_ACCOUNT_CONNECTIONS, now);
            self.close(key, ClosedState::MaxAccountConnectionsExceeded);
            return;
        }
        let state = match d.proxy {
            None => ClosedState::AuthenticationViolation,
            Some(ProxyFailure::NotTrusted) => ClosedState::ProxyNotTrusted,
            Some(ProxyFailure::Required) => ClosedState::ProxyRequired,
        };
        self.auth_violation_as(key, state, now);
    }

    pub(super) fn auth_violation(&mut self, key: ConnKey, now: Instant) {
        self.auth_violation_as(key, ClosedState::AuthenticationViolation, now);
    }

    /// `-ERR 'Authorization Violation'` and close with `state` (nats-server's
    /// `authViolation`: the client never learns more than that).
    fn auth_violation_as(&mut self, key: ConnKey, state: ClosedState, now: Instant) {
        self.notify_auth_failed(key, state, now);
        let label = self.label(key);
        let who = self.auth_user_text(key);
        if who.is_empty() {
            tracing::error!("{label} - authentication error");
        } else {
            tracing::error!("{label} - authentication error - {who}");
        }
        self.send_err(key, reply::ERR_AUTH_VIOLATION, now);
        self.close(key, state);
    }

    /// The user JWT of a connection expired.
    pub(super) fn auth_expired(&mut self, key: ConnKey, now: Instant) {
        if self.cfg.debug {
            let label = self.label(key);
            tracing::debug!("{label} - {ERR_AUTH_EXPIRED}");
        }
        self.send_err(key, ERR_AUTH_EXPIRED, now);
        self.close(key, ClosedState::AuthenticationExpired);
    }

    /// Check every connected client against the authenticator again (an account JWT
    /// changed: revocations, expiry, signing keys).
    pub fn recheck_clients(&mut self, now: Instant) {
        self.sync_accounts();
        self.recheck_auth(now);
        self.finish(now);
    }

    /// After a reload or an account change: check every authenticated client again, as
    /// nats-server's `reloadAuthorization` does. A client whose user was removed is closed
    /// quietly; one whose credentials no longer match gets `-ERR 'Authorization
    /// Violation'`; the others take their (possibly new) account, permissions and limits.
    pub(super) fn recheck_auth(&mut self, now: Instant) {
        let verdicts: Vec<(ConnKey, Option<Recheck>)> = self
            .clients
            .iter()
            .filter(|(_, c)| c.closing.is_none() && c.connect_received && !c.awaiting_auth && !c.internal)
            .map(|(i, c)| {
                let key = ConnKey {
                    idx: i as u32,
                    gen: c.gen,
                };
                let auth = self.authenticator_of(c);
                let v = match (&c.proxy_key, c.identity.as_deref()) {
                    // The proxy it came through is no longer trusted.
                    (Some(k), Some(_)) if !auth.proxy_trusted(k) => Some(Recheck::Proxy(ProxyFailure::NotTrusted)),
                    (_, id) => id.and_then(|id| auth.recheck(&c.opts, id)),
                };
                (key, v)
            })
            .collect();
        for (key, v) in verdicts {
            match v {
                None => {}
                Some(Recheck::Violation) => self.auth_violation(key, now),
                Some(Recheck::Removed) => self.close(key, ClosedState::ClientClosed),
                Some(Recheck::Rebind(id)) => self.rebind(key, *id, now),
                Some(Recheck::Revoked) => {
                    self.send_err(key, ERR_AUTH_REVOKED, now);
                    self.close(key, ClosedState::Revocation);
                }
                Some(Recheck::AccountExpired) => {
                    self.send_err(key, ERR_ACCOUNT_EXPIRED, now);
                    self.close(key, ClosedState::AuthenticationExpired);
                }
                Some(Recheck::Proxy(f)) => self.auth_denied(key, &Denied::proxy(f), now),
            }
        }
    }

    /// Apply a new identity to a connected client: a changed account drops its
    /// subscriptions (they belong to the old account's subject space); permissions and
    /// limits are replaced.
    fn rebind(&mut self, key: ConnKey, id: Identity, now: Instant) {
        let Some(c) = self.client(key) else { return };
        if c.account != id.account {
            // nats-server closes a client whose user moved to another account; it
            // reconnects into the new one.
            self.close(key, ClosedState::ClientClosed);
            return;
        }
        let unchanged = c.identity.as_deref().is_some_and(|cur| {
            cur.permissions == id.permissions && cur.limits == id.limits && cur.expires == id.expires
        });
        if unchanged {
            return;
        }
        if !self.bind_identity(key, id, now) {
            return;
        }
        self.drop_unpermitted_subs(key, now);
    }

    /// After permissions changed: subscriptions they no longer allow are removed, each
    /// with `-ERR 'Permissions Violation for Subscription to "<subject>" (sid "<sid>")'`.
    fn drop_unpermitted_subs(&mut self, key: ConnKey, now: Instant) {
        let Some(c) = self.client(key) else { return };
        let mut sids: Vec<(Box<[u8]>, crate::core::client::SubId)> =
            c.subs.iter().map(|(k, v)| (k.clone(), *v)).collect();
        sids.sort_by_key(|(_, id)| *id);
        let mut removed = Vec::new();
        for (sid, id) in sids {
            let Some(sub) = self.subs.get(id as usize) else {
                continue;
            };
            let (subject, queue) = (sub.subject.clone(), sub.queue.clone());
            let Some(c) = self.client_mut(key) else { return };
            let Some(p) = c.perms.as_mut() else { return };
            let plain = p.can_subscribe(&subject, None);
            let queued = queue.as_deref().is_some_and(|q| p.can_subscribe(&subject, Some(q)));
            if !plain && !queued {
                c.subs.remove(&sid);
                removed.push((id, subject, sid));
            }
        }
        let who = self.auth_user_text(key);
        for (id, subject, sid) in removed {
            self.remove_sub(id);
            let text = format!(
                "Permissions Violation for Subscription to {} (sid {})",
                reply::go_quote(&subject),
                reply::go_quote(&sid)
            );
            self.send_err(key, &text, now);
            tracing::info!(
                "Removed sub {} (sid {}) for {who} - not authorized",
                reply::go_quote(&subject),
                reply::go_quote(&sid)
            );
        }
    }
}

/// How nats-server names the credentials a client logged in with, in its log label:
/// `nkey:<key>`, `user:<name>`, `jwt:<user key>` or `token`, from what CONNECT carried
/// (the no-auth user when it carried nothing and one was assigned). `None` without any.
fn auth_label(c: &crate::core::client::Client) -> Option<String> {
    let o = &c.opts;
    let user = c.identity.as_ref().map(|id| id.user.as_str()).unwrap_or_default();
    if !o.nkey.is_empty() {
        Some(format!("nkey:{}", o.nkey))
    } else if !o.user.is_empty() {
        Some(format!("user:{}", o.user))
    } else if !o.jwt.is_empty() {
        Some(format!("jwt:{user}"))
    } else if !o.auth_token.is_empty() {
        Some("token".to_string())
    } else if !user.is_empty() {
        Some(format!("user:{user}"))
    } else {
        None
    }
}

/// The log label of a client once its first CONNECT is accepted, as nats-server extends
/// it: `<label> - "<version>:<lang>:<name>" - "<account>/<credentials>"`, each part only
/// when it has something (`None`: the label stays).
fn connect_label(
    label: &str,
    opts: &crate::proto::connect::ClientOpts,
    account: &str,
    auth: Option<&str>,
) -> Option<String> {
    let mut ncs = String::new();
    if !opts.version.is_empty() {
        ncs = format!("v{}", opts.version);
    }
    for part in [&opts.lang, &opts.name] {
        if !part.is_empty() {
            if !ncs.is_empty() {
                ncs.push(':');
            }
            ncs.push_str(part);
        }
    }
    let mut out = String::from(label);
    if !ncs.is_empty() {
        out.push_str(" - ");
        out.push_str(&reply::go_quote(ncs.as_bytes()));
    }
    if let Some(auth) = auth {
        out.push_str(" - ");
        out.push_str(&reply::go_quote(format!("{account}/{auth}").as_bytes()));
    }
    (out.len() > label.len()).then_some(out)
}
