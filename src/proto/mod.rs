//! The client wire protocol: parsing, the JSON of INFO and CONNECT, and server replies.

pub mod args;
pub mod client_info;
pub mod connect;
pub mod gojson;
pub mod gotime;
pub mod headers;
pub mod info;
pub mod parser;
mod pub_fast;
pub mod reply;
