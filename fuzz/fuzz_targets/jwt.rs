//! Fuzz target `jwt`: `rnats::auth::jwt` must never panic, whatever it is given.
//!
//! Byte 0 picks the mode (bit 0):
//! - even: the rest is a token or a decorated file: decoded as every claims type, as
//!   generic claims, and read as a creds / seed file;
//! - odd: the rest is a payload: if it is JSON, its `iss` is set to a fixed key of the kind
//!   the claim needs and it is signed (bit 1: the v1 way, over the payload only; else v2),
//!   so that typed decoding, validation and templates see arbitrary claim contents.
//!
//! Invariants: a typed decoder succeeds exactly when `decode_any` yields that type; a
//! decoded claim validates without panicking; re-encoding it with the fixed key (when the
//! encoder accepts it) decodes back to the same claims, apart from what encoding sets
//! (`iss`, `iat`, `jti`, type, version, export/import order).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nkeys::{KeyPair, KeyPairType};
use rnats::auth::jwt::codec::b64_encode;
use rnats::auth::jwt::*;
use serde_json::Value;

const NOW: u64 = 1_700_000_000;

fn key(kind: KeyPairType, byte: u8) -> KeyPair {
    match KeyPair::new_from_raw(kind, [byte; 32]) {
        Ok(k) => k,
        Err(e) => panic!("fixed key: {e}"),
    }
}

struct Keys {
    operator: KeyPair,
    account: KeyPair,
    server: KeyPair,
}

fn keys() -> Keys {
    Keys { operator: key(KeyPairType::Operator, 1), account: key(KeyPairType::Account, 2), server: key(KeyPairType::Server, 3) }
}

fn signer_for<'a>(keys: &'a Keys, kind: &str) -> &'a KeyPair {
    match kind {
        "operator" => &keys.operator,
        "authorization_request" => &keys.server,
        _ => &keys.account,
    }
}

/// What encoding rewrites, cleared so that claims can be compared.
fn normalize(c: &mut ClaimsData, g: &mut GenericFields) {
    c.issuer.clear();
    c.issued_at = 0;
    c.id.clear();
    g.claim_type.clear();
    g.version = 0;
}

fn round_trip(claims: &AnyClaims, keys: &Keys) {
    macro_rules! check {
        ($c:expr, $decode:ident, $fix:expr) => {{
            let signer = signer_for(keys, claims.claim_type());
            let Ok(token) = $c.encode(signer, NOW) else { return };
            let mut back = match $decode(&token) {
                Ok(b) => b,
                Err(e) => panic!("re-encoded claims do not decode: {e}\n{token}"),
            };
            let mut orig = $c.clone();
            normalize(&mut orig.claims, &mut orig.nats.generic);
            normalize(&mut back.claims, &mut back.nats.generic);
            let fix: fn(&mut _) = $fix;
            fix(&mut orig);
            fix(&mut back);
            assert_eq!(orig, back, "round trip changed the claims");
        }};
    }
    match claims {
        AnyClaims::Operator(c) => check!(c, decode_operator, |_: &mut OperatorClaims| {}),
        AnyClaims::Account(c) => check!(c, decode_account, |a: &mut AccountClaims| {
            a.nats.exports.sort_by(|x, y| x.subject.cmp(&y.subject));
            a.nats.imports.sort_by(|x, y| x.subject.cmp(&y.subject));
            // Scope templates read missing limits as -1, so a 0 does not survive.
            a.nats.signing_keys = SigningKeys(a.nats.signing_keys.0.keys().map(|k| (k.clone(), None)).collect());
        }),
        AnyClaims::User(c) => check!(c, decode_user, |_: &mut UserClaims| {}),
        AnyClaims::Activation(c) => check!(c, decode_activation, |_: &mut ActivationClaims| {}),
        AnyClaims::AuthorizationRequest(c) => {
            check!(c, decode_authorization_request, |_: &mut AuthorizationRequestClaims| {})
        }
        AnyClaims::AuthorizationResponse(c) => {
            check!(c, decode_authorization_response, |_: &mut AuthorizationResponseClaims| {})
        }
        AnyClaims::Generic(_) => {}
    }
}

fn exercise(claims: &AnyClaims) {
    match claims {
        AnyClaims::Operator(c) => {
            let _ = c.validation(NOW);
        }
        AnyClaims::Account(c) => {
            let _ = c.validation(NOW);
        }
        AnyClaims::User(c) => {
            let _ = c.validation(NOW);
            let account = TemplateAccount { name: &c.claims.name, tags: &c.nats.generic.tags };
            let _ = apply_user_template(&c.nats.limits, c, account);
        }
        AnyClaims::Activation(c) => {
            let _ = c.validation(NOW);
            let _ = c.hash_id();
        }
        AnyClaims::AuthorizationRequest(c) => {
            let _ = c.validation(NOW);
        }
        AnyClaims::AuthorizationResponse(c) => {
            let _ = c.validation(NOW);
        }
        AnyClaims::Generic(c) => {
            let _ = c.check_time(NOW);
        }
    }
}

fn check_token(token: &str, keys: &Keys) {
    let any = decode_any(token);
    let is = |f: fn(&AnyClaims) -> bool| any.as_ref().is_ok_and(f);
    let agree = [
        (decode_operator(token).is_ok(), is(|c| matches!(c, AnyClaims::Operator(_)))),
        (decode_account(token).is_ok(), is(|c| matches!(c, AnyClaims::Account(_)))),
        (decode_user(token).is_ok(), is(|c| matches!(c, AnyClaims::User(_)))),
        (decode_activation(token).is_ok(), is(|c| matches!(c, AnyClaims::Activation(_)))),
        (decode_authorization_request(token).is_ok(), is(|c| matches!(c, AnyClaims::AuthorizationRequest(_)))),
        (decode_authorization_response(token).is_ok(), is(|c| matches!(c, AnyClaims::AuthorizationResponse(_)))),
    ];
    for (typed, via_any) in agree {
        assert_eq!(typed, via_any, "a typed decoder disagrees with decode_any");
    }
    let _ = decode_generic(token);
    if let Ok(claims) = any {
        exercise(&claims);
        round_trip(&claims, keys);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let keys = keys();
    if mode & 1 == 0 {
        check_token(&text, &keys);
        let _ = parse_decorated_jwt(&text);
        let _ = parse_decorated_nkey(&text);
        return;
    }
    let Ok(mut v) = serde_json::from_str::<Value>(&text) else { return };
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .or_else(|| v.get("nats").and_then(|n| n.get("type")).and_then(Value::as_str))
        .unwrap_or_default()
        .to_string();
    let signer = signer_for(&keys, &kind);
    if let Some(obj) = v.as_object_mut() {
        obj.insert("iss".into(), Value::String(signer.public_key()));
    }
    let payload = b64_encode(v.to_string().as_bytes());
    let v1 = mode & 2 != 0;
    let header = if v1 { r#"{"typ":"jwt","alg":"ed25519"}"# } else { r#"{"typ":"JWT","alg":"ed25519-nkey"}"# };
    let header = b64_encode(header.as_bytes());
    let signed = format!("{header}.{payload}");
    let Ok(sig) = signer.sign(if v1 { payload.as_bytes() } else { signed.as_bytes() }) else { return };
    check_token(&format!("{signed}.{}", b64_encode(&sig)), &keys);
});
