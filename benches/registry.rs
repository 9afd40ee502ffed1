//! Registry selection with reservation, and registration with deregistration, by pool size.
//!
//! Every worker has its own `WorkerLink`; all of them share one loopback socket's queue, which
//! nothing here pushes on, so the socket costs nothing inside the timed routines.

use std::sync::Arc;

use criterion::{black_box, criterion_group, BenchmarkId, Criterion};
use lintel::link::WorkerLink;
use lintel::registry::{
    Address, AdmissionLimits, FairnessRef, RegistrationGuard, Registry, Reservation,
};
use lintel::transport::Outbound;
use lintel_wire::{NodeRouting, Register, PROTOCOL_VERSION};

use crate::support::{loopback, runtime};

/// Workers in the pool a selection runs against.
const POOL_SIZES: [usize; 3] = [1, 100, 10_000];

/// Workers already registered in the pool a registration joins.
const PREFILLED: [usize; 3] = [0, 100, 10_000];

/// Distinct nodes the pinned variant spreads its workers over; it pins the first.
const NODES: usize = 100;

const NAMESPACE: &str = "remote";
const TASK_QUEUE: &str = "gpu";
const ACTIVITY: &str = "render_thumbnail";
const PINNED_NODE: &str = "node-0";

fn register(node: Option<String>) -> Register {
    Register {
        namespaces: vec![NAMESPACE.to_owned()],
        task_queue: TASK_QUEUE.to_owned(),
        node,
        activity_types: vec![ACTIVITY.to_owned(), "transcode".to_owned()],
        identity: "bench-worker".to_owned(),
        // One slot each, so one held reservation is enough to put a worker at capacity.
        max_concurrency: 1,
        ..Default::default()
    }
}

fn address() -> Address<'static> {
    Address {
        needs_version: 1,
        needs_features: lintel::wire::FeatureSet::NONE,
        deployment: None,
        namespace: NAMESPACE,
        task_queue: TASK_QUEUE,
        activity_type: ACTIVITY,
        node: None,
    }
}

/// A registry holding `size` workers in one pool, worker `i` on node `node_of(i)`.
fn pool(
    outbound: &Outbound,
    size: usize,
    node_of: impl Fn(usize) -> Option<String>,
) -> (Arc<Registry>, Vec<RegistrationGuard>) {
    let registry = Registry::new(AdmissionLimits::default());
    let guards = (0..size)
        .map(|i| {
            let pid = i as u64;
            let link = WorkerLink::new(pid, PROTOCOL_VERSION, outbound.clone());
            registry
                .admit(pid, &register(node_of(i)), link)
                .expect("bench registration is valid")
        })
        .collect();
    (registry, guards)
}

fn reserve(registry: &Arc<Registry>, routing: &NodeRouting) -> Reservation {
    match registry.select(address(), &routing.view(), &FairnessRef::default()) {
        Ok(reservation) => reservation,
        Err(census) => panic!("bench pool has no free worker: {census:?}"),
    }
}

/// All workers free: select reserves the worker at the rotation cursor, then the drop releases it.
fn select_free(c: &mut Criterion) {
    let runtime = runtime();
    let socket = loopback(&runtime, 1);
    let mut group = c.benchmark_group("registry_select");
    for size in POOL_SIZES {
        let (registry, _guards) = pool(&socket.outbound, size, |_| None);
        group.bench_function(BenchmarkId::new("free", size), |b| {
            b.iter(|| drop(reserve(black_box(&registry), &NodeRouting::Any)));
        });
    }
    group.finish();
}

/// Pinned to the node of 1 worker in 100: select steps over up to 99 others, the drop releases.
fn select_pinned(c: &mut Criterion) {
    let runtime = runtime();
    let socket = loopback(&runtime, 1);
    let pinned = NodeRouting::Pin(PINNED_NODE.to_owned());
    let mut group = c.benchmark_group("registry_select");
    for size in POOL_SIZES {
        let (registry, _guards) = pool(&socket.outbound, size, |i| {
            Some(format!("node-{}", i % NODES))
        });
        group.bench_function(BenchmarkId::new("pinned", size), |b| {
            b.iter(|| drop(reserve(black_box(&registry), &pinned)));
        });
    }
    group.finish();
}

/// 9,999 of 10,000 at capacity: select walks the whole ring to the free one, the drop releases it.
fn select_saturated(c: &mut Criterion) {
    let runtime = runtime();
    let socket = loopback(&runtime, 1);
    let size = 10_000;
    let (registry, _guards) = pool(&socket.outbound, size, |_| None);
    // Each held reservation fills one worker; the cursor ends just past the last one filled.
    let _held: Vec<Reservation> = (1..size)
        .map(|_| reserve(&registry, &NodeRouting::Any))
        .collect();
    let mut group = c.benchmark_group("registry_select");
    group.bench_function(BenchmarkId::new("saturated", size), |b| {
        b.iter(|| drop(reserve(black_box(&registry), &NodeRouting::Any)));
    });
    group.finish();
}

/// Admit (validate, copy, insert) then drop the guard (remove from the pool, record a departure).
fn admit_drop(c: &mut Criterion) {
    let runtime = runtime();
    let socket = loopback(&runtime, 1);
    let joining = register(None);
    // Passed as an `Arc` clone per iteration; building a link is not counted.
    let link = WorkerLink::new(u64::MAX, PROTOCOL_VERSION, socket.outbound.clone());
    let mut group = c.benchmark_group("registry_admit");
    for size in PREFILLED {
        let (registry, _guards) = pool(&socket.outbound, size, |_| None);
        if size > 0 {
            // A pool in use has a rotation cursor, which deregistration re-checks.
            drop(reserve(&registry, &NodeRouting::Any));
        }
        group.bench_function(BenchmarkId::from_parameter(size), |b| {
            b.iter(|| {
                let guard = registry
                    .admit(u64::MAX, black_box(&joining), link.clone())
                    .expect("bench registration is valid");
                drop(guard);
            });
        });
    }
    group.finish();
}

criterion_group!(
    registry,
    select_free,
    select_pinned,
    select_saturated,
    admit_drop
);
