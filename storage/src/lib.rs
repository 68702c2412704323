//! JetStream stores for rnats. Empty until the JetStream issues land.
//!
//! Module map: none yet. The memory store and the io_uring direct-I/O file store go here.
