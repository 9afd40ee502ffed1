//! lintel: a push-dispatch message-bus node.
//!
//! # Layout
//! Lowest layer first; a module imports only from the ones above it in this list.
//! - [`transport`]: from `lintel-transport`: a framed connection over TCP or any socket halves,
//!   a reader plus a writer task behind a bounded queue; [`epoch`]: a cheap change counter;
//!   [`idmap`]: maps keyed by ids the node assigns, with a fast hasher; `implemented`: what
//!   the node implements of the features version 4 added; [`latency`]: a histogram of
//!   atomic buckets; [`pool_metrics`]: per-pool outcome counts and latency for a bounded set of
//!   pools, the rest as `other`; [`events`]: the
//!   node's lifecycle events in one bounded ring, and their subscribers; [`logfields`]: log
//!   fields that hold lists, as JSON arrays.
//! - [`link`]: the push paths: a worker's queue and a peer's, each with the table that decides
//!   every push's or relay's fate.
//! - [`registry`]: pools of connected workers, selection with reserved slots, waiters
//!   ordered by priority then weighted fairness key (first come first served within a key),
//!   census; [`registrations`]: a connection's pid mapped to its registry entry for its life.
//! - [`cluster`]: the peers this node links to and the pools each announced, with the relays
//!   charged against them.
//! - [`dispatch`]: the one admission and the one finish every dispatch takes, whatever its
//!   source; placement across the cluster, relays, options and typed outcomes.
//! - [`tls`]: the listener's TLS, peer dialling over TLS, client-certificate identities;
//!   [`auth`]: credentials and grants; `connection_counts`: connections, refusals and errors
//!   counted for operators; `shared`: the state every connection task reads.
//! - `connection`: one connection: handshake, then the worker, producer or peer role (a
//!   connection's dispatches in flight in `connection::flights`, peer links and their
//!   dialler in `connection::peer`).
//! - [`node`]: the accept loop, connection limit and drain-then-close shutdown; [`serve`];
//!   `admin`: the metrics and health listener, `console`: the page it serves at `/` and the
//!   figures of the last minutes; [`status`]: the status as operators read it;
//!   [`listener`]: binding and socket tuning;
//!   [`config`]: [`NodeConfig`] and its checks.
//! - [`sdk`]: the `lintel-client` crate re-exported; [`activities`]: built-in `echo` and
//!   `sleep`.
//!
//! The `lintel` command is the binary's own (`src/main.rs`, `src/cli/`), behind the default
//! feature `cli`; with `default-features = false` the library compiles no argument parser,
//! config-file reader or log formatter.
#![deny(unreachable_pub, rustdoc::broken_intra_doc_links)]

pub mod activities;
mod admin;
pub mod auth;
pub mod cluster;
pub mod config;
mod connection;
mod connection_counts;
mod console;
pub mod dispatch;
pub mod epoch;
pub mod events;
pub mod idmap;
mod implemented;
pub mod latency;
pub mod link;
pub mod listener;
pub mod logfields;
pub mod node;
pub mod pool_metrics;
pub mod registrations;
pub mod registry;
mod sessions;
mod shared;
pub mod status;
pub mod tls;

pub use config::NodeConfig;
pub use node::{serve, Node, ServeError};

pub use lintel_client as sdk;
pub use lintel_transport as transport;
pub use lintel_wire as wire;
