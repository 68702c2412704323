//! Account claims: issued by the operator (or one of its signing keys); carry the
//! account's imports, exports, limits, signing keys, revocations, default permissions,
//! mappings, external authorization (auth callout) and message tracing settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::claims::{ClaimsCommon, ClaimsData};
use super::exports::{validate_exports, validate_imports, Export, Import};
use super::json::{go_quote, is_default, is_false};
use super::keys::{is_account_key, is_curve_key, is_user_key};
use super::revocation::RevocationList;
use super::signing_keys::SigningKeys;
use super::types::{GenericFields, Info, NatsLimits, Permissions, NO_LIMIT};
use super::validation::{has_wildcards, validate_subject, ValidationResults};

/// Any account, in `allowed_accounts`.
pub const ANY_ACCOUNT: &str = "*";

/// Account-level limits set by the operator.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AccountLimits {
    #[serde(skip_serializing_if = "is_default")]
    pub imports: i64,
    #[serde(skip_serializing_if = "is_default")]
    pub exports: i64,
    /// Wildcard exports allowed.
    #[serde(rename = "wildcards", skip_serializing_if = "is_false")]
    pub wildcard_exports: bool,
    /// User JWTs of the account may not be bearer tokens.
    #[serde(skip_serializing_if = "is_false")]
    pub disallow_bearer: bool,
    #[serde(skip_serializing_if = "is_default")]
    pub conn: i64,
    #[serde(rename = "leaf", skip_serializing_if = "is_default")]
    pub leaf_node_conn: i64,
}

/// JetStream limits (0 storage means JetStream is disabled for the account or tier).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct JetStreamLimits {
    #[serde(skip_serializing_if = "is_default")]
    pub mem_storage: i64,
    #[serde(skip_serializing_if = "is_default")]
    pub disk_storage: i64,
    #[serde(skip_serializing_if = "is_default")]
    pub streams: i64,
    #[serde(skip_serializing_if = "is_default")]
    pub consumer: i64,
    #[serde(skip_serializing_if = "is_default")]
    pub max_ack_pending: i64,
    #[serde(skip_serializing_if = "is_default")]
    pub mem_max_stream_bytes: i64,
    #[serde(skip_serializing_if = "is_default")]
    pub disk_max_stream_bytes: i64,
    #[serde(skip_serializing_if = "is_false")]
    pub max_bytes_required: bool,
}

/// All limits of an account (Go's `OperatorLimits`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OperatorLimits {
    #[serde(flatten)]
    pub nats: NatsLimits,
    #[serde(flatten)]
    pub account: AccountLimits,
    #[serde(flatten)]
    pub jetstream: JetStreamLimits,
    /// Per-tier JetStream limits (exclusive with the flat ones; when present, decoding
    /// clears the flat ones as jwt v2 does).
    #[serde(rename = "tiered_limits", skip_serializing_if = "BTreeMap::is_empty")]
    pub jetstream_tiered: BTreeMap<String, JetStreamLimits>,
}

impl OperatorLimits {
    /// Everything zero.
    pub fn is_empty(&self) -> bool {
        *self == OperatorLimits::default()
    }

    /// JetStream enabled: some tier (or, without tiers, the flat limits) has storage.
    pub fn is_js_enabled(&self) -> bool {
        let on = |l: &JetStreamLimits| l.mem_storage != 0 || l.disk_storage != 0;
        if self.jetstream_tiered.is_empty() {
            on(&self.jetstream)
        } else {
            self.jetstream_tiered.values().any(on)
        }
    }
}

/// One weighted destination of a mapping.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WeightedMapping {
    pub subject: String,
    /// Percent; 0 means 100.
    #[serde(skip_serializing_if = "is_default")]
    pub weight: u8,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
}

impl WeightedMapping {
    /// The weight with 0 read as 100.
    pub fn weight(&self) -> u8 {
        if self.weight == 0 {
            100
        } else {
            self.weight
        }
    }
}

/// Auth callout settings of an account.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExternalAuthorization {
    /// Users that bypass the callout (the auth service itself).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auth_users: Vec<String>,
    /// Accounts the service may place users in (`*` for any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_accounts: Vec<String>,
    /// Curve key to encrypt requests to.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub xkey: String,
}

impl ExternalAuthorization {
    /// The callout is on when there are auth users.
    pub fn is_enabled(&self) -> bool {
        !self.auth_users.is_empty()
    }

