//! Auth callout (`authorization { auth_callout { issuer, account, auth_users, xkey,
//! allowed_accounts } }`): the server asks an external service on `$SYS.REQ.USER.AUTH`
//! who a connecting client is. The request is an authorization request JWT signed by the
//! server's key (sealed to the service's xkey when one is configured, with the server's
//! xkey in `Nats-Server-Xkey`); the response is an authorization response JWT carrying
//! a user JWT for a fresh user key, issued by the configured issuer, naming the target
//! account in its audience (FEATURES.md §8; nats-server's `processClientOrLeafCallout`).
//!
//! The request is made by the connection's own shard with an internal request
//! (`ShardCore::request_internal`); the connection waits paused, and the verdict is
//! applied on the same shard when the response (or the auth timeout) comes.

use crate::auth::jwt::{self, AuthorizationRequestClaims, Encode};
use crate::auth::operator::accounts::{unix_now, OperatorAccounts};
use crate::auth::operator::user::perm_spec;
use crate::core::accounts::{AccountId, GLOBAL};
use crate::core::auth::{AuthLater, AuthRequest, AuthVerdict, Authenticator, Denied, Identity, Recheck, UserLimits};
use crate::core::client::ConnKey;
use crate::core::shard::internal::InternalMsg;
use crate::core::shard::ShardCore;
use crate::proto::connect::ClientOpts;
use crate::proto::headers;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Where callout requests go.
pub const AUTH_CALLOUT_SUBJECT: &str = "$SYS.REQ.USER.AUTH";
/// The audience of every authorization request.
pub const AUTH_REQUEST_AUDIENCE: &str = "nats-authorization-request";
/// The header carrying the server's xkey on sealed requests.
pub const XKEY_HEADER: &str = "Nats-Server-Xkey";

/// The server's own keys and description, as requests carry them.
pub struct ServerKeys {
    pub signer: nkeys::KeyPair,
    pub xkey: nkeys::XKey,
    pub id: String,
    pub name: String,
    pub host: String,
    pub version: String,
}

impl std::fmt::Debug for ServerKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerKeys").field("id", &self.id).finish()
    }
}

/// The configured callout, resolved.
#[derive(Debug, Clone)]
pub struct CalloutConfig {
    /// Public account key that signs the responses' user JWTs.
    pub issuer: String,
    /// The account requests are published in.
    pub account: AccountId,
    pub account_name: String,
    /// Users (names or nkeys) that authenticate normally (the service's own).
    pub auth_users: HashSet<String>,
    /// The service's public xkey: requests are sealed to it.
    pub xkey: Option<String>,
    /// Accounts whose users go through the callout (empty: all).
    pub allowed_accounts: Vec<String>,
}

/// Config-mode authentication with a callout in front.
#[derive(Debug)]
pub struct CalloutAuthenticator {
    pub inner: Arc<dyn Authenticator>,
    /// The server's shared state (account names for `allowed_accounts`).
    pub shared: Arc<crate::core::stats::Shared>,
    pub cfg: CalloutConfig,
    pub keys: Arc<ServerKeys>,
    pub timeout: Duration,
}

/// nats-server's `getRawAuthUser`: the nkey, else the user name, else the JWT's subject.
fn raw_auth_user(o: &ClientOpts) -> String {
    if !o.nkey.is_empty() {
        o.nkey.clone()
    } else if !o.user.is_empty() {
        o.user.clone()
    } else if !o.jwt.is_empty() {
        crate::proto::connect::jwt_subject(&o.jwt)
    } else if !o.auth_token.is_empty() {
        "[REDACTED]".into()
    } else {
        String::new()
    }
}

