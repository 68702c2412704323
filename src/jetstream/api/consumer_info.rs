//! Consumer API requests and response bodies: `CreateConsumerRequest` (strict), the
//! `ConsumerInfo` every create/info/list/reset answer carries, and the pause, unpin and
//! reset requests. Field names, order and omitempty rules are nats-server 2.14's (checked
//! against the reference's answers).

use super::config::{is_false, is_zero_i64, null_default, ConsumerConfig};
use super::errors::ApiError;
use super::errors_table::JS_INVALID_JSON_ERR;
use super::time::GoTime;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A serde_json error as Go's decoder words the common cases: `unexpected end of JSON
/// input`, `json: unknown field "x"`; otherwise serde's text without its position.
pub fn json_error_text(e: &serde_json::Error) -> String {
    if e.is_eof() {
        return "unexpected end of JSON input".to_string();
    }
    let mut text = e.to_string();
    if let Some(i) = text.rfind(" at line ") {
        text.truncate(i);
    }
    if let Some(rest) = text.strip_prefix("unknown field `") {
        if let Some(end) = rest.find('`') {
            return format!("json: unknown field \"{}\"", rest.get(..end).unwrap_or_default());
        }
    }
    text
}

/// The `action` of a create request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConsumerAction {
    /// `""`: create, or update an existing consumer where allowed.
    #[default]
    CreateOrUpdate,
    /// `"create"`: fail if it exists with a different configuration.
    Create,
    /// `"update"`: fail if it does not exist.
    Update,
}

impl ConsumerAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerAction::CreateOrUpdate => "",
            ConsumerAction::Create => "create",
            ConsumerAction::Update => "update",
        }
    }
}

impl Serialize for ConsumerAction {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ConsumerAction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        match v.as_str() {
            Some("") => Ok(ConsumerAction::CreateOrUpdate),
            Some("create") => Ok(ConsumerAction::Create),
            Some("update") => Ok(ConsumerAction::Update),
            // Go quotes the raw JSON of the value.
            _ => Err(serde::de::Error::custom(format!("unknown consumer action: {v}"))),
        }
    }
}

/// `CreateConsumerRequest`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateConsumerRequest {
    #[serde(default, deserialize_with = "null_default")]
    pub stream_name: String,
    #[serde(default, deserialize_with = "null_default")]
    pub config: ConsumerConfig,
    #[serde(default)]
    pub action: ConsumerAction,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub pedantic: bool,
}

impl CreateConsumerRequest {
    /// Strict decoding: unknown fields refused; errors are `10025 invalid JSON: ...`.
    pub fn decode(body: &[u8]) -> Result<CreateConsumerRequest, ApiError> {
        serde_json::from_slice(body).map_err(|e| JS_INVALID_JSON_ERR.err_with(json_error_text(&e)))
    }
}

/// A consumer and stream sequence, with when it last moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceInfo {
    pub consumer_seq: u64,
    pub stream_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_active: Option<GoTime>,
}

/// A priority group's state in `ConsumerInfo` (`pinned_ts` is always written, the zero
/// time when nothing is pinned).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityGroupState {
    pub group: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pinned_client_id: String,
    #[serde(default = "zero_time")]
    pub pinned_ts: GoTime,
}

fn zero_time() -> GoTime {
    GoTime::ZERO
}

/// `ConsumerInfo`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerInfo {
    pub stream_name: String,
    pub name: String,
    pub created: GoTime,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConsumerConfig>,
    pub delivered: SequenceInfo,
    pub ack_floor: SequenceInfo,
    pub num_ack_pending: i64,
    pub num_redelivered: i64,
    pub num_waiting: i64,
    pub num_pending: u64,
    /// `ClusterInfo` (owned by the stream side), omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub push_bound: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Nanoseconds.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub pause_remaining: i64,
    pub ts: GoTime,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub priority_groups: Vec<PriorityGroupState>,
}

