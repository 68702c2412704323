//! TLS settings (`tls { }`, `websocket { tls { } }`, `--tls*` flags) and the rustls
//! `ServerConfig` built from them, with nats-server's defaults and error texts.
//!
//! [`build_server_config`] is also what HTTPS monitoring uses (with `verify` off, as the
//! reference serves `https_port`), and [`build_stapled_config`] serves the first
//! certificate with its OCSP staple (`crate::transport::ocsp::staple`).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use rustls::crypto::{ring, CryptoProvider, SupportedKxGroup};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// nats-server's `TLS_TIMEOUT` (seconds).
pub const DEFAULT_TLS_TIMEOUT: f64 = 2.0;
/// nats-server's `DEFAULT_TLS_HANDSHAKE_FIRST_FALLBACK_DELAY`.
pub const DEFAULT_FALLBACK_DELAY: Duration = Duration::from_millis(50);

/// A certificate and its key, by path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertPair {
    pub cert_file: String,
    pub key_file: String,
}

/// OCSP peer verification settings (`ocsp_peer`).
#[derive(Clone, Debug, PartialEq)]
pub struct OcspPeer {
    pub verify: bool,
    /// Seconds.
    pub clock_skew: f64,
    pub timeout: f64,
    pub ttl_unset_next_update: f64,
    pub warn_only: bool,
    pub unknown_is_good: bool,
    pub allow_when_ca_unreachable: bool,
}

impl Default for OcspPeer {
    fn default() -> Self {
        OcspPeer {
            verify: false,
            clock_skew: 30.0,
            timeout: 2.0,
            ttl_unset_next_update: 3600.0,
            warn_only: false,
            unknown_is_good: false,
            allow_when_ca_unreachable: false,
        }
    }
}

/// Minimum protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    V1_2,
    V1_3,
}

/// A parsed `tls { }` block (nats-server's `TLSConfigOpts`).
#[derive(Clone, Debug, PartialEq)]
pub struct TlsOptions {
    pub cert_file: String,
    pub key_file: String,
    pub ca_file: String,
    /// `certs`/`certificates`: several certificates, chosen by SNI.
    pub certs: Vec<CertPair>,
    pub verify: bool,
    pub insecure: bool,
    /// `verify_and_map`.
    pub map: bool,
    pub check_known_urls: bool,
    /// Seconds; 0 means the default.
    pub timeout: f64,
    pub rate_limit: i64,
    pub handshake_first: bool,
    /// With `handshake_first`: fall back to INFO first after this long without data.
    pub fallback_delay: Duration,
    /// Lower-case hex SHA-256 of accepted client SubjectPublicKeyInfos.
    pub pinned_certs: Option<BTreeSet<String>>,
    pub min_version: Option<TlsVersion>,
    /// IANA (Go) names; `None`: the defaults.
    pub cipher_suites: Option<Vec<String>>,
    pub allow_insecure_ciphers: bool,
    /// Go curve names; `None`: the defaults.
    pub curve_preferences: Option<Vec<String>>,
    pub cert_store: String,
    pub cert_match_by: String,
    pub cert_match: String,
    pub cert_match_skip_invalid: bool,
    pub ca_certs_match: Vec<String>,
    pub ocsp_peer: Option<OcspPeer>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            cert_file: String::new(),
            key_file: String::new(),
            ca_file: String::new(),
            certs: Vec::new(),
            verify: false,
            insecure: false,
            map: false,
            check_known_urls: false,
            timeout: 0.0,
            rate_limit: 0,
            handshake_first: false,
            fallback_delay: Duration::ZERO,
            pinned_certs: None,
            min_version: None,
            cipher_suites: None,
            allow_insecure_ciphers: false,
            curve_preferences: None,
            cert_store: String::new(),
            cert_match_by: String::new(),
            cert_match: String::new(),
            cert_match_skip_invalid: false,
            ca_certs_match: Vec::new(),
            ocsp_peer: None,
        }
    }
}

impl TlsOptions {
    /// The handshake timeout in force.
    pub fn timeout_duration(&self) -> Duration {
        let secs = if self.timeout > 0.0 {
            self.timeout
        } else {
            DEFAULT_TLS_TIMEOUT
        };
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::from_secs(2))
    }
}

