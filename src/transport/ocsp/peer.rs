//! OCSP checks of client certificates (`tls { verify: true, ocsp_peer { } }`), as
//! nats-server's `tlsClientOCSPValid` makes them, with its debug and warning lines.
//!
//! The chain a client proved is rebuilt from what it sent and the trusted CAs (rustls
//! verified it; it does not hand the path out): leaf first, root last. A self-signed
//! leaf, or a chain none of whose certificates (the root aside) name an http(s) OCSP
//! responder, is valid. Otherwise every such certificate needs a current response
//! that is good (or unknown with `unknown_is_good`), from the cache or, on a miss,
//! from its responder (`GET`, within `ca_timeout`); `warn_only` lets everything pass
//! with a warning, `allow_when_ca_unreachable` lets a certificate pass when its
//! responder cannot be reached and no revocation of it is cached.
//!
//! [`PeerChecker::check`] decides at once when the cache can (no I/O); otherwise it
//! starts the fetches on the OCSP runtime and hands back a [`Pending`] the transport
//! polls, so a shard never waits for a responder.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::cache::ResponseCache;
use super::fetch;
use super::response::{self, CertStatus, Response};
use crate::transport::tls::config::OcspPeer;
use crate::transport::tls::dn::go_subject_string;
use crate::transport::tls::x509::Certificate;
use base64::Engine;
use rustls_pki_types::CertificateDer;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

/// What a client is told (and the server logs) when it fails the check.
pub const REJECT: &str = "client not OCSP valid";

/// The settings of one TLS block's checks, and the server's cache.
pub struct PeerChecker {
    cfg: OcspPeer,
    /// The trusted CAs (`ca_file`, else the system's), to complete chains.
    roots: Vec<Certificate>,
    cache: Arc<ResponseCache>,
}

impl std::fmt::Debug for PeerChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerChecker")
            .field("cfg", &self.cfg)
            .field("roots", &self.roots.len())
            .finish_non_exhaustive()
    }
}

/// A verdict that is on its way.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    slot: Arc<OnceLock<bool>>,
}

impl Pending {
    /// `Some(true)`: the client passed.
    pub fn verdict(&self) -> Option<bool> {
        self.slot.get().copied()
    }
}

/// The result of [`PeerChecker::check`].
pub enum Check {
    Done(bool),
    Pending(Pending),
}

/// One certificate of a chain that has a responder, with its issuer.
#[derive(Clone)]
struct Link {
    leaf: Certificate,
    issuer: Certificate,
    urls: Vec<String>,
}

fn seconds(s: f64, default: Duration) -> Duration {
    if s < 0.0 {
        return default;
    }
    Duration::try_from_secs_f64(s).unwrap_or(default)
}

fn fingerprint(c: &Certificate) -> String {
    base64::engine::general_purpose::STANDARD.encode(ring::digest::digest(&ring::digest::SHA256, &c.raw))
}

fn web_urls(c: &Certificate) -> Vec<String> {
    c.ocsp_urls
        .iter()
        .filter(|u| fetch::Url::parse(u).is_ok())
        .cloned()
        .collect()
}

fn signed(leaf: &Certificate, by: &Certificate) -> bool {
    leaf.raw_issuer == by.raw_subject && super::sig::verify(&by.spki, &leaf.sig_alg, &leaf.tbs, &leaf.signature).is_ok()
}

