//! `proxies { trusted: [ {key: <public nkey>} ] }` (nats-server's `parseProxies`): the
//! proxies allowed to vouch for client connections with `proxy_sig`.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::Cx;
use conf::Entry;

/// The trusted keys, or `None` when the block is not a map (the error is recorded).
pub(super) fn proxies(cx: &mut Cx, e: &Entry) -> Option<Vec<String>> {
    let Some(map) = e.value.as_map() else {
        cx.error(
            &e.key_pos,
            format!("expected proxies to be a map/struct, got {}", e.value.go_type_name()),
        );
        return None;
    };
    let mut keys = Vec::new();
    for (k, entry) in map.iter() {
        match k.to_ascii_lowercase().as_str() {
            "trusted" => keys = trusted(cx, entry),
            _ => cx.unknown(k, entry),
        }
    }
    Some(keys)
}

/// A public nkey of any kind (nats-server's `nkeys.IsValidPublicKey`).
pub(crate) fn valid_key(k: &str) -> bool {
    nkeys::KeyPair::from_public_key(k).is_ok()
}

fn trusted(cx: &mut Cx, e: &Entry) -> Vec<String> {
    let Some(items) = e.value.as_array() else {
        cx.error(
            &e.key_pos,
            format!(
                "expected proxies' trusted field to be an array, got {}",
                e.value.go_type_name()
            ),
        );
        return Vec::new();
    };
    let mut keys = Vec::new();
    for item in items {
        let Some(m) = item.as_map() else {
            cx.error(
                &item.pos,
                format!(
                    "expected proxies' trusted entry to be a map/struct, got {}",
                    item.go_type_name()
                ),
            );
            continue;
        };
        // An entry without a key is kept (startup then refuses its empty key).
        let mut key = String::new();
        for (k, entry) in m.iter() {
            match k.to_ascii_lowercase().as_str() {
                "key" | "public_key" => {
                    let Some(s) = cx.string(entry) else { continue };
                    key = s.to_string();
                    if !valid_key(s) {
                        let q = crate::proto::reply::go_quote(s.as_bytes());
                        cx.error(&entry.key_pos, format!("invalid proxy key {q}"));
                    }
                }
                _ => cx.unknown(k, entry),
            }
        }
        keys.push(key);
    }
    keys
}
