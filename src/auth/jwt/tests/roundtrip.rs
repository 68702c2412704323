//! Encode → decode round trips for every claims type, and the exact JSON the encoder writes.

use super::super::codec::b64_decode;
use super::*;

fn payload_json(token: &str) -> String {
    String::from_utf8(b64_decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap()
}

#[test]
fn user_round_trip_and_layout() {
    let c = Chain::new();
    let mut u = UserClaims::new(c.user.public_key());
    u.claims.name = "alice <&>".into();
    u.claims.expires = (NOW + 60) as i64;
    u.nats.limits.permissions.publish.allow = vec!["a.>".into()];
    u.nats.limits.permissions.subscribe.deny = vec!["b.*".into(), "q grp".into()];
    u.nats.limits.permissions.response = Some(ResponsePermission {
        max_msgs: 1,
        expires: 5_000_000_000,
    });
    u.nats.limits.limits.user.src = vec!["10.0.0.0/8".into()];
    u.nats.limits.limits.user.times = vec![TimeRange {
        start: "08:00:00".into(),
        end: "17:00:00".into(),
    }];
    u.nats.limits.allowed_connection_types = vec!["STANDARD".into()];
    u.nats.generic.tags = vec!["dept:eng".into()];
    let token = u.encode(&c.acc, NOW).unwrap();
    let back = decode_user(&token).unwrap();
    assert_eq!(back.claims.issuer, c.acc.public_key());
    assert_eq!(back.claims.issued_at, NOW as i64);
    assert_eq!(back.claims.id, back.claims.compute_id().unwrap());
    assert_eq!(
        (back.nats.generic.claim_type.as_str(), back.nats.generic.version),
        ("user", 2)
    );
    assert_eq!(back.nats.limits, u.nats.limits);
    assert_eq!(back.nats.generic.tags, u.nats.generic.tags);
    assert_eq!(back.claims.name, u.claims.name);
    assert!(back.validate(NOW).is_ok());
    let json = payload_json(&token);
    let want = format!(
        concat!(
            r#"{{"exp":{exp},"jti":"{jti}","iat":{now},"iss":"{iss}","name":"alice \u003c\u0026\u003e","sub":"{sub}","#,
            r#""nats":{{"pub":{{"allow":["a.>"]}},"sub":{{"deny":["b.*","q grp"]}},"resp":{{"max":1,"ttl":5000000000}},"#,
            r#""src":["10.0.0.0/8"],"times":[{{"start":"08:00:00","end":"17:00:00"}}],"subs":-1,"data":-1,"payload":-1,"#,
            r#""allowed_connection_types":["STANDARD"],"tags":["dept:eng"],"type":"user","version":2}}}}"#
        ),
        exp = NOW + 60,
        jti = back.claims.id,
        now = NOW,
        iss = c.acc.public_key(),
        sub = c.user.public_key()
    )
    .replace("a.>", r"a.\u003e");
    assert_eq!(json, want);
    assert_eq!(
        token.split('.').next().unwrap(),
        "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ"
    );
}

#[test]
fn encoding_is_deterministic() {
    let c = Chain::new();
    let u = UserClaims::new(c.user.public_key());
    assert_eq!(u.encode(&c.acc, NOW).unwrap(), u.encode(&c.acc, NOW).unwrap());
    assert_ne!(u.encode(&c.acc, NOW).unwrap(), u.encode(&c.acc, NOW + 1).unwrap());
}

#[test]
fn operator_and_account_round_trip() {
    let c = Chain::new();
    let sk = KeyPair::new_operator();
    let mut op = OperatorClaims::new(c.op.public_key());
    op.nats.signing_keys = vec![sk.public_key()];
    op.nats.system_account = c.acc.public_key();
    op.nats.operator_service_urls = vec!["nats://localhost:4222".into()];
    op.nats.assert_server_version = "2.10.0".into();
    let token = op.encode(&c.op, NOW).unwrap();
    let back = decode_operator(&token).unwrap();
    assert_eq!(back.nats.signing_keys, op.nats.signing_keys);
    assert!(back.claims.is_self_signed());
    assert!(back.validate(NOW).is_ok());

    let mut acc = c.acc_claims.clone();
    acc.nats.exports = vec![
        Export {
            subject: "z.svc".into(),
            export_type: ExportType::Service,
            ..Default::default()
        },
        Export {
            subject: "a.stream.>".into(),
            export_type: ExportType::Stream,
            ..Default::default()
        },
    ];
    let scoped = KeyPair::new_account();
    let mut scope = UserScope::new(scoped.public_key());
    scope.role = "dev".into();
    scope.template.permissions.publish.allow = vec!["{{name()}}.>".into()];
    acc.nats.signing_keys.add_scope(scope.clone());
    let plain = KeyPair::new_account();
    acc.nats.signing_keys.add(plain.public_key());
    acc.nats.revocations.revoke(c.user.public_key(), NOW as i64);
    acc.nats.mappings.insert(
        "m".into(),
        vec![WeightedMapping {
            subject: "n".into(),
            weight: 50,
            cluster: String::new(),
        }],
    );
    acc.nats.authorization.auth_users = vec![c.user.public_key()];
    acc.nats.limits.jetstream_tiered.insert(
        "R1".into(),
        JetStreamLimits {
            disk_storage: -1,
            ..Default::default()
        },
    );
    let token = acc.encode(&sk, NOW).unwrap();
    let back = decode_account(&token).unwrap();
    assert_eq!(back.claims.issuer, sk.public_key());
    assert_eq!(
        back.nats.exports[0].subject, "a.stream.>",
        "exports are written sorted by subject"
    );
    assert_eq!(back.nats.signing_keys.get(&scoped.public_key()), Some(Some(&scope)));
    assert_eq!(back.nats.signing_keys.get(&plain.public_key()), Some(None));
    assert!(back.is_revoked(&c.user.public_key(), NOW as i64));
    assert!(back.nats.authorization.is_enabled());
    assert!(back.nats.limits.is_js_enabled());
    assert!(back.validate(NOW).is_ok(), "{:?}", back.validation(NOW));
    assert!(back.did_sign(&scoped.public_key(), &c.acc.public_key()));
    assert!(!back.did_sign(&scoped.public_key(), ""));
    assert!(back.did_sign(&c.acc.public_key(), ""));
}

#[test]
fn scope_template_missing_limits_read_as_unlimited() {
    let c = Chain::new();
    let sk = KeyPair::new_account();
    let payload = format!(
        r#"{{"iss":"{op}","sub":"{acc}","nats":{{"signing_keys":["{plain}",{{"kind":"user_scope","key":"{sk}","role":"r","template":{{"pub":{{"allow":["x"]}}}}}},7,null],"type":"account","version":2}}}}"#,
        op = c.op.public_key(),
        acc = c.acc.public_key(),
        plain = KeyPair::new_account().public_key(),
        sk = sk.public_key()
    );
    let acc = decode_account(&sign_raw(V2_HEADER, &payload, &c.op)).unwrap();
    let scope = acc.nats.signing_keys.get(&sk.public_key()).unwrap().unwrap();
    assert_eq!(scope.template.limits.nats, NatsLimits::unlimited());
    assert_eq!(scope.template.permissions.publish.allow, vec!["x"]);
    assert_eq!(acc.nats.signing_keys.0.len(), 2);
}

#[test]
fn activation_and_callout_round_trip() {
    let c = Chain::new();
    let importer = KeyPair::new_account();
    let mut act = ActivationClaims::new(importer.public_key());
    act.nats.import_subject = "svc.*".into();
    act.nats.import_type = ExportType::Service;
    let back = decode_activation(&act.encode(&c.acc, NOW).unwrap()).unwrap();
    assert_eq!(back.nats.import_subject, "svc.*");
    assert_eq!(back.nats.import_type, ExportType::Service);
    assert!(back.validate(NOW).is_ok());
    assert_eq!(back.hash_id().unwrap().len(), 56);

    let server = KeyPair::new_server();
    let mut req = AuthorizationRequestClaims::new(c.acc.public_key());
    req.claims.audience = "nats-authorization-request".into();
    req.nats.user_nkey = c.user.public_key();
    req.nats.server = ServerId {
        name: "s".into(),
        host: "0.0.0.0".into(),
        id: server.public_key(),
        ..Default::default()
    };
    req.nats.client_information = ClientInformation {
        host: "127.0.0.1".into(),
        id: 7,
        kind: "Client".into(),
        ..Default::default()
    };
    req.nats.connect_options = ConnectOptions {
        username: "u".into(),
        password: "p".into(),
        protocol: 1,
        ..Default::default()
    };
    req.nats.tls = Some(ClientTls {
        version: "1.3".into(),
        certs: vec!["PEM".into()],
        ..Default::default()
    });
    let token = req.encode(&server, NOW).unwrap();
    assert!(payload_json(&token).contains(r#""connect_opts":{"user":"u","pass":"p","protocol":1}"#));
    let back = decode_authorization_request(&token).unwrap();
    assert_eq!(back.nats, {
        let mut n = req.nats.clone();
        n.generic = GenericFields {
            tags: vec![],
            claim_type: "authorization_request".into(),
            version: 2,
        };
        n
    });
    assert!(back.validate(NOW).is_ok());

    let user_jwt = UserClaims::new(c.user.public_key()).encode(&c.acc, NOW).unwrap();
    let mut resp = AuthorizationResponseClaims::new(c.user.public_key(), server.public_key());
    resp.nats.jwt = user_jwt.clone();
    let back = decode_authorization_response(&resp.encode(&c.acc, NOW).unwrap()).unwrap();
    assert_eq!(back.nats.jwt, user_jwt);
    assert_eq!(back.claims.audience, server.public_key());
    assert!(back.validate(NOW).is_ok());
}
