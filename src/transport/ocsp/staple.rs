//! OCSP stapling of the server's own certificate, as nats-server's `OCSPMonitor` does it.
//!
//! Whether a certificate is stapled depends on `ocsp { mode }` and on its must-staple
//! (TLS feature `status_request`) extension ([`plan`]): `auto` (and no `ocsp` block)
//! staples must-staple certificates, `always` staples any and shuts the server down if
//! the status is ever not good, `must` staples must-staple certificates and shuts down
//! on revocation, `never` staples nothing. At startup ([`Monitor::prepare`]) the status
//! is read from `store_dir/ocsp/<sha256 of the certificate>` when that holds a valid
//! response, else from the responders (the `ocsp { url(s) }` override, else the
//! certificate's AIA), `POST` first and `GET` as the fallback; a failure refuses the
//! start, and so does a status other than good when the mode shuts down on revocation.
//! Then [`Monitor::spawn`] refreshes it at half the time to `NextUpdate` (a day without
//! one, two minutes once it is past), with nats-server's log lines.
//!
//! The handshake side is [`StapledKey`]: the certificate with the latest response, read
//! by the rustls certificate resolver on shard threads (a read lock, no I/O). A staple
//! that went stale is not served (the handshake fails, as the reference's does when its
//! own fetch fails) and wakes the monitor to fetch at once.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::fetch;
use super::response::{self, CertStatus, Response};
use crate::transport::tls::x509::Certificate;
use base64::Engine;
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

/// nats-server's stapling modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StapleMode {
    Auto,
    Always,
    Must,
    Never,
}

/// Refresh a day after a response without `NextUpdate`.
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// Retry this soon once `NextUpdate` has passed.
pub const MIN_CHECK_INTERVAL: Duration = Duration::from_secs(120);
/// The HTTP client's timeout (nats-server's).
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// `store_dir`'s subdirectory for staples.
pub const STORE_SUBDIR: &str = "ocsp";

/// Whether a certificate is stapled (`Some`), and if the server shuts down when its
/// status is not good (`Some(true)`). `mode` is `None` without an `ocsp` block.
pub fn plan(mode: Option<StapleMode>, must_staple: bool) -> Option<bool> {
    match mode {
        None | Some(StapleMode::Auto) => must_staple.then_some(false),
        Some(StapleMode::Never) => None,
        Some(StapleMode::Always) => Some(true),
        Some(StapleMode::Must) => must_staple.then_some(true),
    }
}

/// How long until the next refresh after `resp` (nats-server's `getNextRun`).
pub fn next_run(resp: Option<&Response>, now: SystemTime) -> Duration {
    match resp.and_then(|r| r.next_update) {
        None => DEFAULT_CHECK_INTERVAL,
        Some(n) => match n.duration_since(now) {
            Ok(d) => d / 2,
            Err(_) => MIN_CHECK_INTERVAL,
        },
    }
}

/// The certificate as handshakes present it, with the latest staple.
#[derive(Debug)]
pub struct StapledKey {
    base: Arc<CertifiedKey>,
    current: RwLock<Option<(Arc<CertifiedKey>, Response)>>,
    kick: tokio::sync::Notify,
}

impl StapledKey {
    pub fn new(base: Arc<CertifiedKey>) -> StapledKey {
        StapledKey {
            base,
            current: RwLock::new(None),
            kick: tokio::sync::Notify::new(),
        }
    }

    /// Serve `resp` from now on.
    pub fn set(&self, resp: Response) {
        let mut ck = (*self.base).clone();
        ck.ocsp = Some(resp.raw.clone());
        if let Ok(mut w) = self.current.write() {
            *w = Some((Arc::new(ck), resp));
        }
    }

    /// The response served now.
    pub fn response(&self) -> Option<Response> {
        self.current.read().ok()?.as_ref().map(|(_, r)| r.clone())
    }

    /// The certificate with a staple that is still valid (`None`, and the monitor is
    /// woken, when there is none).
    pub fn resolve(&self) -> Option<Arc<CertifiedKey>> {
        let now = SystemTime::now();
        let cur = self.current.read().ok()?;
        match cur.as_ref() {
            Some((k, r)) if r.valid_at(now).is_ok() => Some(k.clone()),
            _ => {
                self.kick.notify_one();
                None
            }
        }
    }
}

