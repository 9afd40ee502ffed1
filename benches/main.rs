//! Criterion micro-benches of the node: registry selection and registration, and a worker
//! link's correlation table.
//!
//! Each sibling module owns one criterion group; run them all with `cargo bench --bench main`,
//! or filter by name (`-- registry_select/saturated`, `-- correlation`). End-to-end load runs
//! live apart, in `benches/vs_nats`.

use criterion::criterion_main;

mod correlation;
mod registry;
mod support;

criterion_main!(registry::registry, correlation::correlation);
