//! `ClientInfo`: who sent a message or made a connection, as nats-server describes it in
//! `Nats-Request-Info` headers, system events and `$SYS.REQ.USER.INFO` (its JSON field
//! names, `omitempty` everywhere).

use serde::{Deserialize, Serialize};

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

/// nats-server's `ClientInfo`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ClientInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub id: u64,
    #[serde(rename = "acc", skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(rename = "svc", skip_serializing_if = "String::is_empty")]
    pub service: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub lang: String,
    #[serde(rename = "ver", skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Nanoseconds.
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub rtt: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    #[serde(rename = "alts", skip_serializing_if = "Vec::is_empty")]
    pub alternates: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub jwt: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issuer_key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name_tag: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_type: String,
    #[serde(rename = "client_id", skip_serializing_if = "String::is_empty")]
    pub mqtt_client: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub nonce: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reply: String,
}

impl ClientInfo {
    /// The JSON as nats-server writes it.
    pub fn to_json(&self) -> String {
        String::from_utf8(crate::proto::gojson::to_vec(self)).unwrap_or_default()
    }
}
