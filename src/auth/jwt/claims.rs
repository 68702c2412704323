//! The registered claims every token carries (`aud`, `exp`, `jti`, `iat`, `iss`, `name`,
//! `nbf`, `sub`; Go's `ClaimsData`), their time checks, and the `jti` as jwt v2 computes
//! it: base32 (no padding) of SHA-512/256 over the JSON of these claims with `jti` empty.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha512_256};

use super::codec::b32_encode;
use super::error::JwtError;
use super::json::{go_marshal, is_default};
use super::validation::{ValidationResults, EXPIRED, NOT_YET_VALID};

/// The registered claims, in jwt v2's field order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClaimsData {
    #[serde(rename = "aud", skip_serializing_if = "String::is_empty")]
    pub audience: String,
    /// Unix seconds; 0 is "never".
    #[serde(rename = "exp", skip_serializing_if = "is_default")]
    pub expires: i64,
    #[serde(rename = "jti", skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Unix seconds.
    #[serde(rename = "iat", skip_serializing_if = "is_default")]
    pub issued_at: i64,
    #[serde(rename = "iss", skip_serializing_if = "String::is_empty")]
    pub issuer: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Unix seconds; 0 is "always".
    #[serde(rename = "nbf", skip_serializing_if = "is_default")]
    pub not_before: i64,
    #[serde(rename = "sub", skip_serializing_if = "String::is_empty")]
    pub subject: String,
}

impl ClaimsData {
    /// Claims about `subject`, everything else empty.
    pub fn new(subject: impl Into<String>) -> Self {
        ClaimsData {
            subject: subject.into(),
            ..Self::default()
        }
    }

    /// The time checks of jwt v2 (no clock skew allowance): expired when `now > exp`, not
    /// yet valid when `nbf > now`; `now` in unix seconds.
    pub fn check_time(&self, now: u64) -> Result<(), JwtError> {
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        if self.expires > 0 && now > self.expires {
            return Err(JwtError::Expired);
        }
        if self.not_before > 0 && self.not_before > now {
            return Err(JwtError::NotYetValid);
        }
        Ok(())
    }

    /// Adds the time-check findings to `vr` (Go's `ClaimsData.Validate`).
    pub(crate) fn validate_times(&self, now: u64, vr: &mut ValidationResults) {
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        if self.expires > 0 && now > self.expires {
            vr.add_time_check(EXPIRED);
        }
        if self.not_before > 0 && self.not_before > now {
            vr.add_time_check(NOT_YET_VALID);
        }
    }

    /// Issuer and subject are the same key.
    pub fn is_self_signed(&self) -> bool {
        self.issuer == self.subject
    }

    /// The `jti` jwt v2 gives these claims: the hash of their JSON with `jti` left out.
    pub fn compute_id(&self) -> Result<String, JwtError> {
        let mut c = self.clone();
        c.id.clear();
        let json = go_marshal(&c)?;
        Ok(b32_encode(&Sha512_256::digest(&json), false))
    }
}

/// Access to the registered claims of any claims type.
pub trait ClaimsCommon {
    fn claims(&self) -> &ClaimsData;
    fn claims_mut(&mut self) -> &mut ClaimsData;

    fn subject(&self) -> &str {
        &self.claims().subject
    }
    fn issuer(&self) -> &str {
        &self.claims().issuer
    }
    fn name(&self) -> &str {
        &self.claims().name
    }
    fn id(&self) -> &str {
        &self.claims().id
    }
    fn issued_at(&self) -> i64 {
        self.claims().issued_at
    }
    fn expires(&self) -> i64 {
        self.claims().expires
    }
    /// Time validity only (see [`ClaimsData::check_time`]).
    fn check_time(&self, now: u64) -> Result<(), JwtError> {
        self.claims().check_time(now)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        let mut c = ClaimsData::new("S");
        assert!(c.check_time(u64::MAX).is_ok());
        c.expires = 100;
        assert_eq!(c.check_time(100), Ok(()));
        assert_eq!(c.check_time(101), Err(JwtError::Expired));
        c.expires = 0;
        c.not_before = 50;
        assert_eq!(c.check_time(49), Err(JwtError::NotYetValid));
        assert_eq!(c.check_time(50), Ok(()));
    }

    #[test]
    fn id_is_hash_of_claims_without_jti() {
        let mut c = ClaimsData::new("SUBJ");
        c.issuer = "ISS".into();
        c.issued_at = 1_700_000_000;
        let id = c.compute_id().unwrap();
        // {"iat":1700000000,"iss":"ISS","sub":"SUBJ"}
        let want = b32_encode(
            &Sha512_256::digest(br#"{"iat":1700000000,"iss":"ISS","sub":"SUBJ"}"#),
            false,
        );
        assert_eq!(id, want);
        assert_eq!(id.len(), 52);
        c.id = "something".into();
        assert_eq!(c.compute_id().unwrap(), id, "the old jti does not enter the hash");
    }
}
