//! Validation findings per claims type (jwt v2's rules and texts) and the trust helpers.

use super::*;

fn errors_of(vr: &ValidationResults) -> Vec<String> {
    vr.errors().into_iter().map(str::to_string).collect()
}

#[test]
fn time_checks() {
    let c = Chain::new();
    let mut u = UserClaims::new(c.user.public_key());
    u.claims.expires = NOW as i64;
    let back = decode_user(&u.encode(&c.acc, NOW).unwrap()).unwrap();
    assert_eq!(back.validate(NOW), Ok(()));
    assert_eq!(back.validate(NOW + 1), Err(JwtError::Expired));
    assert_eq!(back.check_time(NOW + 1), Err(JwtError::Expired));
    let vr = back.validation(NOW + 1);
    assert!(vr.is_blocking(true) && !vr.is_blocking(false));
    u.claims.expires = 0;
    u.claims.not_before = (NOW + 10) as i64;
    let back = decode_user(&u.encode(&c.acc, NOW).unwrap()).unwrap();
    assert_eq!(back.validate(NOW), Err(JwtError::NotYetValid));
    assert_eq!(back.validate(NOW + 10), Ok(()));
}

#[test]
fn user_findings() {
    let c = Chain::new();
    let mut u = UserClaims::new(c.user.public_key());
    let l = &mut u.nats.limits;
    l.permissions.publish.allow = vec!["a b".into(), "x..y".into()];
    l.permissions.subscribe.allow = vec!["q g".into(), "a b c".into()];
    l.limits.user.src = vec!["10.0.0.0/8".into(), "nope".into()];
    l.limits.user.times = vec![TimeRange {
        start: "25:00:00".into(),
        end: String::new(),
    }];
    l.limits.user.locale = "Not A Zone".into();
    u.nats.issuer_account = "bad".into();
    assert_eq!(
        errors_of(&u.validation(NOW)),
        [
            r#"Permission Subject "a b c" contains too many spaces"#,
            r#"Permission Subject "a b" is not allowed to contain queue"#,
            r#"subject "x..y" cannot contain consecutive `.`"#,
            r#"invalid cidr "nope" in user src limits"#,
            r#"start in time range is invalid "25:00:00""#,
            "time ranges end must contain an end",
            "could not parse iana time zone by name: unknown time zone Not A Zone",
            "account_id is not an account public key",
        ]
    );
    assert_eq!(
        u.validate(NOW).unwrap_err().to_string(),
        r#"Permission Subject "a b c" contains too many spaces"#
    );
}

#[test]
fn account_findings() {
    let c = Chain::new();
    let mut a = c.acc_claims.clone();
    a.nats.limits.account.wildcard_exports = false;
    a.nats.limits.account.exports = 10;
    a.nats.exports = vec![
        Export {
            subject: "s.*".into(),
            export_type: ExportType::Stream,
            account_token_position: 1,
            ..Default::default()
        },
        Export {
            subject: "s.a".into(),
            export_type: ExportType::Stream,
            ..Default::default()
        },
        Export {
            subject: "svc".into(),
            export_type: ExportType::Service,
            response_type: "Bogus".into(),
            ..Default::default()
        },
    ];
    a.nats.imports = vec![Import {
        subject: "i".into(),
        import_type: ExportType::Service,
        ..Default::default()
    }];
    a.nats.signing_keys.add("not-a-key");
    a.nats.authorization.allowed_accounts = vec!["*".into(), c.acc.public_key()];
    a.nats.mappings.insert(
        "m".into(),
        vec![WeightedMapping {
            subject: "n".into(),
            weight: 120,
            cluster: String::new(),
        }],
    );
    a.nats.trace = Some(MsgTrace {
        destination: "t.*".into(),
        sampling: 101,
    });
    a.nats.cluster_traffic = "mine".into();
    assert_eq!(
        errors_of(&a.validation(NOW)),
        [
            "account to import from is not specified",
            "Account Token Position 1 matches 's' but must match a * in: s.*",
            r#"invalid response type for service: "Bogus""#,
            r#"stream export subject "s.*" already exports "s.a""#,
            r#"Mapping "m" has a weight 120 that exceeds 100"#,
            r#"Mapping "m" exceeds 100% among all of it's weighted to mappings"#,
            "External authorization cannot have accounts without users specified",
            r#"AllowedAccounts can only be a list of accounts or "*""#,
            r#"the account Trace.Destination subject "t.*" is not a valid publish subject"#,
            "the account Trace.Sampling value '101' is not valid, should be in the range [1..100]",
            "the account contains wildcard exports that are not allowed by the operator",
            r#""not-a-key" is not a valid account signing key"#,
            r#"unknown cluster traffic option: "mine""#,
        ]
    );
}

