//! The values the store API takes and returns: stored messages, stream and per-subject
//! state, deleted ranges and the stream limits a store enforces.

use bytes::Bytes;
use std::time::Duration;

/// One stored message as loaded back. Headers and payload share the store's buffers when
/// they can (no copy per load).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMsg {
    pub seq: u64,
    /// Unix nanoseconds, as the reference stores them.
    pub ts: i64,
    pub subject: String,
    pub headers: Bytes,
    pub payload: Bytes,
}

/// A stream's state (the reference's `StreamState`; times are Unix nanoseconds, 0 = none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamState {
    pub msgs: u64,
    pub bytes: u64,
    pub first_seq: u64,
    pub first_ts: i64,
    pub last_seq: u64,
    pub last_ts: i64,
    pub num_subjects: usize,
    pub num_deleted: u64,
    /// Interior deleted sequences (only filled by [`crate::Store::state`]).
    pub deleted: Vec<u64>,
}

/// State of the messages matching one subject or filter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimpleState {
    pub msgs: u64,
    pub first: u64,
    pub last: u64,
}

/// A run of deleted sequences: `first ..= first + num - 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeleteRange {
    pub first: u64,
    pub num: u64,
}

/// What to do when a limit is reached (the reference's `discard`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Discard {
    /// Remove the oldest messages to make room.
    #[default]
    Old,
    /// Refuse the new message.
    New,
}

/// Which implementation a store is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    Memory,
    File,
}

/// The limits and options of a stream that its store enforces (the store-relevant part of
/// the reference's `StreamConfig`). Negative or zero limits mean "unlimited", as there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// The stream's name: the reference keys its checksums and encryption by it.
    pub name: String,
    pub max_msgs: i64,
    pub max_bytes: i64,
    /// Zero: no age limit.
    pub max_age: Duration,
    pub max_msgs_per_subject: i64,
    /// Largest accepted message (subject + headers + payload); <= 0: no limit.
    pub max_msg_size: i64,
    pub discard: Discard,
    pub discard_new_per_subject: bool,
    /// Honour per-message TTLs (`allow_msg_ttl`).
    pub allow_msg_ttl: bool,
    /// The stream's `first_seq`: a new store starts there.
    pub first_seq: u64,
}

impl StoreConfig {
    /// A stream with no limits.
    pub fn new(name: &str) -> StoreConfig {
        StoreConfig {
            name: name.to_string(),
            max_msgs: -1,
            max_bytes: -1,
            max_age: Duration::ZERO,
            max_msgs_per_subject: -1,
            max_msg_size: -1,
            discard: Discard::Old,
            discard_new_per_subject: false,
            allow_msg_ttl: false,
            first_seq: 0,
        }
    }
}

/// Size the reference's file store accounts for one message (its record length).
pub fn file_msg_size(subject_len: usize, headers_len: usize, payload_len: usize) -> u64 {
    let base = 22 + subject_len + payload_len + 8;
    if headers_len == 0 {
        base as u64
    } else {
        (base + 4 + headers_len) as u64
    }
}

/// Size the reference's memory store accounts for one message.
pub fn memory_msg_size(subject_len: usize, headers_len: usize, payload_len: usize) -> u64 {
    (subject_len + headers_len + payload_len + 16) as u64
}
