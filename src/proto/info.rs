//! The INFO the server sends: field order and omission rules of nats-server's `Info`
//! struct (protocol.md §4), so clients and byte-comparing tools see the same document.

use serde::Serialize;

fn is_false(b: &bool) -> bool {
    !*b
}
fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}
fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

/// INFO fields. `Default` is the empty document; the server fills a template once and
/// each connection copies it with its own `client_id`, `client_ip` and `max_payload`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerInfo {
    pub server_id: String,
    pub server_name: String,
    pub version: String,
    pub proto: i32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub git_commit: String,
    pub go: String,
    pub host: String,
    pub port: u16,
    pub headers: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub auth_required: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub tls_required: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub tls_verify: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub tls_available: bool,
    pub max_payload: i32,
    #[serde(skip_serializing_if = "is_false")]
    pub jetstream: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ip: String,
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub client_id: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_ip: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub nonce: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    #[serde(skip_serializing_if = "is_false")]
    pub cluster_dynamic: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub connect_urls: Vec<String>,
    #[serde(skip_serializing_if = "is_false")]
    pub ldm: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub connect_info: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub remote_account: String,
    #[serde(skip_serializing_if = "is_false")]
    pub acc_is_sys: bool,
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub api_lvl: i32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub xkey: String,
    /// rnats's own version (an addition; clients ignore unknown fields).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub rnats_version: String,
}

impl ServerInfo {
    /// The full protocol line: `INFO <json> \r\n` (note the space before CRLF).
    pub fn write_line(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"INFO ");
        out.extend_from_slice(&super::gojson::to_vec(self));
        out.extend_from_slice(b" \r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_order_and_omissions_match_the_reference() {
        let info = ServerInfo {
            server_id: "NID".into(),
            server_name: "NID".into(),
            version: "2.14.0".into(),
            proto: 1,
            go: "go1.26.2".into(),
            host: "0.0.0.0".into(),
            port: 4222,
            headers: true,
            max_payload: 1048576,
            client_id: 5,
            client_ip: "127.0.0.1".into(),
            api_lvl: 4,
            ..Default::default()
        };
        let mut out = Vec::new();
        info.write_line(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap_or_default(),
            "INFO {\"server_id\":\"NID\",\"server_name\":\"NID\",\"version\":\"2.14.0\",\"proto\":1,\"go\":\"go1.26.2\",\"host\":\"0.0.0.0\",\"port\":4222,\"headers\":true,\"max_payload\":1048576,\"client_id\":5,\"client_ip\":\"127.0.0.1\",\"api_lvl\":4} \r\n"
        );
    }
}
