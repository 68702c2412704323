//! Decoding: size check, split, header, payload JSON, claim kind and version, v1 → v2
//! migration, signature, issuer kind. The steps and their order are jwt v2's `Decode`, so
//! a token fails with the same error as it does for nats-server.
//!
//! Versions: a payload with a top-level `type` is a v1 claim (jwt v1 layout) and is
//! migrated to the v2 structs the way jwt v2 does it; its signature covers only the payload
//! chunk. Otherwise `nats.version` is the version: above 2 is refused, typed claims need 2
//! (authorization claims take any), and a claim of unknown kind decodes as
//! [`GenericClaims`] whose signature is checked the v1 way, exactly as jwt v2 does.
//!
//! The payload is read into a `serde_json::Value` first, so a repeated member counts with
//! its last value, as in Go. Where this is stricter than Go's `encoding/json`, a token
//! fails to decode that jwt v2 would decode and then refuse at validation or use: `null`
//! entries inside lists (jwt v2 keeps nil imports/exports that validation rejects) and
//! invalid UTF-8. Member names are matched exactly (Go also matches them
//! case-insensitively).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::account::AccountClaims;
use super::activation::ActivationClaims;
use super::authorization::{AuthorizationRequestClaims, AuthorizationResponseClaims};
use super::claims::{ClaimsCommon, ClaimsData};
use super::codec::{b64_decode, parse_header, split, verify, ALGORITHM_V1};
use super::error::JwtError;
use super::json::strip_nulls;
use super::keys::{key_kind, KeyKind};
use super::operator::OperatorClaims;
use super::types::{
    GenericFields, ACCOUNT_CLAIM, ACTIVATION_CLAIM, AUTHORIZATION_REQUEST_CLAIM, AUTHORIZATION_RESPONSE_CLAIM,
    OPERATOR_CLAIM, USER_CLAIM,
};
use super::user::UserClaims;

/// The claim version this module writes and the highest it reads.
pub const LIB_VERSION: i64 = 2;

/// Claims of a kind this module has no type for: the registered claims and `nats` as JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GenericClaims {
    #[serde(flatten)]
    pub claims: ClaimsData,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub nats: Map<String, Value>,
}

impl ClaimsCommon for GenericClaims {
    fn claims(&self) -> &ClaimsData {
        &self.claims
    }
    fn claims_mut(&mut self) -> &mut ClaimsData {
        &mut self.claims
    }
}

impl GenericClaims {
    /// `nats.type` if it is a string.
    pub fn claim_type(&self) -> &str {
        self.nats.get("type").and_then(Value::as_str).unwrap_or_default()
    }
}

/// Any decoded token.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyClaims {
    Operator(OperatorClaims),
    Account(AccountClaims),
    User(UserClaims),
    Activation(ActivationClaims),
    AuthorizationRequest(AuthorizationRequestClaims),
    AuthorizationResponse(AuthorizationResponseClaims),
    Generic(GenericClaims),
}

impl AnyClaims {
    /// The kind as written in the token (`nats.type`; for generic claims, their `type`).
    pub fn claim_type(&self) -> &str {
        match self {
            AnyClaims::Operator(c) => &c.nats.generic.claim_type,
            AnyClaims::Account(c) => &c.nats.generic.claim_type,
            AnyClaims::User(c) => &c.nats.generic.claim_type,
            AnyClaims::Activation(c) => &c.nats.generic.claim_type,
            AnyClaims::AuthorizationRequest(c) => &c.nats.generic.claim_type,
            AnyClaims::AuthorizationResponse(c) => &c.nats.generic.claim_type,
            AnyClaims::Generic(c) => c.claim_type(),
        }
    }
}

impl ClaimsCommon for AnyClaims {
    fn claims(&self) -> &ClaimsData {
        match self {
            AnyClaims::Operator(c) => &c.claims,
            AnyClaims::Account(c) => &c.claims,
            AnyClaims::User(c) => &c.claims,
            AnyClaims::Activation(c) => &c.claims,
            AnyClaims::AuthorizationRequest(c) => &c.claims,
            AnyClaims::AuthorizationResponse(c) => &c.claims,
            AnyClaims::Generic(c) => &c.claims,
        }
    }
    fn claims_mut(&mut self) -> &mut ClaimsData {
        match self {
            AnyClaims::Operator(c) => &mut c.claims,
            AnyClaims::Account(c) => &mut c.claims,
            AnyClaims::User(c) => &mut c.claims,
            AnyClaims::Activation(c) => &mut c.claims,
            AnyClaims::AuthorizationRequest(c) => &mut c.claims,
            AnyClaims::AuthorizationResponse(c) => &mut c.claims,
            AnyClaims::Generic(c) => &mut c.claims,
        }
    }
}

