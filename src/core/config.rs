//! What the core needs to know about the server: limits, timers, authentication and the
//! INFO template. Built once from the options (and rebuilt on reload); shared read-only
//! by all shards through an `Arc`.

use crate::proto::info::ServerInfo;
use std::time::Duration;

/// One entry of `authorization { users = [...] }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserEntry {
    pub user: String,
    /// Plain text, or a bcrypt hash (`$2a$...`) as nats-server accepts.
    pub pass: String,
}

/// Client authentication: a token, a single user (`--user/--pass`, `authorization
/// { user, password }`) or a list of users. Passwords and tokens may be bcrypt hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    None,
    Token(String),
    User { user: String, pass: String },
    Users(Vec<UserEntry>),
}

/// The credentials a client presented in CONNECT.
#[derive(Clone, Copy, Debug)]
pub struct Credentials<'a> {
    pub user: &'a str,
    pub pass: &'a str,
    pub token: &'a str,
}

/// What a new authentication configuration means for a connected client (reload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recheck {
    /// Still authorized.
    Keep,
    /// Credentials no longer valid: `-ERR 'Authorization Violation'` and close.
    Violation,
    /// The client's user is gone from the configuration: close without an error, as
    /// nats-server does for a client whose user disappeared.
    Removed,
}

impl Auth {
    pub fn required(&self) -> bool {
        !matches!(self, Auth::None)
    }

    /// nats-server's check of CONNECT credentials (`processClientOrLeafAuthentication`
    /// for configured users, a single user or a token).
    pub fn check(&self, c: Credentials<'_>) -> bool {
        match self {
            Auth::None => true,
            Auth::Token(t) => password_matches(t, c.token),
            Auth::User { user, pass } => ct_eq(c.user.as_bytes(), user.as_bytes()) && password_matches(pass, c.pass),
            Auth::Users(users) => {
                !c.user.is_empty()
                    && users
                        .iter()
                        .find(|u| u.user == c.user)
                        .is_some_and(|u| password_matches(&u.pass, c.pass))
            }
        }
    }

    /// Re-check an authenticated client against this (new) configuration.
    pub fn recheck(&self, c: Credentials<'_>) -> Recheck {
        if self.check(c) {
            return Recheck::Keep;
        }
        let named = !c.user.is_empty();
        match self {
            Auth::Users(users) if named && !users.iter().any(|u| u.user == c.user) => Recheck::Removed,
            Auth::Users(_) => Recheck::Violation,
            _ if named => Recheck::Removed,
            _ => Recheck::Violation,
        }
    }
}

/// nats-server's test for a bcrypt hash: `$2a$`, `$2b$`, `$2x$` or `$2y$`, two digits, `$`.
pub fn is_bcrypt(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 7
        && b.starts_with(b"$2")
        && matches!(b.get(2), Some(b'a' | b'b' | b'x' | b'y'))
        && b.get(3) == Some(&b'$')
        && b.get(4).is_some_and(u8::is_ascii_digit)
        && b.get(5).is_some_and(u8::is_ascii_digit)
        && b.get(6) == Some(&b'$')
}

/// A configured password or token against what the client sent: bcrypt when the
/// configured one is a bcrypt hash, otherwise a constant-time comparison.
pub fn password_matches(configured: &str, given: &str) -> bool {
    if is_bcrypt(configured) {
        bcrypt_matches(configured, given)
    } else {
        ct_eq(configured.as_bytes(), given.as_bytes())
    }
}

