//! The Go structs behind a stream configuration (`StreamConfig`, `StreamConfigRequest` and
//! their parts) as [`Schema`]s for the strict decoder: JSON names, Go type names and the
//! enums' own unmarshalers (which compare the raw JSON text, so only the exact lowercase
//! strings pass; `persist_mode` also takes `""`; `compression` decodes a string first).

use super::decode::{CustomErr, Field, Kind, Schema, DURATION, INT, INT32, INT64, UINT64};
use super::json_scan::JVal;
use serde_json::Value;

/// The reference's enum unmarshalers: exact raw text or `can not unmarshal "<raw>"`.
fn enum_of(v: &JVal, raw: &str, allowed: &[&str], empty_as: Option<&str>) -> Result<Value, CustomErr> {
    if let JVal::Str(s) = v {
        let exact = raw.len() == s.len() + 2;
        if exact && allowed.contains(&s.as_str()) {
            return Ok(Value::String(s.clone()));
        }
        if exact && s.is_empty() {
            if let Some(e) = empty_as {
                return Ok(Value::String(e.to_string()));
            }
        }
    }
    Err(CustomErr::Text(format!(
        "can not unmarshal {}",
        super::decode::go_quote(raw)
    )))
}

fn retention(v: &JVal, raw: &str) -> Result<Value, CustomErr> {
    enum_of(v, raw, &["limits", "interest", "workqueue"], None)
}
fn discard(v: &JVal, raw: &str) -> Result<Value, CustomErr> {
    enum_of(v, raw, &["old", "new"], None)
}
fn storage(v: &JVal, raw: &str) -> Result<Value, CustomErr> {
    enum_of(v, raw, &["file", "memory"], None)
}
fn persist_mode(v: &JVal, raw: &str) -> Result<Value, CustomErr> {
    enum_of(v, raw, &["default", "async"], Some("default"))
}
fn compression(v: &JVal, _raw: &str) -> Result<Value, CustomErr> {
    match v {
        JVal::Str(s) if s == "s2" || s == "none" => Ok(Value::String(s.clone())),
        JVal::Str(_) | JVal::Null => Err(CustomErr::Text("unknown compression algorithm".into())),
        other => Err(CustomErr::Type(other.kind_name(), "string")),
    }
}

const fn f(json: &'static str, kind: Kind) -> Field {
    Field { json, kind }
}

const STRINGS: Kind = Kind::Slice("[]string", &Kind::Str);

pub static PLACEMENT: Schema = Schema {
    name: "Placement",
    go_type: "server.Placement",
    fields: &[f("cluster", Kind::Str), f("tags", STRINGS), f("preferred", Kind::Str)],
    embedded: &[],
};

pub static SUBJECT_TRANSFORM: Schema = Schema {
    name: "SubjectTransformConfig",
    go_type: "server.SubjectTransformConfig",
    fields: &[f("src", Kind::Str), f("dest", Kind::Str)],
    embedded: &[],
};

pub static REPUBLISH: Schema = Schema {
    name: "RePublish",
    go_type: "server.RePublish",
    fields: &[f("src", Kind::Str), f("dest", Kind::Str), f("headers_only", Kind::Bool)],
    embedded: &[],
};

pub static EXTERNAL: Schema = Schema {
    name: "ExternalStream",
    go_type: "server.ExternalStream",
    fields: &[f("api", Kind::Str), f("deliver", Kind::Str)],
    embedded: &[],
};

pub static SOURCE_CONSUMER: Schema = Schema {
    name: "StreamConsumerSource",
    go_type: "server.StreamConsumerSource",
    fields: &[f("name", Kind::Str), f("deliver_subject", Kind::Str)],
    embedded: &[],
};

pub static STREAM_SOURCE: Schema = Schema {
    name: "StreamSource",
    go_type: "server.StreamSource",
    fields: &[
        f("name", Kind::Str),
        f("opt_start_seq", Kind::Int(&UINT64)),
        f("opt_start_time", Kind::Time),
        f("filter_subject", Kind::Str),
        f(
            "subject_transforms",
            Kind::Slice("[]server.SubjectTransformConfig", &Kind::Struct(&SUBJECT_TRANSFORM)),
        ),
        f("external", Kind::Struct(&EXTERNAL)),
        f("consumer", Kind::Struct(&SOURCE_CONSUMER)),
    ],
    embedded: &[],
};

pub static CONSUMER_LIMITS: Schema = Schema {
    name: "StreamConsumerLimits",
    go_type: "server.StreamConsumerLimits",
    fields: &[
        f("inactive_threshold", Kind::Int(&DURATION)),
        f("max_ack_pending", Kind::Int(&INT)),
    ],
    embedded: &[],
};

/// The fields of `StreamConfig`.
pub static STREAM_CONFIG_FIELDS: &[Field] = &[
    f("name", Kind::Str),
    f("description", Kind::Str),
    f("subjects", STRINGS),
    f("retention", Kind::Custom(retention)),
    f("max_consumers", Kind::Int(&INT)),
    f("max_msgs", Kind::Int(&INT64)),
    f("max_bytes", Kind::Int(&INT64)),
    f("max_age", Kind::Int(&DURATION)),
    f("max_msgs_per_subject", Kind::Int(&INT64)),
    f("max_msg_size", Kind::Int(&INT32)),
    f("discard", Kind::Custom(discard)),
    f("storage", Kind::Custom(storage)),
    f("num_replicas", Kind::Int(&INT)),
    f("no_ack", Kind::Bool),
    f("duplicate_window", Kind::Int(&DURATION)),
    f("placement", Kind::Struct(&PLACEMENT)),
    f("mirror", Kind::Struct(&STREAM_SOURCE)),
    f(
        "sources",
        Kind::Slice("[]*server.StreamSource", &Kind::Struct(&STREAM_SOURCE)),
    ),
    f("compression", Kind::Custom(compression)),
    f("first_seq", Kind::Int(&UINT64)),
    f("subject_transform", Kind::Struct(&SUBJECT_TRANSFORM)),
    f("republish", Kind::Struct(&REPUBLISH)),
    f("allow_direct", Kind::Bool),
    f("mirror_direct", Kind::Bool),
    f("discard_new_per_subject", Kind::Bool),
    f("sealed", Kind::Bool),
    f("deny_delete", Kind::Bool),
    f("deny_purge", Kind::Bool),
    f("allow_rollup_hdrs", Kind::Bool),
    f("consumer_limits", Kind::Struct(&CONSUMER_LIMITS)),
    f("allow_msg_ttl", Kind::Bool),
    f("subject_delete_marker_ttl", Kind::Int(&DURATION)),
    f("allow_msg_counter", Kind::Bool),
    f("allow_atomic", Kind::Bool),
    f("allow_msg_schedules", Kind::Bool),
    f("persist_mode", Kind::Custom(persist_mode)),
    f("allow_batched", Kind::Bool),
    f("metadata", Kind::Map("map[string]string", &Kind::Str)),
];

/// `StreamConfig` on its own.
pub static STREAM_CONFIG: Schema = Schema {
    name: "StreamConfig",
    go_type: "server.StreamConfig",
    fields: STREAM_CONFIG_FIELDS,
    embedded: &[],
};

/// The create/update request: `StreamConfig` embedded, plus `pedantic`.
pub static STREAM_CONFIG_REQUEST: Schema = Schema {
    name: "StreamConfigRequest",
    go_type: "server.StreamConfigRequest",
    fields: &[f("pedantic", Kind::Bool)],
    embedded: &[("StreamConfig", STREAM_CONFIG_FIELDS)],
};
