//! Postcard's bytes for the hot frame bodies (submissions, pushes, relays, replies, outcomes),
//! written and read field by field instead of through serde.
//!
//! Postcard writes an unsigned integer as LEB128, a string or byte string as its length then
//! its bytes, an `Option` as `0` or `1` then the value, a `bool` as one byte, an enum as its
//! variant index then its fields, and a struct as its fields in order. The property tests
//! check every writer against serde's encoding of the same frame, and every reader against
//! serde's decoding of the same bytes.

mod read;
mod write;

pub(crate) use read::read_body;
pub(crate) use write::write_body;