/// Loads a CA bundle's certificates (DER), for finding an issuer.
pub fn pem_certs(path: &str) -> Result<Vec<Certificate>, String> {
    use rustls_pki_types::pem::PemObject;
    let pem = std::fs::read(path).map_err(|e| format!("open {path}: {}", conf::go_os_error(&e)))?;
    let mut out = Vec::new();
    for item in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
        let der = item.map_err(|e| format!("{e:?}"))?;
        out.push(Certificate::parse(&der).map_err(|e| format!("x509: {e}"))?);
    }
    Ok(out)
}

/// The system's trusted CAs.
pub fn system_ca_certs() -> Vec<Certificate> {
    for path in [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ] {
        if let Ok(c) = pem_certs(path) {
            return c;
        }
    }
    Vec::new()
}

fn signed(leaf: &Certificate, by: &Certificate) -> bool {
    super::sig::verify(&by.spki, &leaf.sig_alg, &leaf.tbs, &leaf.signature).is_ok()
}

/// nats-server's `getOCSPIssuer`: the second certificate of the chain (which must have
/// signed the leaf), else a CA of `ca_file` (or of the system) that signed it, the leaf
/// being good for server authentication (Go's chain verification defaults); it must be
/// a CA.
pub fn find_issuer(ca_file: &str, chain: &[Certificate]) -> Result<Certificate, String> {
    let cas = if ca_file.is_empty() {
        Vec::new()
    } else {
        pem_certs(ca_file).map_err(|e| format!("failed to parse ca_file: {e}"))?
    };
    let leaf = chain.first().ok_or("invalid ocsp ca configuration")?;
    let issuer = match chain.get(1) {
        Some(candidate) => {
            super::sig::verify(&candidate.spki, &leaf.sig_alg, &leaf.tbs, &leaf.signature)
                .map_err(|e| format!("invalid issuer configuration: {e}"))?;
            candidate.clone()
        }
        None => {
            let roots = if cas.is_empty() { system_ca_certs() } else { cas };
            roots
                .into_iter()
                .find(|ca| leaf.allows_server_auth() && ca.raw_subject == leaf.raw_issuer && signed(leaf, ca))
                .ok_or("no issuers found")?
        }
    };
    if !issuer.is_ca {
        let subject = crate::transport::tls::dn::go_subject_string(&issuer.subject);
        return Err(format!("{subject} invalid ca basic constraints: is not ca"));
    }
    Ok(issuer)
}

/// Creates `store_dir/ocsp` (nats-server's `setupOCSPStapleStoreDir`).
pub fn setup_store_dir(store_dir: &str) -> Result<Option<PathBuf>, String> {
    if store_dir.is_empty() {
        return Ok(None);
    }
    let dir = Path::new(store_dir).join(STORE_SUBDIR);
    match std::fs::metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(&dir)
            .map_err(|e| format!("could not create OCSP storage directory - {}", conf::go_os_error(&e)))?,
        Ok(m) if m.is_dir() => {}
        _ => return Err("OCSP storage directory is not a directory".into()),
    }
    Ok(Some(dir))
}

/// One stapled certificate's monitor.
pub struct Monitor {
    /// `Client` (the connection kind in the log lines).
    kind: &'static str,
    cert_file: String,
    leaf: Certificate,
    issuer: Certificate,
    request: Vec<u8>,
    urls: Vec<String>,
    shutdown_on_revoke: bool,
    store: Option<PathBuf>,
    key: Arc<StapledKey>,
}

/// What the server's startup needs to set up stapling for one certificate.
pub struct Setup<'a> {
    pub kind: &'static str,
    pub cert_file: &'a str,
    pub ca_file: &'a str,
    pub key: &'a Arc<CertifiedKey>,
    pub mode: Option<StapleMode>,
    pub override_urls: &'a [String],
    pub store_dir: &'a str,
}

