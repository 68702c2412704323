//! Configured users (config mode): a token, a single user, users with passwords, users
//! with nkeys, `no_auth_user`, each bound to an account with optional permissions and
//! allowed connection types — nats-server's `processClientOrLeafAuthentication` without
//! JWTs (FEATURES.md §8).
//!
//! Ownership: a [`UserDirectory`] is built once per configuration (startup, reload) and
//! shared read-only by every shard through the [`ConfigAuthenticator`].

use super::secret::password_matches;
use crate::core::accounts::{AccountId, GLOBAL};
use crate::core::auth::{
    AuthLater, AuthRequest, AuthVerdict, Authenticator, ConnType, Denied, Identity, ProxyFailure, Recheck,
};
use crate::core::perms::PermSpec;
use crate::proto::connect::ClientOpts;
use std::collections::HashMap;

/// A user with a password (plain or bcrypt).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasswordUser {
    pub name: String,
    pub password: String,
    pub account: AccountId,
    pub permissions: Option<PermSpec>,
    /// Empty: every type.
    pub conn_types: Vec<ConnType>,
    /// Only through a trusted proxy.
    pub proxy_required: bool,
}

/// A user identified by its public nkey.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NkeyUser {
    pub nkey: String,
    pub account: AccountId,
    pub permissions: Option<PermSpec>,
    pub conn_types: Vec<ConnType>,
    /// Only through a trusted proxy.
    pub proxy_required: bool,
}

/// Everything config mode knows about users.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserDirectory {
    /// `authorization { token }` / `--auth`.
    pub token: Option<String>,
    /// `authorization { user, password }` / `--user --pass`.
    pub single: Option<(String, String)>,
    pub users: HashMap<String, PasswordUser>,
    pub nkeys: HashMap<String, NkeyUser>,
    /// Connections without credentials become this user (a name or an nkey).
    pub no_auth_user: Option<String>,
    /// Permissions of the token or single user (`authorization { permissions }`).
    pub default_permissions: Option<PermSpec>,
    /// A `users` list was configured, even an empty one (nats-server then requires
    /// authentication and, with no users, admits nobody).
    pub listed: bool,
    /// `no_auth_user` is the server's own hidden user (a system account with users and
    /// nothing else configured): INFO keeps saying authentication is required.
    pub hidden_no_auth_user: bool,
    /// `authorization { proxy_required }`: the token or single user only through a
    /// trusted proxy.
    pub proxy_required: bool,
    /// `tls { verify_and_map }`: users are named by the client certificate.
    pub tls_map: bool,
}

impl UserDirectory {
    /// Anything configured at all (INFO `auth_required`).
    pub fn required(&self) -> bool {
        self.listed || self.token.is_some() || self.single.is_some() || !self.users.is_empty() || !self.nkeys.is_empty()
    }
}

fn type_allowed(allowed: &[ConnType], t: ConnType) -> bool {
    allowed.is_empty() || allowed.contains(&t)
}

/// Verify `sig` (base64url, or standard base64 as a fallback) over `nonce` by `pubkey`.
pub fn verify_nonce_signature(pubkey: &str, nonce: &str, sig: &str) -> Result<(), &'static str> {
    if sig.is_empty() {
        return Err("Signature missing");
    }
    let raw = decode_sig(sig).ok_or("Signature not valid base64")?;
    let kp = nkeys::KeyPair::from_public_key(pubkey).map_err(|_| "User nkey not valid")?;
    kp.verify(nonce.as_bytes(), &raw).map_err(|_| "Signature not verified")
}

fn decode_sig(sig: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(sig)
        .or_else(|_| base64::engine::general_purpose::STANDARD.decode(sig))
        .ok()
}