/// Go's `url.QueryEscape` for base64 text.
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(char::from(b)),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl PeerChecker {
    pub fn new(cfg: OcspPeer, roots: Vec<Certificate>, cache: Arc<ResponseCache>) -> PeerChecker {
        PeerChecker { cfg, roots, cache }
    }

    /// The chain from the client's certificates to a trusted root (leaf first).
    fn chain(&self, presented: &[Certificate]) -> Vec<Certificate> {
        let Some(leaf) = presented.first() else {
            return Vec::new();
        };
        let mut chain = vec![leaf.clone()];
        while chain.len() < 10 {
            let Some(last) = chain.last() else { break };
            if last.raw_issuer == last.raw_subject && signed(last, last) {
                break;
            }
            let next = presented
                .iter()
                .skip(1)
                .chain(self.roots.iter())
                .find(|c| signed(last, c) && !chain.iter().any(|x| x.raw == c.raw))
                .cloned();
            match next {
                Some(c) => chain.push(c),
                None => break,
            }
        }
        chain
    }

    /// The links of `chain` that need a response (`None`: the chain is unexpected).
    fn links(chain: &[Certificate]) -> Vec<Link> {
        let mut out = Vec::new();
        for (i, cert) in chain.iter().enumerate().take(chain.len().saturating_sub(1)) {
            let urls = web_urls(cert);
            if urls.is_empty() {
                continue;
            }
            if let Some(issuer) = chain.get(i + 1) {
                out.push(Link {
                    leaf: cert.clone(),
                    issuer: issuer.clone(),
                    urls,
                });
            }
        }
        out
    }

    /// Check the client whose certificates (leaf first) are `presented`.
    pub fn check(self: &Arc<Self>, presented: &[CertificateDer<'_>]) -> Check {
        let certs: Vec<Certificate> = presented.iter().filter_map(|c| Certificate::parse(c).ok()).collect();
        tracing::debug!("Peer OCSP enabled: 1 TLS client chain(s) will be evaluated");
        if certs.is_empty() {
            tracing::error!("Peer certificate is nil, rejecting OCSP peer");
            return Check::Done(false);
        }
        let chain = self.chain(&certs);
        tracing::debug!("Chain [0]: {} total link(s)", chain.len());
        if chain.len() == 1 {
            tracing::debug!("Chain [0] is self-signed, thus peer is valid");
            return Check::Done(true);
        }
        let links = Self::links(&chain);
        if links.is_empty() {
            tracing::debug!("Chain [0] has no OCSP eligible links, thus peer is valid");
            return Check::Done(true);
        }
        tracing::debug!("Chain [0] has {} OCSP eligible link(s)", links.len());
        // Links the cache decides, in order; the first that needs a responder and
        // everything after it go to the runtime.
        let mut rest = links.into_iter();
        while let Some(link) = rest.next() {
            match self.cached(&link) {
                Cached::Current(r) => {
                    if !self.judge(&link, &r) {
                        return Check::Done(self.finish(false));
                    }
                }
                Cached::Miss { revoked } => {
                    let remaining: Vec<Link> = rest.collect();
                    return self.spawn(link, revoked, remaining);
                }
            }
        }
        Check::Done(self.finish(true))
    }

    fn finish(&self, valid: bool) -> bool {
        if valid {
            tracing::debug!("Chain [0] is OCSP valid for all eligible links, thus peer is valid");
        } else {
            tracing::debug!("No OCSP valid chains, thus peer is invalid");
        }
        valid
    }

    /// Ask `first`'s responder (its cache lookup missed; `revoked`: an expired
    /// revocation was cached), then check `rest`, on the runtime.
    fn spawn(self: &Arc<Self>, first: Link, revoked: bool, rest: Vec<Link>) -> Check {
        let pending = Pending::default();
        let Some(h) = super::runtime::handle() else {
            return Check::Done(self.finish(false));
        };
        let slot = pending.slot.clone();
        let me = self.clone();
        h.spawn(async move {
            let mut valid = me.ask_responder(&first, revoked).await;
            for link in &rest {
                if !valid {
                    break;
                }
                valid = match me.cached(link) {
                    Cached::Current(r) => me.judge(link, &r),
                    Cached::Miss { revoked } => me.ask_responder(link, revoked).await,
                };
            }
            let _ = slot.set(me.finish(valid));
        });
        Check::Pending(pending)
    }

    fn skew(&self) -> Duration {
        seconds(self.cfg.clock_skew, Duration::from_secs(30))
    }

    fn ttl(&self) -> Duration {
        seconds(self.cfg.ttl_unset_next_update, Duration::from_secs(3600))
    }

    fn cached(&self, link: &Link) -> Cached {
        let key = fingerprint(&link.leaf);
        let subj = go_subject_string(&link.leaf.subject);
        tracing::debug!("Checking OCSP peer cache for [{subj}], key [{key}]");
        let Some(raw) = self.cache.get(&key) else {
            return Cached::Miss { revoked: false };
        };
        match Response::parse(&raw, &link.issuer) {
            Ok(r) => {
                if !r.valid_delegation(&link.issuer) {
                    tracing::debug!("Invalid cached OCSP response for [{subj}] with fingerprint [{key}]");
                    self.cache.delete(&key, true);
                    return Cached::Miss { revoked: false };
                }
                let revoked = r.status == CertStatus::Revoked;
                match r.current(SystemTime::now(), self.skew(), self.ttl()) {
                    Ok(()) => {
                        tracing::debug!("Cached OCSP response is current, status [{}]", r.status.as_str());
                        Cached::Current(Box::new(r))
                    }
                    Err(why) => {
                        tracing::debug!("{why}");
                        tracing::debug!("Cached OCSP response is expired, status [{}]", r.status.as_str());
                        self.cache.delete(&key, true);
                        Cached::Miss { revoked }
                    }
                }
            }
            Err(_) => {
                tracing::debug!("Invalid cached OCSP response for [{subj}] with fingerprint [{key}]");
                self.cache.delete(&key, true);
                Cached::Miss { revoked: false }
            }
        }
    }

    /// The status check of a usable response (nats-server's last step of `certOCSPGood`).
    fn judge(&self, link: &Link, r: &Response) -> bool {
        let subj = go_subject_string(&link.leaf.subject);
        let bad = r.status == CertStatus::Revoked || (r.status == CertStatus::Unknown && !self.cfg.unknown_is_good);
        if bad {
            tracing::warn!("OCSP verify fail for [{subj}] with CA status [{}]", r.status.as_str());
            if self.cfg.warn_only {
                tracing::warn!("OCSP verify fail for [{subj}] but WarnOnly is true so allowing");
                return true;
            }
            tracing::debug!("Invalid OCSP response status: {}", r.status.as_str());
            return false;
        }
        tracing::debug!("OCSP verify pass for [{subj}]");
        true
    }

    /// A link the cache could not answer for: its responder decides (`revoked_cached`:
    /// the cache held an expired revocation of it).
    async fn ask_responder(&self, link: &Link, revoked_cached: bool) -> bool {
        let subj = go_subject_string(&link.leaf.subject);
        // The reason a link fails, logged at debug level as the reference does.
        let reject = |why: &str| {
            tracing::debug!("{why}");
            false
        };
        let raw = match self.fetch(link).await {
            Ok(raw) if !raw.is_empty() => raw,
            other => {
                let err = other.err().unwrap_or_default();
                tracing::warn!("Attempt to obtain OCSP response from CA responder for [{subj}] failed: {err}");
                if self.cfg.warn_only {
                    tracing::warn!("OCSP verify fail for [{subj}] but WarnOnly is true so allowing");
                    return true;
                }
                if self.cfg.allow_when_ca_unreachable && !revoked_cached {
                    tracing::warn!("Failed to obtain OCSP CA response for [{subj}] but AllowWhenCAUnreachable set; no cached revocation so allowing");
                    return true;
                } else if self.cfg.allow_when_ca_unreachable {
                    tracing::warn!("Failed to obtain OCSP CA response for [{subj}] but AllowWhenCAUnreachable set; cached revocation exists so rejecting");
                }
                return reject("Failed OCSP response fetch");
            }
        };
        let r = match Response::parse(&raw, &link.issuer) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("Could not parse OCSP CA response for [{subj}]: {e}");
                if self.cfg.warn_only {
                    tracing::warn!("OCSP verify fail for [{subj}] but WarnOnly is true so allowing");
                    return true;
                }
                return reject("Failed OCSP response parse");
            }
        };
        if !r.valid_delegation(&link.issuer) {
            tracing::warn!("Invalid OCSP response delegation: {subj}");
            if self.cfg.warn_only {
                tracing::warn!("OCSP verify fail for [{subj}] but WarnOnly is true so allowing");
                return true;
            }
            return reject(&format!("Invalid OCSP response delegation: {subj}"));
        }
        if let Err(why) = r.current(SystemTime::now(), self.skew(), self.ttl()) {
            tracing::debug!("{why}");
            tracing::warn!("New OCSP CA response obtained for [{subj}] but not current");
            if self.cfg.warn_only {
                tracing::warn!("OCSP verify fail for [{subj}] but WarnOnly is true so allowing");
                return true;
            }
            return reject("OCSP response not in effectivity window");
        }
        self.cache.put(&fingerprint(&link.leaf), &r, &subj);
        self.judge(link, &r)
    }

    /// nats-server's `FetchOCSPResponse`: `GET` each responder in turn.
    async fn fetch(&self, link: &Link) -> Result<Vec<u8>, String> {
        let timeout = match Duration::try_from_secs_f64(self.cfg.timeout) {
            Ok(d) if !d.is_zero() => d,
            _ => Duration::from_secs(2),
        };
        let req = response::request(&link.leaf, &link.issuer);
        let enc = query_escape(&base64::engine::general_purpose::STANDARD.encode(req));
        let mut last = String::from("no available OCSP servers");
        for u in &link.urls {
            tracing::debug!("Trying OCSP responder url [{u}]");
            let url = format!("{}/{enc}", u.trim_end_matches('/'));
            match fetch::get(&url, timeout).await {
                Ok(a) if a.status == 200 => return Ok(a.body),
                Ok(a) => last = format!("bad OCSP responder http status: [{}]", a.status),
                Err(e) => last = e,
            }
        }
        Err(format!("exhausted OCSP responders: {last}"))
    }
}

enum Cached {
    Current(Box<Response>),
    Miss { revoked: bool },
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn query_escape_as_go() {
        assert_eq!(query_escape("MFQw+a/b=="), "MFQw%2Ba%2Fb%3D%3D");
    }

    #[test]
    fn chains_are_completed_from_the_roots() {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, "Root");
        let ca = p.self_signed(&ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["c".into()])
            .unwrap()
            .signed_by(&leaf_key, &ca, &ca_key)
            .unwrap();
        let root = Certificate::parse(ca.der()).unwrap();
        let cache = Arc::new(ResponseCache::new(super::super::cache::CacheConfig::default()));
        let checker = Arc::new(PeerChecker::new(OcspPeer::default(), vec![root.clone()], cache));
        let chain = checker.chain(&[Certificate::parse(leaf.der()).unwrap()]);
        assert_eq!(chain.len(), 2);
        assert_eq!(chain.last().unwrap().raw, root.raw);
        // No responder in the leaf: valid without asking anyone.
        assert!(matches!(checker.check(&[leaf.der().clone()]), Check::Done(true)));
        // Nothing presented: rejected.
        assert!(matches!(checker.check(&[]), Check::Done(false)));
    }
}
