//! Trace headers, JSON and compression.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]