/// `$JS.API.CONSUMER.PAUSE` request: a zero or absent time resumes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerPauseRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_until: Option<GoTime>,
}

impl ConsumerPauseRequest {
    /// The reference decodes the body (strictly) only when it looks like a JSON object
    /// or array; anything else is an empty request.
    pub fn decode(body: &[u8]) -> Result<ConsumerPauseRequest, ApiError> {
        let t = body.trim_ascii();
        if !(t.starts_with(b"{") && t.ends_with(b"}") || t.starts_with(b"[") && t.ends_with(b"]")) {
            return Ok(ConsumerPauseRequest::default());
        }
        serde_json::from_slice(t).map_err(|e| JS_INVALID_JSON_ERR.err_with(json_error_text(&e)))
    }
}

/// The pause response body (after `type`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerPauseResponse {
    pub paused: bool,
    pub pause_until: GoTime,
    /// Nanoseconds.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub pause_remaining: i64,
}

/// `$JS.API.CONSUMER.UNPIN` request (decoded leniently, as the reference does).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerUnpinRequest {
    #[serde(default, deserialize_with = "null_default")]
    pub group: String,
}

/// `$JS.API.CONSUMER.RESET` request: no `seq` (or 0) resets to the ack floor. Decoded
/// leniently when the body is not empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerResetRequest {
    #[serde(
        default,
        skip_serializing_if = "super::config::is_zero_u64",
        deserialize_with = "null_default"
    )]
    pub seq: u64,
}

/// Decode a lenient request body (Go's `json.Unmarshal` into the struct), mapping errors
/// to `10025 invalid JSON`.
pub fn decode_lenient<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| JS_INVALID_JSON_ERR.err_with(json_error_text(&e)))
}

