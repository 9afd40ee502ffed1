//! Criterion micro-benches of the wire crate: framing and channel names.
//!
//! Each sibling module owns one criterion group; run them all with
//! `cargo bench -p lintel-wire --bench main`, or filter by name
//! (`-- push_decode`, `-- channel_encode/escaped`).

use criterion::criterion_main;

mod channel;
mod frame;

criterion_main!(frame::frame, channel::channel);
