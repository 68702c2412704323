//! Activation claims: an exporting account's permission for one importing account (the
//! subject) to import a token-required export. Issued by the exporter's key or one of its
//! signing keys (then `issuer_account` names the exporter).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::claims::{ClaimsCommon, ClaimsData};
use super::codec::b32_encode;
use super::json::{go_quote, is_default};
use super::keys::is_account_key;
use super::types::{ExportType, GenericFields};
use super::validation::{validate_subject, ValidationResults};

/// The `nats` object of an activation JWT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Activation {
    /// The exported subject the import may use.
    #[serde(rename = "subject", skip_serializing_if = "String::is_empty")]
    pub import_subject: String,
    #[serde(rename = "kind", skip_serializing_if = "is_default")]
    pub import_type: ExportType,
    /// The exporting account when the issuer is one of its signing keys.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issuer_account: String,
    #[serde(flatten)]
    pub generic: GenericFields,
}

/// An activation JWT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ActivationClaims {
    #[serde(flatten)]
    pub claims: ClaimsData,
    pub nats: Activation,
}

impl ClaimsCommon for ActivationClaims {
    fn claims(&self) -> &ClaimsData {
        &self.claims
    }
    fn claims_mut(&mut self) -> &mut ClaimsData {
        &mut self.claims
    }
}

impl ActivationClaims {
    /// Claims for the importing account `subject`.
    pub fn new(subject: impl Into<String>) -> Self {
        ActivationClaims {
            claims: ClaimsData::new(subject),
            ..Self::default()
        }
    }

    /// The checks without time checks (what an import's validation adds).
    pub(crate) fn validate_content(&self, vr: &mut ValidationResults) {
        let a = &self.nats;
        if a.import_type != ExportType::Stream && a.import_type != ExportType::Service {
            vr.add_error(format!("invalid import type: {}", go_quote(a.import_type.as_str())));
        }
        validate_subject(&a.import_subject, vr);
        if !a.issuer_account.is_empty() && !is_account_key(&a.issuer_account) {
            vr.add_error("account_id is not an account public key");
        }
    }

    /// All findings (time checks included) for `now` (unix seconds).
    pub fn validation(&self, now: u64) -> ValidationResults {
        let mut vr = ValidationResults::new();
        self.claims.validate_times(now, &mut vr);
        self.validate_content(&mut vr);
        vr
    }

    /// `Ok` unless [`Self::validation`] has a blocking or time-check finding.
    pub fn validate(&self, now: u64) -> Result<(), super::JwtError> {
        self.validation(now).into_result()
    }

    /// jwt v2's `HashID`: base32 (padded) SHA-256 of `issuer.subject.<subject>`, where the
    /// subject is cut before its first wildcard token (`_` if it starts with one). `None`
    /// without issuer, subject or import subject.
    pub fn hash_id(&self) -> Option<String> {
        let c = &self.claims;
        let subj = &self.nats.import_subject;
        if c.issuer.is_empty() || c.subject.is_empty() || subj.is_empty() {
            return None;
        }
        let tokens: Vec<&str> = subj.split('.').collect();
        let cleaned = match tokens.iter().position(|t| *t == "*" || *t == ">") {
            Some(0) => "_".to_string(),
            Some(i) => tokens.get(..i).unwrap_or_default().join("."),
            None => String::new(),
        };
        let cleaned = if cleaned.is_empty() { subj.clone() } else { cleaned };
        let base = format!("{}.{}.{}", c.issuer, c.subject, cleaned);
        Some(b32_encode(&Sha256::digest(base.as_bytes()), true))
    }
}
