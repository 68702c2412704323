//! The envelope of system responses and events: nats-server's `ServerAPIResponse`
//! (`server`, `data`, `error`) and its `ServerInfo` description of the sending server.

use crate::proto::gotime;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// The parts of `ServerInfo` that do not change while the server runs, and the event
/// sequence.
#[derive(Debug, Default)]
pub struct ServerIdentity {
    pub name: String,
    pub host: String,
    pub id: String,
    pub cluster: String,
    pub domain: String,
    pub version: String,
    pub tags: Vec<String>,
    pub jetstream: bool,
    pub seq: AtomicU64,
}

/// `flags` of a JetStream server: JetStream enabled (1), binary stream snapshots (2) and
/// account NRG (4), as nats-server 2.14 sets them.
pub const JS_CAPABILITIES: u64 = 1 | 2 | 4;

/// nats-server's `ServerInfo` as JSON.
#[derive(Serialize)]
pub struct ServerInfo<'a> {
    pub name: &'a str,
    pub host: &'a str,
    pub id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub cluster: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub domain: &'a str,
    pub ver: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub tags: &'a [String],
    /// nats-server 2.14's feature flags and their values (all off by default).
    pub feature_flags: FeatureFlags,
    pub jetstream: bool,
    pub flags: u64,
    pub seq: u64,
    pub time: String,
}

impl ServerIdentity {
    /// The description for the next message (its sequence taken).
    pub fn info(&self) -> ServerInfo<'_> {
        ServerInfo {
            name: &self.name,
            host: &self.host,
            id: &self.id,
            cluster: &self.cluster,
            domain: &self.domain,
            ver: &self.version,
            tags: &self.tags,
            feature_flags: FeatureFlags::default(),
            jetstream: self.jetstream,
            flags: if self.jetstream { JS_CAPABILITIES } else { 0 },
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            time: gotime::rfc3339_nano(SystemTime::now()),
        }
    }
}

/// `feature_flags` as nats-server 2.14 reports them.
#[derive(Serialize, Default)]
pub struct FeatureFlags {
    pub js_ack_fc_v2: bool,
    pub js_raft_delete_range: bool,
}

/// `{"code": N, "description": "..."}`.
#[derive(Serialize)]
pub struct ApiError {
    pub code: u16,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// A response: `data` or `error`.
#[derive(Serialize)]
pub struct Response<'a, T: Serialize> {
    pub server: ServerInfo<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
}

/// Encode a response with Go's JSON escaping.
pub fn encode<T: Serialize>(server: &ServerIdentity, data: Option<T>, error: Option<ApiError>) -> Vec<u8> {
    crate::proto::gojson::to_vec(&Response {
        server: server.info(),
        data,
        error,
    })
}
