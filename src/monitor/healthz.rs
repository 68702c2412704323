//! `/healthz` (monitoring.md §11). Without JetStream a running server is healthy; only
//! the option checks can fail (a stream without an account, a consumer without a
//! stream), with nats-server's texts and status codes.

use super::optjson::{self, f, EventFilter, Field, Kind, Val};
use super::query::Query;
use super::MonitorError;
use serde::Serialize;

/// nats-server's `HealthzOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthzOptions {
    /// Deprecated spelling of `js_enabled_only`.
    pub js_enabled: bool,
    pub js_enabled_only: bool,
    pub js_server_only: bool,
    pub js_meta_only: bool,
    pub account: String,
    pub stream: String,
    pub consumer: String,
    pub details: bool,
}

const FIELDS: [Field; 8] = [
    f("js-enabled", "HealthzOptions", Kind::Bool),
    f("js-enabled-only", "HealthzOptions", Kind::Bool),
    f("js-server-only", "HealthzOptions", Kind::Bool),
    f("js-meta-only", "HealthzOptions", Kind::Bool),
    f("account", "HealthzOptions", Kind::Str),
    f("stream", "HealthzOptions", Kind::Str),
    f("consumer", "HealthzOptions", Kind::Str),
    f("details", "HealthzOptions", Kind::Bool),
];

impl HealthzOptions {
    /// From a `/healthz` query string.
    pub fn from_query(q: &Query) -> Result<HealthzOptions, MonitorError> {
        let js_enabled = q.bool("js-enabled")?;
        if js_enabled {
            tracing::warn!("Healthcheck: js-enabled deprecated, use js-enabled-only instead");
        }
        Ok(HealthzOptions {
            js_enabled,
            js_enabled_only: q.bool("js-enabled-only")?,
            js_server_only: q.bool("js-server-only")?,
            js_meta_only: q.bool("js-meta-only")?,
            details: q.bool("details")?,
            account: q.get("account").to_string(),
            stream: q.get("stream").to_string(),
            consumer: q.get("consumer").to_string(),
        })
    }

    /// From the JSON body of a `$SYS` request (`HealthzEventOptions`).
    pub fn from_json(body: &[u8]) -> Result<(HealthzOptions, EventFilter), String> {
        let mut o = HealthzOptions::default();
        let mut filter = EventFilter::default();
        if body.is_empty() {
            return Ok((o, filter));
        }
        let fields: Vec<Field> = FIELDS.iter().chain(EventFilter::FIELDS.iter()).copied().collect();
        for (name, v) in optjson::decode(body, "HealthzEventOptions", &fields)? {
            if filter.take(name, &v) {
                continue;
            }
            match (name, v) {
                ("js-enabled", Val::Bool(b)) => o.js_enabled = b,
                ("js-enabled-only", Val::Bool(b)) => o.js_enabled_only = b,
                ("js-server-only", Val::Bool(b)) => o.js_server_only = b,
                ("js-meta-only", Val::Bool(b)) => o.js_meta_only = b,
                ("account", Val::Str(s)) => o.account = s,
                ("stream", Val::Str(s)) => o.stream = s,
                ("consumer", Val::Str(s)) => o.consumer = s,
                ("details", Val::Bool(b)) => o.details = b,
                _ => {}
            }
        }
        Ok((o, filter))
    }
}

/// One problem (`details=true`).
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthzError {
    /// `CONNECTION`, `BAD_REQUEST`, `JETSTREAM`, `ACCOUNT`, `STREAM`, `CONSUMER`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stream: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub consumer: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// nats-server's `HealthStatus`. `status_code` is only shown in the system service's
/// answer; over HTTP it is the response status.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthStatus {
    pub status: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub status_code: u16,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<HealthzError>,
}

fn is_zero(n: &u16) -> bool {
    *n == 0
}

/// The server's health for `opts`.
pub fn healthz(opts: &HealthzOptions) -> HealthStatus {
    let mut h = HealthStatus {
        status: "ok".into(),
        ..Default::default()
    };
    let bad = if opts.account.is_empty() && !opts.stream.is_empty() {
        Some("\"account\" must not be empty when checking stream health")
    } else if opts.stream.is_empty() && !opts.consumer.is_empty() {
        Some("\"stream\" must not be empty when checking consumer health")
    } else {
        None
    };
    if let Some(text) = bad {
        h.status_code = 400;
        if opts.details {
            h.errors.push(HealthzError {
                kind: "BAD_REQUEST".into(),
                error: text.into(),
                ..Default::default()
            });
        } else {
            h.status = "error".into();
            h.error = text.into();
        }
    }
    // Without JetStream configured, a running server has nothing more to check.
    if opts.details {
        h.status = if h.errors.is_empty() { "ok" } else { "error" }.into();
    }
    if h.status_code == 0 {
        h.status_code = if h.error.is_empty() && h.errors.is_empty() {
            200
        } else {
            503
        };
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(q: &str) -> (u16, String) {
        let o = HealthzOptions::from_query(&Query::parse(q)).unwrap_or_default();
        let mut h = healthz(&o);
        let code = h.status_code;
        h.status_code = 0;
        (
            code,
            String::from_utf8(crate::proto::gojson::to_vec(&h)).unwrap_or_default(),
        )
    }

    #[test]
    fn answers_as_the_reference() {
        let cases = [
            ("", 200, r#"{"status":"ok"}"#),
            ("js-enabled-only=true", 200, r#"{"status":"ok"}"#),
            ("account=A&stream=S&consumer=C", 200, r#"{"status":"ok"}"#),
            (
                "stream=x",
                400,
                r#"{"status":"error","error":"\"account\" must not be empty when checking stream health"}"#,
            ),
            (
                "account=A&consumer=c",
                400,
                r#"{"status":"error","error":"\"stream\" must not be empty when checking consumer health"}"#,
            ),
            (
                "stream=x&details=1",
                400,
                r#"{"status":"error","errors":[{"type":"BAD_REQUEST","error":"\"account\" must not be empty when checking stream health"}]}"#,
            ),
        ];
        for (q, code, body) in cases {
            assert_eq!(check(q), (code, body.to_string()), "{q}");
        }
    }

    #[test]
    fn json_options() {
        let (o, _) =
            HealthzOptions::from_json(br#"{"js-server-only":true,"details":true,"account":"A"}"#).unwrap_or_default();
        assert!(o.js_server_only && o.details);
        assert_eq!(o.account, "A");
    }
}