/// What decides kind and version (jwt v2's `identifier`).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Identifier {
    #[serde(rename = "type")]
    v1_type: String,
    nats: GenericFields,
}

/// Decodes and verifies a token of any kind (jwt v2's `Decode`). Time validity is not
/// checked: see the claims' `validate(now)`.
pub fn decode_any(token: &str) -> Result<AnyClaims, JwtError> {
    let chunks = split(token)?;
    parse_header(chunks.header)?;
    let payload = b64_decode(chunks.payload)?;
    let (version, claims) = load(&payload)?;
    let sig = b64_decode(chunks.signature)?;
    let issuer = &claims.claims().issuer;
    if version <= 1 {
        if !verify(issuer, chunks.payload.as_bytes(), &sig) {
            return Err(JwtError::Signature { version: 1 });
        }
    } else if !verify(issuer, chunks.signed.as_bytes(), &sig) {
        return Err(JwtError::Signature { version: 2 });
    }
    if let Some((kinds, expected)) = expected_issuers(&claims) {
        if !key_kind(issuer).is_some_and(|k| kinds.contains(&k)) {
            return Err(JwtError::IssuerKind { expected });
        }
    }
    Ok(claims)
}

/// The key kinds that may issue each claim kind, and their text in Go's error.
fn expected_issuers(c: &AnyClaims) -> Option<(&'static [KeyKind], &'static str)> {
    const ACC_OP: &[KeyKind] = &[KeyKind::Account, KeyKind::Operator];
    match c {
        AnyClaims::Operator(_) => Some((&[KeyKind::Operator], "[operator]")),
        AnyClaims::Account(_) | AnyClaims::Activation(_) => Some((ACC_OP, "[account operator]")),
        AnyClaims::User(_) | AnyClaims::AuthorizationResponse(_) => Some((&[KeyKind::Account], "[account]")),
        AnyClaims::AuthorizationRequest(_) => Some((&[KeyKind::Server], "[server]")),
        AnyClaims::Generic(_) => None,
    }
}

/// Expected issuer kinds for encoding, by claim kind.
pub(crate) fn expected_signers(kind: &str) -> (&'static [KeyKind], &'static str) {
    const ACC_OP: &[KeyKind] = &[KeyKind::Account, KeyKind::Operator];
    match kind {
        OPERATOR_CLAIM => (&[KeyKind::Operator], "[operator]"),
        ACCOUNT_CLAIM | ACTIVATION_CLAIM => (ACC_OP, "[account operator]"),
        AUTHORIZATION_REQUEST_CLAIM => (&[KeyKind::Server], "[server]"),
        _ => (&[KeyKind::Account], "[account]"),
    }
}

/// Parses the payload into typed claims; returns the version that decides how the
/// signature is checked (`-1` for generic claims).
fn load(payload: &[u8]) -> Result<(i64, AnyClaims), JwtError> {
    let mut value: Value = serde_json::from_slice(payload)?;
    strip_nulls(&mut value);
    let id = if value.is_null() {
        Identifier::default()
    } else {
        Identifier::deserialize(&value)?
    };
    let (kind, version) = if id.v1_type.is_empty() {
        (id.nats.claim_type, id.nats.version)
    } else {
        (id.v1_type, 1)
    };
    if version > LIB_VERSION {
        return Err(JwtError::NewerVersion);
    }
    let typed = |v: i64| {
        if v == 1 || v == 2 {
            Ok(v)
        } else {
            Err(JwtError::UnsupportedVersion(v))
        }
    };
    let claims = match kind.as_str() {
        OPERATOR_CLAIM => {
            typed(version)?;
            let v = if version == 1 {
                super::v1::operator(value)
            } else {
                value
            };
            AnyClaims::Operator(OperatorClaims::deserialize(v)?)
        }
        ACCOUNT_CLAIM => {
            typed(version)?;
            let v = if version == 1 {
                super::v1::account(value)?
            } else {
                value
            };
            let mut a = AccountClaims::deserialize(v)?;
            if !a.nats.limits.jetstream_tiered.is_empty() {
                a.nats.limits.jetstream = Default::default();
            }
            AnyClaims::Account(a)
        }
        USER_CLAIM => {
            typed(version)?;
            let v = if version == 1 { super::v1::user(value) } else { value };
            AnyClaims::User(UserClaims::deserialize(v)?)
        }
        ACTIVATION_CLAIM => {
            typed(version)?;
            let v = if version == 1 {
                super::v1::activation(value)
            } else {
                value
            };
            AnyClaims::Activation(ActivationClaims::deserialize(v)?)
        }
        AUTHORIZATION_REQUEST_CLAIM => AnyClaims::AuthorizationRequest(AuthorizationRequestClaims::deserialize(value)?),
        AUTHORIZATION_RESPONSE_CLAIM => {
            AnyClaims::AuthorizationResponse(AuthorizationResponseClaims::deserialize(value)?)
        }
        "cluster" => return Err(JwtError::ClusterClaims),
        "server" => return Err(JwtError::ServerClaims),
        _ => {
            let g = if value.is_null() {
                GenericClaims::default()
            } else {
                GenericClaims::deserialize(value)?
            };
            return Ok((-1, AnyClaims::Generic(g)));
        }
    };
    Ok((version, claims))
}

