//! Test support: a node on 127.0.0.1:0 that shuts down on drop, raw frame clients and scripted
//! peers, a counting notifier, and helpers to build frames and read dispatch results.
//!
//! # Layout
//! - `admin`: [`admin_get`] and [`admin_response`], a GET against a node's admin listener.
//! - `counting`: [`Counting`], a global allocator counting the bytes live in its binary.
//! - `lines`: [`stderr_lines`], a child process's stderr line by line.
//! - `node`: [`TestNode`], its notifier [`Events`], [`within`], the bound on every wait, and
//!   node configs tests share.
//! - `pki`: [`Pki`], a CA made for one test, and the [`Leaf`] certificates it signs.
//! - `raw`: [`RawClient`], a client speaking frames, and [`next_frame`], the one way tests read
//!   a frame past the node's pings.
//! - `peers`: scripted peers over a [`RawClient`]: [`RawWorker`], [`AutoWorker`], producers,
//!   a peer node past its hellos ([`hand_peer`]).
//! - `frames`: builders for handshakes, registrations, requests, replies and submissions.
//! - `dispatch`: in-process dispatches and what to read from their results.
//! - `sdk`: [`dispatch_of`] and [`worker_config`], the SDK's builders fed from a
//!   `DispatchRequest` or a `Register`, field by field.
//! - `fairness`: [`logging_worker`]s that log what they completed, and [`waiting`] options.
//! - `cluster`: peered test nodes, waits on what a node knows of its peers, SDK workers.
//! - `silent`: [`watchful`], a node config that tells a silent worker, and a raw worker that
//!   falls silent ([`fall_silent`]) and answers again.
//! - `served`: [`lintel`], the built binary free of the caller's settings, and [`Served`], a
//!   `lintel serve` child read line by line.
//! - `netns`: [`Netns`], hosts in network namespaces of their own behind one bridge, each with
//!   its own `/etc/hosts`, removed on drop.
//! - `host_clients`: workers and producers as processes on hosts of their own, reporting
//!   what they see as lines gathered into the simulation's ledger.
//! - `processes`: nodes and workers as `lintel` processes, and their admin endpoints.
//! - `abuse` and `load`: the fault suite's misbehaving clients and its load.
//! - `sim`, `sim_links`, `sim_clients`, `sim_faults`, `sim_checks`: nodes, links, clients and
//!   faults on a turmoil network, and the invariants a run is checked against.
#![deny(unreachable_pub, rustdoc::broken_intra_doc_links)]

pub mod abuse;
mod admin;
mod cluster;
mod counting;
mod dispatch;
mod fairness;
pub mod faulty;
mod frames;
pub mod host_clients;
mod lines;
pub mod load;
pub mod netns;
mod node;
mod peers;
mod pki;
pub mod processes;
mod raw;
mod sdk;
mod served;
mod silent;
pub mod sim;
pub mod sim_checks;
pub mod sim_clients;
pub mod sim_faults;
pub mod sim_links;

pub use admin::{admin_get, admin_post, admin_request, admin_response};
pub use cluster::{
    client, cluster_config, echo, header_echo, pool, sdk_worker, up, WELL_UNDER_TIMEOUT,
};
pub use counting::Counting;
pub use dispatch::{
    count, counts, dispatch, no_worker, outcome_of, parked, poll_once, served_by, spawn_dispatch,
};
pub use fairness::{
    assert_b_served_within_25, count_with, logging_worker, wait_fairness, waiting, Log, TASK,
};
pub use frames::{
    hello, hello_at, on_node, plain, register, registration, reply_frame, request, request_in,
    response_to, submit, submit_timing_out, VERSION_3_FEATURES,
};
pub use lines::stderr_lines;
pub use netns::Netns;
pub use node::{loopback_listener, quiet_config, within, Events, TestNode, WAIT};
pub use peers::{
    hand_acceptor, hand_peer, hand_peer_written_at, next_outcome, offering, producer,
    small_window_worker, AutoWorker, RawWorker, Stats,
};
pub use pki::{Leaf, Pki};
pub use raw::{next_frame, next_of, small_window_client, small_window_client_at, RawClient};
pub use sdk::{dispatch_of, worker_builder, worker_config};
pub use served::{line_with, lintel, loopback_address, without_settings, Served};
pub use silent::{answer_again, fall_silent, unanswered_ping, watchful};
