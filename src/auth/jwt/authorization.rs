//! Auth callout claims: the request the server signs with its server key and sends to the
//! auth service (who the client is, its CONNECT options, its TLS state), and the response
//! the service signs with an account key (a user JWT or an error).

use serde::{Deserialize, Serialize};

use super::claims::{ClaimsCommon, ClaimsData};
use super::json::is_default;
use super::keys::{is_account_key, is_server_key, is_user_key};
use super::types::GenericFields;
use super::validation::ValidationResults;

/// The server asking.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerId {
    pub name: String,
    pub host: String,
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The server's curve key when the request is encrypted.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub xkey: String,
}

/// The connecting client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientInformation {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(skip_serializing_if = "is_default")]
    pub id: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name_tag: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub client_type: String,
    #[serde(rename = "mqtt_id", skip_serializing_if = "String::is_empty")]
    pub mqtt: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub nonce: String,
}

/// The client's CONNECT options relevant to authentication.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConnectOptions {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub jwt: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub nkey: String,
    #[serde(rename = "sig", skip_serializing_if = "String::is_empty")]
    pub signed_nonce: String,
    #[serde(rename = "auth_token", skip_serializing_if = "String::is_empty")]
    pub token: String,
    #[serde(rename = "user", skip_serializing_if = "String::is_empty")]
    pub username: String,
    #[serde(rename = "pass", skip_serializing_if = "String::is_empty")]
    pub password: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub lang: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    pub protocol: i64,
}

/// The client's TLS state: PEM certificates, verified chains when verification ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientTls {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cipher: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub certs: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verified_chains: Vec<Vec<String>>,
}

/// The `nats` object of an authorization request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthorizationRequest {
    #[serde(rename = "server_id")]
    pub server: ServerId,
    /// The user key the response must be about.
    pub user_nkey: String,
    #[serde(rename = "client_info")]
    pub client_information: ClientInformation,
    #[serde(rename = "connect_opts")]
    pub connect_options: ConnectOptions,
    #[serde(rename = "client_tls", skip_serializing_if = "Option::is_none")]
    pub tls: Option<ClientTls>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub request_nonce: String,
    #[serde(flatten)]
    pub generic: GenericFields,
}

/// An authorization request JWT (signed by a server key).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthorizationRequestClaims {
    #[serde(flatten)]
    pub claims: ClaimsData,
    pub nats: AuthorizationRequest,
}

/// The `nats` object of an authorization response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthorizationResponse {
    /// The user JWT when authorized.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub jwt: String,
    /// Why not, when not authorized.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// The account when the issuer is one of its signing keys.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issuer_account: String,
    #[serde(flatten)]
    pub generic: GenericFields,
}

/// An authorization response JWT (signed by an account key).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthorizationResponseClaims {
    #[serde(flatten)]
    pub claims: ClaimsData,
    pub nats: AuthorizationResponse,
}

impl ClaimsCommon for AuthorizationRequestClaims {
    fn claims(&self) -> &ClaimsData {
        &self.claims
    }
    fn claims_mut(&mut self) -> &mut ClaimsData {
        &mut self.claims
    }
}

impl ClaimsCommon for AuthorizationResponseClaims {
    fn claims(&self) -> &ClaimsData {
        &self.claims
    }
    fn claims_mut(&mut self) -> &mut ClaimsData {
        &mut self.claims
    }
}

impl AuthorizationRequestClaims {
    /// A request about `subject` (the callout account or the configured issuer).
    pub fn new(subject: impl Into<String>) -> Self {
        AuthorizationRequestClaims {
            claims: ClaimsData::new(subject),
            ..Self::default()
        }
    }

    /// All findings (time checks included) for `now` (unix seconds).
    pub fn validation(&self, now: u64) -> ValidationResults {
        let mut vr = ValidationResults::new();
        let u = &self.nats.user_nkey;
        if u.is_empty() {
            vr.add_error("User nkey is required");
        } else if !is_user_key(u) {
            vr.add_error(format!(
                "User nkey {} is not a valid user public key",
                super::json::go_quote(u)
            ));
        }
        self.claims.validate_times(now, &mut vr);
        vr
    }

    /// `Ok` unless [`Self::validation`] has a blocking or time-check finding.
    pub fn validate(&self, now: u64) -> Result<(), super::JwtError> {
        self.validation(now).into_result()
    }
}

impl AuthorizationResponseClaims {
    /// A response about the user key `subject` for the server `audience`.
    pub fn new(subject: impl Into<String>, audience: impl Into<String>) -> Self {
        let mut c = AuthorizationResponseClaims {
            claims: ClaimsData::new(subject),
            ..Self::default()
        };
        c.claims.audience = audience.into();
        c
    }

    /// All findings (time checks included) for `now` (unix seconds). The server refuses a
    /// response with any finding, warnings included.
    pub fn validation(&self, now: u64) -> ValidationResults {
        let mut vr = ValidationResults::new();
        if !is_user_key(&self.claims.subject) {
            vr.add_error("Subject must be a user public key");
        }
        if !is_server_key(&self.claims.audience) {
            vr.add_error("Audience must be a server public key");
        }
        let r = &self.nats;
        if r.error.is_empty() && r.jwt.is_empty() {
            vr.add_error("Error or Jwt is required");
        }
        if !r.error.is_empty() && !r.jwt.is_empty() {
            vr.add_error("Only Error or Jwt can be set");
        }
        if !r.issuer_account.is_empty() && !is_account_key(&r.issuer_account) {
            vr.add_error("issuer_account is not an account public key");
        }
        self.claims.validate_times(now, &mut vr);
        vr
    }

    /// `Ok` unless [`Self::validation`] has any finding (as the server checks responses).
    pub fn validate(&self, now: u64) -> Result<(), super::JwtError> {
        let vr = self.validation(now);
        match vr.issues.into_iter().next() {
            None => Ok(()),
            Some(i) if i.description == super::validation::EXPIRED => Err(super::JwtError::Expired),
            Some(i) if i.description == super::validation::NOT_YET_VALID => Err(super::JwtError::NotYetValid),
            Some(i) => Err(super::JwtError::Invalid(i.description)),
        }
    }
}
