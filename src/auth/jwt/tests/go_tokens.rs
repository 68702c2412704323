//! Tokens made by Go tools: they decode, verify, hash to their own `jti`, and re-serialize
//! to the very payload bytes they carry (so tokens encoded here are jwt v2's bytes).

use super::super::codec::b64_decode;
use super::super::json::go_marshal;
use super::*;

const V2: &str = include_str!("../testdata/go_tokens_v2.txt");
const V1: &str = include_str!("../testdata/go_tokens_v1.txt");

fn payload_of(token: &str) -> String {
    String::from_utf8(b64_decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap()
}

fn reserialize(c: &AnyClaims) -> String {
    let bytes = match c {
        AnyClaims::Operator(c) => go_marshal(c),
        AnyClaims::Account(c) => go_marshal(c),
        AnyClaims::User(c) => go_marshal(c),
        other => panic!("unexpected fixture kind {other:?}"),
    };
    String::from_utf8(bytes.unwrap()).unwrap()
}

#[test]
fn v2_tokens_decode_and_reserialize_byte_for_byte() {
    let mut kinds = Vec::new();
    for token in V2.lines().filter(|l| !l.is_empty()) {
        let claims = decode_any(token).unwrap_or_else(|e| panic!("{e}: {token}"));
        kinds.push(claims.claim_type().to_string());
        let data = claims.claims();
        assert_eq!(data.compute_id().unwrap(), data.id, "jti is jwt v2's hash");
        let mut want = payload_of(token);
        let got = reserialize(&claims);
        if matches!(claims, AnyClaims::Account(_)) {
            // These were made before jwt v2 had external authorization; it now always
            // writes the (empty) struct.
            let marker = r#","authorization":{}"#;
            assert!(got.contains(marker));
            want = want.replace(
                r#""default_permissions":{"pub":{},"sub":{}}"#,
                r#""default_permissions":{"pub":{},"sub":{}},"authorization":{}"#,
            );
        }
        assert_eq!(got, want);
        assert_eq!(decode_generic(token).unwrap().claims, *data);
    }
    kinds.sort();
    kinds.dedup();
    assert_eq!(kinds, ["account", "operator", "user"]);
}

#[test]
fn v2_fixture_fields() {
    let sys = V2.lines().find(|t| payload_of(t).contains(r#""name":"SYS""#)).unwrap();
    let acc = decode_account(sys).unwrap();
    assert_eq!(acc.nats.exports.len(), 2);
    let e = &acc.nats.exports[0];
    assert_eq!(
        (e.subject.as_str(), e.export_type, e.account_token_position),
        ("$SYS.ACCOUNT.*.>", ExportType::Stream, 3)
    );
    assert_eq!(acc.nats.exports[1].response_type, "Stream");
    assert!(acc
        .nats
        .signing_keys
        .contains("ACPJOCLYM2GC546MD34FW5O2DUA63LDHWFGSBIIZSIFIB2TZUFDD4NPU"));
    assert_eq!(acc.nats.limits.account.conn, NO_LIMIT);
    assert!(acc.validate(NOW).is_ok());
    let js = V2.lines().find(|t| payload_of(t).contains("mem_storage")).unwrap();
    let js = decode_account(js).unwrap();
    assert!(js.nats.limits.is_js_enabled());
    assert_eq!(js.nats.limits.jetstream.streams, 100);
}

#[test]
fn v1_tokens_are_migrated() {
    let mut tokens = V1.lines().filter(|l| !l.is_empty());
    let mut seen = 0;
    for token in tokens.by_ref() {
        match decode_any(token).unwrap() {
            AnyClaims::Operator(op) => {
                assert_eq!(op.claims.name, "Synadia Communications Inc.");
                assert_eq!(op.claims.audience, "TESTS");
                assert_eq!(op.nats.signing_keys.len(), 3);
                assert_eq!(
                    (op.nats.generic.claim_type.as_str(), op.nats.generic.version),
                    ("operator", 1)
                );
                assert!(op.validate(NOW).is_ok());
                assert!(op.did_sign("ODSKACSRBWP537DZDRVJ657JOIGOPOQ6KG7T4HN6OK4F6IECGXDAHNP2", "Axxx"));
            }
            AnyClaims::Account(acc) => {
                assert_eq!(
                    (acc.nats.generic.claim_type.as_str(), acc.nats.generic.version),
                    ("account", 1)
                );
                assert!(acc.nats.limits.is_empty());
            }
            other => panic!("unexpected {other:?}"),
        }
        // The generic decoder moves the v1 top-level type into `nats`.
        let g = decode_generic(token).unwrap();
        assert!(["operator", "account"].contains(&g.claim_type()));
        seen += 1;
    }
    assert_eq!(seen, 3);
}

#[test]
fn tampering_with_a_go_token_fails() {
    let token = V2.lines().next().unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let payload = payload_of(token).replace(r#""name":"SYS""#, r#""name":"SYZ""#);
    let forged = format!("{}.{}.{}", parts[0], b64_encode(payload.as_bytes()), parts[2]);
    assert_eq!(decode_any(&forged).unwrap_err(), JwtError::Signature { version: 2 });
    let mut sig = b64_decode(parts[2]).unwrap();
    sig[0] ^= 1;
    let forged = format!("{}.{}.{}", parts[0], parts[1], b64_encode(&sig));
    assert_eq!(
        decode_any(&forged).unwrap_err().to_string(),
        "claim failed V2 signature verification"
    );
}