/// Go's names of the cipher suites it implements, and whether it calls them insecure.
const GO_CIPHERS: &[(&str, bool)] = &[
    ("TLS_AES_128_GCM_SHA256", false),
    ("TLS_AES_256_GCM_SHA384", false),
    ("TLS_CHACHA20_POLY1305_SHA256", false),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", false),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", false),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", false),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", false),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", false),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", false),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", false),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", false),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", false),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", false),
    ("TLS_RSA_WITH_RC4_128_SHA", true),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", true),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", true),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", true),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", true),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", true),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", true),
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", true),
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", true),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", true),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", true),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", true),
];

/// Whether Go knows the cipher suite `name`, and if it is insecure.
pub fn go_cipher(name: &str) -> Option<bool> {
    GO_CIPHERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, insecure)| *insecure)
}

/// Go's curve names.
pub const GO_CURVES: &[&str] = &["X25519MLKEM768", "X25519", "CurveP256", "CurveP384", "CurveP521"];

/// Go's name of a rustls suite.
pub fn go_cipher_name(s: rustls::CipherSuite) -> String {
    let name = format!("{s:?}");
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

fn rustls_suite(go: &str) -> Option<SupportedCipherSuite> {
    ring::ALL_CIPHER_SUITES
        .iter()
        .find(|s| go_cipher_name(s.suite()) == go)
        .copied()
}

fn rustls_group(go: &str) -> Option<&'static dyn SupportedKxGroup> {
    match go {
        "X25519" => Some(ring::kx_group::X25519),
        "CurveP256" => Some(ring::kx_group::SECP256R1),
        "CurveP384" => Some(ring::kx_group::SECP384R1),
        _ => None,
    }
}

/// Why a TLS configuration cannot be used (the reference's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TlsConfigError(pub String);

fn go_os_error(path: &str, e: &std::io::Error) -> String {
    format!("open {path}: {}", conf::go_os_error(e))
}

/// The labels of the PEM blocks in `pem` (`CERTIFICATE`, `PRIVATE KEY`, ...).
fn pem_labels(pem: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(pem)
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("-----BEGIN ")?
                .strip_suffix("-----")
                .map(str::to_string)
        })
        .collect()
}

/// Go's `X509KeyPair` complaint about a certificate input without certificates.
fn no_certificate(pem: &[u8]) -> String {
    let skipped = pem_labels(pem);
    match skipped.as_slice() {
        [] => "tls: failed to find any PEM data in certificate input".into(),
        [one] if one.ends_with("PRIVATE KEY") => "tls: failed to find certificate PEM data in certificate input, but did find a private key; PEM inputs may have been switched".into(),
        _ => format!(
            "tls: failed to find \"CERTIFICATE\" PEM block in certificate input after skipping PEM blocks of the following types: [{}]",
            skipped.join(" ")
        ),
    }
}

/// Go's `X509KeyPair` complaint about a key input without a key.
fn no_key(pem: &[u8]) -> String {
    let skipped = pem_labels(pem);
    match skipped.as_slice() {
        [] => "tls: failed to find any PEM data in key input".into(),
        [one] if one == "CERTIFICATE" => "tls: found a certificate rather than a key in the PEM for the private key".into(),
        _ => format!(
            "tls: failed to find PEM block with type ending in \"PRIVATE KEY\" in key input after skipping PEM blocks of the following types: [{}]",
            skipped.join(" ")
        ),
    }
}

/// Load a certificate chain and key as Go's `tls.LoadX509KeyPair` does.
pub(crate) fn load_pair(cert_file: &str, key_file: &str) -> Result<CertifiedKey, String> {
    let cert_pem = std::fs::read(cert_file).map_err(|e| go_os_error(cert_file, &e))?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err(no_certificate(&cert_pem));
    }
    let key_pem = std::fs::read(key_file).map_err(|e| go_os_error(key_file, &e))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| no_key(&key_pem))?;
    let signer = ring::default_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|_| "tls: failed to parse private key".to_string())?;
    let ck = CertifiedKey::new(chain, signer);
    ck.keys_match()
        .map_err(|_| "tls: private key does not match public key".to_string())?;
    Ok(ck)
}

