//! Config-mode authentication as nats-server decides it.
#![allow(clippy::unwrap_used)]

use super::*;
use base64::Engine;

fn opts(f: impl FnOnce(&mut ClientOpts)) -> ClientOpts {
    let mut o = ClientOpts::default();
    f(&mut o);
    o
}

fn user(name: &str, pass: &str, account: AccountId) -> PasswordUser {
    PasswordUser {
        name: name.into(),
        password: pass.into(),
        account,
        permissions: None,
        conn_types: Vec::new(),
        proxy_required: false,
    }
}

fn sign(kp: &nkeys::KeyPair, nonce: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(kp.sign(nonce.as_bytes()).unwrap())
}

#[test]
fn users_in_accounts_and_no_auth_user() {
    let mut dir = UserDirectory::default();
    dir.users.insert("a".into(), user("a", "pa", 3));
    dir.users.insert("b".into(), user("b", "pb", 4));
    dir.no_auth_user = Some("b".into());
    let auth = ConfigAuthenticator::new(dir);
    assert!(auth.required());
    assert!(!auth.nonce_required());
    let id = auth
        .check(
            &opts(|o| {
                o.user = "a".into();
                o.pass = "pa".into()
            }),
            "",
            ConnType::Standard,
        )
        .unwrap();
    assert_eq!((id.account, id.user.as_str()), (3, "a"));
    assert!(auth
        .check(
            &opts(|o| {
                o.user = "a".into();
                o.pass = "x".into()
            }),
            "",
            ConnType::Standard
        )
        .is_err());
    assert!(auth
        .check(&opts(|o| o.user = "zz".into()), "", ConnType::Standard)
        .is_err());
    // No credentials at all: the no_auth_user.
    let id = auth.check(&ClientOpts::default(), "", ConnType::Standard).unwrap();
    assert_eq!((id.account, id.user.as_str()), (4, "b"));
    // A password without a user does not fall back to no_auth_user.
    assert!(auth
        .check(&opts(|o| o.pass = "pb".into()), "", ConnType::Standard)
        .is_err());
}

#[test]
fn nkeys_need_a_signature_of_the_nonce() {
    let kp = nkeys::KeyPair::new_user();
    let pk = kp.public_key();
    let mut dir = UserDirectory::default();
    dir.nkeys.insert(
        pk.clone(),
        NkeyUser {
            nkey: pk.clone(),
            account: 2,
            permissions: None,
            conn_types: Vec::new(),
            proxy_required: false,
        },
    );
    let auth = ConfigAuthenticator::new(dir);
    assert!(auth.nonce_required());
    let nonce = "abcdefghijklmno";
    let good = opts(|o| {
        o.nkey = pk.clone();
        o.sig = sign(&kp, nonce);
    });
    assert_eq!(auth.check(&good, nonce, ConnType::Standard).unwrap().account, 2);
    // Standard base64 is accepted too.
    let std_sig = base64::engine::general_purpose::STANDARD.encode(kp.sign(nonce.as_bytes()).unwrap());
    assert!(auth
        .check(
            &opts(|o| {
                o.nkey = pk.clone();
                o.sig = std_sig
            }),
            nonce,
            ConnType::Standard
        )
        .is_ok());
    assert_eq!(
        auth.check(&good, "other-nonce", ConnType::Standard).unwrap_err().detail,
        "Signature not verified"
    );
    let missing = opts(|o| o.nkey = pk.clone());
    assert_eq!(
        auth.check(&missing, nonce, ConnType::Standard).unwrap_err().detail,
        "Signature missing"
    );
    let garbage = opts(|o| {
        o.nkey = pk.clone();
        o.sig = "!!!".into();
    });
    assert_eq!(
        auth.check(&garbage, nonce, ConnType::Standard).unwrap_err().detail,
        "Signature not valid base64"
    );
    let other = nkeys::KeyPair::new_user();
    let wrong_key = opts(|o| {
        o.nkey = other.public_key();
        o.sig = sign(&other, nonce);
    });
    assert!(auth.check(&wrong_key, nonce, ConnType::Standard).is_err());
}

#[test]
fn connection_types_restrict_users() {
    let mut dir = UserDirectory::default();
    let mut u = user("ws", "p", 0);
    u.conn_types = vec![ConnType::Websocket];
    dir.users.insert("ws".into(), u);
    let auth = ConfigAuthenticator::new(dir);
    let o = opts(|o| {
        o.user = "ws".into();
        o.pass = "p".into()
    });
    assert!(auth.check(&o, "", ConnType::Standard).is_err());
    assert!(auth.check(&o, "", ConnType::Websocket).is_ok());
}

#[test]
fn token_and_single_user() {
    let auth = ConfigAuthenticator::new(UserDirectory {
        token: Some("t0k".into()),
        ..Default::default()
    });
    assert!(auth
        .check(&opts(|o| o.auth_token = "t0k".into()), "", ConnType::Standard)
        .is_ok());
    assert!(auth
        .check(&opts(|o| o.auth_token = "x".into()), "", ConnType::Standard)
        .is_err());
    assert!(auth.check(&ClientOpts::default(), "", ConnType::Standard).is_err());
    let auth = ConfigAuthenticator::new(UserDirectory {
        single: Some(("u".into(), "p".into())),
        ..Default::default()
    });
    assert!(auth
        .check(
            &opts(|o| {
                o.user = "u".into();
                o.pass = "p".into()
            }),
            "",
            ConnType::Standard
        )
        .is_ok());
    assert!(auth
        .check(
            &opts(|o| {
                o.user = "v".into();
                o.pass = "p".into()
            }),
            "",
            ConnType::Standard
        )
        .is_err());
    // No authentication configured: everybody is in $G.
    let none = ConfigAuthenticator::default();
    assert!(!none.required());
    assert_eq!(
        none.check(&ClientOpts::default(), "", ConnType::Standard)
            .unwrap()
            .account,
        GLOBAL
    );
}

#[test]
fn recheck_after_reload() {
    let mut dir = UserDirectory::default();
    dir.users.insert("a".into(), user("a", "pa", 1));
    let auth = ConfigAuthenticator::new(dir);
    let cur = Identity::in_account(1, "a");
    let a = opts(|o| {
        o.user = "a".into();
        o.pass = "pa".into()
    });
    assert!(matches!(auth.recheck(&a, &cur), Some(Recheck::Rebind(ref id)) if id.account == 1));
    let wrong = opts(|o| {
        o.user = "a".into();
        o.pass = "old".into()
    });
    assert!(matches!(auth.recheck(&wrong, &cur), Some(Recheck::Violation)));
    let gone = opts(|o| {
        o.user = "zz".into();
        o.pass = "x".into()
    });
    assert!(matches!(auth.recheck(&gone, &cur), Some(Recheck::Removed)));
}