#[test]
fn import_with_activation_token() {
    let c = Chain::new();
    let exporter = KeyPair::new_account();
    let mut act = ActivationClaims::new(c.acc.public_key());
    act.nats.import_subject = "svc.>".into();
    act.nats.import_type = ExportType::Service;
    act.claims.expires = (NOW - 10) as i64;
    let token = act.encode(&exporter, NOW).unwrap();
    let mut a = c.acc_claims.clone();
    let imp = Import {
        subject: "svc.x".into(),
        account: exporter.public_key(),
        token,
        import_type: ExportType::Service,
        ..Default::default()
    };
    a.nats.imports = vec![imp.clone()];
    assert!(
        a.validation(NOW).errors().is_empty(),
        "activation expiry is not checked inside an import"
    );
    a.nats.imports[0].account = KeyPair::new_account().public_key();
    a.nats.imports[0].subject = "other".into();
    assert_eq!(
        errors_of(&a.validation(NOW)),
        [
            r#"activation token doesn't match account for import "other""#,
            r#"activation token import subject "svc.>" doesn't match import "other""#,
        ]
    );
    a.nats.imports = vec![Import {
        token: "garbage".into(),
        ..imp
    }];
    assert_eq!(
        errors_of(&a.validation(NOW)),
        [r#"import "svc.x" contains an invalid activation token"#]
    );
}

#[test]
fn operator_and_callout_findings() {
    let c = Chain::new();
    let mut op = OperatorClaims::new(c.op.public_key());
    op.nats.signing_keys = vec![c.acc.public_key()];
    op.nats.system_account = c.op.public_key();
    op.nats.operator_service_urls = vec!["http://h:1".into(), "nats://u:p@h:1".into(), "tls://h:1/p".into()];
    op.nats.assert_server_version = "2.x.0".into();
    let errs = errors_of(&op.validation(NOW));
    assert_eq!(
        errs,
        [
            r#"operator service url "http://h:1" - protocol not supported (only 'nats', 'tls', 'ws', 'wss' only)"#
                .to_string(),
            r#"operator service url "nats://u:p@h:1" - credentials are not supported"#.into(),
            r#"operator service url "tls://h:1/p" - paths are not supported"#.into(),
            format!("{} is not an operator public key", c.acc.public_key()),
            format!("{} is not an account public key", c.op.public_key()),
            "assert server version error: asserted server version cant parse x to int".into(),
        ]
    );
    let mut resp = AuthorizationResponseClaims::new(c.acc.public_key(), "not-a-server");
    resp.nats.issuer_account = "x".into();
    assert_eq!(
        errors_of(&resp.validation(NOW)),
        [
            "Subject must be a user public key",
            "Audience must be a server public key",
            "Error or Jwt is required",
            "issuer_account is not an account public key",
        ]
    );
    let req = AuthorizationRequestClaims::new(c.acc.public_key());
    assert_eq!(req.validate(NOW).unwrap_err().to_string(), "User nkey is required");
}

#[test]
fn trust_helpers() {
    let c = Chain::new();
    let sk = KeyPair::new_operator();
    let mut op = OperatorClaims::new(c.op.public_key());
    op.nats.signing_keys = vec![sk.public_key()];
    let (o, a) = (c.op.public_key(), c.acc.public_key());
    assert!(op.did_sign(&o, &a) && op.did_sign(&sk.public_key(), &a) && !op.did_sign(&a, &a));
    op.nats.strict_signing_key_usage = true;
    assert!(!op.did_sign(&o, &a) && op.did_sign(&o, &o) && op.did_sign(&sk.public_key(), &a));

    let mut acc = c.acc_claims.clone();
    let user = UserClaims::new(c.user.public_key());
    assert!(acc.is_user_revoked(&user), "no iat counts as revoked");
    let mut issued = user.clone();
    issued.claims.issued_at = 100;
    assert!(!acc.is_user_revoked(&issued));
    acc.nats.revocations.revoke(super::super::revocation::REVOKE_ALL, 100);
    assert!(acc.is_user_revoked(&issued));

    let scoped = KeyPair::new_account();
    let scope = UserScope::new(scoped.public_key());
    let mut u = UserClaims::new(c.user.public_key());
    u.claims.issuer = scoped.public_key();
    assert_eq!(
        scope.validate_scoped_signer(&u).unwrap_err().to_string(),
        "scoped users require no permissions or limits set"
    );
    u.nats.limits = UserPermissionLimits::default();
    assert!(scope.validate_scoped_signer(&u).is_ok());
    u.claims.issuer = c.acc.public_key();
    assert_eq!(
        scope.validate_scoped_signer(&u).unwrap_err().to_string(),
        "issuer not the scoped signer"
    );
}
