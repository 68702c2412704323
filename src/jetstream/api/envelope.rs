//! The API's response envelope: `{"type":"io.nats.jetstream.api.v1.<suffix>", ...}` with the
//! body's fields after `type` (as the reference's embedded `ApiResponse` puts them), or
//! `"error":{...}` in their place. Paged responses (names, lists, stream info) keep
//! `total/offset/limit` even on error, as the reference sends them.

use super::errors::ApiError;
use serde::Serialize;
use serde_json::{Map, Value};

pub const TYPE_PREFIX: &str = "io.nats.jetstream.api.v1.";

/// `total`, `offset`, `limit` of a paged response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Paged {
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
}

fn with_type(type_suffix: &str, error: Option<&ApiError>, rest: Value) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("type".into(), Value::String(format!("{TYPE_PREFIX}{type_suffix}")));
    if let Some(e) = error {
        m.insert("error".into(), serde_json::to_value(e).unwrap_or(Value::Null));
    }
    if let Value::Object(fields) = rest {
        for (k, v) in fields {
            if k != "type" {
                m.insert(k, v);
            }
        }
    }
    crate::proto::gojson::to_vec(&Value::Object(m))
}

/// A success response: `type`, then the body's fields.
pub fn ok_response(type_suffix: &str, body: &impl Serialize) -> Vec<u8> {
    with_type(type_suffix, None, serde_json::to_value(body).unwrap_or(Value::Null))
}

/// An error response: `{"type":..., "error":{...}}`.
pub fn error_response(type_suffix: &str, err: &ApiError) -> Vec<u8> {
    with_type(type_suffix, Some(err), Value::Null)
}

/// An error response that still carries some success fields (`"purged":0` of a purge,
/// `"stream"`/`"seq"` are the pub ack's own, see `info::PubAckError`).
pub fn error_response_with(type_suffix: &str, err: &ApiError, extra: &impl Serialize) -> Vec<u8> {
    with_type(
        type_suffix,
        Some(err),
        serde_json::to_value(extra).unwrap_or(Value::Null),
    )
}

/// A paged success response: `type`, `total/offset/limit`, then the body's fields.
pub fn paged_ok_response(type_suffix: &str, paged: Paged, body: &impl Serialize) -> Vec<u8> {
    let mut rest = serde_json::to_value(paged).unwrap_or(Value::Null);
    if let (Value::Object(r), Value::Object(b)) = (&mut rest, serde_json::to_value(body).unwrap_or(Value::Null)) {
        r.extend(b);
    }
    with_type(type_suffix, None, rest)
}

/// A paged error response: `type`, `error`, zero `total/offset/limit` and `extra` (the
/// reference sends `"streams":null` for names and `"streams":[]` for lists).
pub fn paged_error_response(type_suffix: &str, err: &ApiError, extra: &impl Serialize) -> Vec<u8> {
    let mut rest = serde_json::to_value(Paged::default()).unwrap_or(Value::Null);
    if let (Value::Object(r), Value::Object(b)) = (&mut rest, serde_json::to_value(extra).unwrap_or(Value::Null)) {
        r.extend(b);
    }
    with_type(type_suffix, Some(err), rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::api::errors_table as t;
    use serde_json::json;

    /// Shapes observed from the reference.
    #[test]
    fn envelopes() {
        let e = t::JS_INVALID_JSON_ERR.err_with(r#"json: unknown field "foo""#);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                error_response("stream_create_response", &e),
                r#"{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":400,"err_code":10025,"description":"invalid JSON: json: unknown field \"foo\""}}"#,
            ),
            (
                paged_error_response("stream_info_response", &e, &json!({})),
                r#"{"type":"io.nats.jetstream.api.v1.stream_info_response","error":{"code":400,"err_code":10025,"description":"invalid JSON: json: unknown field \"foo\""},"total":0,"offset":0,"limit":0}"#,
            ),
            (
                paged_error_response("stream_names_response", &e, &json!({"streams": null})),
                r#"{"type":"io.nats.jetstream.api.v1.stream_names_response","error":{"code":400,"err_code":10025,"description":"invalid JSON: json: unknown field \"foo\""},"total":0,"offset":0,"limit":0,"streams":null}"#,
            ),
            (
                error_response_with("stream_purge_response", &e, &json!({"purged": 0})),
                r#"{"type":"io.nats.jetstream.api.v1.stream_purge_response","error":{"code":400,"err_code":10025,"description":"invalid JSON: json: unknown field \"foo\""},"purged":0}"#,
            ),
            (
                paged_ok_response(
                    "stream_names_response",
                    Paged {
                        total: 1,
                        offset: 0,
                        limit: 1024,
                    },
                    &json!({"streams": ["A"]}),
                ),
                r#"{"type":"io.nats.jetstream.api.v1.stream_names_response","total":1,"offset":0,"limit":1024,"streams":["A"]}"#,
            ),
            (
                ok_response("stream_delete_response", &json!({"success": true})),
                r#"{"type":"io.nats.jetstream.api.v1.stream_delete_response","success":true}"#,
            ),
        ];
        for (got, want) in cases {
            assert_eq!(String::from_utf8(got).unwrap(), want);
        }
    }
}
