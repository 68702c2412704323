//! `/healthz` (monitoring.md §11): the option checks (a stream without an account, a
//! consumer without a stream), then with JetStream configured a standalone server's
//! checks: JetStream enabled (`js-enabled-only` stops there, `js-server-only` skips it
//! all), every stream directory of the store recovered, and the asked account, stream
//! and consumer present, with nats-server's texts and status codes.

use super::gather::{Done, Plan};
use super::jsz::{self, StreamPart};
use super::optjson::{self, f, EventFilter, Field, Kind, Val};
use super::query::Query;
use super::{Context, MonitorError};
use crate::core::accounts::AccountId;
use crate::core::shard::ShardCore;
use crate::jetstream::JetStream;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

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

/// What the JetStream checks look at (JetStream is configured).
pub struct JsHealth<'a> {
    /// JetStream, if it runs.
    pub js: Option<&'a JetStream>,
    /// An account's id by name.
    pub account_id: &'a dyn Fn(&str) -> Option<AccountId>,
    /// Whether a stream of an account has a consumer of that name.
    pub has_consumer: &'a dyn Fn(AccountId, &str, &str) -> bool,
}

/// The server's health for `opts`; `js` is `None` when JetStream is not configured.
pub fn healthz(opts: &HealthzOptions, js: Option<JsHealth<'_>>) -> HealthStatus {
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
    } else if !opts.js_server_only {
        if let Some(js) = js {
            check_jetstream(opts, &js, &mut h);
        }
    }
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

const UNAVAILABLE: &str = "unavailable";
/// The store directory's staging area for snapshots (not an account).
const SNAP_STAGING_DIR: &str = ".snap-staging";

/// Record one problem: the first one ends the check without `details`. Returns whether
/// to go on.
fn problem(h: &mut HealthStatus, details: bool, e: HealthzError) -> bool {
    if details {
        h.errors.push(e);
        true
    } else {
        h.status = UNAVAILABLE.into();
        h.error = e.error;
        false
    }
}

/// The sorted names in a directory (none if it cannot be read).
fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A standalone server's JetStream checks: enabled, then every stream directory of the
/// store (or the asked account's, stream's, consumer's) recovered.
fn check_jetstream(opts: &HealthzOptions, jh: &JsHealth<'_>, h: &mut HealthStatus) {
    let details = opts.details;
    let Some(js) = jh.js else {
        let text = crate::jetstream::api::errors_table::JS_NOT_ENABLED_ERR.err();
        let text = format!("{} ({})", text.description, text.err_code);
        h.status_code = 503;
        h.status = UNAVAILABLE.into();
        if details {
            h.errors.push(HealthzError {
                kind: "JETSTREAM".into(),
                error: text,
                ..Default::default()
            });
        } else {
            h.error = text;
        }
        return;
    };
    if opts.js_enabled_only || opts.js_enabled {
        return;
    }
    let root = &js.settings.root;
    let (mut acc_found, mut stream_found, mut consumer_found) = (false, false, false);
    for account in dir_names(root) {
        if account == SNAP_STAGING_DIR {
            continue;
        }
        if !opts.account.is_empty() {
            if account != opts.account {
                continue;
            }
            acc_found = true;
        }
        let Some(acc) = (jh.account_id)(&account) else {
            let e = HealthzError {
                kind: "ACCOUNT".into(),
                account: account.clone(),
                error: format!("JetStream account '{account}' could not be resolved"),
                ..Default::default()
            };
            if !problem(h, details, e) {
                return;
            }
            continue;
        };
        for stream in dir_names(&root.join(&account).join("streams")) {
            if !opts.stream.is_empty() {
                if stream != opts.stream {
                    continue;
                }
                stream_found = true;
            }
            if js.registry_to_read().get(acc, &stream).is_none() {
                let e = HealthzError {
                    kind: "STREAM".into(),
                    account: account.clone(),
                    stream: stream.clone(),
                    error: format!("JetStream stream '{account} > {stream}' could not be recovered"),
                    ..Default::default()
                };
                if !problem(h, details, e) {
                    return;
                }
                continue;
            }
            if stream_found {
                if !opts.consumer.is_empty() {
                    consumer_found = (jh.has_consumer)(acc, &stream, &opts.consumer);
                }
                break;
            }
        }
        if acc_found {
            break;
        }
    }
    let q = |s: &str| crate::proto::reply::go_quote(s.as_bytes());
    let missing = if !opts.account.is_empty() && !acc_found {
        Some(HealthzError {
            kind: "ACCOUNT".into(),
            account: opts.account.clone(),
            error: format!("JetStream account {} not found", q(&opts.account)),
            ..Default::default()
        })
    } else if !opts.stream.is_empty() && !stream_found {
        Some(HealthzError {
            kind: "STREAM".into(),
            account: opts.account.clone(),
            stream: opts.stream.clone(),
            error: format!(
                "JetStream stream {} not found on account {}",
                q(&opts.stream),
                q(&opts.account)
            ),
            ..Default::default()
        })
    } else if !opts.consumer.is_empty() && !consumer_found {
        Some(HealthzError {
            kind: "CONSUMER".into(),
            account: opts.account.clone(),
            stream: opts.stream.clone(),
            consumer: opts.consumer.clone(),
            error: format!(
                "JetStream consumer {} not found for stream {} on account {}",
                q(&opts.consumer),
                q(&opts.stream),
                q(&opts.account)
            ),
        })
    } else {
        None
    };
    if let Some(e) = missing {
        h.status_code = 404;
        if details {
            h.errors = vec![e];
        } else {
            h.status = UNAVAILABLE.into();
            h.error = e.error;
        }
    }
}

