//! NATS JWT v2 (the format of nats-io/jwt v2 as nats-server 2.14 uses it): decoding,
//! signature verification, validation and encoding of operator, account, user, activation
//! and auth callout claims. A pure library: no I/O, and time comes in as `now` (unix
//! seconds).
//!
//! Module map:
//! - [`codec`]: `header.payload.signature`, base64url, the header, ed25519 via nkeys,
//!   [`MAX_TOKEN_SIZE`].
//! - [`json`]: Go-compatible JSON writing (so `jti` and whole tokens match jwt v2's) and
//!   Go's `null` leniency when reading.
//! - [`claims`]: the registered claims ([`ClaimsData`]), time checks, the `jti` hash, the
//!   [`ClaimsCommon`] accessors.
//! - [`types`], [`exports`], [`signing_keys`], [`revocation`]: the shared value types.
//! - [`operator`], [`account`], [`user`], [`activation`], [`authorization`]: one claims
//!   type each, with `validation(now)` (all findings, jwt v2's rules and texts) and
//!   `validate(now)` (the first blocking or time finding as an error).
//! - [`decode`] (with [`v1`] migration), [`encode`]: the two directions.
//! - [`templates`]: scoped signing key templates (`{{name()}}`, `{{tag(key)}}`, ...).
//! - [`creds`]: creds, decorated JWT and seed files.
//! - [`keys`], [`url`], [`validation`]: nkey kinds, Go URL parsing, validation results.
//!
//! What trusting a token means (trusted operators, the account that issued a user, signing
//! keys and scopes, revocations, pinned accounts) is the server's decision; this module
//! gives it the pieces: decoding checks the signature and the issuer's key *kind*, and
//! [`OperatorClaims::did_sign`], [`AccountClaims::did_sign`], [`SigningKeys::get`],
//! [`UserScope::validate_scoped_signer`], [`RevocationList::is_revoked`] and
//! [`apply_user_template`] do the rest as nats-server does.
//!
//! Decoding is deliberately kept apart from time validity: the server decodes expired
//! tokens too (to report them, to schedule expiry).
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

pub mod account;
pub mod activation;
pub mod authorization;
pub mod claims;
pub mod codec;
pub mod creds;
pub mod decode;
pub mod encode;
pub mod error;
pub mod exports;
pub mod json;
pub mod keys;
pub mod operator;
pub mod revocation;
pub mod signing_keys;
pub mod templates;
pub mod types;
pub mod url;
pub mod user;
pub mod v1;
pub mod validation;

#[cfg(test)]
mod tests;

pub use account::{
    Account, AccountClaims, AccountLimits, ExternalAuthorization, JetStreamLimits, MsgTrace, OperatorLimits,
    WeightedMapping,
};
pub use activation::{Activation, ActivationClaims};
pub use authorization::{
    AuthorizationRequest, AuthorizationRequestClaims, AuthorizationResponse, AuthorizationResponseClaims,
    ClientInformation, ClientTls, ConnectOptions, ServerId,
};
pub use claims::{ClaimsCommon, ClaimsData};
pub use codec::{Header, MAX_TOKEN_SIZE};
pub use creds::{
    decorate_jwt, decorate_seed, format_user_config, parse_decorated_jwt, parse_decorated_nkey,
    parse_decorated_user_nkey,
};
pub use decode::{
    decode_account, decode_activation, decode_any, decode_authorization_request, decode_authorization_response,
    decode_generic, decode_operator, decode_user, AnyClaims, GenericClaims,
};
pub use encode::{encode, Encode};
pub use error::JwtError;
pub use exports::{Export, Import, SamplingRate, ServiceLatency};
pub use keys::KeyKind;
pub use operator::{Operator, OperatorClaims};
pub use revocation::RevocationList;
pub use signing_keys::{SigningKeys, UserScope};
pub use templates::{apply_user_template, TemplateAccount, MAX_TEMPLATE_EXPANSIONS};
pub use types::{
    ExportType, GenericFields, Info, Limits, NatsLimits, Permission, Permissions, ResponsePermission, TimeRange,
    UserLimits, NO_LIMIT,
};
pub use user::{User, UserClaims, UserPermissionLimits};
pub use validation::{ValidationIssue, ValidationResults};
