//! jwt v1 payloads rewritten into the v2 layout before typed decoding, as jwt v2's
//! `migrateV1` does: the top-level `type` and `tags` (and `issuer_account` for users and
//! activations) move into `nats`, only the fields v1 had are kept, and `nats.version`
//! becomes 1.

use serde_json::{Map, Value};

use super::error::JwtError;

/// Takes the v1 `nats` object, keeping only `keep`, and moves the top-level fields in.
fn migrate(mut value: Value, keep: &[&str], move_issuer_account: bool) -> (Value, Map<String, Value>) {
    let mut nats = Map::new();
    if let Value::Object(top) = &mut value {
        if let Some(Value::Object(old)) = top.remove("nats") {
            for (k, v) in old {
                if keep.contains(&k.as_str()) {
                    nats.insert(k, v);
                }
            }
        }
        for (from, to) in [("type", "type"), ("tags", "tags")] {
            if let Some(v) = top.remove(from) {
                nats.insert(to.to_string(), v);
            }
        }
        if let Some(v) = top.remove("issuer_account") {
            if move_issuer_account {
                nats.insert("issuer_account".into(), v);
            }
        }
    }
    nats.insert("version".into(), Value::from(1));
    (value, nats)
}

fn put_nats(mut value: Value, nats: Map<String, Value>) -> Value {
    if let Value::Object(top) = &mut value {
        top.insert("nats".into(), Value::Object(nats));
    }
    value
}

/// A v1 operator.
pub(crate) fn operator(value: Value) -> Value {
    let keep = [
        "signing_keys",
        "account_server_url",
        "operator_service_urls",
        "system_account",
    ];
    let (value, nats) = migrate(value, &keep, false);
    put_nats(value, nats)
}

/// A v1 account: its limits lose the JetStream part; its signing keys must be plain keys.
pub(crate) fn account(value: Value) -> Result<Value, JwtError> {
    let keep = ["imports", "exports", "limits", "signing_keys", "revocations"];
    let (value, mut nats) = migrate(value, &keep, false);
    if let Some(Value::Object(limits)) = nats.get_mut("limits") {
        let v1_limits = [
            "subs",
            "data",
            "payload",
            "imports",
            "exports",
            "wildcards",
            "disallow_bearer",
            "conn",
            "leaf",
        ];
        limits.retain(|k, _| v1_limits.contains(&k.as_str()));
    }
    if let Some(keys) = nats.get("signing_keys") {
        if !keys.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
            return Err(JwtError::Json("v1 signing_keys must be a list of keys".into()));
        }
    }
    Ok(put_nats(value, nats))
}

/// A v1 user: subs/data/payload default to unlimited.
pub(crate) fn user(value: Value) -> Value {
    let keep = [
        "pub",
        "sub",
        "resp",
        "src",
        "times",
        "times_location",
        "subs",
        "data",
        "payload",
        "bearer_token",
    ];
    let (value, mut nats) = migrate(value, &keep, true);
    for k in ["subs", "data", "payload"] {
        nats.entry(k).or_insert(Value::from(-1));
    }
    put_nats(value, nats)
}

/// A v1 activation: `nats.subject` and `nats.type` become `subject` and `kind`.
pub(crate) fn activation(mut value: Value) -> Value {
    let mut subject = None;
    let mut kind = None;
    if let Some(Value::Object(old)) = value.get_mut("nats") {
        subject = old.remove("subject");
        kind = old.remove("type");
    }
    let (value, mut nats) = migrate(value, &[], true);
    if let Some(s) = subject {
        nats.insert("subject".into(), s);
    }
    if let Some(k) = kind {
        nats.insert("kind".into(), k);
    }
    put_nats(value, nats)
}
