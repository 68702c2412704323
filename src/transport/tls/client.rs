//! rustls `ClientConfig`s for the server's own outgoing TLS connections (today the URL
//! account resolver's `https://` fetches, configured by `resolver_tls`), as Go's
//! `GenTLSConfig` used on the client side builds them: the CAs of `ca_file` as roots (the
//! system's trust store without one), the `cert_file`/`key_file` pair as the client
//! certificate, `insecure` to skip verifying the server, and the minimum version, cipher
//! suites and curves of the block.

use super::config::{load_pair, load_roots, provider, system_roots, TlsConfigError, TlsOptions, TlsVersion};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use std::sync::Arc;

/// The client configuration for `o`; `None` is Go's default client (system roots,
/// nothing else).
pub fn build_client_config(o: Option<&TlsOptions>) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let default = TlsOptions::default();
    let o = o.unwrap_or(&default);
    let provider = Arc::new(provider(o));
    let versions: &[&'static rustls::SupportedProtocolVersion] = match o.min_version {
        Some(TlsVersion::V1_3) => &[&rustls::version::TLS13],
        _ => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| TlsConfigError(format!("tls: {e}")))?;
    let roots = if o.ca_file.is_empty() {
        system_roots()
    } else {
        load_roots(&o.ca_file)?
    };
    let builder = if o.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Insecure(provider)))
    } else {
        builder.with_root_certificates(roots)
    };
    let cfg = if o.cert_file.is_empty() {
        builder.with_no_client_auth()
    } else {
        let ck = load_pair(&o.cert_file, &o.key_file).map_err(TlsConfigError)?;
        builder
            .with_client_auth_cert(ck.cert.clone(), private_key(&o.key_file)?)
            .map_err(|e| TlsConfigError(format!("tls: {e}")))?
    };
    Ok(Arc::new(cfg))
}

/// The private key of `key_file` (already checked against its certificate).
fn private_key(key_file: &str) -> Result<rustls::pki_types::PrivateKeyDer<'static>, TlsConfigError> {
    use rustls::pki_types::pem::PemObject;
    let pem = std::fs::read(key_file).map_err(|e| TlsConfigError(format!("open {key_file}: {e}")))?;
    rustls::pki_types::PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|_| TlsConfigError("tls: failed to find any PEM data in key input".into()))
}

/// `insecure: true`: any server certificate is accepted (Go's `InsecureSkipVerify`);
/// handshake signatures are still checked.
#[derive(Debug)]
struct Insecure(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Insecure {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
