//! Encoding: the same steps as jwt v2's `Encode`, so a token made here is byte for byte
//! the token jwt v2 makes from the same claims, key and time: subject kind check, claim
//! type, signer kind check, `iss` = the signer, `iat` = `now`, `jti` = hash of the
//! registered claims, `nats.version` = 2, Go-style JSON, ed25519 over `header.payload`.

use nkeys::KeyPair;
use serde::Serialize;

use super::account::AccountClaims;
use super::activation::ActivationClaims;
use super::authorization::{AuthorizationRequestClaims, AuthorizationResponseClaims};
use super::claims::{ClaimsCommon, ClaimsData};
use super::codec::{sign_token, Header};
use super::decode::{expected_signers, LIB_VERSION};
use super::error::JwtError;
use super::keys::{is_account_key, is_operator_key, is_user_key, key_kind};
use super::operator::OperatorClaims;
use super::types::{
    GenericFields, ACCOUNT_CLAIM, ACTIVATION_CLAIM, AUTHORIZATION_REQUEST_CLAIM, AUTHORIZATION_RESPONSE_CLAIM,
    OPERATOR_CLAIM, USER_CLAIM,
};
use super::user::UserClaims;

/// Claims that can be signed into a token.
pub trait Encode: Clone + Serialize + ClaimsCommon {
    /// The `nats.type` written.
    const CLAIM_TYPE: &'static str;

    /// The generic `nats` fields (type, version, tags).
    fn generic_mut(&mut self) -> &mut GenericFields;

    /// Checks and normalisation of the kind before the common steps.
    fn prepare(&mut self) -> Result<(), JwtError>;

    /// Signs these claims with `signer` (which needs its seed) at `now` (unix seconds,
    /// becomes `iat`). The claims are not changed; decode the token to see what was written.
    fn encode(&self, signer: &KeyPair, now: u64) -> Result<String, JwtError> {
        let mut c = self.clone();
        c.prepare()?;
        c.generic_mut().claim_type = Self::CLAIM_TYPE.to_string();
        if c.claims().subject.is_empty() {
            return Err(JwtError::SubjectNotSet);
        }
        let issuer = signer.public_key();
        let (kinds, expected) = expected_signers(Self::CLAIM_TYPE);
        if !key_kind(&issuer).is_some_and(|k| kinds.contains(&k)) {
            return Err(JwtError::IssuerKind { expected });
        }
        let data: &mut ClaimsData = c.claims_mut();
        data.issuer = issuer;
        data.issued_at = i64::try_from(now).unwrap_or(i64::MAX);
        data.id = data.compute_id()?;
        c.generic_mut().version = LIB_VERSION;
        sign_token(&Header::v2(), &c, signer)
    }
}

impl Encode for OperatorClaims {
    const CLAIM_TYPE: &'static str = OPERATOR_CLAIM;

    fn generic_mut(&mut self) -> &mut GenericFields {
        &mut self.nats.generic
    }

    fn prepare(&mut self) -> Result<(), JwtError> {
        if !is_operator_key(&self.claims.subject) {
            return Err(JwtError::SubjectKind("expected subject to be an operator public key"));
        }
        self.check_account_server_url().map_err(JwtError::Encode)
    }
}

impl Encode for AccountClaims {
    const CLAIM_TYPE: &'static str = ACCOUNT_CLAIM;

    fn generic_mut(&mut self) -> &mut GenericFields {
        &mut self.nats.generic
    }

    /// Exports and imports are written sorted by subject, as jwt v2 sorts them.
    fn prepare(&mut self) -> Result<(), JwtError> {
        if !is_account_key(&self.claims.subject) {
            return Err(JwtError::SubjectKind("expected subject to be account public key"));
        }
        self.nats.exports.sort_by(|a, b| a.subject.cmp(&b.subject));
        self.nats.imports.sort_by(|a, b| a.subject.cmp(&b.subject));
        Ok(())
    }
}

impl Encode for UserClaims {
    const CLAIM_TYPE: &'static str = USER_CLAIM;

    fn generic_mut(&mut self) -> &mut GenericFields {
        &mut self.nats.generic
    }

    fn prepare(&mut self) -> Result<(), JwtError> {
        if !is_user_key(&self.claims.subject) {
            return Err(JwtError::SubjectKind("expected subject to be user public key"));
        }
        Ok(())
    }
}

impl Encode for ActivationClaims {
    const CLAIM_TYPE: &'static str = ACTIVATION_CLAIM;

    fn generic_mut(&mut self) -> &mut GenericFields {
        &mut self.nats.generic
    }

    fn prepare(&mut self) -> Result<(), JwtError> {
        if !is_account_key(&self.claims.subject) {
            return Err(JwtError::SubjectKind("expected subject to be an account"));
        }
        Ok(())
    }
}

impl Encode for AuthorizationRequestClaims {
    const CLAIM_TYPE: &'static str = AUTHORIZATION_REQUEST_CLAIM;

    fn generic_mut(&mut self) -> &mut GenericFields {
        &mut self.nats.generic
    }

    fn prepare(&mut self) -> Result<(), JwtError> {
        Ok(())
    }
}

impl Encode for AuthorizationResponseClaims {
    const CLAIM_TYPE: &'static str = AUTHORIZATION_RESPONSE_CLAIM;

    fn generic_mut(&mut self) -> &mut GenericFields {
        &mut self.nats.generic
    }

    fn prepare(&mut self) -> Result<(), JwtError> {
        Ok(())
    }
}

/// Signs `claims` with `signer` at `now`; see [`Encode::encode`].
pub fn encode<C: Encode>(claims: &C, signer: &KeyPair, now: u64) -> Result<String, JwtError> {
    claims.encode(signer, now)
}