/// Certificates read from a PEM file of CAs (`ca_file`).
pub fn load_roots(ca_file: &str) -> Result<RootCertStore, TlsConfigError> {
    let pem = std::fs::read(ca_file).map_err(|e| TlsConfigError(go_os_error(ca_file, &e)))?;
    let mut roots = RootCertStore::empty();
    let mut added = 0;
    for c in CertificateDer::pem_slice_iter(&pem).flatten() {
        if roots.add(c).is_ok() {
            added += 1;
        }
    }
    if added == 0 {
        return Err(TlsConfigError("failed to parse root ca certificate".into()));
    }
    Ok(roots)
}

/// The system's trust store (Go verifies client certificates against it when no
/// `ca_file` is given).
pub(crate) fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for path in [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ] {
        if let Ok(pem) = std::fs::read(path) {
            for c in CertificateDer::pem_slice_iter(&pem).flatten() {
                let _ = roots.add(c);
            }
            break;
        }
    }
    roots
}

/// Certificates with the DNS names they are for.
type NamedKeys = Vec<(Vec<String>, Arc<CertifiedKey>)>;

/// Several certificates: the one whose DNS names match the SNI, else the first. The
/// first may be stapled (OCSP): then its current staple goes with it.
#[derive(Debug)]
struct BySni {
    keys: NamedKeys,
    stapled: Option<Arc<crate::transport::ocsp::staple::StapledKey>>,
}

impl BySni {
    fn key(&self, i: usize) -> Option<Arc<CertifiedKey>> {
        match (&self.stapled, i) {
            (Some(s), 0) => s.resolve(),
            _ => self.keys.get(i).map(|(_, k)| k.clone()),
        }
    }
}

fn dns_matches(pattern: &str, host: &str) -> bool {
    let (p, h) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    match p.strip_prefix("*.") {
        Some(rest) => h.split_once('.').is_some_and(|(_, hr)| hr == rest),
        None => p == h,
    }
}

impl ResolvesServerCert for BySni {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(sni) = hello.server_name() {
            if let Some(i) = self
                .keys
                .iter()
                .position(|(names, _)| names.iter().any(|n| dns_matches(n, sni)))
            {
                return self.key(i);
            }
        }
        self.key(0)
    }
}

/// The certificates of `o`, each with its DNS names.
fn certified_keys(o: &TlsOptions) -> Result<NamedKeys, TlsConfigError> {
    let mut out = Vec::new();
    let names = |ck: &CertifiedKey| {
        ck.cert
            .first()
            .and_then(|c| super::x509::Certificate::parse(c).ok())
            .map(|c| c.dns_names)
            .unwrap_or_default()
    };
    if !o.cert_file.is_empty() || !o.key_file.is_empty() {
        if o.key_file.is_empty() {
            return Err(TlsConfigError("missing 'key_file' in TLS configuration".into()));
        }
        if o.cert_file.is_empty() {
            return Err(TlsConfigError("missing 'cert_file' in TLS configuration".into()));
        }
        let ck = load_pair(&o.cert_file, &o.key_file)
            .map_err(|e| TlsConfigError(format!("error parsing X509 certificate/key pair: {e}")))?;
        out.push((names(&ck), Arc::new(ck)));
    } else {
        let n = o.certs.len();
        for (i, p) in o.certs.iter().enumerate() {
            let ck = load_pair(&p.cert_file, &p.key_file)
                .map_err(|e| TlsConfigError(format!("error parsing X509 certificate/key pair {}/{n}: {e}", i + 1)))?;
            out.push((names(&ck), Arc::new(ck)));
        }
    }
    Ok(out)
}

/// The crypto provider for `o`: its cipher suites (TLS 1.2; Go does not let TLS 1.3
/// suites be configured) and key exchange groups, as far as rustls implements them.
pub(crate) fn provider(o: &TlsOptions) -> CryptoProvider {
    let mut p = ring::default_provider();
    if let Some(names) = &o.cipher_suites {
        let tls12: Vec<SupportedCipherSuite> = names.iter().filter_map(|n| rustls_suite(n)).collect();
        let mut suites: Vec<SupportedCipherSuite> = ring::ALL_CIPHER_SUITES
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .copied()
            .collect();
        suites.extend(tls12.into_iter().filter(|s| s.version() == &rustls::version::TLS12));
        p.cipher_suites = suites;
    }
    // The reference's order for a client whose first choice is AES-GCM (whatever order
    // `cipher_suites` lists): AES-128-GCM, AES-256-GCM, then the rest; rustls lists
    // AES-256 first.
    p.cipher_suites.sort_by_key(|s| preference(s.suite()));
    if let Some(names) = &o.curve_preferences {
        let groups: Vec<&'static dyn SupportedKxGroup> = names.iter().filter_map(|n| rustls_group(n)).collect();
        if !groups.is_empty() {
            p.kx_groups = groups;
        }
    }
    p
}

