//! Authentication and authorization: who a connection is, which account it belongs to and
//! what it may publish and subscribe to.
//!
//! Module map:
//! - [`callout`]: auth callout: an external service decides through `$SYS.REQ.USER.AUTH`.
//! - [`config`]: the security settings of the config file as typed data (users, nkeys,
//!   accounts with exports/imports/mappings/limits, permissions, operator, resolver,
//!   auth callout), before they are resolved into runtime structures.
//! - [`secret`]: password and token comparison (bcrypt or constant time).
//! - [`users`]: config mode: token, single user, users with passwords or nkeys,
//!   `no_auth_user`, accounts and permissions of configured users.
//! - [`operator`]: operator (JWT) mode: user JWTs against account JWTs from the resolver.
//! - [`resolver`]: account resolvers of operator mode (memory, URL, full/cache directory).
//! - [`jwt`]: NATS JWT v2 claims (operator, account, user, activation, authorization
//!   request/response): decoding, verification and encoding.
//!
//! Ownership: everything here is either plain configuration (read-only, shared by all
//! shards through an `Arc`) or per-connection state owned by the connection's shard.

pub mod callout;
pub mod config;
pub mod jwt;
pub mod operator;
pub mod resolver;
pub mod secret;
pub mod users;
