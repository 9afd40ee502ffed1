//! lintel: a push-dispatch message-bus node.
//!
//! # Layout
//! Lowest layer first; a module imports only from the ones above it in this list.
//! - [`transport`]: from `lintel-client`: a framed TCP connection, a reader plus a writer task
//!   behind a bounded queue.
//! - [`link`]: a worker's push path: its queue and the table that decides each push's fate.
//! - [`registry`]: pools of connected workers, selection with reserved slots, FIFO waiters,
//!   census; [`notifier`]: maps a connection's pid to its registry entry for its life.
//! - [`dispatch`]: the one admission and the one finish every dispatch takes, whatever its
//!   source; options (from `lintel-client`) and typed outcomes.
//! - `shared`: the state every connection task reads; `connection`: one accepted connection:
//!   handshake, then the worker or producer role (a producer's dispatches in flight in
//!   `connection::flights`).
//! - [`node`]: the accept loop, connection limit and drain-then-close shutdown; [`serve`];
//!   [`listener`]: binding and socket tuning; [`config`]: [`NodeConfig`].
//! - [`cli`]: the `lintel` command; [`sdk`]: the `lintel-client` crate re-exported;
//!   [`activities`]: built-in `echo` and `sleep`.
#![deny(unreachable_pub, rustdoc::broken_intra_doc_links)]

pub mod activities;
mod admin;
pub mod auth;
pub mod cli;
pub mod cluster;
pub mod config;
mod connection;
pub mod dispatch;
pub mod link;
pub mod listener;
pub mod node;
pub mod notifier;
pub mod registry;
mod shared;
pub mod signal;
mod tally;

pub use config::NodeConfig;
pub use node::{serve, Node, ServeError};

pub use lintel_client as sdk;
pub use lintel_client::transport;
pub use lintel_wire as wire;
