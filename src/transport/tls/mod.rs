//! TLS on rustls, sans-IO.
//!
//! - [`config`]: the `tls { }` options and the rustls `ServerConfig` built from them
//!   ([`config::build_server_config`], also for HTTPS monitoring).
//! - [`client`]: `ClientConfig`s for the server's own outgoing connections (the URL
//!   account resolver's `https://`, `resolver_tls`).
//! - [`session`]: one connection's TLS state machine over byte buffers.
//! - [`peer`]: the client certificate as authentication sees it (`verify_and_map`).
//! - [`rate`]: `connection_rate_limit`, the server's handshake counter.
//! - [`dn`]: distinguished names compared and printed as the reference does.
//! - [`x509`], [`der`]: the small certificate reader behind them.

pub mod client;
pub mod config;
pub mod der;
pub mod dn;
pub mod peer;
pub mod rate;
pub mod session;
pub mod x509;

pub use config::{build_server_config, TlsConfigError, TlsOptions};
pub use peer::TlsPeer;
pub use session::{TlsError, TlsSession};
