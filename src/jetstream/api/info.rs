//! Response shapes of the stream side, serialized as the reference does (field names,
//! order, omitempty): stream state and info, cluster info of a standalone server, account
//! info, pub acks (and their error form), stored messages for MSG.GET.

use super::config::{ExternalStream, StreamConfig, SubjectTransform};
use super::errors::ApiError;
use super::time::GoTime;
use base64::Engine;
use serde::Serialize;
use std::collections::BTreeMap;

fn is_zero_usize(v: &usize) -> bool {
    *v == 0
}
fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

/// `lost` of a stream state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LostStreamData {
    pub msgs: Vec<u64>,
    pub bytes: u64,
}

/// `StreamState` JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StreamStateJson {
    pub messages: u64,
    pub bytes: u64,
    pub first_seq: u64,
    pub first_ts: GoTime,
    pub last_seq: u64,
    pub last_ts: GoTime,
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub num_subjects: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subjects: Option<BTreeMap<String, u64>>,
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub num_deleted: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<LostStreamData>,
    pub consumer_count: usize,
}

impl StreamStateJson {
    /// From the store's state; `deleted` is kept only when asked for (`deleted_details`).
    pub fn from_store(s: &storage::StreamState, consumers: usize, deleted_details: bool) -> Self {
        StreamStateJson {
            messages: s.msgs,
            bytes: s.bytes,
            first_seq: s.first_seq,
            first_ts: GoTime::from_nanos_or_zero(s.first_ts),
            last_seq: s.last_seq,
            last_ts: GoTime::from_nanos_or_zero(s.last_ts),
            num_subjects: s.num_subjects,
            subjects: None,
            num_deleted: s.num_deleted,
            deleted: if deleted_details { s.deleted.clone() } else { Vec::new() },
            lost: None,
            consumer_count: consumers,
        }
    }
}

/// `ClusterInfo`. A standalone server sends `{"leader":"<server name>"}` (observed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClusterInfo {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub raft_group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub leader: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_since: Option<GoTime>,
    #[serde(skip_serializing_if = "is_false")]
    pub system_account: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub traffic_account: String,
}

impl ClusterInfo {
    pub fn standalone(server_name: &str) -> Self {
        ClusterInfo {
            leader: server_name.to_string(),
            ..Default::default()
        }
    }
}

/// `StreamSourceInfo` (mirror / sources state).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StreamSourceInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalStream>,
    pub lag: u64,
    /// Nanoseconds since last contact, -1 if never.
    pub active: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub filter_subject: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subject_transforms: Vec<SubjectTransform>,
}

/// `StreamAlternate`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StreamAlternate {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
    pub cluster: String,
}

/// `StreamInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StreamInfo {
    pub config: StreamConfig,
    pub created: GoTime,
    pub state: StreamStateJson,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror: Option<StreamSourceInfo>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<StreamSourceInfo>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternates: Vec<StreamAlternate>,
    pub ts: GoTime,
}

/// `JetStreamAccountLimits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AccountLimits {
    pub max_memory: i64,
    pub max_storage: i64,
    pub max_streams: i64,
    pub max_consumers: i64,
    pub max_ack_pending: i64,
    pub memory_max_stream_bytes: i64,
    pub storage_max_stream_bytes: i64,
    pub max_bytes_required: bool,
}

impl Default for AccountLimits {
    /// Unlimited (all -1), as an account with JetStream enabled and no limits shows.
    fn default() -> Self {
        AccountLimits {
            max_memory: -1,
            max_storage: -1,
            max_streams: -1,
            max_consumers: -1,
            max_ack_pending: -1,
            memory_max_stream_bytes: -1,
            storage_max_stream_bytes: -1,
            max_bytes_required: false,
        }
    }
}

/// `JetStreamTier`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tier {
    pub memory: u64,
    pub storage: u64,
    pub reserved_memory: u64,
    pub reserved_storage: u64,
    pub streams: usize,
    pub consumers: usize,
    pub limits: AccountLimits,
}

/// `JetStreamAPIStats`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ApiStats {
    pub level: u32,
    pub total: u64,
    pub errors: u64,
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub inflight: u64,
}

/// `JetStreamAccountStats` (the `$JS.API.INFO` body).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AccountInfo {
    #[serde(flatten)]
    pub tier: Tier,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
    pub api: ApiStats,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tiers: BTreeMap<String, Tier>,
}

/// `PubAck`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PubAck {
    pub stream: String,
    pub seq: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
    #[serde(skip_serializing_if = "is_false")]
    pub duplicate: bool,
    #[serde(rename = "val", skip_serializing_if = "String::is_empty")]
    pub value: String,
    #[serde(rename = "batch", skip_serializing_if = "String::is_empty")]
    pub batch_id: String,
    #[serde(rename = "count", skip_serializing_if = "is_zero_usize")]
    pub batch_size: usize,
}

