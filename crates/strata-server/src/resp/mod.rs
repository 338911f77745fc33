//! The Redis serialization protocol: request parsing and reply encoding.

pub mod parse;
pub mod reply;
pub mod request;

pub use parse::{parse_request, Limits, ProtocolError};
pub use reply::Reply;
pub use request::write_request;
