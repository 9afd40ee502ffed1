//! Criterion micro-benches of the node: registry selection and registration, a worker link's
//! correlation table, and a frame's trip from a producer's socket onto a worker's queue.
//!
//! Each sibling module owns one criterion group; run them all with `cargo bench --bench main`,
//! or filter by name (`-- registry_select/saturated`, `-- correlation`, `-- frame_trip_node`).
//! End-to-end load runs live apart, in `benches/vs_nats`; node instructions per dispatch under
//! callgrind in `benches/instructions.sh`.

use criterion::criterion_main;

mod correlation;
mod frame;
mod registry;
mod support;

criterion_main!(registry::registry, correlation::correlation, frame::frame);
