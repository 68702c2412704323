//! OCSP: the server's own certificate status stapled into its handshakes, and client
//! certificates checked with their issuers' responders (`ocsp_peer`), as nats-server does
//! them.
//!
//! - [`response`]: the request the server sends, responses decoded and signature-checked.
//! - [`sig`]: the signature algorithms of responses and responder certificates.

pub mod response;
pub mod sig;

pub use response::{CertStatus, ParseError, Response};
