//! The security settings of a config file as typed data (filled by `server::config`).
