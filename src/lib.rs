//! lintel: a push-dispatch message-bus node.
//!
//! # Layout
//! - [`node`]: the accept loop, connection limit and drain-then-close shutdown; [`serve`].
//! - [`listener`]: binding and socket tuning through socket2.
//! - `connection`: one accepted connection: handshake, then the worker or producer role.
//! - [`notifier`]: maps a connection's pid to its registry entry for the connection's life.
//! - [`sdk`]: the worker and producer SDKs, the `lintel-client` crate re-exported;
//!   [`activities`]: built-in `echo` and `sleep`.
//! - [`cli`]: the `lintel` command.
//! - [`config`]: [`NodeConfig`], its defaults, file and validation.
//! - [`transport`]: from `lintel-client`: a framed TCP connection, a reader plus a writer task
//!   behind a bounded queue.
//! - [`registry`]: pools of connected workers, selection with reserved capacity, census.
//! - [`dispatch`]: the dispatcher, its options (defined in `lintel-client`) and typed outcomes.
#![deny(unreachable_pub, rustdoc::broken_intra_doc_links)]

pub mod activities;
pub mod cli;
pub mod config;
mod connection;
pub mod dispatch;
pub mod link;
pub mod listener;
pub mod node;
pub mod notifier;
pub mod registry;
mod shared;

pub use config::NodeConfig;
pub use node::{serve, Node, ServeError};

pub use lintel_client as sdk;
pub use lintel_client::transport;
pub use lintel_wire as wire;
