//! lintel: a push-dispatch message-bus node.
//!
//! # Layout
//! - [`transport`]: a framed TCP connection, a reader plus a writer task behind a bounded queue.
//! - [`registry`]: pools of connected workers, selection with reserved capacity, census.
//! - [`dispatch`]: the dispatcher, its options and typed outcomes.
//! - [`sdk`]: the worker and producer SDKs.
#![deny(unreachable_pub, rustdoc::broken_intra_doc_links)]

pub mod dispatch;
pub mod registry;
pub mod sdk;
pub mod transport;

pub use lintel_wire as wire;
