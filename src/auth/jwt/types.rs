//! The value types several claim kinds share, in jwt v2's JSON layout: permissions, user
//! limits, NATS limits, time ranges, import/export types, info, the generic `nats` fields.
//!
//! Every struct is `#[serde(default)]` (absent and `null` members read as Go's zero value)
//! and skips what Go's `omitempty` skips when written; structs Go embeds are
//! `#[serde(flatten)]`ed so the JSON stays flat.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use super::json::{go_quote, is_default};
use super::validation::{parse_cidr, parse_clock, plausible_time_zone, validate_permission_subject, ValidationResults};

/// jwt v2's `NoLimit`.
pub const NO_LIMIT: i64 = -1;

/// The claim kinds (`nats.type`).
pub const OPERATOR_CLAIM: &str = "operator";
pub const ACCOUNT_CLAIM: &str = "account";
pub const USER_CLAIM: &str = "user";
pub const ACTIVATION_CLAIM: &str = "activation";
pub const AUTHORIZATION_REQUEST_CLAIM: &str = "authorization_request";
pub const AUTHORIZATION_RESPONSE_CLAIM: &str = "authorization_response";

/// Fields every claim kind carries inside `nats` (Go's `GenericFields`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GenericFields {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub claim_type: String,
    #[serde(skip_serializing_if = "is_default")]
    pub version: i64,
}

/// Allow and deny subject lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Permission {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

impl Permission {
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    fn validate(&self, permit_queue: bool, vr: &mut ValidationResults) {
        for s in self.allow.iter().chain(&self.deny) {
            validate_permission_subject(s, permit_queue, vr);
        }
    }
}

/// Allowed responses to received requests: `max` messages within `ttl` nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResponsePermission {
    #[serde(rename = "max")]
    pub max_msgs: i64,
    /// Nanoseconds (Go `time.Duration`).
    #[serde(rename = "ttl")]
    pub expires: i64,
}

/// Publish / subscribe permissions (`pub`, `sub`, `resp`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Permissions {
    #[serde(rename = "pub")]
    pub publish: Permission,
    #[serde(rename = "sub")]
    pub subscribe: Permission,
    #[serde(rename = "resp", skip_serializing_if = "Option::is_none")]
    pub response: Option<ResponsePermission>,
}

impl Permissions {
    pub(crate) fn validate(&self, vr: &mut ValidationResults) {
        self.subscribe.validate(true, vr);
        self.publish.validate(false, vr);
    }
}

/// A daily connect window, `HH:MM:SS` each.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TimeRange {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub start: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub end: String,
}

impl TimeRange {
    fn validate(&self, vr: &mut ValidationResults) {
        if self.start.is_empty() {
            vr.add_error("time ranges start must contain a start");
        } else if parse_clock(&self.start).is_none() {
            vr.add_error(format!("start in time range is invalid {}", go_quote(&self.start)));
        }
        if self.end.is_empty() {
            vr.add_error("time ranges end must contain an end");
        } else if parse_clock(&self.end).is_none() {
            vr.add_error(format!("end in time range is invalid {}", go_quote(&self.end)));
        }
    }
}

/// Source networks and connect windows of a user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserLimits {
    /// CIDRs; read from a JSON array or from one comma-separated string.
    #[serde(deserialize_with = "cidr_list", skip_serializing_if = "Vec::is_empty")]
    pub src: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub times: Vec<TimeRange>,
    /// IANA zone the `times` are in (server local time when empty).
    #[serde(rename = "times_location", skip_serializing_if = "String::is_empty")]
    pub locale: String,
}

/// Subscription, data and payload limits (`-1` is unlimited).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NatsLimits {
    #[serde(skip_serializing_if = "is_default")]
    pub subs: i64,
    #[serde(skip_serializing_if = "is_default")]
    pub data: i64,
    #[serde(skip_serializing_if = "is_default")]
    pub payload: i64,
}

impl NatsLimits {
    /// All three unlimited.
    pub fn unlimited() -> Self {
        NatsLimits {
            subs: NO_LIMIT,
            data: NO_LIMIT,
            payload: NO_LIMIT,
        }
    }
}

/// A user's limits: [`UserLimits`] and [`NatsLimits`] side by side.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    #[serde(flatten)]
    pub user: UserLimits,
    #[serde(flatten)]
    pub nats: NatsLimits,
}

impl Limits {
    pub(crate) fn validate(&self, vr: &mut ValidationResults) {
        for cidr in &self.user.src {
            if parse_cidr(cidr).is_none() {
                vr.add_error(format!("invalid cidr {} in user src limits", go_quote(cidr)));
            }
        }
        for t in &self.user.times {
            t.validate(vr);
        }
        if !self.user.locale.is_empty() && !plausible_time_zone(&self.user.locale) {
            vr.add_error(format!(
                "could not parse iana time zone by name: unknown time zone {}",
                self.user.locale
            ));
        }
    }
}

/// Reads a CIDR list: a JSON array as is, or a comma-separated string (lower-cased,
/// trimmed, empty and repeated entries dropped).
fn cidr_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        List(Vec<String>),
        Text(String),
    }
    match Either::deserialize(d)
        .map_err(|_| de::Error::custom("src must be a list of CIDRs or a comma separated string"))?
    {
        Either::List(l) => Ok(l),
        Either::Text(t) => {
            let mut out: Vec<String> = Vec::new();
            for part in t.to_lowercase().split(',') {
                let p = part.trim().to_lowercase();
                if !p.is_empty() && !out.contains(&p) {
                    out.push(p);
                }
            }
            Ok(out)
        }
    }
}

/// Kind of an import, export or activation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExportType {
    #[default]
    Unknown,
    Stream,
    Service,
}

impl ExportType {
    pub fn as_str(self) -> &'static str {
        match self {
            ExportType::Unknown => "unknown",
            ExportType::Stream => "stream",
            ExportType::Service => "service",
        }
    }
}

impl std::fmt::Display for ExportType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ExportType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ExportType::Unknown => Err(serde::ser::Error::custom("unknown export type")),
            t => s.serialize_str(t.as_str()),
        }
    }
}

impl<'de> Deserialize<'de> for ExportType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "stream" => Ok(ExportType::Stream),
            "service" => Ok(ExportType::Service),
            _ => Err(de::Error::custom(format!("unknown export type {}", go_quote(&s)))),
        }
    }
}

/// Free-text description and an info URL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Info {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub info_url: String,
}

/// jwt v2's `MaxInfoLength`.
pub const MAX_INFO_LENGTH: usize = 8 * 1024;

impl Info {
    pub(crate) fn validate(&self, vr: &mut ValidationResults) {
        if self.description.len() > MAX_INFO_LENGTH {
            vr.add_error("Description is too long");
        }
        if !self.info_url.is_empty() {
            if self.info_url.len() > MAX_INFO_LENGTH {
                vr.add_error("Info URL is too long");
            }
            let err = match super::url::parse(&self.info_url) {
                Ok(u) if u.hostname().is_empty() || u.scheme.is_empty() => Some("no hostname or scheme".to_string()),
                Ok(_) => None,
                Err(e) => Some(e),
            };
            if let Some(e) = err {
                vr.add_error(format!("error parsing info url: {e}"));
            }
        }
    }
}
