//! OCSP: the server's own certificate status stapled into its handshakes, and client
//! certificates checked with their issuers' responders (`ocsp_peer`), as nats-server does
//! them.
//!
//! - [`response`]: the request the server sends, responses decoded and signature-checked.
//! - [`fetch`]: HTTP(S) to responders, with Go's error texts.
//! - [`sig`]: the signature algorithms of responses and responder certificates.
//! - [`peer`]: client certificates checked with their responders (`ocsp_peer`).
//! - [`cache`]: the peer checks' response cache (`ocsp_cache`).
//! - [`staple`]: stapling the server's certificate status (`ocsp { }`), its monitor.
//! - [`runtime`]: the small tokio runtime OCSP's waiting happens on (never a shard).

pub mod cache;
pub mod fetch;
pub mod peer;
pub mod response;
pub mod runtime;
pub mod sig;
pub mod staple;

pub use response::{CertStatus, ParseError, Response};