/// What a CONNECT resolves to in config mode.
#[derive(Debug, PartialEq, Eq)]
enum Found<'a> {
    Nkey(&'a NkeyUser),
    User(&'a PasswordUser),
    Simple,
}

/// Config mode's authenticator.
#[derive(Debug, Default)]
pub struct ConfigAuthenticator {
    pub dir: UserDirectory,
}

impl ConfigAuthenticator {
    pub fn new(dir: UserDirectory) -> Self {
        ConfigAuthenticator { dir }
    }

    /// The identity `opts` authenticates as, or why not. `nonce` is what INFO carried.
    pub fn check(&self, opts: &ClientOpts, nonce: &str, conn_type: ConnType) -> Result<Identity, Denied> {
        self.check_proxied(opts, nonce, conn_type, false)
    }

    /// [`Self::check`] for a connection that came through a trusted proxy (`proxied`)
    /// or not: users with `proxy_required` need one.
    pub fn check_proxied(
        &self,
        opts: &ClientOpts,
        nonce: &str,
        conn_type: ConnType,
        proxied: bool,
    ) -> Result<Identity, Denied> {
        let needs_proxy = |required: bool| {
            if required && !proxied {
                Err(Denied::proxy(ProxyFailure::Required))
            } else {
                Ok(())
            }
        };
        let d = &self.dir;
        let no_creds = opts.user.is_empty() && opts.pass.is_empty() && opts.auth_token.is_empty();
        let no_auth = d.no_auth_user.as_deref().filter(|_| no_creds && opts.nkey.is_empty());
        let found = self.find(opts, no_auth, conn_type)?;
        match found {
            Found::Nkey(u) => {
                needs_proxy(u.proxy_required)?;
                if no_auth != Some(u.nkey.as_str()) {
                    verify_nonce_signature(&u.nkey, nonce, &opts.sig).map_err(Denied::because)?;
                }
                let mut id = Identity::in_account(u.account, &u.nkey);
                id.permissions = u.permissions.clone();
                Ok(id)
            }
            Found::User(u) => {
                needs_proxy(u.proxy_required)?;
                let given = if no_auth == Some(u.name.as_str()) {
                    u.password.as_str()
                } else {
                    opts.pass.as_str()
                };
                if !password_matches(&u.password, given) {
                    return Err(Denied::because(""));
                }
                let mut id = Identity::in_account(u.account, &u.name);
                id.permissions = u.permissions.clone();
                Ok(id)
            }
            Found::Simple => {
                if self.required() {
                    needs_proxy(d.proxy_required)?;
                }
                let ok = if let Some(t) = &d.token {
                    password_matches(t, &opts.auth_token)
                } else if let Some((user, pass)) = &d.single {
                    *user == opts.user && password_matches(pass, &opts.pass)
                } else {
                    !self.required()
                };
                if !ok {
                    return Err(Denied::because(""));
                }
                let mut id = Identity::in_account(GLOBAL, &opts.user);
                id.permissions = d.default_permissions.clone();
                Ok(id)
            }
        }
    }

    fn find<'a>(&'a self, opts: &ClientOpts, no_auth: Option<&str>, t: ConnType) -> Result<Found<'a>, Denied> {
        let d = &self.dir;
        if !d.nkeys.is_empty() {
            let key = if !opts.nkey.is_empty() {
                Some(opts.nkey.as_str())
            } else {
                no_auth.filter(|n| d.nkeys.contains_key(*n))
            };
            if let Some(k) = key {
                return match d.nkeys.get(k) {
                    Some(u) if type_allowed(&u.conn_types, t) => Ok(Found::Nkey(u)),
                    Some(_) => Err(Denied::because("Connection type not allowed")),
                    None => Err(Denied::because("")),
                };
            }
        }
        if !d.users.is_empty() {
            let name = if !opts.user.is_empty() {
                Some(opts.user.as_str())
            } else {
                no_auth.filter(|n| d.users.contains_key(*n))
            };
            if let Some(n) = name {
                return match d.users.get(n) {
                    Some(u) if type_allowed(&u.conn_types, t) => Ok(Found::User(u)),
                    Some(_) => Err(Denied::because("Connection type not allowed")),
                    None => Err(Denied::because("")),
                };
            }
        }
        if d.token.is_none() && d.single.is_none() && self.required() {
            // Users are configured but none was named (and no no_auth_user applies).
            return Err(Denied::because(""));
        }
        Ok(Found::Simple)
    }
}