/// Decodes an operator JWT.
pub fn decode_operator(token: &str) -> Result<OperatorClaims, JwtError> {
    match decode_any(token)? {
        AnyClaims::Operator(c) => Ok(c),
        _ => Err(JwtError::WrongClaimType("not operator claim")),
    }
}

/// Decodes an account JWT.
pub fn decode_account(token: &str) -> Result<AccountClaims, JwtError> {
    match decode_any(token)? {
        AnyClaims::Account(c) => Ok(c),
        _ => Err(JwtError::WrongClaimType("not account claim")),
    }
}

/// Decodes a user JWT.
pub fn decode_user(token: &str) -> Result<UserClaims, JwtError> {
    match decode_any(token)? {
        AnyClaims::User(c) => Ok(c),
        _ => Err(JwtError::WrongClaimType("not user claim")),
    }
}

/// Decodes an activation JWT.
pub fn decode_activation(token: &str) -> Result<ActivationClaims, JwtError> {
    match decode_any(token)? {
        AnyClaims::Activation(c) => Ok(c),
        _ => Err(JwtError::WrongClaimType("not activation claim")),
    }
}

/// Decodes an authorization request JWT.
pub fn decode_authorization_request(token: &str) -> Result<AuthorizationRequestClaims, JwtError> {
    match decode_any(token)? {
        AnyClaims::AuthorizationRequest(c) => Ok(c),
        _ => Err(JwtError::WrongClaimType("not an authorization request claim")),
    }
}

/// Decodes an authorization response JWT (the text of the type mismatch error is jwt
/// v2's, which says "request" here too).
pub fn decode_authorization_response(token: &str) -> Result<AuthorizationResponseClaims, JwtError> {
    match decode_any(token)? {
        AnyClaims::AuthorizationResponse(c) => Ok(c),
        _ => Err(JwtError::WrongClaimType("not an authorization request claim")),
    }
}

/// jwt v2's `DecodeGeneric`, which the server uses where only the registered claims
/// matter (resolver stores, delete requests): any kind, the signature checked over the
/// payload for a v1 header (`alg` exactly `ed25519`) and over `header.payload` otherwise,
/// no issuer kind check. For v1 tokens the top-level `type` and `tags` are copied into
/// `nats`. Unlike jwt v2 this also applies the size limit.
pub fn decode_generic(token: &str) -> Result<GenericClaims, JwtError> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct WithTop {
        #[serde(flatten)]
        generic: GenericClaims,
        #[serde(rename = "type")]
        v1_type: String,
        tags: Vec<String>,
    }
    let chunks = split(token)?;
    let header = parse_header(chunks.header)?;
    let payload = b64_decode(chunks.payload)?;
    let mut value: Value = serde_json::from_slice(&payload)?;
    strip_nulls(&mut value);
    let parsed = if value.is_null() {
        WithTop::default()
    } else {
        WithTop::deserialize(value)?
    };
    let sig = b64_decode(chunks.signature)?;
    let mut g = parsed.generic;
    if header.alg == ALGORITHM_V1 {
        if !verify(&g.claims.issuer, chunks.payload.as_bytes(), &sig) {
            return Err(JwtError::Signature { version: 1 });
        }
        if !parsed.v1_type.is_empty() {
            g.nats.insert("type".into(), Value::String(parsed.v1_type));
        }
        if !parsed.tags.is_empty() {
            g.nats.insert("tags".into(), Value::from(parsed.tags));
        }
    } else if !verify(&g.claims.issuer, chunks.signed.as_bytes(), &sig) {
        return Err(JwtError::Signature { version: 2 });
    }
    Ok(g)
}
