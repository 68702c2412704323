//! The nats-server configuration format. Filled by the config issue.
//!
//! Module map: none yet.