/// What stops a monitor: dropping it, or [`Running::stop`].
pub struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Running {
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

fn store_key(leaf: &Certificate) -> String {
    crate::transport::tls::peer::hex(ring::digest::digest(&ring::digest::SHA256, &leaf.raw).as_ref())
}

impl Monitor {
    /// Decide whether `s.key` is stapled and fetch its first status (blocking; startup
    /// and reload). `Ok(None)`: not stapled. Errors are the texts that refuse the start.
    pub fn prepare(s: &Setup<'_>) -> Result<Option<Monitor>, String> {
        let chain: Vec<Certificate> = s
            .key
            .cert
            .iter()
            .map(|c| Certificate::parse(c))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("error parsing certificate: x509: {e}"))?;
        let Some(leaf) = chain.first() else {
            return Err("no certificate found".into());
        };
        let Some(shutdown_on_revoke) = plan(s.mode, leaf.must_staple) else {
            return Ok(None);
        };
        let store = setup_store_dir(s.store_dir)?;
        let issuer = find_issuer(s.ca_file, &chain)?;
        let urls = if s.override_urls.is_empty() {
            leaf.ocsp_urls.clone()
        } else {
            s.override_urls.to_vec()
        };
        let mon = Monitor {
            kind: s.kind,
            cert_file: s.cert_file.to_string(),
            request: response::request(leaf, &issuer),
            leaf: leaf.clone(),
            issuer,
            urls,
            shutdown_on_revoke,
            store,
            key: Arc::new(StapledKey::new(s.key.clone())),
        };
        let (mon, got) = super::runtime::block_on(async move {
            let got = mon.status().await;
            (mon, got)
        })
        .ok_or("OCSP runtime unavailable")?;
        let resp = got.map_err(|e| format!("bad OCSP status update for certificate at '{}': {e}", s.cert_file))?;
        if resp.status != CertStatus::Good && mon.shutdown_on_revoke {
            return Err(format!(
                "found existing OCSP status for certificate at '{}': {}",
                s.cert_file,
                resp.status.as_str()
            ));
        }
        Ok(Some(mon))
    }

    /// The connection kind (`Client`) the log lines name.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The certificate handshakes use.
    pub fn key(&self) -> Arc<StapledKey> {
        self.key.clone()
    }

    /// The response in memory if still valid, else the one stored on disk if valid,
    /// else the responders' (nats-server's `getStatus`).
    async fn status(&self) -> Result<Response, String> {
        if let Some(r) = self.key.response() {
            if r.valid_at(SystemTime::now()).is_ok() {
                return Ok(r);
            }
        }
        if let Some(r) = self.local_status() {
            self.key.set(r.clone());
            return Ok(r);
        }
        self.remote_status().await
    }

    fn local_status(&self) -> Option<Response> {
        let path = self.store.as_ref()?.join(store_key(&self.leaf));
        let raw = std::fs::read(path).ok()?;
        let r = Response::parse(&raw, &self.issuer).ok()?;
        r.valid_at(SystemTime::now()).ok()?;
        Some(r)
    }

    async fn ask(&self, method: &str, url: &str) -> Result<Vec<u8>, String> {
        let start = Instant::now();
        let (answer, reqlen, shown) = if method == "POST" {
            (
                fetch::post(url, &self.request, HTTP_TIMEOUT).await?,
                self.request.len(),
                url.to_string(),
            )
        } else {
            let enc = base64::engine::general_purpose::STANDARD.encode(&self.request);
            let full = format!("{url}/{enc}");
            (fetch::get(&full, HTTP_TIMEOUT).await?, enc.len(), full)
        };
        tracing::debug!(
            "Received OCSP response (method={method}, status={}, url={shown}, duration={:.3}s)",
            answer.status,
            start.elapsed().as_secs_f64()
        );
        if answer.status > 299 {
            return Err(format!(
                "non-ok http status on {method} request (reqlen={reqlen}): {}",
                answer.status
            ));
        }
        Ok(answer.body)
    }

    /// Ask the responders, keep (and store) what they say (nats-server's
    /// `getRemoteStatus`).
    async fn remote_status(&self) -> Result<Response, String> {
        if self.urls.is_empty() {
            return Err("no available ocsp servers".into());
        }
        let mut raw = None;
        let mut last_err = String::new();
        for u in &self.urls {
            let u = u.trim_end_matches('/');
            match self.ask("POST", u).await {
                Ok(b) => {
                    raw = Some(b);
                    break;
                }
                Err(post_err) => match self.ask("GET", u).await {
                    Ok(b) => {
                        raw = Some(b);
                        break;
                    }
                    Err(get_err) => last_err = format!("{post_err}\n{get_err}"),
                },
            }
        }
        let raw = raw.ok_or_else(|| format!("exhausted ocsp servers: {last_err}"))?;
        let resp = Response::parse(&raw, &self.issuer).map_err(|e| format!("failed to get remote status: {e}"))?;
        if !resp.is_for(&self.leaf.serial) {
            return Err("failed to get remote status: no response matching the supplied certificate".into());
        }
        resp.valid_at(SystemTime::now())?;
        if let Some(dir) = &self.store {
            write_status(dir, &store_key(&self.leaf), &raw).map_err(|e| format!("failed to write ocsp status: {e}"))?;
        }
        self.key.set(resp.clone());
        Ok(resp)
    }

    /// Keep the staple fresh until stopped; `shutdown` is called when the status turns
    /// bad in a mode that shuts down on revocation.
    pub fn spawn(self, shutdown: Arc<dyn Fn() + Send + Sync>) -> Running {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if let Some(h) = super::runtime::handle() {
            h.spawn(async move {
                if self.run(rx).await {
                    shutdown();
                }
            });
        }
        Running { stop: Some(tx) }
    }

    /// The refresh loop; true when the server must shut down.
    async fn run(self, mut stop: tokio::sync::oneshot::Receiver<()>) -> bool {
        let kind = self.kind;
        let file = self.cert_file.clone();
        let fmt = |t: Option<SystemTime>| {
            t.map(crate::proto::gotime::rfc3339_nano)
                .unwrap_or_else(|| "0001-01-01T00:00:00Z".into())
        };
        let go = crate::server::options::go_duration;
        let mut wait = Duration::ZERO;
        match self.status().await {
            Ok(r) if r.status == CertStatus::Good => {
                wait = next_run(Some(&r), SystemTime::now());
                tracing::info!(
                    "Found OCSP status for {kind} certificate at '{file}': good, next update {}, checking again in {}",
                    fmt(r.next_update),
                    go(wait)
                );
            }
            Ok(r) if self.shutdown_on_revoke => {
                tracing::error!(
                    "Found OCSP status for {kind} certificate at '{file}': {}",
                    r.status.as_str()
                );
                return true;
            }
            _ => {}
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.key.kick.notified() => {}
                _ = &mut stop => return false,
            }
            match self.remote_status().await {
                Err(e) => {
                    wait = next_run(self.key.response().as_ref(), SystemTime::now());
                    tracing::error!(
                        "Bad OCSP status update for certificate '{file}': {e}, trying again in {}",
                        go(wait)
                    );
                }
                Ok(r) if r.status == CertStatus::Good => {
                    wait = next_run(Some(&r), SystemTime::now());
                    tracing::info!(
                        "Received OCSP status for {kind} certificate '{file}': good, next update {}, checking again in {}",
                        fmt(r.next_update),
                        go(wait)
                    );
                }
                Ok(r) => {
                    tracing::error!(
                        "Received OCSP status for {kind} certificate '{file}': {}",
                        r.status.as_str()
                    );
                    return self.shutdown_on_revoke;
                }
            }
        }
    }
}

