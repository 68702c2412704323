//! The load generator's error type.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can stop a run.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// The target address is not on the loopback interface (the lab only loads 127.0.0.0/8 and ::1).
    #[error("refusing non-loopback target {0}: the perf lab only loads servers on this machine")]
    NotLoopback(String),

    /// The target address could not be parsed or resolved.
    #[error("bad target address {addr:?}: {reason}")]
    BadAddress { addr: String, reason: String },

    /// TCP connect failed or timed out.
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: SocketAddr, source: io::Error },

    /// The peer accepted the connection but did not greet like a NATS server.
    #[error("{addr} is not a NATS server: {reason}")]
    NotNats { addr: SocketAddr, reason: String },

    /// The server violated the protocol (or we do not understand it).
    #[error("protocol error: {0}")]
    Protocol(String),

    /// The server sent `-ERR`.
    #[error("server error: -ERR {0}")]
    Server(String),

    /// The server closed the connection.
    #[error("connection closed by the server{0}")]
    Closed(String),

    /// A bounded wait ran out.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { what: String, after: Duration },

    /// Socket I/O failure.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),

    /// The server process could not be started or died.
    #[error("server {bin}: {reason}")]
    ServerProcess { bin: PathBuf, reason: String },

    /// The server does not behave as the scenario's configuration says it must (e.g. the auth
    /// scenarios against a server without the lab's auth config).
    #[error("server configuration check failed: {0}")]
    Config(String),

    /// A scenario parameter is out of range.
    #[error("invalid parameter: {0}")]
    Param(String),

    /// Writing results failed.
    #[error("cannot write {path}: {reason}")]
    Output { path: PathBuf, reason: String },

    /// A worker thread panicked.
    #[error("worker thread panicked: {0}")]
    Worker(String),
}

/// Shorthand result type.
pub type Result<T> = std::result::Result<T, PerfError>;
