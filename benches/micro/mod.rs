//! The micro-bench groups, one module each, plus what they share.
//!
//! They live in a directory because Cargo would build every `benches/*.rs` as a bench target
//! of its own.

pub(crate) mod correlation;
pub(crate) mod registry;
mod support;