/// A failed publish's reply: `{"error":{...},"stream":"S","seq":0}` (observed; the error
/// comes first, then the ack's own fields).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PubAckError {
    pub error: ApiError,
    #[serde(flatten)]
    pub ack: PubAck,
}

impl PubAck {
    pub fn to_json(&self) -> Vec<u8> {
        crate::proto::gojson::to_vec(self)
    }
    /// The error reply for a publish into `stream`.
    pub fn error_json(stream: &str, error: ApiError) -> Vec<u8> {
        let ack = PubAck {
            stream: stream.to_string(),
            ..Default::default()
        };
        crate::proto::gojson::to_vec(&PubAckError { error, ack })
    }
}

fn b64_opt<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
}
fn is_empty_bytes(v: &bytes::Bytes) -> bool {
    v.is_empty()
}

/// `StoredMsg` of a MSG.GET response (`hdrs`, `data` in base64, omitted when empty).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StoredMsgJson {
    pub subject: String,
    pub seq: u64,
    #[serde(skip_serializing_if = "is_empty_bytes", serialize_with = "b64_opt")]
    pub hdrs: bytes::Bytes,
    #[serde(skip_serializing_if = "is_empty_bytes", serialize_with = "b64_opt")]
    pub data: bytes::Bytes,
    pub time: GoTime,
}

impl StoredMsgJson {
    pub fn from_store(m: &storage::StoredMsg, no_hdr: bool) -> Self {
        StoredMsgJson {
            subject: m.subject.clone(),
            seq: m.seq,
            hdrs: if no_hdr { bytes::Bytes::new() } else { m.headers.clone() },
            data: m.payload.clone(),
            time: GoTime::from_nanos_or_zero(m.ts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::api::envelope::ok_response;
    use crate::jetstream::api::errors_table as t;

    fn s(v: Vec<u8>) -> String {
        String::from_utf8(v).unwrap()
    }

    /// Shapes observed from the reference.
    #[test]
    fn shapes() {
        assert_eq!(
            s(PubAck::error_json("P", t::JS_STREAM_MISMATCH_ERR.err())),
            r#"{"error":{"code":400,"err_code":10056,"description":"stream name in subject does not match request"},"stream":"P","seq":0}"#
        );
        assert_eq!(
            s(PubAck {
                stream: "P".into(),
                seq: 1,
                ..Default::default()
            }
            .to_json()),
            r#"{"stream":"P","seq":1}"#
        );
        let ack = PubAck {
            stream: "T3".into(),
            seq: 2,
            batch_id: "B1".into(),
            batch_size: 2,
            ..Default::default()
        };
        assert_eq!(s(ack.to_json()), r#"{"stream":"T3","seq":2,"batch":"B1","count":2}"#);
        let ts = GoTime::parse("2026-12-01T13:24:41.028646984Z").unwrap();
        let m = StoredMsgJson {
            subject: "p".into(),
            seq: 1,
            data: bytes::Bytes::from_static(b"x"),
            time: ts,
            ..Default::default()
        };
        assert_eq!(
            s(ok_response(
                "stream_msg_get_response",
                &serde_json::json!({ "message": m })
            )),
            r#"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"p","seq":1,"data":"eA==","time":"2026-12-01T13:24:41.028646984Z"}}"#
        );
        let st = storage::StreamState {
            msgs: 1,
            bytes: 32,
            first_seq: 1,
            first_ts: ts.0,
            last_seq: 1,
            last_ts: ts.0,
            num_subjects: 1,
            ..Default::default()
        };
        assert_eq!(
            s(crate::proto::gojson::to_vec(&StreamStateJson::from_store(
                &st, 0, false
            ))),
            r#"{"messages":1,"bytes":32,"first_seq":1,"first_ts":"2026-12-01T13:24:41.028646984Z","last_seq":1,"last_ts":"2026-12-01T13:24:41.028646984Z","num_subjects":1,"consumer_count":0}"#
        );
        assert_eq!(
            s(crate::proto::gojson::to_vec(&ClusterInfo::standalone("REFSRV"))),
            r#"{"leader":"REFSRV"}"#
        );
        let ai = AccountInfo {
            tier: Tier {
                storage: 345,
                streams: 4,
                consumers: 1,
                ..Default::default()
            },
            api: ApiStats {
                level: 4,
                total: 158,
                errors: 139,
                inflight: 0,
            },
            ..Default::default()
        };
        assert_eq!(
            s(ok_response("account_info_response", &ai)),
            r#"{"type":"io.nats.jetstream.api.v1.account_info_response","memory":0,"storage":345,"reserved_memory":0,"reserved_storage":0,"streams":4,"consumers":1,"limits":{"max_memory":-1,"max_storage":-1,"max_streams":-1,"max_consumers":-1,"max_ack_pending":-1,"memory_max_stream_bytes":-1,"storage_max_stream_bytes":-1,"max_bytes_required":false},"api":{"level":4,"total":158,"errors":139}}"#
        );
    }
}
