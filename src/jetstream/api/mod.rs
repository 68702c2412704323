//! The JetStream API's wire shapes: configurations, requests, responses, errors and
//! Go's time formats. Pure data and decoding; nothing here touches a shard.
//!
//! - [`config`]: `StreamConfig`, `ConsumerConfig` and their enums.
//! - [`errors`] and [`errors_table`] (generated from errors.json): API errors.
//! - [`prepare`]: what the handlers call to turn request bodies into checked configs and
//!   queries.
//! - [`time`]: Go's `time.Time` in JSON.
//! - [`duration`]: Go's `time.Duration` text (parse and format).
//! - [`consumer_check`]: consumer create subjects, defaults, checks and update rules.
//! - [`consumer_info`]: consumer requests and `ConsumerInfo`.
//! - [`consumer_msgs`]: pull requests, status messages, ack subjects and payloads.
//! - [`json_scan`]: a JSON reader with Go's syntax errors; [`decode`]: strict request
//!   decoding with the reference's `invalid JSON` texts, against Go struct [`decode::Schema`]s
//!   ([`stream_schema`] for stream configurations).
//! - [`requests`]: the stream API's request bodies (info, names/list, purge, msg get/delete,
//!   direct get).
//! - [`info`]: response shapes (stream info and state, account info, pub acks, stored msgs).
//! - [`envelope`]: the `{"type": ..., "error": ...}` response envelope.
//! - [`stream_check`]: stream config defaults, validation and update rules, `_nats.*` metadata.

pub mod config;
pub mod consumer_check;
pub mod consumer_info;
pub mod consumer_msgs;
pub mod decode;
pub mod duration;
pub mod envelope;
pub mod errors;
#[rustfmt::skip]
#[allow(clippy::all)]
pub mod errors_table;
pub mod info;
pub mod json_scan;
pub mod prepare;
pub mod requests;
pub mod stream_check;
mod stream_check_sources;
pub mod stream_schema;
pub mod time;

pub use errors::{ApiError, ErrDef};
pub use time::GoTime;
