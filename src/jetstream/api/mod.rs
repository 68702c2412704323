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

pub mod config;
pub mod consumer_check;
pub mod consumer_info;
pub mod consumer_msgs;
pub mod duration;
pub mod errors;
#[rustfmt::skip]
#[allow(clippy::all)]
pub mod errors_table;
pub mod prepare;
pub mod time;

pub use errors::{ApiError, ErrDef};
pub use time::GoTime;
