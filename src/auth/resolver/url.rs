//! `resolver: URL(http://host:port/path/)`: account JWTs fetched over HTTP, `GET
//! <url><account public key>` answering the JWT with status 200 (nats-server's
//! `URLAccResolver`).
//!
//! Fetches run on a small pool of resolver threads, never on a shard; each has the
//! reference's 1.9 s deadline. A fetch that fails is logged (`Account fetch failed: ...`,
//! the reference's texts: `could not fetch <"url">: 404 Not Found`, `... Get "url": dial
//! tcp ...`) and answers `None`. The resolver is read-only: preloads are refused at
//! startup and updates through `$SYS` only reach accounts already registered. At startup
//! the reference checks that someone answers at the base URL ([`UrlResolver::probe`]).
//!
//! `https://` URLs are fetched over TLS with the `resolver_tls` settings (CAs, client
//! certificate, `insecure`), or the system's trust store without them, as Go's default
//! client does.

use super::dirstore::is_account;
use super::http;
use super::{AccountResolver, FetchDone, ResolverError, ResolverKind};
use crate::auth::jwt::MAX_TOKEN_SIZE;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// nats-server's `DEFAULT_ACCOUNT_FETCH_TIMEOUT`.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_millis(1900);
/// Fetches that can run at once.
const WORKERS: usize = 4;

type Task = Box<dyn FnOnce() + Send>;

/// The URL resolver.
pub struct UrlResolver {
    base: String,
    timeout: Duration,
    tls: Arc<rustls::ClientConfig>,
    tasks: Mutex<mpsc::Sender<Task>>,
}

impl std::fmt::Debug for UrlResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlResolver")
            .field("url", &redact(&self.base))
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The URL with the password of its user info (if any) replaced, as the reference logs it.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{scheme}://{name}:xxxxx@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

impl UrlResolver {
    /// A resolver for `url` (a `/` is added if missing) with the reference's timeout and
    /// Go's default TLS client (the system's trust store).
    pub fn new(url: &str) -> Self {
        Self::with_timeout(url, DEFAULT_FETCH_TIMEOUT)
    }

    pub fn with_timeout(url: &str, timeout: Duration) -> Self {
        let tls = crate::transport::tls::client::build_client_config(None).unwrap_or_else(|_| {
            // Without a `ca_file` nothing is read that could fail; an empty store then.
            Arc::new(
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
            )
        });
        Self::with_tls(url, timeout, tls)
    }

    /// A resolver whose `https://` fetches use `tls` (built from `resolver_tls`).
    pub fn with_tls(url: &str, timeout: Duration, tls: Arc<rustls::ClientConfig>) -> Self {
        let mut base = url.to_string();
        if !base.ends_with('/') {
            base.push('/');
        }
        let (tx, rx) = mpsc::channel::<Task>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..WORKERS {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("rnats-url-resolver-{i}"))
                .spawn(move || loop {
                    let task = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    match task {
                        Ok(task) => task(),
                        Err(_) => return,
                    }
                });
            if let Err(e) = spawned {
                tracing::error!("Could not start an account resolver thread: {e}");
            }
        }
        UrlResolver {
            base,
            timeout,
            tls,
            tasks: Mutex::new(tx),
        }
    }

    /// The base URL (ending with `/`).
    pub fn url(&self) -> &str {
        &self.base
    }

    /// `GET <url><account>`, waiting for the answer (at most the timeout). The error texts
    /// are the reference's.
    pub fn fetch_blocking(&self, account: &str) -> Result<String, ResolverError> {
        fetch_url(&format!("{}{account}", self.base), self.timeout, &self.tls)
    }

    /// The reference's startup check: the base URL must answer 200.
    pub fn probe(&self) -> Result<(), ResolverError> {
        self.fetch_blocking("").map(|_| ())
    }
}

fn fetch_url(url: &str, timeout: Duration, tls: &Arc<rustls::ClientConfig>) -> Result<String, ResolverError> {
    let shown = crate::auth::jwt::json::go_quote(&redact(url));
    match http::get(url, timeout, MAX_TOKEN_SIZE, tls) {
        Err(http::GetError::Transport(e)) => Err(ResolverError::Io(format!("could not fetch <{shown}>: {e}"))),
        Err(http::GetError::Body(e)) => Err(ResolverError::Io(e)),
        Ok(r) if r.code != 200 => Err(ResolverError::Io(format!("could not fetch <{shown}>: {}", r.status))),
        Ok(r) => Ok(String::from_utf8_lossy(&r.body).into_owned()),
    }
}

impl AccountResolver for UrlResolver {
    fn kind(&self) -> ResolverKind {
        ResolverKind::Url
    }

    /// Nothing is known without asking the server: see [`Self::fetch`].
    fn lookup(&self, _account: &str) -> Option<String> {
        None
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn fetch(&self, account: &str, done: FetchDone) {
        if !is_account(account) {
            tracing::warn!("Account fetch failed: will only fetch valid account keys");
            done(None);
            return;
        }
        let url = format!("{}{account}", self.base);
        let (timeout, tls) = (self.timeout, self.tls.clone());
        let task: Task = Box::new(move || match fetch_url(&url, timeout, &tls) {
            Ok(jwt) => done(Some(jwt)),
            Err(e) => {
                tracing::warn!("Account fetch failed: {e}");
                done(None)
            }
        });
        let sent = self.tasks.lock().unwrap_or_else(|p| p.into_inner()).send(task);
        if let Err(mpsc::SendError(task)) = sent {
            // No worker left (they could not start): fetch here rather than never.
            task();
        }
    }

    fn store(&self, _account: &str, _jwt: &str) -> Result<(), ResolverError> {
        Err(ResolverError::Refused(
            "store operation not supported for URL Resolver".into(),
        ))
    }
}

#[cfg(test)]
#[path = "url_tests.rs"]
mod tests;
