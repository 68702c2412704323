//! Trusted proxies (`proxies { trusted: [{key}] }`, nats-server 2.12): a proxy in front of
//! the server signs the connection's nonce with its own nkey and sends the signature as
//! `proxy_sig` in the client's CONNECT. A signature that one of the trusted keys verifies
//! marks the connection as proxied (users with `proxy_required` need that); a signature
//! no trusted key verifies refuses the connection ("proxy is not trusted").
//!
//! [`TrustedProxies`] wraps the authenticator of the configuration; the core asks it
//! before anything else ([`Authenticator::proxy_check`]) and passes the verified key on
//! in [`AuthRequest::trusted_proxy`]. Built per configuration (startup, reload), shared
//! read-only by every shard.

use crate::core::auth::{AuthLater, AuthRequest, AuthVerdict, Authenticator, Identity, ProxyFailure, Recheck};
use crate::proto::connect::ClientOpts;
use std::sync::Arc;

/// The configured authenticator with trusted proxies in front.
#[derive(Debug)]
pub struct TrustedProxies {
    keys: Vec<(String, nkeys::KeyPair)>,
    inner: Arc<dyn Authenticator>,
}

impl TrustedProxies {
    /// Wrap `inner` with the proxy keys `keys` (public nkeys, validated by the config);
    /// keys that do not decode are skipped. With no keys, `inner` is returned as it is.
    pub fn wrap(inner: Arc<dyn Authenticator>, keys: &[String]) -> Arc<dyn Authenticator> {
        let keys: Vec<(String, nkeys::KeyPair)> = keys
            .iter()
            .filter_map(|k| nkeys::KeyPair::from_public_key(k).ok().map(|kp| (k.clone(), kp)))
            .collect();
        if keys.is_empty() {
            return inner;
        }
        Arc::new(TrustedProxies { keys, inner })
    }
}

impl Authenticator for TrustedProxies {
    fn required(&self) -> bool {
        self.inner.required()
    }

    fn advertised(&self) -> bool {
        self.inner.advertised()
    }

    /// Proxies sign the nonce, so there always is one.
    fn nonce_required(&self) -> bool {
        true
    }

    fn authenticate(&self, req: &AuthRequest<'_>, later: AuthLater) -> AuthVerdict {
        self.inner.authenticate(req, later)
    }

    fn recheck(&self, opts: &ClientOpts, current: &Identity) -> Option<Recheck> {
        self.inner.recheck(opts, current)
    }

    /// nats-server's `proxyCheck`: only the raw URL-safe base64 form is accepted (no
    /// standard-base64 fallback as for user signatures); the first key that verifies wins.
    fn proxy_check(&self, opts: &ClientOpts, nonce: &str) -> Result<Option<String>, ProxyFailure> {
        use base64::Engine;
        if opts.proxy_sig.is_empty() {
            return Ok(None);
        }
        let Ok(sig) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&opts.proxy_sig) else {
            return Err(ProxyFailure::NotTrusted);
        };
        self.keys
            .iter()
            .find(|(_, kp)| kp.verify(nonce.as_bytes(), &sig).is_ok())
            .map(|(k, _)| Some(k.clone()))
            .ok_or(ProxyFailure::NotTrusted)
    }

    fn proxy_trusted(&self, key: &str) -> bool {
        self.keys.iter().any(|(k, _)| k == key)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::core::auth::NoAuth;

    fn sign(kp: &nkeys::KeyPair, nonce: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(kp.sign(nonce.as_bytes()).unwrap())
    }

    #[test]
    fn a_trusted_signature_names_its_key_and_others_are_refused() {
        let trusted = nkeys::KeyPair::new_user();
        let other = nkeys::KeyPair::new_user();
        let auth = TrustedProxies::wrap(Arc::new(NoAuth), &[other.public_key(), trusted.public_key()]);
        let mut opts = ClientOpts::default();
        assert_eq!(auth.proxy_check(&opts, "n1"), Ok(None), "no signature: not proxied");
        opts.proxy_sig = sign(&trusted, "n1");
        assert_eq!(auth.proxy_check(&opts, "n1"), Ok(Some(trusted.public_key())));
        assert_eq!(
            auth.proxy_check(&opts, "n2"),
            Err(ProxyFailure::NotTrusted),
            "another nonce"
        );
        opts.proxy_sig = sign(&nkeys::KeyPair::new_user(), "n1");
        assert_eq!(auth.proxy_check(&opts, "n1"), Err(ProxyFailure::NotTrusted));
        opts.proxy_sig = "not base64!".into();
        assert_eq!(auth.proxy_check(&opts, "n1"), Err(ProxyFailure::NotTrusted));
        assert!(auth.proxy_trusted(&trusted.public_key()));
        assert!(!auth.proxy_trusted(&nkeys::KeyPair::new_user().public_key()));
        assert!(auth.nonce_required());
    }

    #[test]
    fn without_keys_nothing_is_wrapped() {
        let auth = TrustedProxies::wrap(Arc::new(NoAuth), &["not-a-key".to_string()]);
        let opts = ClientOpts {
            proxy_sig: "anything".into(),
            ..Default::default()
        };
        assert_eq!(auth.proxy_check(&opts, "n"), Ok(None));
        assert!(!auth.nonce_required());
    }
}