/// `err` with its first letter upper-cased, as nats-server logs callout failures.
fn title(err: &str) -> String {
    let mut c = err.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// What a request needs from the CONNECT, owned (it crosses to the shard's job).
struct Pending {
    key: ConnKey,
    opts: ClientOpts,
    nonce: String,
    host: String,
    cid: u64,
}

/// One callout request: the configuration it runs under (in operator mode taken from
/// the account JWT of the connecting user) and the server's keys.
struct Request {
    cfg: CalloutConfig,
    keys: Arc<ServerKeys>,
    timeout: Duration,
    /// Operator mode: the accounts, for signing keys and placement.
    operator: Option<Arc<OperatorAccounts>>,
}

impl Request {
    fn request_claims(&self, p: &Pending, user_nkey: &str) -> AuthorizationRequestClaims {
        let mut c = AuthorizationRequestClaims::new(self.cfg.issuer.clone());
        c.claims.audience = AUTH_REQUEST_AUDIENCE.into();
        c.claims.expires = (unix_now() + self.timeout.as_secs().max(1)) as i64;
        let n = &mut c.nats;
        n.user_nkey = user_nkey.to_string();
        n.server = jwt::ServerId {
            name: self.keys.name.clone(),
            host: self.keys.host.clone(),
            id: self.keys.id.clone(),
            version: self.keys.version.clone(),
            xkey: if self.cfg.xkey.is_some() {
                self.keys.xkey.public_key()
            } else {
                String::new()
            },
            ..Default::default()
        };
        let o = &p.opts;
        n.client_information = jwt::ClientInformation {
            host: p.host.clone(),
            id: p.cid,
            user: raw_auth_user(o),
            name: o.name.clone(),
            kind: "Client".into(),
            client_type: "nats".into(),
            nonce: if o.sig.is_empty() {
                String::new()
            } else {
                p.nonce.clone()
            },
            ..Default::default()
        };
        n.connect_options = jwt::ConnectOptions {
            jwt: o.jwt.clone(),
            nkey: o.nkey.clone(),
            signed_nonce: o.sig.clone(),
            token: o.auth_token.clone(),
            username: o.user.clone(),
            password: o.pass.clone(),
            name: o.name.clone(),
            lang: o.lang.clone(),
            version: o.version.clone(),
            protocol: o.protocol,
        };
        c
    }

    /// The verdict on a response (or on none: the timeout).
    fn verdict(&self, core: &ShardCore, msg: Option<InternalMsg>, user_nkey: &str) -> Result<Identity, String> {
        let account = &self.cfg.account_name;
        let Some(m) = msg else {
            return Err(format!(
                "Authorization callout response not received in time on account {account:?}"
            ));
        };
        let mut body = m.payload;
        let body_start: Vec<u8> = body.iter().take(3).copied().collect();
        if body.is_empty() {
            return Err(format!(
                "auth callout violation: {:?} on account {account:?}",
                "no reason supplied"
            ));
        }
        if let Some(service) = &self.cfg.xkey {
            if !body.starts_with(b"eyJ") {
                let sender = nkeys::XKey::from_public_key(service).map_err(|e| e.to_string())?;
                body = self
                    .keys
                    .xkey
                    .open(&body, &sender)
                    .map_err(|e| format!("error decrypting auth callout response on account {account:?}: {e}"))?;
            }
        }
        let encrypted = self.cfg.xkey.is_some() && !text_is_jwt(&body_start);
        let text = String::from_utf8(body).map_err(|e| e.to_string())?;
        let cr = jwt::decode_authorization_response(&text).map_err(|e| e.to_string())?;
        if let Some(issue) = cr.validation(unix_now()).issues.first() {
            return Err(format!(
                "authorization response had validation errors: {}",
                issue.description
            ));
        }
        if cr.claims.subject != user_nkey {
            return Err("auth callout violation: auth callout response is not for expected user".into());
        }
        if cr.claims.audience != self.keys.id {
            return Err("auth callout violation: auth callout response is not for server".into());
        }
        if !cr.nats.error.is_empty() {
            return Err(format!("auth callout service returned an error: {}", cr.nats.error));
        }
        let account_claims = self
            .operator
            .as_ref()
            .and_then(|o| o.known(&self.cfg.issuer))
            .map(|k| k.claims);
        if let (Some(ac), false) = (&account_claims, encrypted) {
            let pk = if cr.nats.issuer_account.is_empty() {
                &cr.claims.issuer
            } else {
                &cr.nats.issuer_account
            };
            if *pk != ac.claims.subject && !ac.nats.signing_keys.contains(pk) {
                return Err("auth callout signing key is unknown".into());
            }
        }
        let arc = jwt::decode_user(&cr.nats.jwt).map_err(|e| e.to_string())?;
        if let Some(issue) = arc.validation(unix_now()).issues.first() {
            return Err(format!("Error validating user JWT: {}", issue.description));
        }
        if arc.claims.subject != user_nkey {
            return Err(format!(
                "Expected authorized user of {user_nkey:?} but got {:?} on account {account:?}",
                arc.claims.subject
            ));
        }
        if let Some(ops) = &self.operator {
            return self.operator_identity(core, ops, &arc);
        }
        if !arc.nats.issuer_account.is_empty() {
            return Err(format!(
                "error non operator mode account {account:?}: attempted to use issuer_account"
            ));
        }
        if arc.claims.issuer != self.cfg.issuer {
            return Err(format!(
                "wrong issuer for auth callout response on account {account:?}, expected {:?} got {:?}",
                self.cfg.issuer, arc.claims.issuer
            ));
        }
        // The account: named by the user JWT's audience (config mode), else the
        // callout's own.
        let placement = if arc.claims.audience.is_empty() {
            GLOBAL
        } else {
            core.account_table()
                .by_name(&arc.claims.audience)
                .map(|d| d.id)
                .ok_or_else(|| {
                    format!(
                        "no valid account {:?} for auth callout response on account {account:?}: account not found",
                        arc.claims.audience
                    )
                })?
        };
        Ok(self.identity(&arc, &arc.nats.limits, placement))
    }

    /// Operator mode: the user JWT is issued by the callout's account (or an allowed
    /// one), which is where the user goes; a scoped signing key's template applies.
    fn operator_identity(
        &self,
        core: &ShardCore,
        ops: &Arc<OperatorAccounts>,
        arc: &jwt::UserClaims,
    ) -> Result<Identity, String> {
        let account = &self.cfg.account_name;
        let jwt_issuer = if arc.nats.issuer_account.is_empty() {
            &arc.claims.issuer
        } else {
            &arc.nats.issuer_account
        };
        if *jwt_issuer != self.cfg.issuer && !self.cfg.allowed_accounts.iter().any(|a| a == "*" || a == jwt_issuer) {
            return Err(format!(
                "account {:?} not permitted as valid account option for auth callout for account {account:?}",
                arc.claims.issuer
            ));
        }
        let table = ops.ensure(jwt_issuer).map_err(|e| {
            format!("no valid account {jwt_issuer:?} for auth callout response on account {account:?}: {e}")
        })?;
        let placement = table.by_name(jwt_issuer).map(|d| d.id).unwrap_or(GLOBAL);
        let target = ops.known(jwt_issuer).ok_or_else(|| {
            format!("no valid account {jwt_issuer:?} for auth callout response on account {account:?}")
        })?;
        let mut limits = arc.nats.limits.clone();
        match target.claims.nats.signing_keys.get(&arc.claims.issuer) {
            None if arc.claims.issuer != target.claims.claims.subject => {
                return Err(format!("user JWT issuer {:?} is not known", arc.claims.issuer));
            }
            Some(Some(scope)) => {
                scope
                    .validate_scoped_signer(arc)
                    .map_err(|e| format!("user JWT is not valid: {e}"))?;
                limits = jwt::apply_user_template(
                    &scope.template,
                    arc,
                    jwt::TemplateAccount {
                        name: &target.claims.claims.name,
                        tags: &target.claims.nats.generic.tags,
                    },
                )
                .map_err(|e| format!("user JWT generated invalid permissions: {e}"))?;
            }
            _ => {}
        }
        let _ = core;
        Ok(self.identity(arc, &limits, placement))
    }

    /// The identity of an admitted callout user.
    fn identity(&self, arc: &jwt::UserClaims, limits: &jwt::UserPermissionLimits, placement: AccountId) -> Identity {
        let expires =
            (arc.claims.expires > 0).then(|| SystemTime::UNIX_EPOCH + Duration::from_secs(arc.claims.expires as u64));
        let user = if arc.claims.name.is_empty() {
            arc.claims.subject.clone()
        } else {
            arc.claims.name.clone()
        };
        let mut permissions = perm_spec(&limits.permissions);
        if placement == self.cfg.account {
            // Users placed in the callout account may not impersonate the server.
            permissions
                .get_or_insert_with(Default::default)
                .add_publish_deny(&[AUTH_CALLOUT_SUBJECT]);
        }
        Identity {
            account: placement,
            user,
            permissions,
            limits: UserLimits {
                max_subscriptions: limits.limits.nats.subs,
                max_payload: limits.limits.nats.payload,
                max_data: limits.limits.nats.data,
            },
            expires,
            name_tag: arc.claims.name.clone(),
            tags: arc.nats.generic.tags.clone(),
            issuer_key: String::new(),
            jwt: None,
        }
    }

    /// Publish the request from the connection's shard; the verdict is applied there.
    fn start(self: Arc<Self>, p: Pending, later: AuthLater) -> AuthVerdict {
        let started = later.run_on_shard(Box::new(move |core: &mut ShardCore, now: Instant| {
            let user_kp = nkeys::KeyPair::new_user();
            let user_nkey = user_kp.public_key();
            let claims = self.request_claims(&p, &user_nkey);
            let Ok(token) = claims.encode(&self.keys.signer, unix_now()) else {
                core.auth_completed(
                    p.key,
                    AuthVerdict::Deny(Denied::because("Error encoding auth request claim")),
                    now,
                );
                return;
            };
            let mut body = token.into_bytes();
            let mut header = None;
            if let Some(service) = &self.cfg.xkey {
                let sealed = nkeys::XKey::from_public_key(service)
                    .ok()
                    .and_then(|r| self.keys.xkey.seal(&body, &r).ok());
                let Some(sealed) = sealed else {
                    core.auth_completed(
                        p.key,
                        AuthVerdict::Deny(Denied::because("Error encrypting auth request claim")),
                        now,
                    );
                    return;
                };
                body = sealed;
                header = Some(headers::with(None, XKEY_HEADER, &self.keys.xkey.public_key()));
            }
            let key = p.key;
            let me = self.clone();
            let on_reply = Box::new(move |core: &mut ShardCore, m: Option<InternalMsg>, now: Instant| {
                let verdict = match me.verdict(core, m, &user_nkey) {
                    Ok(id) => AuthVerdict::Allow(Box::new(id)),
                    Err(e) => {
                        tracing::warn!("{}", title(&e));
                        AuthVerdict::Deny(Denied::because(""))
                    }
                };
                core.auth_completed(key, verdict, now);
            });
            let acc = self.cfg.account;
            core.request_internal(
                acc,
                AUTH_CALLOUT_SUBJECT.as_bytes(),
                header.as_deref(),
                &body,
                self.timeout,
                on_reply,
                now,
            );
        }));
        if started {
            AuthVerdict::Pending
        } else {
            AuthVerdict::Deny(Denied::because("auth callout unavailable"))
        }
    }
}

/// The callout authenticator behind an `Arc` (the request keeps it alive).
#[derive(Debug)]
pub struct Callout(pub Arc<CalloutAuthenticator>);

impl Authenticator for Callout {
    fn required(&self) -> bool {
        true
    }

    fn nonce_required(&self) -> bool {
        self.0.inner.nonce_required()
    }

    fn authenticate(&self, req: &AuthRequest<'_>, later: AuthLater) -> AuthVerdict {
        let me = &self.0;
        let user = raw_auth_user(req.opts);
        if me.cfg.auth_users.contains(&user) {
            // The service's own users authenticate as configured; in the callout account
            // they may not publish requests in the server's name.
            return match me.inner.authenticate(req, AuthLater::new(req.shard, req.key, None)) {
                AuthVerdict::Allow(mut id) => {
                    if id.account == me.cfg.account {
                        id.permissions
                            .get_or_insert_with(Default::default)
                            .add_publish_deny(&[AUTH_CALLOUT_SUBJECT]);
                    }
                    AuthVerdict::Allow(id)
                }
                other => other,
            };
        }
        if !me.cfg.allowed_accounts.is_empty() {
            // Only users of the listed accounts go through the callout; others keep the
            // configured verdict.
            if let AuthVerdict::Allow(id) = me.inner.authenticate(req, AuthLater::new(req.shard, req.key, None)) {
                let name = me.shared.accounts.snapshot().name(id.account).to_string();
                if id.account != GLOBAL && !me.cfg.allowed_accounts.contains(&name) {
                    return AuthVerdict::Allow(id);
                }
            }
        }
        if !later.can_wait() {
            return AuthVerdict::Deny(Denied::because("auth callout needs a runtime"));
        }
        let p = Pending {
            key: req.key,
            opts: req.opts.clone(),
            nonce: req.nonce.to_string(),
            host: req.peer.ip().to_string(),
            cid: req.cid,
        };
        let req = Arc::new(Request {
            cfg: me.cfg.clone(),
            keys: me.keys.clone(),
            timeout: me.timeout,
            operator: None,
        });
        req.start(p, later)
    }

    fn recheck(&self, opts: &ClientOpts, current: &Identity) -> Option<Recheck> {
        // Users admitted by the service stay; the service's own users follow the config.
        if self.0.cfg.auth_users.contains(&raw_auth_user(opts)) {
            return self.0.inner.recheck(opts, current);
        }
        None
    }
}

/// Does a response body start like a JWT (`eyJ`, base64 of `{"`)?
fn text_is_jwt(start: &[u8]) -> bool {
    start == b"eyJ"
}

/// Operator mode: an account JWT with external authorization (`authorization {
/// auth_users, allowed_accounts, xkey }`) sends its users, but for its auth users, to a
/// callout in that account; everything else is the operator authenticator's.
#[derive(Debug)]
pub struct OperatorCallout {
    pub inner: Arc<crate::auth::operator::OperatorAuthenticator>,
    pub keys: Arc<ServerKeys>,
    pub timeout: Duration,
}

impl OperatorCallout {
    /// The callout configuration of the account a CONNECT's user JWT belongs to, if that
    /// account delegates to a callout and the user is not one of its auth users.
    fn delegated(&self, opts: &ClientOpts) -> Option<(CalloutConfig, Arc<OperatorAccounts>)> {
        let ops = self.inner.accounts.clone();
        let token = if jwt::decode_user(&opts.jwt).is_ok() {
            opts.jwt.clone()
        } else {
            self.inner.default_sentinel.clone()?
        };
        let user = jwt::decode_user(&token).ok()?;
        let account = user.account().to_string();
        if ops.resolver.is_remote() && ops.known(&account).is_none() {
            return None;
        }
        let table = ops.ensure(&account).ok()?;
        let known = ops.known(&account)?;
        let ext = &known.claims.nats.authorization;
        if !ext.is_enabled() || ext.auth_users.contains(&user.claims.subject) {
            return None;
        }
        let id = table.by_name(&account)?.id;
        let cfg = CalloutConfig {
            issuer: account.clone(),
            account: id,
            account_name: account,
            auth_users: ext.auth_users.iter().cloned().collect(),
            xkey: (!ext.xkey.is_empty()).then(|| ext.xkey.clone()),
            allowed_accounts: ext.allowed_accounts.clone(),
        };
        Some((cfg, ops))
    }
}

impl Authenticator for OperatorCallout {
    fn required(&self) -> bool {
        true
    }

    fn nonce_required(&self) -> bool {
        true
    }

    fn authenticate(&self, req: &AuthRequest<'_>, later: AuthLater) -> AuthVerdict {
        let Some((cfg, ops)) = self.delegated(req.opts) else {
            return self.inner.authenticate(req, later);
        };
        if !later.can_wait() {
            return AuthVerdict::Deny(Denied::because("auth callout needs a runtime"));
        }
        let p = Pending {
            key: req.key,
            opts: req.opts.clone(),
            nonce: req.nonce.to_string(),
            host: req.peer.ip().to_string(),
            cid: req.cid,
        };
        let r = Arc::new(Request {
            cfg,
            keys: self.keys.clone(),
            timeout: self.timeout,
            operator: Some(ops),
        });
        r.start(p, later)
    }

    fn recheck(&self, opts: &ClientOpts, current: &Identity) -> Option<Recheck> {
        // Admitted by a callout (no JWT of its own): kept.
        current.jwt.as_ref()?;
        self.inner.recheck(opts, current)
    }
}