    fn validate(&self, vr: &mut ValidationResults) {
        if !self.allowed_accounts.is_empty() && self.auth_users.is_empty() {
            vr.add_error("External authorization cannot have accounts without users specified");
        }
        for u in &self.auth_users {
            if !is_user_key(u) {
                vr.add_error(format!("AuthUser {} is not a valid user public key", go_quote(u)));
            }
        }
        for a in &self.allowed_accounts {
            if a == ANY_ACCOUNT {
                if self.allowed_accounts.len() > 1 {
                    vr.add_error(format!(
                        "AllowedAccounts can only be a list of accounts or {}",
                        go_quote(ANY_ACCOUNT)
                    ));
                }
            } else if !is_account_key(a) {
                vr.add_error(format!("Account {} is not a valid account public key", go_quote(a)));
            }
        }
        if !self.xkey.is_empty() && !is_curve_key(&self.xkey) {
            vr.add_error(format!("XKey {} is not a valid public xkey", go_quote(&self.xkey)));
        }
    }
}

/// Message tracing of an account.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MsgTrace {
    #[serde(rename = "dest", skip_serializing_if = "String::is_empty")]
    pub destination: String,
    /// Percent 1..=100; 0 means 100 (jwt v2's `Validate` rewrites it so).
    #[serde(skip_serializing_if = "is_default")]
    pub sampling: i64,
}

/// The `nats` object of an account JWT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Account {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<Import>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<Export>,
    pub limits: OperatorLimits,
    #[serde(skip_serializing_if = "SigningKeys::is_empty")]
    pub signing_keys: SigningKeys,
    #[serde(skip_serializing_if = "RevocationList::is_empty")]
    pub revocations: RevocationList,
    pub default_permissions: Permissions,
    /// Subject mappings: source subject to weighted destinations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mappings: BTreeMap<String, Vec<WeightedMapping>>,
    pub authorization: ExternalAuthorization,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<MsgTrace>,
    /// `""`, `system` or `owner`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster_traffic: String,
    #[serde(flatten)]
    pub info: Info,
    #[serde(flatten)]
    pub generic: GenericFields,
}

/// An account JWT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AccountClaims {
    #[serde(flatten)]
    pub claims: ClaimsData,
    pub nats: Account,
}

impl ClaimsCommon for AccountClaims {
    fn claims(&self) -> &ClaimsData {
        &self.claims
    }
    fn claims_mut(&mut self) -> &mut ClaimsData {
        &mut self.claims
    }
}

impl AccountClaims {
    /// Claims for the account key `subject` with jwt v2's starting limits: everything
    /// unlimited, wildcard exports allowed, JetStream disabled.
    pub fn new(subject: impl Into<String>) -> Self {
        let mut c = AccountClaims {
            claims: ClaimsData::new(subject),
            ..Self::default()
        };
        c.nats.limits.nats = NatsLimits::unlimited();
        c.nats.limits.account = AccountLimits {
            imports: NO_LIMIT,
            exports: NO_LIMIT,
            wildcard_exports: true,
            disallow_bearer: false,
            conn: NO_LIMIT,
            leaf_node_conn: NO_LIMIT,
        };
        c
    }

    /// Did this account sign a user or activation JWT: issued by the account key itself, or
    /// by one of its signing keys with `issuer_account` naming this account.
    pub fn did_sign(&self, issuer: &str, issuer_account: &str) -> bool {
        if issuer == self.claims.subject {
            return true;
        }
        issuer_account == self.claims.subject && self.nats.signing_keys.contains(issuer)
    }

    /// Is a JWT about `key` issued at `issued_at` revoked by this account.
    pub fn is_revoked(&self, key: &str, issued_at: i64) -> bool {
        self.nats.revocations.is_revoked(key, issued_at)
    }

    /// jwt v2's `IsClaimRevoked` for a user: revoked, or without subject or `iat`.
    pub fn is_user_revoked(&self, user: &super::UserClaims) -> bool {
        user.claims.issued_at == 0
            || user.claims.subject.is_empty()
            || self.is_revoked(&user.claims.subject, user.claims.issued_at)
    }