impl ConfigAuthenticator {
    /// `verify_and_map`: the certificate names the user (nats-server's
    /// `checkClientTLSCertSubject` over the users that accept this connection type).
    fn map_tls(&self, req: &AuthRequest<'_>) -> AuthVerdict {
        let Some(peer) = req.tls else {
            return AuthVerdict::Deny(Denied::because("User required in cert, no TLS connection state"));
        };
        let names: Vec<&str> = self
            .dir
            .users
            .values()
            .filter(|u| type_allowed(&u.conn_types, req.conn_type))
            .map(|u| u.name.as_str())
            .collect();
        let Some(name) = peer.map_to_user(&names) else {
            return AuthVerdict::Deny(Denied::because(format!("User in cert [{:?}], not found", peer.subject)));
        };
        if !req.opts.user.is_empty() {
            tracing::warn!(
                "User {:?} found in connect proto, but user required from cert",
                req.opts.user
            );
        }
        let mut opts = req.opts.clone();
        opts.user = name.to_string();
        match self.check(&opts, req.nonce, req.conn_type) {
            Ok(id) => AuthVerdict::Allow(Box::new(id)),
            Err(d) => AuthVerdict::Deny(d),
        }
    }
}

impl Authenticator for ConfigAuthenticator {
    fn required(&self) -> bool {
        self.dir.required()
    }

    fn advertised(&self) -> bool {
        self.dir.required() && (self.dir.no_auth_user.is_none() || self.dir.hidden_no_auth_user)
    }

    fn nonce_required(&self) -> bool {
        !self.dir.nkeys.is_empty()
    }

    fn authenticate(&self, req: &AuthRequest<'_>, _later: AuthLater) -> AuthVerdict {
        if self.dir.tls_map && !self.dir.users.is_empty() && req.opts.nkey.is_empty() {
            return self.map_tls(req);
        }
        match self.check_proxied(req.opts, req.nonce, req.conn_type, req.trusted_proxy.is_some()) {
            Ok(id) => AuthVerdict::Allow(Box::new(id)),
            Err(d) => AuthVerdict::Deny(d),
        }
    }

    /// nats-server's reload rules: a user that is gone is closed quietly, credentials that
    /// no longer match get an authorization violation; the rest take their new account
    /// and permissions. Nkey signatures are not checked again (the nonce is spent).
    fn recheck(&self, opts: &ClientOpts, current: &Identity) -> Option<Recheck> {
        let d = &self.dir;
        if !opts.nkey.is_empty() || (current.user.starts_with('U') && d.nkeys.contains_key(&current.user)) {
            let key = if opts.nkey.is_empty() {
                &current.user
            } else {
                &opts.nkey
            };
            return Some(match d.nkeys.get(key) {
                Some(u) if u.proxy_required && current.proxy_key.is_none() => Recheck::Proxy(ProxyFailure::Required),
                Some(u) => {
                    let mut id = Identity::in_account(u.account, &u.nkey);
                    id.permissions = u.permissions.clone();
                    Recheck::Rebind(Box::new(id))
                }
                None => Recheck::Removed,
            });
        }
        let mapped;
        let opts = if d.tls_map && opts.user.is_empty() && !current.user.is_empty() {
            // The certificate named the user at CONNECT.
            let mut o = opts.clone();
            o.user = current.user.clone();
            mapped = o;
            &mapped
        } else {
            opts
        };
        match self.check_proxied(opts, "", ConnType::Standard, current.proxy_key.is_some()) {
            Ok(id) => Some(Recheck::Rebind(Box::new(id))),
            Err(d) if d.proxy.is_some() => Some(Recheck::Proxy(ProxyFailure::Required)),
            Err(_) => {
                let named = !opts.user.is_empty();
                let listed = d.listed || !d.users.is_empty() || !d.nkeys.is_empty();
                if named && (!listed || !d.users.contains_key(&opts.user)) {
                    Some(Recheck::Removed)
                } else {
                    Some(Recheck::Violation)
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "users_tests.rs"]
mod tests;
