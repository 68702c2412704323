//! CONNECT options, decoded the way nats-server decodes them (Go's encoding/json over
//! defaults): keys match exactly or case-insensitively, `null` leaves a field unchanged,
//! unknown keys are ignored, and any type mismatch is an error (the connection closes).

use serde_json::{Map, Value};

/// Options a client sent in CONNECT. `Default` is nats-server's `defaultOpts`:
/// verbose, pedantic and echo on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOpts {
    pub echo: bool,
    pub verbose: bool,
    pub pedantic: bool,
    pub tls_required: bool,
    pub nkey: String,
    pub jwt: String,
    pub sig: String,
    pub auth_token: String,
    pub user: String,
    pub pass: String,
    pub name: String,
    pub lang: String,
    pub version: String,
    pub protocol: i64,
    pub account: String,
    pub new_account: bool,
    pub headers: bool,
    pub no_responders: bool,
    pub remote_account: String,
    pub proxy_sig: String,
}

impl Default for ClientOpts {
    fn default() -> Self {
        ClientOpts {
            echo: true,
            verbose: true,
            pedantic: true,
            tls_required: false,
            nkey: String::new(),
            jwt: String::new(),
            sig: String::new(),
            auth_token: String::new(),
            user: String::new(),
            pass: String::new(),
            name: String::new(),
            lang: String::new(),
            version: String::new(),
            protocol: 0,
            account: String::new(),
            new_account: false,
            headers: false,
            no_responders: false,
            remote_account: String::new(),
            proxy_sig: String::new(),
        }
    }
}

/// The CONNECT argument could not be decoded; the connection closes without `-ERR`.
#[derive(Debug, thiserror::Error)]
#[error("invalid CONNECT: {0}")]
pub struct ConnectError(pub String);

enum Field {
    Bool(fn(&mut ClientOpts) -> &mut bool),
    Str(fn(&mut ClientOpts) -> &mut String),
    Int(fn(&mut ClientOpts) -> &mut i64),
    /// Route/leaf-only objects: accepted and ignored.
    Object,
}

const FIELDS: &[(&str, Field)] = &[
    ("echo", Field::Bool(|o| &mut o.echo)),
    ("verbose", Field::Bool(|o| &mut o.verbose)),
    ("pedantic", Field::Bool(|o| &mut o.pedantic)),
    ("tls_required", Field::Bool(|o| &mut o.tls_required)),
    ("nkey", Field::Str(|o| &mut o.nkey)),
    ("jwt", Field::Str(|o| &mut o.jwt)),
    ("sig", Field::Str(|o| &mut o.sig)),
    ("auth_token", Field::Str(|o| &mut o.auth_token)),
    ("user", Field::Str(|o| &mut o.user)),
    ("pass", Field::Str(|o| &mut o.pass)),
    ("name", Field::Str(|o| &mut o.name)),
    ("lang", Field::Str(|o| &mut o.lang)),
    ("version", Field::Str(|o| &mut o.version)),
    ("protocol", Field::Int(|o| &mut o.protocol)),
    ("account", Field::Str(|o| &mut o.account)),
    ("new_account", Field::Bool(|o| &mut o.new_account)),
    ("headers", Field::Bool(|o| &mut o.headers)),
    ("no_responders", Field::Bool(|o| &mut o.no_responders)),
    ("import", Field::Object),
    ("export", Field::Object),
    ("remote_account", Field::Str(|o| &mut o.remote_account)),
    ("proxy_sig", Field::Str(|o| &mut o.proxy_sig)),
];

fn field_for(key: &str) -> Option<&'static Field> {
    FIELDS
        .iter()
        .find(|(name, _)| *name == key)
        .or_else(|| FIELDS.iter().find(|(name, _)| name.eq_ignore_ascii_case(key)))
        .map(|(_, f)| f)
}

impl ClientOpts {
    /// Decode `arg` over `self` (a second CONNECT starts from the current options).
    pub fn apply_json(&mut self, arg: &[u8]) -> Result<(), ConnectError> {
        // Go replaces invalid UTF-8 instead of rejecting it.
        let text = String::from_utf8_lossy(arg);
        let v: Value = serde_json::from_str(&text).map_err(|e| ConnectError(e.to_string()))?;
        let map: Map<String, Value> = match v {
            Value::Null => return Ok(()),
            Value::Object(m) => m,
            other => return Err(ConnectError(format!("cannot decode {other} into options"))),
        };
        let mut first_err = None;
        for (k, v) in map {
            let Some(field) = field_for(&k) else { continue };
            if v.is_null() {
                continue;
            }
            let ok = match (field, &v) {
                (Field::Bool(f), Value::Bool(b)) => {
                    *f(self) = *b;
                    true
                }
                (Field::Str(f), Value::String(s)) => {
                    *f(self) = s.clone();
                    true
                }
                (Field::Int(f), Value::Number(n)) => match n.as_i64() {
                    Some(i) => {
                        *f(self) = i;
                        true
                    }
                    None => false,
                },
                (Field::Object, Value::Object(_)) => true,
                _ => false,
            };
            if !ok && first_err.is_none() {
                first_err = Some(ConnectError(format!("cannot decode field {k:?}")));
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// The `sub` claim of a JWT, read without verifying it (for log lines only); empty when
/// the token is not readable.
pub fn jwt_subject(token: &str) -> String {
    use base64::Engine;
    let Some(payload) = token.split('.').nth(1) else {
        return String::new();
    };
    let Ok(raw) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload) else {
        return String::new();
    };
    serde_json::from_slice::<Value>(&raw)
        .ok()
        .and_then(|v| v.get("sub").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_are_verbose_pedantic_echo() {
        let mut o = ClientOpts::default();
        o.apply_json(b"{}").unwrap();
        assert!(o.verbose && o.pedantic && o.echo);
        assert_eq!(o.protocol, 0);
    }

    #[test]
    fn decodes_like_go() {
        let mut o = ClientOpts::default();
        o.apply_json(br#"{"verbose":false,"Pedantic":false,"name":"x","protocol":1,"headers":true,"unknown":[1,2],"echo":null,"import":{"allow":["a"]}}"#)
            .unwrap();
        assert!(!o.verbose && !o.pedantic && o.echo && o.headers);
        assert_eq!((o.name.as_str(), o.protocol), ("x", 1));
        let mut o = ClientOpts::default();
        o.apply_json(b"null").unwrap();
        assert_eq!(o, ClientOpts::default());
    }

    #[test]
    fn rejects_wrong_types_and_bad_json() {
        for bad in [
            &br#"{"verbose":"no"}"#[..],
            br#"{"protocol":1.5}"#,
            b"[]",
            b"{",
            b"",
            br#"{"name":1}"#,
            br#""x""#,
        ] {
            assert!(
                ClientOpts::default().apply_json(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
