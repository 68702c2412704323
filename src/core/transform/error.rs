//! Errors of subject transforms and account mappings, with nats-server 2.14's texts.
//!
//! Destination errors read `invalid mapping destination: <reason> in <token>` (or without
//! the ` in <token>` part when no token is named); the config layer wraps them as
//! `Error adding mapping for "<src>" to "<dest>" : <this text>`.

use crate::proto::reply::go_quote;

/// Why a mapping destination was refused (the reference's `ErrMappingDestination*` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestErrorKind {
    /// `ErrInvalidMappingDestinationSubject`: an empty token, a token after `>`, whitespace.
    InvalidTransform,
    /// Strict transforms must reference every source wildcard.
    NotUsingAllWildcards,
    /// A `{{...}}` token that names no known function.
    UnknownFunction,
    /// A wildcard number beyond the source's `*` count, or a reference in a literal source.
    IndexOutOfRange,
    NotEnoughArgs,
    InvalidArg,
    TooManyArgs,
    /// Strict transforms (imports) only allow wildcard references.
    NotSupportedForImport,
}

impl DestErrorKind {
    /// The reference's error text.
    pub const fn text(self) -> &'static str {
        match self {
            DestErrorKind::InvalidTransform => "invalid mapping destination: invalid transform",
            DestErrorKind::NotUsingAllWildcards => {
                "invalid mapping destination: not using all of the token wildcard(s)"
            }
            DestErrorKind::UnknownFunction => "invalid mapping destination: unknown function",
            DestErrorKind::IndexOutOfRange => "invalid mapping destination: wildcard index out of range",
            DestErrorKind::NotEnoughArgs => "invalid mapping destination: not enough arguments passed to the function",
            DestErrorKind::InvalidArg => {
                "invalid mapping destination: function argument is invalid or in the wrong format"
            }
            DestErrorKind::TooManyArgs => "invalid mapping destination: too many arguments passed to the function",
            DestErrorKind::NotSupportedForImport => {
                "invalid mapping destination: the only mapping function allowed for import transforms is {{Wildcard()}}"
            }
        }
    }
}

/// A transform that cannot be built, or a subject it cannot map.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransformError {
    /// `ErrBadSubject`: source or destination is not a valid subject (empty token, `>` not
    /// last, `*` in the destination, `>` on one side only), or a published subject is not literal.
    #[error("invalid subject")]
    BadSubject,
    /// `ErrNoTransforms`: the subject does not match the source.
    #[error("no matching transforms available")]
    NoTransforms,
    /// A destination error naming the offending token (empty: none named).
    #[error("{}{}{}", .kind.text(), if .token.is_empty() { "" } else { " in " }, .token)]
    Destination { kind: DestErrorKind, token: String },
}

impl TransformError {
    pub(super) fn dest(kind: DestErrorKind, token: &str) -> Self {
        TransformError::Destination {
            kind,
            token: token.to_owned(),
        }
    }

    /// The destination error kind, if this is one.
    pub fn kind(&self) -> Option<DestErrorKind> {
        match self {
            TransformError::Destination { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// An account mapping that cannot be added (`AddWeightedMappings`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// Two destinations with the same subject (across all clusters).
    #[error("duplicate entry for {}", go_quote(.0.as_bytes()))]
    Duplicate(String),
    #[error("individual weights need to be <= 100")]
    WeightOver100,
    /// The weights of one cluster (or of the cluster-less destinations) add up past 100.
    #[error("total weight needs to be <= 100")]
    TotalWeightOver100,
    /// An invalid source (`invalid subject`) or destination.
    #[error(transparent)]
    Transform(#[from] TransformError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        // Texts observed from `nats-server -t` (2.14.0).
        for (e, want) in [
            (TransformError::BadSubject, "invalid subject"),
            (
                TransformError::dest(DestErrorKind::InvalidTransform, ""),
                "invalid mapping destination: invalid transform",
            ),
            (
                TransformError::dest(DestErrorKind::InvalidTransform, "x"),
                "invalid mapping destination: invalid transform in x",
            ),
            (
                TransformError::dest(DestErrorKind::IndexOutOfRange, "$2: [2]"),
                "invalid mapping destination: wildcard index out of range in $2: [2]",
            ),
        ] {
            assert_eq!(e.to_string(), want);
        }
        assert_eq!(
            MappingError::Duplicate("A".into()).to_string(),
            r#"duplicate entry for "A""#
        );
        assert_eq!(
            MappingError::from(TransformError::BadSubject).to_string(),
            "invalid subject"
        );
    }
}
