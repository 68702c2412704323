//! Scoped signing key templates.

use super::*;

fn user() -> UserClaims {
    let mut u = UserClaims::new("UABC");
    u.claims.name = "alice".into();
    u.nats.issuer_account = "AACC".into();
    u.nats.generic.tags = vec!["dept:eng".into(), "dept:ops".into(), "site:x".into(), "Dept:no".into()];
    u
}

fn template(pub_allow: &[&str], pub_deny: &[&str], sub_allow: &[&str], sub_deny: &[&str]) -> UserPermissionLimits {
    let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut t = UserPermissionLimits::unlimited();
    t.permissions.publish = Permission {
        allow: v(pub_allow),
        deny: v(pub_deny),
    };
    t.permissions.subscribe = Permission {
        allow: v(sub_allow),
        deny: v(sub_deny),
    };
    t
}

const ACC_TAGS: &[&str] = &["region:eu", "tier:gold"];

fn apply(t: &UserPermissionLimits) -> Result<UserPermissionLimits, JwtError> {
    let tags: Vec<String> = ACC_TAGS.iter().map(|s| s.to_string()).collect();
    apply_user_template(
        t,
        &user(),
        TemplateAccount {
            name: "Acme",
            tags: &tags,
        },
    )
}

#[test]
fn operations_expand() {
    let cases: [(&str, &[&str]); 10] = [
        ("{{name()}}.>", &["alice.>"]),
        ("{{ NAME() }}.x", &["alice.x"]),
        ("u.{{subject()}}", &["u.UABC"]),
        ("{{account-name()}}.{{account-subject()}}", &["Acme.AACC"]),
        ("d.{{tag(dept)}}", &["d.eng", "d.ops"]),
        ("d.{{tag(DEPT)}}", &["d.eng", "d.ops"]),
        ("{{tag(dept)}}.{{account-tag(region)}}", &["eng.eu", "ops.eu"]),
        (
            "{{tag(dept)}}.{{tag(site)}}.{{name()}}",
            &["eng.x.alice", "ops.x.alice"],
        ),
        ("plain.subject", &["plain.subject"]),
        ("{{name()}} bad", &[]),
    ];
    for (input, want) in cases {
        let got = apply(&template(&[input], &[], &[], &[])).unwrap();
        assert_eq!(got.permissions.publish.allow, want, "{input}");
    }
}

#[test]
fn allow_lists_drop_bad_subjects_deny_lists_fail() {
    // A missing tag in an allow list yields nothing; the emptied allow list denies `>`.
    let got = apply(&template(&["x.{{tag(none)}}"], &[], &[], &[])).unwrap();
    assert!(got.permissions.publish.allow.is_empty());
    assert_eq!(got.permissions.publish.deny, [">"]);
    // Lists without templates stay as they are, invalid or not.
    let got = apply(&template(&["a b"], &[], &["s"], &[])).unwrap();
    assert_eq!(got.permissions.publish.allow, ["a b"]);
    let cases = [
        (
            template(&[], &["x.{{tag(none)}}"], &[], &[]),
            r#"generated invalid subject "x.{{tag(none)}}": "none" is not defined"#,
        ),
        (template(&[], &[], &[], &["{{name()}}.."]), "generated invalid subject"),
        (
            template(&["{{nope()}}"], &[], &[], &[]),
            r#"template operation in "{{nope()}}": "nope()" is not defined"#,
        ),
    ];
    for (t, want) in cases {
        assert_eq!(apply(&t).unwrap_err().to_string(), want);
    }
    // The tag prefix matches case-insensitively but is only stripped in lower case, so the
    // key becomes "TAG(dept", nothing matches, and the allow list loses the entry.
    let got = apply(&template(&[], &[], &["{{TAG(dept)}}"], &[])).unwrap();
    assert!(got.permissions.subscribe.allow.is_empty());
    assert_eq!(got.permissions.subscribe.deny, [">"]);
}

#[test]
fn other_template_fields_are_kept() {
    let mut t = template(&["{{name()}}"], &[], &[], &[]);
    t.bearer_token = true;
    t.limits.nats.subs = 10;
    let got = apply(&t).unwrap();
    assert!(got.bearer_token);
    assert_eq!(got.limits.nats.subs, 10);
    assert_eq!(got.permissions.publish.allow, ["alice"]);
}

#[test]
fn expansion_is_bounded() {
    let mut u = user();
    u.nats.generic.tags = (0..60).map(|i| format!("k:v{i}")).collect();
    let t = template(&["{{tag(k)}}.{{tag(k)}}"], &[], &[], &[]);
    let got = apply_user_template(&t, &u, TemplateAccount::default()).unwrap();
    assert_eq!(got.permissions.publish.allow.len(), 60 * 60);
    let t = template(&["{{tag(k)}}.{{tag(k)}}.{{tag(k)}}"], &[], &[], &[]);
    assert_eq!(
        apply_user_template(&t, &u, TemplateAccount::default())
            .unwrap_err()
            .to_string(),
        "template expansion exceeds limit: 4096"
    );
}
