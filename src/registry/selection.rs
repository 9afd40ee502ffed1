//! Which workers a dispatch may use: node tiers from the routing, eligibility, and the census.

use std::sync::atomic::Ordering;

use lintel_wire::{Census, NoWorkerReason, NodeRouting};

use super::WorkerCell;

/// Which nodes one tier of a lookup accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NodeFilter<'a> {
    Any,
    One(&'a str),
    Set(&'a [String]),
}

impl NodeFilter<'_> {
    pub(crate) fn allows(&self, node: Option<&str>) -> bool {
        match self {
            NodeFilter::Any => true,
            NodeFilter::One(want) => node == Some(*want),
            NodeFilter::Set(set) => node.is_some_and(|node| set.iter().any(|want| want == node)),
        }
    }
}

/// The tiers tried in order: a pin or require is one tier; prefer is one per node, then any.
/// A request's own non-empty `node` pins it when the routing is `Any`.
pub(crate) fn tiers<'a>(
    routing: &'a NodeRouting,
    request_node: Option<&'a str>,
) -> Vec<NodeFilter<'a>> {
    match routing {
        NodeRouting::Any => match request_node.filter(|node| !node.is_empty()) {
            Some(node) => vec![NodeFilter::One(node)],
            None => vec![NodeFilter::Any],
        },
        NodeRouting::Pin(node) if node.is_empty() => vec![NodeFilter::Any],
        NodeRouting::Pin(node) => vec![NodeFilter::One(node)],
        NodeRouting::Prefer(nodes) => nodes
            .iter()
            .map(|node| NodeFilter::One(node))
            .chain(std::iter::once(NodeFilter::Any))
            .collect(),
        NodeRouting::Require(nodes) => vec![NodeFilter::Set(nodes)],
    }
}

/// True when `worker` may take `activity` under `filter` right now.
pub(crate) fn eligible(worker: &WorkerCell, activity: &str, filter: NodeFilter<'_>) -> bool {
    compatible(worker, activity, filter)
        && !worker.excluded.load(Ordering::Relaxed)
        && worker.in_flight.load(Ordering::Relaxed) < worker.max_concurrency.load(Ordering::Relaxed)
}

fn compatible(worker: &WorkerCell, activity: &str, filter: NodeFilter<'_>) -> bool {
    worker.registration.activity_types.contains(activity)
        && filter.allows(worker.registration.node.as_deref())
}

/// Counts the pool's workers against `activity` and `filter` and names why none is eligible.
pub(crate) fn census<'a>(
    members: impl Iterator<Item = &'a WorkerCell>,
    activity: &str,
    filter: NodeFilter<'_>,
    last_departure_ms_ago: Option<u64>,
) -> Census {
    let mut census = Census {
        reason: NoWorkerReason::PoolEmpty,
        pool_workers: 0,
        serving_activity: 0,
        compatible_workers: 0,
        at_capacity: 0,
        excluded: 0,
        last_departure_ms_ago,
    };
    for worker in members {
        census.pool_workers += 1;
        if !worker.registration.activity_types.contains(activity) {
            continue;
        }
        census.serving_activity += 1;
        if !filter.allows(worker.registration.node.as_deref()) {
            continue;
        }
        census.compatible_workers += 1;
        if worker.excluded.load(Ordering::Relaxed) {
            census.excluded += 1;
        } else if worker.in_flight.load(Ordering::Relaxed)
            >= worker.max_concurrency.load(Ordering::Relaxed)
        {
            census.at_capacity += 1;
        }
    }
    census.reason = if census.pool_workers == 0 {
        NoWorkerReason::PoolEmpty
    } else if census.serving_activity == 0 {
        NoWorkerReason::NoActivityMatch
    } else if census.compatible_workers == 0 {
        NoWorkerReason::NodeFilterMatchedNobody
    } else if census.excluded == census.compatible_workers {
        NoWorkerReason::AllExcluded
    } else {
        NoWorkerReason::AllAtCapacity
    };
    census
}