/// Write a response next to its final name, then move it there.
fn write_status(dir: &Path, name: &str, data: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("tmp-cert-status{}", std::process::id()));
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, dir.join(name)).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn plans_as_the_reference() {
        use StapleMode::*;
        for (mode, must, want) in [
            (None, false, None),
            (None, true, Some(false)),
            (Some(Auto), false, None),
            (Some(Auto), true, Some(false)),
            (Some(Always), false, Some(true)),
            (Some(Always), true, Some(true)),
            (Some(Must), false, None),
            (Some(Must), true, Some(true)),
            (Some(Never), true, None),
        ] {
            assert_eq!(plan(mode, must), want, "{mode:?} {must}");
        }
    }

    #[test]
    fn refresh_timing() {
        let now = SystemTime::now();
        let resp = |next: Option<SystemTime>| Response {
            raw: Vec::new(),
            status: CertStatus::Good,
            serial: Vec::new(),
            produced_at: now,
            this_update: now,
            next_update: next,
            signer: None,
        };
        assert_eq!(next_run(None, now), DEFAULT_CHECK_INTERVAL);
        assert_eq!(next_run(Some(&resp(None)), now), DEFAULT_CHECK_INTERVAL);
        let hours = |h: u64| Duration::from_secs(3600 * h);
        assert_eq!(next_run(Some(&resp(Some(now + hours(2)))), now), hours(1));
        assert_eq!(next_run(Some(&resp(Some(now - hours(1)))), now), MIN_CHECK_INTERVAL);
    }
}
