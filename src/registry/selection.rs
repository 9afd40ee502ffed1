//! Which workers a dispatch may use: node tiers from the routing, eligibility, and the census.

use std::sync::atomic::Ordering;

use lintel_wire::{Census, Names, NoWorkerReason, NodeRouting, RoutingRef};

use super::worker::WorkerCell;

/// Which nodes one tier of a lookup accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NodeFilter<'a> {
    Any,
    One(&'a str),
    Set(Names<'a>),
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

/// The node tiers of a lookup: each preferred node alone, in order, then `last`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tiers<'a> {
    preferred: Names<'a>,
    /// The widest tier; the census is taken against it.
    pub(crate) last: NodeFilter<'a>,
}

impl<'a> Tiers<'a> {
    /// A request's own non-empty `node` pins it, whatever the routing says; otherwise a pin or
    /// require is one tier, and prefer is one per node, then any.
    pub(crate) fn new<'r: 'a>(routing: &RoutingRef<'r>, request_node: Option<&'a str>) -> Self {
        let none = Names::default();
        if let Some(node) = request_node.filter(|node| !node.is_empty()) {
            return Self {
                preferred: none,
                last: NodeFilter::One(node),
            };
        }
        let (preferred, last) = match routing {
            NodeRouting::Any => (none, NodeFilter::Any),
            NodeRouting::Pin("") => (none, NodeFilter::Any),
            NodeRouting::Pin(node) => (none, NodeFilter::One(node)),
            NodeRouting::Prefer(nodes) => (*nodes, NodeFilter::Any),
            NodeRouting::Require(nodes) => (none, NodeFilter::Set(*nodes)),
        };
        Self { preferred, last }
    }

    /// One tier alone.
    pub(crate) fn single(filter: NodeFilter<'a>) -> Self {
        Self {
            preferred: Names::default(),
            last: filter,
        }
    }

    /// The tiers in the order they are tried.
    pub(crate) fn iter(self) -> impl Iterator<Item = NodeFilter<'a>> {
        self.preferred
            .iter()
            .map(NodeFilter::One)
            .chain(std::iter::once(self.last))
    }
}

/// The cheap atomic checks come first: in a saturated pool they reject without string look-ups.
pub(crate) fn eligible(worker: &WorkerCell, activity: &str, filter: NodeFilter<'_>) -> bool {
    worker.has_free_slot() && compatible(worker, activity, filter)
}

/// Serves `activity` on a node `filter` allows, whatever its slots.
pub(crate) fn compatible(worker: &WorkerCell, activity: &str, filter: NodeFilter<'_>) -> bool {
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
        } else if worker.is_full() {
            census.at_capacity += 1;
        }
    }
    census.reason = reason_of(&census);
    census
}

/// Why nobody is eligible, from a census's counts.
pub(crate) fn reason_of(census: &Census) -> NoWorkerReason {
    if census.pool_workers == 0 {
        NoWorkerReason::PoolEmpty
    } else if census.serving_activity == 0 {
        NoWorkerReason::NoActivityMatch
    } else if census.compatible_workers == 0 {
        NoWorkerReason::NodeFilterMatchedNobody
    } else if census.excluded == census.compatible_workers {
        NoWorkerReason::AllExcluded
    } else {
        NoWorkerReason::AllAtCapacity
    }
}
