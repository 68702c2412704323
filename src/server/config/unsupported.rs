//! Keys that nats-server 2.14 accepts but rnats does not implement yet.
//!
//! Keys whose absence would change what the server does for clients (clustering,
//! MQTT, ...) are errors: running without them would silently weaken or
//! change the service. Keys that only tune features rnats does not have, or that change
//! nothing observable yet, are accepted with a logged note. (The security keys are all
//! parsed; those the core does not enforce yet are refused at startup by
//! `Options::refuse_missing_features`.)

use super::Cx;
use conf::Entry;

/// Reference keys rnats refuses until their feature exists.
const NOT_YET: &[&str] = &[
    "cluster",
    "gateway",
    "leaf",
    "leafnodes",
    "mqtt",
    "prof_port",
    "proxy_protocol",
    "default_js_domain",
];

/// Reference keys rnats accepts without effect (for now), with a note in the log.
const NO_EFFECT: &[&str] = &[
    "server_tags",
    "server_metadata",
    "feature_flags",
    "prof_block_rate",
    "write_timeout",
];

pub(super) fn top_level(cx: &mut Cx, key: &str, lower: &str, e: &Entry) {
    if NOT_YET.contains(&lower) {
        not_yet(cx, key, e);
    } else if NO_EFFECT.contains(&lower) {
        cx.notes
            .push(format!("{}: {key:?} has no effect in rnats yet", e.key_pos));
    } else {
        cx.unknown(key, e);
    }
}

/// An error for a reference key whose feature rnats lacks.
pub(super) fn not_yet(cx: &mut Cx, key: &str, e: &Entry) {
    cx.error(&e.key_pos, format!("{key:?} is not supported by rnats yet"));
}
