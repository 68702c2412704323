//! Message tracing in the sans-IO core.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]
