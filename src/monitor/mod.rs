//! Monitoring: nats-server's HTTP endpoints with their JSON (monitoring.md), rnats's own
//! `/shardz`, `/stacksz` and `/metrics`, and the same builders for the system account's
//! `$SYS.REQ.SERVER.*` / `$SYS.REQ.ACCOUNT.*` services.
//!
//! Module map:
//! - [`http`]: the HTTP server (hyper on a small tokio runtime of its own threads),
//!   routing under `http_base_path`, JSONP, CORS and request statistics; [`https`]:
//!   the TLS in front of it for HTTPS monitoring.
//! - [`gather`]: asking every shard for its part with jobs ([`gather::Plan`]), from the
//!   HTTP threads, a blocking caller, or a shard.
//! - [`varz`], [`connz`], [`subsz`], [`accountz`] (`/accountz`, `/accstatz`),
//!   [`disabled`] (`/routez`, `/gatewayz`, `/leafz`, `/jsz`, `/raftz`, `/ipqueuesz`: what
//!   the reference answers while those features are off; `/jsz` while JetStream is off),
//!   [`jsz`] (`/jsz` and `/varz`'s `jetstream` with JetStream on), [`healthz`], [`shardz`]
//!   (with `/stacksz`), [`metrics`] (Prometheus text), [`index`] (the `/` page).
//! - [`query`] (URL query values), [`optjson`] (JSON request bodies of `$SYS` requests),
//!   [`gofmt`] (Go's duration, uptime and strconv texts).
//!
//! Ownership: the monitor owns no server state. Counters come from the shards' published
//! atomics; everything else is asked of the shards with jobs and merged here, so the
//! message path never takes a lock for monitoring. The [`Context`] is shared (`Arc`) by
//! the HTTP server and whoever else builds answers (the system services).

pub mod accountz;
pub mod connz;
pub mod disabled;
pub mod gather;
pub mod gofmt;
pub mod healthz;
pub mod http;
pub mod https;
pub mod index;
pub mod jsz;
pub mod jsz_types;
pub mod metrics;
pub mod optjson;
pub mod query;
pub mod shardz;
pub mod subsz;
pub mod varz;

use crate::core::post::Post;
use crate::server::state::ServerState;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

pub use accountz::{accountz, accstatz, AccountStatzOptions, AccountzOptions};
pub use connz::{connz, ConnzOptions};
pub use healthz::{healthz, HealthzOptions};
pub use subsz::{subsz, SubszOptions};
pub use varz::varz;

/// Why an answer could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MonitorError {
    /// Bad options: HTTP 400 with this text (the system services answer it with code 500,
    /// as nats-server does for errors after the request body was decoded).
    #[error("{0}")]
    BadRequest(String),
    /// HTTP 404 with this text.
    #[error("{0}")]
    NotFound(String),
    /// A shard did not answer in time (or the server is stopping).
    #[error("the server's shards did not answer")]
    Unavailable,
}

impl MonitorError {
    /// The HTTP status of this error.
    pub fn http_status(&self) -> u16 {
        match self {
            MonitorError::BadRequest(_) => 400,
            MonitorError::NotFound(_) => 404,
            MonitorError::Unavailable => 503,
        }
    }
}

/// What the monitor needs from the server: its state, the shards' job poster, and the
/// HTTP request statistics `/varz` reports.
pub struct Context {
    state: Arc<ServerState>,
    post: OnceLock<Arc<dyn Post>>,
    jetstream: OnceLock<Arc<crate::jetstream::JetStream>>,
    hits: Mutex<BTreeMap<String, u64>>,
    cpu: Mutex<varz::CpuSampler>,
}

impl Context {
    /// A context for the server described by `state`; the shards are attached later
    /// ([`Context::set_post`]), once they run.
    pub fn new(state: Arc<ServerState>) -> Arc<Context> {
        Arc::new(Context {
            state,
            post: OnceLock::new(),
            jetstream: OnceLock::new(),
            hits: Mutex::new(BTreeMap::new()),
            cpu: Mutex::new(varz::CpuSampler::default()),
        })
    }

    /// Attach the shards' job poster (once).
    pub fn set_post(&self, post: Arc<dyn Post>) {
        let _ = self.post.set(post);
    }

    /// Attach JetStream (once, after it was installed on the shards).
    pub fn set_jetstream(&self, js: Arc<crate::jetstream::JetStream>) {
        let _ = self.jetstream.set(js);
    }

    /// JetStream, when it runs.
    pub fn jetstream(&self) -> Option<&Arc<crate::jetstream::JetStream>> {
        self.jetstream.get()
    }

    /// The shards' job poster.
    pub(crate) fn post(&self) -> Result<Arc<dyn Post>, MonitorError> {
        self.post.get().cloned().ok_or(MonitorError::Unavailable)
    }

    /// The server's state.
    pub fn state(&self) -> &ServerState {
        &self.state
    }

    /// The server id.
    pub fn server_id(&self) -> String {
        self.state.live().info.server_id.clone()
    }

    /// Count a request to `path` (nats-server's `http_req_stats`).
    pub fn count_hit(&self, path: &str) {
        let mut h = self.hits.lock().unwrap_or_else(|p| p.into_inner());
        *h.entry(path.to_string()).or_insert(0) += 1;
    }

    /// The request counts so far.
    pub fn http_stats(&self) -> BTreeMap<String, u64> {
        self.hits.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// CPU use since the previous sample, in percent.
    pub(crate) fn cpu_percent(&self) -> f64 {
        self.cpu.lock().unwrap_or_else(|p| p.into_inner()).sample()
    }

    /// The system account's name, if there is one.
    pub fn system_account(&self) -> Option<String> {
        let t = self.state.shared.accounts.snapshot();
        t.system().map(|id| t.name(id).to_string())
    }
}

/// Subscriptions nats-server makes for an account's service imports (one internal
/// subscription each, counted in the account's sublist). rnats routes service imports
/// without sublist entries, so monitoring adds them where the reference counts them.
pub(crate) fn import_subs(def: &crate::core::accounts::AccountDef) -> u64 {
    def.service_imports.len() as u64
}

/// `now` as the JSON time nats-server writes (`time.Time` in UTC, RFC 3339 with
/// nanoseconds and trailing zeros dropped).
pub(crate) fn json_time(t: std::time::SystemTime) -> String {
    crate::proto::gotime::rfc3339_nano(t)
}

#[cfg(test)]
mod tests;