/// Where a suite comes in the server's order (lower first).
fn preference(s: rustls::CipherSuite) -> u8 {
    use rustls::CipherSuite as C;
    match s {
        C::TLS13_AES_128_GCM_SHA256
        | C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 0,
        C::TLS13_AES_256_GCM_SHA384
        | C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 1,
        _ => 2,
    }
}

/// The certificate served by default (the first), as loaded for `o`.
pub fn first_key(o: &TlsOptions) -> Result<Arc<CertifiedKey>, TlsConfigError> {
    certified_keys(o)?
        .into_iter()
        .next()
        .map(|(_, k)| k)
        .ok_or_else(|| TlsConfigError("no certificate found".into()))
}

/// nats-server's `GenTLSConfig`, on rustls: certificates, client verification against
/// `ca_file` (or the system roots) when `verify`, minimum version, suites and curves.
pub fn build_server_config(o: &TlsOptions) -> Result<Arc<ServerConfig>, TlsConfigError> {
    build_stapled_config(o, None)
}

/// [`build_server_config`] with the first certificate served with its OCSP staple.
pub fn build_stapled_config(
    o: &TlsOptions,
    stapled: Option<Arc<crate::transport::ocsp::staple::StapledKey>>,
) -> Result<Arc<ServerConfig>, TlsConfigError> {
    if !o.cert_store.is_empty() {
        if !o.cert_file.is_empty() {
            return Err(TlsConfigError(
                "'cert_file' and 'cert_store' may not both be configured".into(),
            ));
        }
        return Err(TlsConfigError("cert_store is not supported on this platform".into()));
    }
    let keys = certified_keys(o)?;
    let provider = Arc::new(provider(o));
    let versions: &[&'static rustls::SupportedProtocolVersion] = match o.min_version {
        Some(TlsVersion::V1_3) => &[&rustls::version::TLS13],
        _ => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| TlsConfigError(format!("tls: {e}")))?;
    let builder = if o.verify {
        let roots = if o.ca_file.is_empty() {
            system_roots()
        } else {
            load_roots(&o.ca_file)?
        };
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| TlsConfigError(format!("tls: {e}")))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        if !o.ca_file.is_empty() {
            // Read (and so checked) as the reference does, though unused without verify.
            load_roots(&o.ca_file)?;
        }
        builder.with_no_client_auth()
    };
    let mut cfg = builder.with_cert_resolver(Arc::new(BySni { keys, stapled }));
    cfg.ignore_client_order = true;
    Ok(Arc::new(cfg))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn go_names() {
        assert_eq!(
            go_cipher_name(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256),
            "TLS_AES_128_GCM_SHA256"
        );
        assert_eq!(
            go_cipher_name(rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
        );
        assert!(rustls_suite("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256").is_some());
        assert_eq!(go_cipher("TLS_RSA_WITH_RC4_128_SHA"), Some(true));
        assert_eq!(go_cipher("nope"), None);
    }

    #[test]
    fn wildcard_sni() {
        assert!(dns_matches("*.example.com", "a.example.com"));
        assert!(!dns_matches("*.example.com", "a.b.example.com"));
        assert!(dns_matches("Example.com", "example.COM"));
    }

    #[test]
    fn missing_files_use_go_texts() {
        let o = TlsOptions {
            cert_file: "/nonexistent/c.pem".into(),
            key_file: "/nonexistent/k.pem".into(),
            ..Default::default()
        };
        assert_eq!(
            build_server_config(&o).unwrap_err().0,
            "error parsing X509 certificate/key pair: open /nonexistent/c.pem: no such file or directory"
        );
        let o = TlsOptions {
            cert_file: "/nonexistent/c.pem".into(),
            ..Default::default()
        };
        assert_eq!(
            build_server_config(&o).unwrap_err().0,
            "missing 'key_file' in TLS configuration"
        );
    }
}
