//! The JSON shapes of `/jsz` and `/varz`'s `jetstream` section: nats-server's `JSInfo`,
//! `JetStreamStats`, `JetStreamConfig`, `JSLimitOpts`, `AccountDetail`, `StreamDetail`
//! and `JetStreamVarz`, with their field names, order and omitted-when-empty rules.

use crate::jetstream::api::config::StreamConfig;
use crate::jetstream::api::consumer_info::ConsumerInfo;
use crate::jetstream::api::GoTime;
use serde::Serialize;

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// JetStream's API counters (`JetStreamAPIStats`).
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct JsApi {
    pub level: i64,
    pub total: u64,
    pub errors: u64,
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub inflight: u64,
}

/// `JetStreamStats`.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct JetStreamStats {
    pub memory: u64,
    pub storage: u64,
    pub reserved_memory: u64,
    pub reserved_storage: u64,
    pub accounts: usize,
    pub ha_assets: usize,
    pub api: JsApi,
}

/// `JetStreamConfig` (all zero while JetStream is off).
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct JetStreamConfig {
    pub max_memory: i64,
    pub max_storage: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub store_dir: String,
    /// Nanoseconds.
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub sync_interval: i64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub sync_always: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub compress_ok: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub unique_tag: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

/// `JSLimitOpts` (durations in nanoseconds; zero values are omitted).
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct JsLimits {
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub max_request_batch: i64,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub max_ack_pending: i64,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub max_ha_assets: i64,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub max_duplicate_window: i64,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub max_batch_inflight_per_stream: i64,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub max_batch_inflight_total: i64,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub max_batch_size: i64,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub max_batch_timeout: i64,
}

/// One stream of an account (`StreamDetail`).
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct StreamDetail {
    pub name: String,
    pub created: GoTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<StreamConfig>,
    pub state: serde_json::Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consumer_detail: Vec<ConsumerInfo>,
}

/// One account (`AccountDetail`).
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct AccountDetail {
    pub name: String,
    pub id: String,
    #[serde(flatten)]
    pub stats: JetStreamStats,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stream_detail: Vec<StreamDetail>,
}

/// `/jsz` (`JSInfo`).
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct Jsz {
    #[serde(flatten)]
    pub stats: JetStreamStats,
    pub server_id: String,
    pub now: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    pub config: JetStreamConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<JsLimits>,
    pub streams: usize,
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub streams_leader: usize,
    pub consumers: usize,
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub consumers_leader: usize,
    pub messages: u64,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub account_details: Vec<AccountDetail>,
    pub total: usize,
}

/// `/varz`'s `jetstream` (`JetStreamVarz`): `{}` while JetStream is off.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct JetStreamVarz {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<JetStreamConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<JetStreamStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<JsLimits>,
}