/// Successful bcrypt verifications, by SHA-256 of (hash, password). A bcrypt check costs
/// tens of milliseconds, which would stall a whole shard; a reconnecting client with the
/// same credentials is verified once.
fn bcrypt_matches(hash: &str, given: &str) -> bool {
    use sha2::{Digest, Sha256};
    use std::collections::HashSet;
    use std::sync::Mutex;
    static VERIFIED: Mutex<Option<HashSet<[u8; 32]>>> = Mutex::new(None);
    const MAX_CACHED: usize = 4096;
    let mut h = Sha256::new();
    h.update(hash.as_bytes());
    h.update([0u8]);
    h.update(given.as_bytes());
    let key: [u8; 32] = h.finalize().into();
    if let Ok(cache) = VERIFIED.lock() {
        if cache.as_ref().is_some_and(|c| c.contains(&key)) {
            return true;
        }
    }
    let ok = bcrypt::verify(given, hash).unwrap_or(false);
    if ok {
        if let Ok(mut cache) = VERIFIED.lock() {
            let set = cache.get_or_insert_with(HashSet::new);
            if set.len() >= MAX_CACHED {
                set.clear();
            }
            set.insert(key);
        }
    }
    ok
}

/// Equality without early exit, for credentials.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Core settings, with nats-server's defaults.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    pub max_control_line: usize,
    /// Negative: unlimited.
    pub max_payload: i64,
    pub max_pending: usize,
    /// Negative: reject every connection (`max_connections: 0` in a config file).
    pub max_connections: i64,
    /// Zero: unlimited.
    pub max_subscriptions: usize,
    /// Zero: unlimited.
    pub max_sub_tokens: usize,
    pub ping_interval: Duration,
    pub ping_max: u32,
    pub write_deadline: Duration,
    pub auth: Auth,
    pub auth_timeout: Duration,
    /// Headers supported (not `no_header_support`).
    pub headers: bool,
    pub sublist_cache: bool,
    pub trace: bool,
    pub debug: bool,
    /// Zero: unlimited.
    pub max_traced_msg_len: usize,
    /// Template for every INFO this server sends.
    pub info: ServerInfo,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            max_control_line: 4096,
            max_payload: 1024 * 1024,
            max_pending: 64 * 1024 * 1024,
            max_connections: 64 * 1024,
            max_subscriptions: 0,
            max_sub_tokens: 0,
            ping_interval: Duration::from_secs(120),
            ping_max: 2,
            write_deadline: Duration::from_secs(10),
            auth: Auth::None,
            auth_timeout: Duration::from_secs(2),
            headers: true,
            sublist_cache: true,
            trace: false,
            debug: false,
            max_traced_msg_len: 0,
            info: ServerInfo::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds<'a>(user: &'a str, pass: &'a str, token: &'a str) -> Credentials<'a> {
        Credentials { user, pass, token }
    }

    #[test]
    fn bcrypt_prefixes() {
        assert!(is_bcrypt("$2a$11$abc"));
        assert!(is_bcrypt("$2y$04$"));
        assert!(!is_bcrypt("$2c$11$abc"));
        assert!(!is_bcrypt("$2a$1$abc"));
        assert!(!is_bcrypt("2a$11$abc"));
    }

    #[test]
    fn users_tokens_and_bcrypt() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let users = Auth::Users(vec![
            UserEntry {
                user: "a".into(),
                pass: "pa".into(),
            },
            UserEntry {
                user: "b".into(),
                pass: hash.clone(),
            },
        ]);
        assert!(users.check(creds("a", "pa", "")));
        assert!(users.check(creds("b", "s3cret", "")));
        assert!(users.check(creds("b", "s3cret", "")), "cached verification");
        assert!(!users.check(creds("b", "nope", "")));
        assert!(!users.check(creds("", "", "pa")));
        assert_eq!(users.recheck(creds("a", "x", "")), Recheck::Violation);
        assert_eq!(users.recheck(creds("c", "x", "")), Recheck::Removed);
        let token = Auth::Token(hash);
        assert!(token.check(creds("", "", "s3cret")));
        assert_eq!(token.recheck(creds("", "", "x")), Recheck::Violation);
        assert_eq!(token.recheck(creds("a", "pa", "")), Recheck::Removed);
        assert_eq!(Auth::None.recheck(creds("a", "", "")), Recheck::Keep);
    }
}
