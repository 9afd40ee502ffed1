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
//! - `fairness`: [`logging_worker`]s that log what they completed, and [`waiting`] options.
//! - `cluster`: peered test nodes, waits on what a node knows of its peers, SDK workers.
//! - `silent`: [`watchful`], a node config that tells a silent worker, and a raw worker that
//!   falls silent ([`fall_silent`]) and answers again.
//! - `served`: [`lintel`], the built binary free of the caller's settings, and [`Served`], a
//!   `lintel serve` child read line by line.
//! - `netns`: [`Netns`], hosts in network namespaces of their own behind one bridge, each with
//!   its own `/etc/hosts`, removed on drop.
#![allow(dead_code, unreachable_pub)]

mod admin;
mod cluster;
mod counting;
mod dispatch;
mod fairness;
pub mod faulty;
mod frames;
mod lines;
pub mod netns;
mod node;
mod peers;
mod pki;
mod raw;
mod served;
mod silent;

// Each test file is its own crate and uses a part of what follows.
#[allow(unused_imports)]
pub use admin::{admin_get, admin_post, admin_request, admin_response};
#[allow(unused_imports)]
pub use cluster::{client, cluster_config, header_echo, sdk_worker, up, WELL_UNDER_TIMEOUT};
#[allow(unused_imports)]
pub use counting::Counting;
#[allow(unused_imports)]
pub use dispatch::{
    count, counts, dispatch, no_worker, outcome_of, parked, poll_once, served_by, spawn_dispatch,
};
#[allow(unused_imports)]
pub use fairness::{
    assert_b_served_within_25, count_with, logging_worker, wait_fairness, waiting, Log, TASK,
};
#[allow(unused_imports)]
pub use frames::{
    hello, hello_at, on_node, plain, register, registration, reply_frame, request, request_in,
    response_to, submit, submit_timing_out,
};
#[allow(unused_imports)]
pub use lines::stderr_lines;
#[allow(unused_imports)]
pub use netns::Netns;
#[allow(unused_imports)]
pub use node::{quiet_config, within, Events, TestNode, WAIT};
#[allow(unused_imports)]
pub use peers::{
    hand_acceptor, hand_peer, next_outcome, offering, producer, small_window_worker, AutoWorker,
    RawWorker, Stats,
};
#[allow(unused_imports)]
pub use pki::{Leaf, Pki};
#[allow(unused_imports)]
pub use raw::{next_frame, next_of, small_window_client, small_window_client_at, RawClient};
#[allow(unused_imports)]
pub use served::{line_with, lintel, loopback_address, without_settings, Served};
#[allow(unused_imports)]
pub use silent::{answer_again, fall_silent, unanswered_ping, watchful};