/// The check for this server: JetStream's parts from `ctx`, and the consumers (asked of
/// the shards only when a consumer is checked) from `parts`.
fn healthz_ctx(ctx: &Context, opts: &HealthzOptions, parts: &[Vec<StreamPart>]) -> HealthStatus {
    if !ctx.state().live().opts.jetstream.enabled {
        return healthz(opts, None);
    }
    let table = ctx.state().shared.accounts.snapshot();
    let account_id = |name: &str| table.iter().find(|d| d.name == name).map(|d| d.id);
    let has_consumer = |acc: AccountId, stream: &str, c: &str| jsz::has_consumer(parts, acc, stream, c);
    let jh = JsHealth {
        js: ctx.jetstream().map(|j| j.as_ref()),
        account_id: &account_id,
        has_consumer: &has_consumer,
    };
    healthz(opts, Some(jh))
}

/// Whether answering `opts` needs the consumers of the shards.
fn needs_consumers(ctx: &Context, opts: &HealthzOptions) -> bool {
    ctx.jetstream().is_some() && !opts.consumer.is_empty()
}

fn consumers_plan(ctx: &Arc<Context>, opts: &HealthzOptions) -> Plan<Vec<StreamPart>, HealthStatus> {
    let (ctx2, opts2) = (ctx.clone(), opts.clone());
    Plan::new(
        |core: &mut ShardCore, now| jsz::shard_streams(core, jsz::PartWant::default(), now),
        move |parts| Ok(healthz_ctx(&ctx2, &opts2, &parts)),
    )
}

/// `/healthz` from the HTTP server.
pub async fn healthz_async(ctx: &Arc<Context>, opts: &HealthzOptions) -> HealthStatus {
    if !needs_consumers(ctx, opts) {
        return healthz_ctx(ctx, opts, &[]);
    }
    consumers_plan(ctx, opts)
        .run_async(ctx)
        .await
        .unwrap_or_else(|_| healthz_ctx(ctx, opts, &[]))
}

/// `/healthz` from a shard (the system services).
pub fn healthz_on_shard(
    core: &mut ShardCore,
    ctx: &Arc<Context>,
    opts: &HealthzOptions,
    done: Done<HealthStatus>,
    now: Instant,
) {
    if !needs_consumers(ctx, opts) {
        return done(core, Ok(healthz_ctx(ctx, opts, &[])), now);
    }
    consumers_plan(ctx, opts).run_on_shard(core, done, now);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(q: &str) -> (u16, String) {
        let o = HealthzOptions::from_query(&Query::parse(q)).unwrap_or_default();
        let mut h = healthz(&o, None);
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
    fn jetstream_configured_but_not_running() {
        let none = |_: &str| None;
        let no = |_: AccountId, _: &str, _: &str| false;
        let jh = || JsHealth {
            js: None,
            account_id: &none,
            has_consumer: &no,
        };
        let text = "JetStream not enabled (10076)";
        let h = healthz(&HealthzOptions::default(), Some(jh()));
        assert_eq!(
            (h.status.as_str(), h.status_code, h.error.as_str()),
            ("unavailable", 503, text)
        );
        let details = HealthzOptions {
            details: true,
            ..Default::default()
        };
        let h = healthz(&details, Some(jh()));
        assert_eq!((h.status.as_str(), h.errors.len()), ("error", 1));
        assert_eq!(h.errors.first().map(|e| e.kind.as_str()), Some("JETSTREAM"));
        // `js-server-only` checks no JetStream at all.
        let server_only = HealthzOptions {
            js_server_only: true,
            ..Default::default()
        };
        assert_eq!(healthz(&server_only, Some(jh())).status_code, 200);
    }

    #[test]
    fn json_options() {
        let (o, _) =
            HealthzOptions::from_json(br#"{"js-server-only":true,"details":true,"account":"A"}"#).unwrap_or_default();
        assert!(o.js_server_only && o.details);
        assert_eq!(o.account, "A");
    }
}
