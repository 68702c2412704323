//! Unit tests of the JWT module, by concern. Fixtures in `../testdata/` are tokens made by
//! Go tools (nsc / jwt v2 and v1) found in nats-server and nats.rs test configurations.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod creds;
mod go_tokens;
mod rejects;
mod roundtrip;
mod templates;
mod validation;

use nkeys::KeyPair;

use super::codec::b64_encode;
use super::*;

pub(super) const NOW: u64 = 1_700_000_000;

/// A token with the given header and payload JSON, signed over `header.payload`.
pub(super) fn sign_raw(header: &str, payload: &str, kp: &KeyPair) -> String {
    let signed = format!("{}.{}", b64_encode(header.as_bytes()), b64_encode(payload.as_bytes()));
    let sig = kp.sign(signed.as_bytes()).unwrap();
    format!("{signed}.{}", b64_encode(&sig))
}

pub(super) const V2_HEADER: &str = r#"{"typ":"JWT","alg":"ed25519-nkey"}"#;

/// An operator, an account it signs and a user the account signs.
pub(super) struct Chain {
    pub op: KeyPair,
    pub acc: KeyPair,
    pub user: KeyPair,
    pub acc_claims: AccountClaims,
}

impl Chain {
    pub fn new() -> Self {
        let op = KeyPair::new_operator();
        let acc = KeyPair::new_account();
        let user = KeyPair::new_user();
        let acc_claims = AccountClaims::new(acc.public_key());
        Chain {
            op,
            acc,
            user,
            acc_claims,
        }
    }
}
