//! Imports and exports resolved into routing entries. A stream export that another
//! account imports becomes a [`StreamLink`] on the exporting account (a message published
//! there is also delivered in the importer); a service import becomes a
//! [`ServiceImport`] on the importing account (a request published there goes to the
//! exporter, and its reply comes back through a response mapping).

use super::AccountId;
use crate::core::transform::SubjectTransform;
use std::time::Duration;

/// How a subject is rewritten when it crosses into another account.
#[derive(Debug, Clone, PartialEq)]
pub enum Rewrite {
    /// Unchanged.
    Same,
    /// A literal prefix (stream import `prefix`, with its trailing `.`).
    Prefix(Box<[u8]>),
    /// A literal subject (an import of a literal subject under another name).
    Literal(Box<[u8]>),
    /// A wildcard rewrite (strict: wildcard references only).
    Transform(Box<SubjectTransform>),
}

impl Rewrite {
    /// `subject` as it appears on the other side. `Same` borrows; the rest build a new
    /// subject.
    pub fn apply<'a>(&self, subject: &'a [u8], out: &'a mut Vec<u8>) -> &'a [u8] {
        match self {
            Rewrite::Same => subject,
            Rewrite::Prefix(p) => {
                out.clear();
                out.extend_from_slice(p);
                out.extend_from_slice(subject);
                out
            }
            Rewrite::Literal(s) => {
                out.clear();
                out.extend_from_slice(s);
                out
            }
            Rewrite::Transform(t) => {
                // Strict transforms have no random functions.
                *out = t.transform_subject(subject, &mut || 0);
                out
            }
        }
    }
}

/// Messages of the exporting account on `from` are also delivered in `importer`.
#[derive(Debug, Clone)]
pub struct StreamLink {
    /// The imported subjects, in the exporter's subject space.
    pub from: Box<[u8]>,
    pub importer: AccountId,
    pub rewrite: Rewrite,
    pub allow_trace: bool,
}

/// How many responses a service request may get (`response_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseType {
    #[default]
    Singleton,
    Stream,
    Chunked,
}

impl ResponseType {
    /// The name nats-server uses in JSON (`/accountz`, JWTs).
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseType::Singleton => "Singleton",
            ResponseType::Stream => "Stream",
            ResponseType::Chunked => "Chunked",
        }
    }
}

/// Service latency sampling of an export (`latency { sampling, subject }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyTracking {
    /// 1..=100 percent; 0 means "sample when the request carries tracing headers".
    pub sampling: u8,
    pub subject: String,
}

/// Requests published on `local` in the importing account go to `exporter`.
#[derive(Debug, Clone)]
pub struct ServiceImport {
    /// The subject (pattern) in the importing account.
    pub local: Box<[u8]>,
    pub exporter: AccountId,
    /// From the importer's subject to the exporter's.
    pub rewrite: Rewrite,
    /// The export's subject (identifies the export, for cycle checks and reports).
    pub export_subject: Box<[u8]>,
    pub response: ResponseType,
    /// How long a response mapping lives without a response (`response_threshold`).
    pub threshold: Duration,
    /// Share the requester's details with the exporter (`share`).
    pub share: bool,
    pub latency: Option<LatencyTracking>,
    pub allow_trace: bool,
}

/// nats-server's default `response_threshold`.
pub const DEFAULT_RESPONSE_THRESHOLD: Duration = Duration::from_secs(120);
