//! Operator (decentralized JWT) mode: users present a user JWT and sign the server's
//! nonce; the user's account JWT comes from the account resolver and must be issued by a
//! trusted operator; signing keys, scoped templates, revocations, source networks,
//! connect times, bearer tokens, limits and permissions come from the claims, as
//! nats-server's `processClientOrLeafAuthentication` decides (FEATURES.md §8).
//!
//! - [`accounts`]: account JWTs to accounts (registry), activation tokens.
//! - [`user`]: the checks of one user JWT against its account.
//!
//! A resolver that needs the network (URL) answers later: the CONNECT waits (the
//! connection is paused, the auth timeout runs) while a resolver thread fetches.

pub mod accounts;
pub mod user;

use crate::auth::jwt;
use crate::core::auth::{AuthLater, AuthRequest, AuthVerdict, Authenticator, Denied, Identity, Recheck};
use crate::proto::connect::ClientOpts;
use accounts::{unix_now, AccountError, OperatorAccounts};
use std::collections::HashSet;
use std::sync::Arc;

/// The authenticator of operator mode.
#[derive(Debug)]
pub struct OperatorAuthenticator {
    pub accounts: Arc<OperatorAccounts>,
    /// `resolver_pinned_accounts`: only these accounts' users may connect (empty: all).
    pub pinned: HashSet<String>,
    /// `default_sentinel`: the bearer user JWT for clients without one.
    pub default_sentinel: Option<String>,
}

impl OperatorAuthenticator {
    /// The user JWT a client presented (or the sentinel), decoded.
    fn user_claims(&self, opts: &ClientOpts) -> Result<(jwt::UserClaims, String), Denied> {
        let mut token = opts.jwt.clone();
        if jwt::decode_user(&token).is_err() {
            match &self.default_sentinel {
                Some(s) => token = s.clone(),
                None if opts.jwt.is_empty() => return Err(Denied::because("Authentication requires a user JWT")),
                None => {}
            }
        }
        let claims = jwt::decode_user(&token).map_err(|e| Denied::because(format!("User JWT not valid: {e}")))?;
        if claims.nats.limits.proxy_required {
            return Err(Denied::because("proxy required"));
        }
        claims
            .validate(unix_now())
            .map_err(|e| Denied::because(format!("User JWT no longer valid: {e}")))?;
        Ok((claims, token))
    }

    /// Decide with the account known (or fetched synchronously).
    fn decide(&self, req: &DecideInput) -> Result<Identity, Denied> {
        let table = self.accounts.ensure(&req.account).map_err(|e| match e {
            AccountError::NotFound => Denied::because(format!("Account JWT lookup error: {e}")),
            AccountError::Untrusted => Denied::because("Account JWT not signed by trusted operator"),
            AccountError::Invalid(why) => Denied::because(format!("Account JWT lookup error: {why}")),
        })?;
        let known = self
            .accounts
            .known(&req.account)
            .ok_or_else(|| Denied::because("Account JWT lookup error: account not found"))?;
        let id = table
            .by_name(&req.account)
            .map(|d| d.id)
            .ok_or_else(|| Denied::because("Account JWT lookup error: account not found"))?;
        user::check(
            &req.user,
            &req.token,
            &known.claims,
            id,
            &req.nonce,
            &req.sig,
            req.peer,
            req.conn_type,
        )
    }
}

/// What a decision needs, owned (it may run on a resolver thread).
struct DecideInput {
    user: jwt::UserClaims,
    token: String,
    account: String,
    nonce: String,
    sig: String,
    peer: std::net::SocketAddr,
    conn_type: crate::core::auth::ConnType,
}

impl Authenticator for OperatorAuthenticator {
    fn required(&self) -> bool {
        true
    }

    fn nonce_required(&self) -> bool {
        true
    }

    fn authenticate(&self, req: &AuthRequest<'_>, later: AuthLater) -> AuthVerdict {
        let (user, token) = match self.user_claims(req.opts) {
            Ok(u) => u,
            Err(d) => return AuthVerdict::Deny(d),
        };
        let account = user.account().to_string();
        if !self.pinned.is_empty() && !self.pinned.contains(&account) {
            return AuthVerdict::Deny(Denied::because(format!(
                "Account {account} not listed as operator pinned account"
            )));
        }
        let input = DecideInput {
            user,
            token,
            account: account.clone(),
            nonce: req.nonce.to_string(),
            sig: req.opts.sig.clone(),
            peer: req.peer,
            conn_type: req.conn_type,
        };
        let known = self.accounts.known(&account).is_some();
        if known || !self.accounts.resolver.is_remote() || !later.can_wait() {
            return match self.decide(&input) {
                Ok(id) => AuthVerdict::Allow(Box::new(id)),
                Err(d) => AuthVerdict::Deny(d),
            };
        }
        // The account comes over the network: fetch on a resolver thread, then decide
        // there and post the verdict back to the connection's shard.
        let accounts = self.accounts.clone();
        let me = OperatorAuthenticator {
            accounts: self.accounts.clone(),
            pinned: self.pinned.clone(),
            default_sentinel: self.default_sentinel.clone(),
        };
        self.accounts.resolver.fetch(
            &account,
            Box::new(move |found| {
                let verdict = match found.map(|t| (accounts.verify(&input.account, &t), t)) {
                    Some((Ok(claims), t)) => {
                        accounts.update(&input.account, claims, &t);
                        match me.decide(&input) {
                            Ok(id) => AuthVerdict::Allow(Box::new(id)),
                            Err(d) => AuthVerdict::Deny(d),
                        }
                    }
                    Some((Err(e), _)) => AuthVerdict::Deny(Denied::because(format!("Account JWT lookup error: {e}"))),
                    None => AuthVerdict::Deny(Denied::because("Account JWT lookup error: account not found")),
                };
                later.complete(verdict);
            }),
        );
        AuthVerdict::Pending
    }

    /// After an account update or a reload: users whose JWT is revoked or whose account
    /// is gone or expired are closed; the rest keep their identity with the account's
    /// new limits applied when they reconnect (nats-server re-checks the same way).
    fn recheck(&self, opts: &ClientOpts, current: &Identity) -> Option<Recheck> {
        let user = jwt::decode_user(current.jwt.as_deref().unwrap_or(&opts.jwt)).ok()?;
        let account = user.account().to_string();
        let Some(known) = self.accounts.known(&account) else {
            return Some(Recheck::Violation);
        };
        if user.nats.limits.bearer_token && known.claims.nats.limits.account.disallow_bearer {
            return Some(Recheck::Violation);
        }
        if known.claims.is_user_revoked(&user) {
            return Some(Recheck::Revoked);
        }
        let expired = known.claims.claims.expires != 0 && known.claims.claims.expires <= unix_now() as i64;
        if expired {
            return Some(Recheck::AccountExpired);
        }
        if !known.claims.did_sign(&user.claims.issuer, &user.nats.issuer_account) {
            return Some(Recheck::Violation);
        }
        None
    }
}