#[cfg(test)]
mod tests {
    use super::super::config::{AckPolicy, ConsumerConfig, DeliverPolicy};
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn create_request_decoding() {
        let r = CreateConsumerRequest::decode(
            br#"{"stream_name":"S","config":{"durable_name":"C","ack_policy":"explicit"},"action":"create","pedantic":true}"#,
        )
        .unwrap();
        assert_eq!(r.stream_name, "S");
        assert_eq!(r.config.ack_policy, AckPolicy::Explicit);
        assert_eq!(r.action, ConsumerAction::Create);
        assert!(r.pedantic);
        // Texts the reference answers with (10025).
        let cases: &[(&str, &str)] = &[
            (
                r#"{"stream_name":"S","config":{"bogus":1}}"#,
                r#"invalid JSON: json: unknown field "bogus""#,
            ),
            (
                r#"{"stream_name":"S","action":"bogus"}"#,
                r#"invalid JSON: unknown consumer action: "bogus""#,
            ),
            (
                r#"{"stream_name":"S","action":1}"#,
                "invalid JSON: unknown consumer action: 1",
            ),
            (r#"{"stream_name":"S""#, "invalid JSON: unexpected end of JSON input"),
        ];
        for (body, want) in cases {
            let e = CreateConsumerRequest::decode(body.as_bytes()).unwrap_err();
            assert_eq!(
                (e.code, e.err_code, e.description.as_str()),
                (400, 10025, *want),
                "{body}"
            );
        }
        let round = serde_json::to_string(&CreateConsumerRequest::default()).unwrap();
        assert_eq!(
            round,
            r#"{"stream_name":"","config":{"deliver_policy":"all","ack_policy":"none","replay_policy":"instant","num_replicas":0},"action":""}"#
        );
    }

    /// The shape the reference answered `$JS.API.CONSUMER.INFO` with (fields, order).
    #[test]
    fn info_shape_matches_reference() {
        let created = GoTime::parse("2026-12-01T13:17:11.78667754Z").unwrap();
        let info = ConsumerInfo {
            stream_name: "F".into(),
            name: "D".into(),
            created,
            config: Some(ConsumerConfig {
                durable_name: "D".into(),
                name: "D".into(),
                deliver_policy: DeliverPolicy::All,
                ack_policy: AckPolicy::Explicit,
                ack_wait: 30_000_000_000,
                max_deliver: -1,
                max_waiting: 512,
                max_ack_pending: 1000,
                metadata: BTreeMap::from([
                    ("_nats.level".to_string(), "4".to_string()),
                    ("_nats.req.level".to_string(), "0".to_string()),
                    ("_nats.ver".to_string(), "2.14.0".to_string()),
                ]),
                ..ConsumerConfig::default()
            }),
            delivered: SequenceInfo {
                consumer_seq: 7,
                stream_seq: 6,
                last_active: GoTime::parse("2026-12-01T13:17:16.9654744Z"),
            },
            ack_floor: SequenceInfo {
                consumer_seq: 2,
                stream_seq: 2,
                last_active: GoTime::parse("2026-12-01T13:17:14.961814577Z"),
            },
            num_ack_pending: 2,
            num_redelivered: 1,
            num_waiting: 0,
            num_pending: 4,
            cluster: None,
            push_bound: false,
            paused: false,
            pause_remaining: 0,
            ts: GoTime::parse("2026-12-01T13:17:17.566608236Z").unwrap(),
            priority_groups: Vec::new(),
        };
        let want = r#"{"stream_name":"F","name":"D","created":"2026-12-01T13:17:11.78667754Z","config":{"durable_name":"D","name":"D","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"num_replicas":0,"metadata":{"_nats.level":"4","_nats.req.level":"0","_nats.ver":"2.14.0"}},"delivered":{"consumer_seq":7,"stream_seq":6,"last_active":"2026-12-01T13:17:16.9654744Z"},"ack_floor":{"consumer_seq":2,"stream_seq":2,"last_active":"2026-12-01T13:17:14.961814577Z"},"num_ack_pending":2,"num_redelivered":1,"num_waiting":0,"num_pending":4,"ts":"2026-12-01T13:17:17.566608236Z"}"#;
        assert_eq!(serde_json::to_string(&info).unwrap(), want);
        let back: ConsumerInfo = serde_json::from_str(want).unwrap();
        assert_eq!(back, info);

        let groups = vec![PriorityGroupState {
            group: "g1".into(),
            pinned_client_id: String::new(),
            pinned_ts: GoTime::ZERO,
        }];
        assert_eq!(
            serde_json::to_string(&groups).unwrap(),
            r#"[{"group":"g1","pinned_ts":"0001-01-01T00:00:00Z"}]"#
        );
    }

    #[test]
    fn pause_shapes() {
        let r = ConsumerPauseRequest::decode(br#"{"pause_until":"2030-01-01T00:00:00Z"}"#).unwrap();
        assert_eq!(r.pause_until, GoTime::parse("2030-01-01T00:00:00Z"));
        assert_eq!(
            ConsumerPauseRequest::decode(b"").unwrap(),
            ConsumerPauseRequest::default()
        );
        assert_eq!(
            ConsumerPauseRequest::decode(b"junk").unwrap(),
            ConsumerPauseRequest::default()
        );
        assert_eq!(ConsumerPauseRequest::decode(br#"{"x":1}"#).unwrap_err().err_code, 10025);
        let resp = ConsumerPauseResponse {
            paused: false,
            pause_until: GoTime::ZERO,
            pause_remaining: 0,
        };
        assert_eq!(
            serde_json::to_string(&resp).unwrap(),
            r#"{"paused":false,"pause_until":"0001-01-01T00:00:00Z"}"#
        );
        let u: ConsumerUnpinRequest = decode_lenient(br#"{"group":"g1","other":2}"#).unwrap();
        assert_eq!(u.group, "g1");
        let s: ConsumerResetRequest = decode_lenient(br#"{"seq":2}"#).unwrap();
        assert_eq!(s.seq, 2);
    }
}
