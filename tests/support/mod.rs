//! Test support: a node on 127.0.0.1:0 that shuts down on drop, a raw frame client, a
//! counting notifier, and helpers to build requests and registrations.
//!
//! # Layout
//! - `node`: [`TestNode`], its notifier [`Events`], and [`within`], the bound on every wait.
//! - `raw`: [`RawClient`], a client speaking frames, and [`next_frame`], the one way tests read
//!   a frame past the node's pings.
//! - `frames`: builders for handshakes, registrations and requests.
#![allow(dead_code, unreachable_pub)]

mod frames;
mod node;
mod raw;

// Each test file is its own crate and uses a part of what follows.
#[allow(unused_imports)]
pub use frames::{hello, register, request};
#[allow(unused_imports)]
pub use node::{within, Events, TestNode, WAIT};
#[allow(unused_imports)]
pub use raw::{next_frame, RawClient};
