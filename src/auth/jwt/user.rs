//! User claims: issued by an account (or one of its signing keys, then `issuer_account`
//! names the account), carrying the user's permissions and limits.

use serde::{Deserialize, Serialize};

use super::claims::{ClaimsCommon, ClaimsData};
use super::json::is_false;
use super::keys::is_account_key;
use super::types::{GenericFields, Limits, NatsLimits, Permissions};
use super::validation::ValidationResults;

/// Connection types of `allowed_connection_types`.
pub const CONNECTION_TYPE_STANDARD: &str = "STANDARD";
pub const CONNECTION_TYPE_WEBSOCKET: &str = "WEBSOCKET";
pub const CONNECTION_TYPE_LEAFNODE: &str = "LEAFNODE";
pub const CONNECTION_TYPE_LEAFNODE_WS: &str = "LEAFNODE_WS";
pub const CONNECTION_TYPE_MQTT: &str = "MQTT";
pub const CONNECTION_TYPE_MQTT_WS: &str = "MQTT_WS";
pub const CONNECTION_TYPE_IN_PROCESS: &str = "IN_PROCESS";

/// Permissions and limits of a user; also the template of a scoped signing key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserPermissionLimits {
    #[serde(flatten)]
    pub permissions: Permissions,
    #[serde(flatten)]
    pub limits: Limits,
    /// No nonce signature needed to connect.
    #[serde(skip_serializing_if = "is_false")]
    pub bearer_token: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub proxy_required: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_connection_types: Vec<String>,
}

impl UserPermissionLimits {
    /// Unlimited subs/data/payload, nothing else set (`NewUserClaims`' default).
    pub fn unlimited() -> Self {
        let mut l = UserPermissionLimits::default();
        l.limits.nats = NatsLimits::unlimited();
        l
    }
}

/// The `nats` object of a user JWT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct User {
    #[serde(flatten)]
    pub limits: UserPermissionLimits,
    /// The account when the issuer is one of its signing keys.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issuer_account: String,
    #[serde(flatten)]
    pub generic: GenericFields,
}

/// A user JWT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserClaims {
    #[serde(flatten)]
    pub claims: ClaimsData,
    pub nats: User,
}

impl ClaimsCommon for UserClaims {
    fn claims(&self) -> &ClaimsData {
        &self.claims
    }
    fn claims_mut(&mut self) -> &mut ClaimsData {
        &mut self.claims
    }
}

impl UserClaims {
    /// Claims for the user key `subject` with unlimited subs/data/payload (`NewUserClaims`).
    pub fn new(subject: impl Into<String>) -> Self {
        let mut c = UserClaims {
            claims: ClaimsData::new(subject),
            ..Self::default()
        };
        c.nats.limits = UserPermissionLimits::unlimited();
        c
    }

    /// Nothing set in permissions and limits: what a user issued by a scoped signing key
    /// must look like (`HasEmptyPermissions`).
    pub fn has_empty_permissions(&self) -> bool {
        self.nats.limits == UserPermissionLimits::default()
    }

    pub fn is_bearer_token(&self) -> bool {
        self.nats.limits.bearer_token
    }

    /// The account this user belongs to: `issuer_account` if set, else the issuer.
    pub fn account(&self) -> &str {
        if self.nats.issuer_account.is_empty() {
            &self.claims.issuer
        } else {
            &self.nats.issuer_account
        }
    }

    /// All findings (time checks included) for `now` (unix seconds).
    pub fn validation(&self, now: u64) -> ValidationResults {
        let mut vr = ValidationResults::new();
        self.claims.validate_times(now, &mut vr);
        self.nats.limits.permissions.validate(&mut vr);
        self.nats.limits.limits.validate(&mut vr);
        let ia = &self.nats.issuer_account;
        if !ia.is_empty() && !is_account_key(ia) {
            vr.add_error("account_id is not an account public key");
        }
        vr
    }

    /// `Ok` unless [`Self::validation`] has a blocking or time-check finding (what the
    /// server requires of a user JWT at CONNECT).
    pub fn validate(&self, now: u64) -> Result<(), super::JwtError> {
        self.validation(now).into_result()
    }
}
