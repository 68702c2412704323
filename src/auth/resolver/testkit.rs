//! Test helpers for the resolvers and the claims services: operator and account keys,
//! account, user and delete-request JWTs, temporary directories.
#![allow(clippy::unwrap_used)]

use crate::auth::jwt::claims::ClaimsData;
use crate::auth::jwt::codec::{sign_token, Header};
use crate::auth::jwt::{encode, AccountClaims, GenericClaims, UserClaims};
use nkeys::KeyPair;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// An operator with a signing key, its system account, two accounts, and a stranger
/// operator nobody trusts.
pub struct Keys {
    pub operator: KeyPair,
    pub signing: KeyPair,
    pub system: KeyPair,
    pub account: KeyPair,
    pub other: KeyPair,
    pub stranger: KeyPair,
}

impl Keys {
    pub fn new() -> Self {
        Keys {
            operator: KeyPair::new_operator(),
            signing: KeyPair::new_operator(),
            system: KeyPair::new_account(),
            account: KeyPair::new_account(),
            other: KeyPair::new_account(),
            stranger: KeyPair::new_operator(),
        }
    }

    pub fn account_pub(&self) -> String {
        self.account.public_key()
    }

    pub fn other_pub(&self) -> String {
        self.other.public_key()
    }

    pub fn system_pub(&self) -> String {
        self.system.public_key()
    }
}

/// The account JWT of `account`, signed by `signer` at `iat`, after `edit`.
pub fn account_jwt(signer: &KeyPair, account: &KeyPair, iat: u64, edit: impl FnOnce(&mut AccountClaims)) -> String {
    let mut c = AccountClaims::new(account.public_key());
    c.claims.name = "acc".into();
    edit(&mut c);
    encode(&c, signer, iat).unwrap()
}

/// A user JWT issued by `account`.
pub fn user_jwt(account: &KeyPair, iat: u64) -> String {
    let u = KeyPair::new_user();
    encode(&UserClaims::new(u.public_key()), account, iat).unwrap()
}

/// A generic JWT (a delete request) about `subject` with `nats`, signed by `signer`.
pub fn generic_jwt(signer: &KeyPair, subject: &str, nats: serde_json::Value) -> String {
    let mut claims = ClaimsData::new(subject);
    claims.issuer = signer.public_key();
    claims.issued_at = 1_700_000_000;
    claims.id = claims.compute_id().unwrap();
    let g = GenericClaims {
        claims,
        nats: match nats {
            serde_json::Value::Object(m) => m,
            _ => Default::default(),
        },
    };
    sign_token(&Header::v2(), &g, signer).unwrap()
}

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("rnats-resolver-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
