//! The crate's typed errors. Texts of the errors that nats-server reports to clients
//! (`maximum messages exceeded`, `no message found`, ...) are the reference's.

use std::io;

/// Everything a store operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store is closed")]
    Closed,
    #[error("no message found")]
    MsgNotFound,
    #[error("stream store EOF")]
    Eof,
    #[error("maximum messages exceeded")]
    MaxMsgs,
    #[error("maximum bytes exceeded")]
    MaxBytes,
    #[error("maximum messages per subject exceeded")]
    MaxMsgsPerSubject,
    #[error("message too large")]
    MsgTooLarge,
    #[error("expected sequence does not match store")]
    SequenceMismatch,
    #[error("snapshot in progress")]
    SnapshotInProgress,
    #[error("too many matching results for request")]
    TooManyResults,
    #[error("partial purges not supported on memory store")]
    PartialPurge,
    /// An earlier write or fdatasync failed: the store refuses every later write (the data
    /// that failed may or may not be on disk, so pretending otherwise would lose writes).
    #[error("store refuses writes after an I/O failure: {0}")]
    WritesRefused(String),
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// Stored bytes that fail their checks (a block, an index, a state or key file).
    #[error("corrupt store data: {0}")]
    Corrupt(String),
    #[error("bad snapshot: {0}")]
    BadSnapshot(String),
    #[error("encryption: {0}")]
    Encryption(String),
    #[error("invalid store configuration: {0}")]
    Config(String),
}

impl StoreError {
    /// Is this a refusal to store for a limit (discard new), as opposed to a failure?
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            StoreError::MaxMsgs | StoreError::MaxBytes | StoreError::MaxMsgsPerSubject | StoreError::MsgTooLarge
        )
    }
}

/// Result of store operations.
pub type Result<T> = std::result::Result<T, StoreError>;