    /// All findings (time checks included) for `now` (unix seconds).
    pub fn validation(&self, now: u64) -> ValidationResults {
        let mut vr = ValidationResults::new();
        self.claims.validate_times(now, &mut vr);
        let a = &self.nats;
        validate_imports(&a.imports, &self.claims.subject, &mut vr);
        validate_exports(&a.exports, &mut vr);
        if !a.limits.jetstream_tiered.is_empty() {
            if a.limits.jetstream != JetStreamLimits::default() {
                vr.add_error("JetStream Limits and tiered JetStream Limits are mutually exclusive");
            }
            if a.limits.jetstream_tiered.contains_key("") {
                vr.add_error(r#"Tiered JetStream Limits can not contain a blank "" tier name"#);
            }
        }
        a.default_permissions.validate(&mut vr);
        validate_mappings(&a.mappings, &mut vr);
        a.authorization.validate(&mut vr);
        if let Some(t) = &a.trace {
            let mut tvr = ValidationResults::new();
            validate_subject(&t.destination, &mut tvr);
            if let Some(first) = tvr.issues.first() {
                vr.add_error(format!("the account Trace.Destination {}", first.description));
            }
            if has_wildcards(&t.destination) {
                vr.add_error(format!(
                    "the account Trace.Destination subject {} is not a valid publish subject",
                    go_quote(&t.destination)
                ));
            }
            if !(0..=100).contains(&t.sampling) {
                vr.add_error(format!(
                    "the account Trace.Sampling value '{}' is not valid, should be in the range [1..100]",
                    t.sampling
                ));
            }
        }
        let lim = &a.limits.account;
        let n_imports = i64::try_from(a.imports.len()).unwrap_or(i64::MAX);
        let n_exports = i64::try_from(a.exports.len()).unwrap_or(i64::MAX);
        const TOO_MANY_IMPORTS: &str = "the account contains more imports than allowed by the operator";
        if !a.limits.is_empty() && lim.imports >= 0 && n_imports > lim.imports {
            vr.add_error(TOO_MANY_IMPORTS);
        }
        if lim.imports != NO_LIMIT && n_imports > lim.imports {
            vr.add_error(TOO_MANY_IMPORTS);
        }
        if lim.exports != NO_LIMIT {
            if n_exports > lim.exports {
                vr.add_error("the account contains more exports than allowed by the operator");
            }
            if !lim.wildcard_exports {
                for _ in a.exports.iter().filter(|e| has_wildcards(&e.subject)) {
                    vr.add_error("the account contains wildcard exports that are not allowed by the operator");
                }
            }
        }
        a.signing_keys.validate(&mut vr);
        a.info.validate(&mut vr);
        if !matches!(a.cluster_traffic.as_str(), "" | "system" | "owner") {
            vr.add_error(format!(
                "unknown cluster traffic option: {}",
                go_quote(&a.cluster_traffic)
            ));
        }
        if is_account_key(&self.claims.issuer) && !a.limits.is_empty() {
            vr.add_warning("self-signed account JWTs shouldn't contain operator limits");
        }
        vr
    }

    /// `Ok` unless [`Self::validation`] has a blocking or time-check finding.
    pub fn validate(&self, now: u64) -> Result<(), super::JwtError> {
        self.validation(now).into_result()
    }
}

fn validate_mappings(mappings: &BTreeMap<String, Vec<WeightedMapping>>, vr: &mut ValidationResults) {
    for (from, dests) in mappings {
        validate_subject(from, vr);
        let mut per_cluster: BTreeMap<&str, u32> = BTreeMap::new();
        let mut total = 0u32;
        for e in dests {
            validate_subject(&e.subject, vr);
            if e.weight() > 100 {
                vr.add_error(format!(
                    "Mapping {} has a weight {} that exceeds 100",
                    go_quote(from),
                    e.weight()
                ));
            }
            if e.cluster.is_empty() {
                total += u32::from(e.weight());
            } else {
                let t = per_cluster.entry(e.cluster.as_str()).or_default();
                *t += u32::from(e.weight());
                if *t > 100 {
                    vr.add_error(format!(
                        "Mapping {} in cluster {} exceeds 100% among all of it's weighted to mappings",
                        go_quote(from),
                        go_quote(&e.cluster)
                    ));
                }
            }
        }
        if total > 100 {
            vr.add_error(format!(
                "Mapping {} exceeds 100% among all of it's weighted to mappings",
                go_quote(from)
            ));
        }
    }
}
