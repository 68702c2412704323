//! Building the configured resolver at startup, with nats-server's checks and texts:
//! preloads only for writable resolvers (`resolver preloads only available for writeable
//! resolver types MEM/DIR/CACHE_DIR`), each preload an account JWT (`preload account error
//! for "KEY": ...`) stored as the resolver's `Store` does (a failed store is logged, not
//! fatal, as in the reference), and for a URL resolver a request to the base URL that must
//! answer 200 (`could not fetch <"url">: ...`).
//!
//! The reference parses the directory options into its resolver while reading the config;
//! the one check of those that this layer still makes is the fetch timeout (`Fetch timeout
//! 0s is too smal`), which the config reader does not report.

use super::dir::DirectoryResolver;
use super::memory::MemoryResolver;
use super::url::UrlResolver;
use super::{AccountResolver, ResolverError, ResolverKind};
use crate::auth::config::ResolverConfig;
use crate::auth::jwt::{decode_account, json::go_quote};
use std::sync::Arc;

/// The resolver `cfg` describes, preloaded with `preload` (account key, account JWT).
pub fn from_config(
    cfg: &ResolverConfig,
    preload: &[(String, String)],
) -> Result<Arc<dyn AccountResolver>, ResolverError> {
    from_config_with_tls(cfg, preload, None)
}

/// [`from_config`] with `resolver_tls`: the TLS settings of a URL resolver's `https://`
/// fetches (without them, the system's trust store).
pub fn from_config_with_tls(
    cfg: &ResolverConfig,
    preload: &[(String, String)],
    tls: Option<&crate::transport::tls::TlsOptions>,
) -> Result<Arc<dyn AccountResolver>, ResolverError> {
    let mut url_resolver = None;
    let resolver: Arc<dyn AccountResolver> = match cfg {
        ResolverConfig::Memory => Arc::new(MemoryResolver::new()),
        ResolverConfig::Url(url) => {
            let client =
                crate::transport::tls::client::build_client_config(tls).map_err(|e| ResolverError::Refused(e.0))?;
            let r = Arc::new(UrlResolver::with_tls(url, super::url::DEFAULT_FETCH_TIMEOUT, client));
            url_resolver = Some(r.clone());
            r
        }
        ResolverConfig::Full(d) => Arc::new(DirectoryResolver::full(d)?),
        ResolverConfig::Cache(d) => Arc::new(DirectoryResolver::cache(d)?),
    };
    if !preload.is_empty() {
        if resolver.kind() == ResolverKind::Url {
            return Err(ResolverError::Refused(
                "resolver preloads only available for writeable resolver types MEM/DIR/CACHE_DIR".into(),
            ));
        }
        for (key, jwt) in preload {
            if let Err(e) = decode_account(jwt) {
                return Err(ResolverError::Refused(format!(
                    "preload account error for {}: {e}",
                    go_quote(key)
                )));
            }
            if let Err(e) = resolver.store(key, jwt) {
                tracing::error!("Preloading account {key} failed: {e}");
            }
        }
    }
    if let Some(r) = url_resolver {
        r.probe()?;
    }
    Ok(resolver)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::config::{DeleteMode, DirResolver};
    use crate::auth::resolver::testkit::{account_jwt, Keys, TempDir};
    use std::time::Duration;

    #[test]
    fn preloads_go_into_writable_resolvers() {
        let k = Keys::new();
        let a = account_jwt(&k.operator, &k.account, 100, |_| {});
        let tmp = TempDir::new("build");
        let full = ResolverConfig::Full(DirResolver {
            dir: tmp.path().join("full").display().to_string(),
            delete: DeleteMode::Rename,
            ..DirResolver::default()
        });
        let cache = ResolverConfig::Cache(DirResolver {
            dir: tmp.path().join("cache").display().to_string(),
            ..DirResolver::default()
        });
        for cfg in [ResolverConfig::Memory, full, cache] {
            let r = from_config(&cfg, &[(k.account_pub(), a.clone())]).unwrap();
            assert_eq!(r.lookup(&k.account_pub()), Some(a.clone()), "{cfg:?}");
        }
        assert!(tmp
            .path()
            .join("full")
            .join(format!("{}.jwt", k.account_pub()))
            .is_file());
    }

    #[test]
    fn startup_errors_are_the_references() {
        let k = Keys::new();
        let a = account_jwt(&k.operator, &k.account, 100, |_| {});
        let url = ResolverConfig::Url("http://127.0.0.1:1/x/".into());
        let e = from_config(&url, &[(k.account_pub(), a)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "resolver preloads only available for writeable resolver types MEM/DIR/CACHE_DIR"
        );
        let user = crate::auth::resolver::testkit::user_jwt(&k.account, 100);
        let e = from_config(&ResolverConfig::Memory, &[("AKEY".into(), user)]).unwrap_err();
        assert_eq!(e.to_string(), r#"preload account error for "AKEY": not account claim"#);
        let e = from_config(&ResolverConfig::Memory, &[("AKEY".into(), "x".into())]).unwrap_err();
        assert_eq!(e.to_string(), r#"preload account error for "AKEY": expected 3 chunks"#);
        let tmp = TempDir::new("build-timeout");
        let zero = ResolverConfig::Full(DirResolver {
            dir: tmp.path().display().to_string(),
            timeout: Some(Duration::ZERO),
            ..DirResolver::default()
        });
        assert_eq!(
            from_config(&zero, &[]).unwrap_err().to_string(),
            "Fetch timeout 0s is too smal"
        );
    }

    #[test]
    fn a_url_resolver_must_find_its_server() {
        // A port just closed: the probe's connect is refused.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let e = from_config(&ResolverConfig::Url(format!("http://127.0.0.1:{port}/x/")), &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "could not fetch <\"http://127.0.0.1:{port}/x/\">: Get \"http://127.0.0.1:{port}/x/\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            )
        );
    }
}
