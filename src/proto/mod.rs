//! The client wire protocol: parsing, the JSON of INFO and CONNECT, and server replies.

pub mod args;
pub mod connect;
pub mod gojson;
pub mod info;
pub mod parser;
pub mod reply;
