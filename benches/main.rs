//! Criterion micro-benches of the node: registry selection and registration, and a worker
//! link's correlation table.
//!
//! Each module under `micro/` owns one criterion group; run them all with
//! `cargo bench --bench main`, or filter by name (`-- registry_select/saturated`,
//! `-- correlation`). End-to-end load runs live apart, in `benches/vs_nats`.

use criterion::criterion_main;

mod micro;

criterion_main!(micro::registry::registry, micro::correlation::correlation);
