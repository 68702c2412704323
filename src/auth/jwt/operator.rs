//! Operator claims: the root of trust in operator mode. Self-signed by the operator key
//! (or signed by one of its signing keys); names the system account, signing keys, and
//! the server version it requires.

use serde::{Deserialize, Serialize};

use super::claims::{ClaimsCommon, ClaimsData};
use super::json::{go_quote, is_false};
use super::keys::{is_account_key, is_operator_key};
use super::types::GenericFields;
use super::url;
use super::validation::ValidationResults;

/// The `nats` object of an operator JWT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Operator {
    /// Operator keys that may sign on the operator's behalf.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signing_keys: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account_server_url: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub operator_service_urls: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub system_account: String,
    /// Minimum server version, `major.minor.update`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub assert_server_version: String,
    /// Accounts must be signed by a signing key, not by the operator key itself.
    #[serde(skip_serializing_if = "is_false")]
    pub strict_signing_key_usage: bool,
    #[serde(flatten)]
    pub generic: GenericFields,
}

/// An operator JWT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OperatorClaims {
    #[serde(flatten)]
    pub claims: ClaimsData,
    pub nats: Operator,
}

impl ClaimsCommon for OperatorClaims {
    fn claims(&self) -> &ClaimsData {
        &self.claims
    }
    fn claims_mut(&mut self) -> &mut ClaimsData {
        &mut self.claims
    }
}

/// jwt v2's `ParseServerVersion`: `""` is `(0, 0, 0)`.
pub fn parse_server_version(version: &str) -> Result<(i64, i64, i64), String> {
    if version.is_empty() {
        return Ok((0, 0, 0));
    }
    let parts: Vec<&str> = version.split('.').collect();
    let [a, b, c] = parts.as_slice() else {
        return Err("asserted server version must be of the form <major>.<minor>.<update>".into());
    };
    let mut nums = [0i64; 3];
    for (n, s) in nums.iter_mut().zip([a, b, c]) {
        *n = s
            .parse()
            .map_err(|_| format!("asserted server version cant parse {s} to int"))?;
    }
    if nums.iter().any(|n| *n < 0) {
        return Err(format!(
            "asserted server version can'b contain negative values: {version}"
        ));
    }
    let [major, minor, update] = nums;
    Ok((major, minor, update))
}

impl OperatorClaims {
    /// Self-issued claims for the operator key `subject`.
    pub fn new(subject: impl Into<String>) -> Self {
        let subject = subject.into();
        let mut c = OperatorClaims::default();
        c.claims.issuer = subject.clone();
        c.claims.subject = subject;
        c
    }

    /// Did this operator sign claims issued by `issuer` about `subject`: its own key
    /// (unless strict signing key usage is on, where only its own JWT may be self-signed),
    /// or one of its signing keys.
    pub fn did_sign(&self, issuer: &str, subject: &str) -> bool {
        if issuer == self.claims.subject {
            return !self.nats.strict_signing_key_usage || subject == self.claims.subject;
        }
        self.nats.signing_keys.iter().any(|k| k == issuer)
    }

    /// The account server URL check encoding also applies.
    pub(crate) fn check_account_server_url(&self) -> Result<(), String> {
        let u = &self.nats.account_server_url;
        if u.is_empty() {
            return Ok(());
        }
        match url::parse(u) {
            Err(e) => Err(format!("error parsing account server url: {e}")),
            Ok(p) if p.scheme.is_empty() => Err(format!("account server url {} requires a protocol", go_quote(u))),
            Ok(_) => Ok(()),
        }
    }

    /// All findings (time checks included) for `now` (unix seconds).
    pub fn validation(&self, now: u64) -> ValidationResults {
        let mut vr = ValidationResults::new();
        self.claims.validate_times(now, &mut vr);
        if let Err(e) = self.check_account_server_url() {
            vr.add_error(e);
        }
        for v in self.nats.operator_service_urls.iter().filter(|v| !v.is_empty()) {
            if let Err(e) = validate_operator_service_url(v) {
                vr.add_error(e);
            }
        }
        for k in &self.nats.signing_keys {
            if !is_operator_key(k) {
                vr.add_error(format!("{k} is not an operator public key"));
            }
        }
        let sys = &self.nats.system_account;
        if !sys.is_empty() && !is_account_key(sys) {
            vr.add_error(format!("{sys} is not an account public key"));
        }
        if let Err(e) = parse_server_version(&self.nats.assert_server_version) {
            vr.add_error(format!("assert server version error: {e}"));
        }
        vr
    }

    /// `Ok` unless [`Self::validation`] has a blocking or time-check finding.
    pub fn validate(&self, now: u64) -> Result<(), super::JwtError> {
        self.validation(now).into_result()
    }
}

/// jwt v2's `ValidateOperatorServiceURL`: `nats`, `tls`, `ws` or `wss`, no credentials, no
/// path.
pub fn validate_operator_service_url(v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Ok(());
    }
    let q = go_quote(v);
    let u = url::parse(v).map_err(|e| format!("error parsing operator service url {q}: {e}"))?;
    if u.has_user {
        return Err(format!("operator service url {q} - credentials are not supported"));
    }
    if !u.path.is_empty() {
        return Err(format!("operator service url {q} - paths are not supported"));
    }
    match u.scheme.as_str() {
        "nats" | "tls" | "ws" | "wss" => Ok(()),
        _ => Err(format!(
            "operator service url {q} - protocol not supported (only 'nats', 'tls', 'ws', 'wss' only)"
        )),
    }
}
