//! The JSON of a trace event, nats-server's `MsgTraceEvent`:
//! `{"server": ServerInfo, "request": {"header", "msgsize"}, "hops", "events": [...]}`
//! with one entry per step the message took: `in` (ingress), `sm` (subject mapping),
//! `si` (service import), `se` (stream export), `eg` (egress, one per delivery attempt).
//!
//! Steps are encoded one by one as they happen ([`encode`]), because the shards that
//! deliver a message send their steps to the shard that owns the trace as bytes; the
//! owner joins them into one event ([`assemble`]). Go's escaping, omitted-if-empty fields
//! and RFC 3339 times as the reference writes them.

use crate::proto::{gojson, gotime};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::SystemTime;

/// nats-server's connection kind `CLIENT` (`kind` of `in` and `eg`).
pub const KIND_CLIENT: u8 = 0;

/// Why a delivery was not made, as the `eg` event's `error` says it.
pub mod errors {
    pub const NO_ECHO: &str = "Not delivered because of no echo";
    pub const SUB_DENY: &str = "Not delivered because subscription denies this subject";
    pub const CLIENT_CLOSED: &str = "Not delivered because client is closed";
    pub const AUTO_UNSUB: &str = "Not delivered because auto-unsubscribe exceeded";
}

/// The time of a step, as Go's `time.Time` encodes in JSON.
pub fn now_ts() -> String {
    gotime::rfc3339_nano(SystemTime::now())
}

#[derive(Serialize)]
struct Ingress<'a> {
    #[serde(rename = "type")]
    typ: &'static str,
    ts: &'a str,
    kind: u8,
    cid: u64,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    acc: &'a str,
    subj: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    error: &'a str,
}

/// The `in` step: who published, in which account, on which subject; `error` when the
/// publish was refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngressStep {
    pub ts: String,
    pub cid: u64,
    pub name: String,
    pub acc: String,
    pub subj: String,
    pub error: String,
}

impl IngressStep {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&gojson::to_vec(&Ingress {
            typ: "in",
            ts: &self.ts,
            kind: KIND_CLIENT,
            cid: self.cid,
            name: &self.name,
            acc: &self.acc,
            subj: &self.subj,
            error: &self.error,
        }));
    }
}

#[derive(Serialize)]
struct Mapping<'a> {
    #[serde(rename = "type")]
    typ: &'static str,
    ts: &'a str,
    to: &'a str,
}

#[derive(Serialize)]
struct StreamExport<'a> {
    #[serde(rename = "type")]
    typ: &'static str,
    ts: &'a str,
    acc: &'a str,
    to: &'a str,
}

#[derive(Serialize)]
struct ServiceImport<'a> {
    #[serde(rename = "type")]
    typ: &'static str,
    ts: &'a str,
    acc: &'a str,
    from: &'a str,
    to: &'a str,
}

/// One delivery attempt (`eg`).
#[derive(Serialize, Debug, Default)]
pub struct Egress<'a> {
    #[serde(rename = "type")]
    typ: &'static str,
    ts: String,
    kind: u8,
    cid: u64,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    hop: &'a str,
    /// The subscriber's account, when it is not the publisher's (imports).
    #[serde(skip_serializing_if = "str::is_empty")]
    acc: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    sub: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    queue: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    error: &'a str,
}

impl<'a> Egress<'a> {
    /// A delivery to client `cid` (`name` from its CONNECT) on subscription `sub`.
    pub fn client(cid: u64, name: &'a str, sub: &'a str, queue: &'a str, acc: &'a str, error: &'a str) -> Self {
        Egress {
            typ: "eg",
            ts: now_ts(),
            kind: KIND_CLIENT,
            cid,
            name,
            hop: "",
            acc,
            sub,
            queue,
            error,
        }
    }
}

/// A step recorded while the message was routed, encoded.
pub enum Step<'a> {
    Mapping { to: &'a str },
    StreamExport { acc: &'a str, to: &'a str },
    ServiceImport { acc: &'a str, from: &'a str, to: &'a str },
    Egress(Egress<'a>),
}

/// One step as JSON (its time taken now).
pub fn encode(step: &Step<'_>) -> Vec<u8> {
    let ts = now_ts();
    match step {
        Step::Mapping { to } => gojson::to_vec(&Mapping { typ: "sm", ts: &ts, to }),
        Step::StreamExport { acc, to } => gojson::to_vec(&StreamExport {
            typ: "se",
            ts: &ts,
            acc,
            to,
        }),
        Step::ServiceImport { acc, from, to } => gojson::to_vec(&ServiceImport {
            typ: "si",
            ts: &ts,
            acc,
            from,
            to,
        }),
        Step::Egress(e) => gojson::to_vec(e),
    }
}

/// Append encoded steps (one, or a comma-separated list) to a comma-separated list.
pub fn append_encoded(out: &mut Vec<u8>, steps: &[u8]) {
    if steps.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(steps);
}

/// nats-server 2.14's `feature_flags`, all off.
#[derive(Serialize, Default)]
struct FeatureFlags {
    js_ack_fc_v2: bool,
    js_raft_delete_range: bool,
}

/// The sending server (`ServerInfo`).
#[derive(Serialize)]
pub struct Server<'a> {
    pub name: &'a str,
    pub host: &'a str,
    pub id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub cluster: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub domain: &'a str,
    pub ver: &'a str,
    feature_flags: FeatureFlags,
    pub jetstream: bool,
    pub flags: u64,
    pub seq: u64,
    pub time: String,
}

impl<'a> Server<'a> {
    pub fn new(name: &'a str, host: &'a str, id: &'a str, ver: &'a str, seq: u64) -> Self {
        Server {
            name,
            host,
            id,
            cluster: "",
            domain: "",
            ver,
            feature_flags: FeatureFlags::default(),
            jetstream: false,
            flags: 0,
            seq,
            time: now_ts(),
        }
    }
}

#[derive(Serialize)]
struct Request<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    header: Option<&'a BTreeMap<String, Vec<String>>>,
    #[serde(skip_serializing_if = "is_zero")]
    msgsize: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The whole event: the server, the traced request, the ingress step and the other steps
/// (already encoded, comma-separated).
pub fn assemble(
    server: &Server<'_>,
    header: Option<&BTreeMap<String, Vec<String>>>,
    msgsize: usize,
    ingress: &IngressStep,
    steps: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(512 + steps.len());
    out.extend_from_slice(b"{\"server\":");
    out.extend_from_slice(&gojson::to_vec(server));
    out.extend_from_slice(b",\"request\":");
    out.extend_from_slice(&gojson::to_vec(&Request { header, msgsize }));
    out.extend_from_slice(b",\"events\":[");
    ingress.encode(&mut out);
    append_encoded(&mut out, steps);
    out.extend_from_slice(b"]}");
    out
}
