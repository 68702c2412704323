//! `websocket { }` / `ws { }` (nats-server's `parseWebsocket`). Its startup checks
//! (TLS required unless `no_tls`, origins, headers, authentication overrides) are not
//! made by `-t`, as in the reference: see `Options::validate_websocket`.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::{listen, Cx};
use crate::server::options::Options;
use conf::{Entry, ValueKind};
use std::time::Duration;

/// The block's `authorization` (nats-server's `parseSimpleAuth`).
fn simple_auth(cx: &mut Cx, o: &mut Options, e: &Entry) -> Option<()> {
    let m = cx.map(e)?;
    let w = &mut o.websocket;
    for (k, v) in m.iter() {
        match k.to_ascii_lowercase().as_str() {
            "user" | "username" => w.username = cx.string(v)?.to_string(),
            "pass" | "password" => w.password = cx.string(v)?.to_string(),
            "token" => w.token = cx.string(v)?.to_string(),
            "timeout" => {
                w.auth_timeout = match &v.value.kind {
                    ValueKind::Integer(n) => *n as f64,
                    ValueKind::Float(f) => *f,
                    _ => 1.0,
                }
            }
            _ => cx.unknown(k, v),
        }
    }
    Some(())
}

/// `websocket { ... }`.
pub(super) fn websocket(cx: &mut Cx, o: &mut Options, e: &Entry) {
    let Some(m) = e.value.as_map() else {
        let ty = e.value.go_type_name();
        cx.error(&e.key_pos, format!("Expected websocket to be a map, got {ty}"));
        return;
    };
    for (key, v) in m.iter() {
        // A failed type assertion ends the block, as the reference's recovered panic does.
        let ok = entry(cx, o, key, v);
        if ok.is_none() {
            return;
        }
    }
}

fn entry(cx: &mut Cx, o: &mut Options, key: &str, v: &Entry) -> Option<()> {
    match key.to_ascii_lowercase().as_str() {
        "listen" => {
            if let Some((host, port)) = listen(cx, v) {
                o.websocket.host = host.unwrap_or_default();
                o.websocket.port = port;
            }
        }
        "port" => o.websocket.port = cx.int(v)?,
        "host" | "net" => o.websocket.host = cx.string(v)?.to_string(),
        "advertise" => o.websocket.advertise = cx.string(v)?.to_string(),
        "no_tls" => o.websocket.no_tls = cx.bool(v)?,
        "tls" => {
            if let Some(t) = super::tls::parse_tls(cx, v, true) {
                o.websocket.tls = Some(t);
            }
        }
        "same_origin" => o.websocket.same_origin = cx.bool(v)?,
        "allowed_origins" | "allowed_origin" | "allow_origins" | "allow_origin" | "origins" | "origin" => {
            match &v.value.kind {
                ValueKind::String(s) => o.websocket.allowed_origins = vec![s.clone()],
                ValueKind::Array(items) => {
                    let mut out = Vec::new();
                    for i in items {
                        match i.as_str() {
                            Some(s) => out.push(s.to_string()),
                            None => {
                                let ty = i.go_type_name();
                                cx.error(
                                    &i.pos,
                                    format!("error parsing allowed origins: unsupported type in array {ty}"),
                                );
                            }
                        }
                    }
                    o.websocket.allowed_origins = out;
                }
                _ => {
                    let ty = v.value.go_type_name();
                    cx.error(
                        &v.key_pos,
                        format!("error parsing allowed origins: unsupported type {ty}"),
                    );
                }
            }
        }
        "handshake_timeout" => {
            let d = match &v.value.kind {
                ValueKind::Integer(n) => Duration::from_secs((*n).max(0) as u64),
                ValueKind::String(s) => match conf::parse_duration_nanos(s) {
                    Ok(n) => Duration::from_nanos(n.max(0) as u64),
                    Err(err) => {
                        cx.error(&v.key_pos, err);
                        return Some(());
                    }
                },
                _ => {
                    let ty = v.value.go_type_name();
                    cx.error(
                        &v.key_pos,
                        format!("error parsing handshake timeout: unsupported type {ty}"),
                    );
                    Duration::ZERO
                }
            };
            o.websocket.handshake_timeout = d;
        }
        "compress" | "compression" => o.websocket.compression = cx.bool(v)?,
        "authorization" | "authentication" => simple_auth(cx, o, v)?,
        "jwt_cookie" => o.websocket.jwt_cookie = cx.string(v)?.to_string(),
        "user_cookie" => o.websocket.user_cookie = cx.string(v)?.to_string(),
        "pass_cookie" => o.websocket.pass_cookie = cx.string(v)?.to_string(),
        "token_cookie" => o.websocket.token_cookie = cx.string(v)?.to_string(),
        "no_auth_user" => o.websocket.no_auth_user = cx.string(v)?.to_string(),
        "headers" => {
            let Some(hm) = v.value.as_map() else {
                let ty = v.value.go_type_name();
                cx.error(&v.key_pos, format!("error parsing headers: unsupported type {ty}"));
                return Some(());
            };
            let mut headers = Vec::new();
            for (hk, hv) in hm.iter() {
                match hv.value.as_str() {
                    Some(s) => headers.push((hk.to_string(), s.to_string())),
                    None => {
                        let ty = hv.value.go_type_name();
                        cx.error(
                            &hv.key_pos,
                            format!("error parsing header key {hk}: unsupported type {ty}"),
                        );
                    }
                }
            }
            o.websocket.headers = headers;
        }
        "ping_interval" => {
            if let Some(d) = cx.duration("ping_interval", v) {
                o.websocket.ping_interval = d;
            }
        }
        _ => cx.unknown(key, v),
    }
    Some(())
}
