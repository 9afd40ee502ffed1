//! Which workers a dispatch may use: node tiers from the routing, and eligibility.

use lintel_wire::{Census, FeatureSet, Names, NoWorkerReason, NodeRouting, RoutingRef};

use lintel_client::status::Standing;

use super::worker::WorkerCell;

/// Where a dispatch wants to go: a pool and an activity type inside it.
#[derive(Debug, Clone, Copy)]
pub struct Address<'a> {
    pub namespace: &'a str,
    /// Already normalized: empty means `default`.
    pub task_queue: &'a str,
    pub activity_type: &'a str,
    /// The request's own node pin; it beats the routing.
    pub node: Option<&'a str>,
    /// The lowest protocol version a worker (or a peer link) needs to carry the dispatch: 1,
    /// or 3 for one with headers or a required deployment.
    pub needs_version: u16,
    /// What a worker (or a peer link) must have listed to carry it: `heartbeat-timeout` for
    /// a request with a heartbeat timeout.
    pub needs_features: FeatureSet,
    /// The deployment a worker must be registered with; `None` takes any.
    pub deployment: Option<&'a str>,
}

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
pub(crate) fn eligible(worker: &WorkerCell, address: &Address<'_>, filter: NodeFilter<'_>) -> bool {
    worker.has_free_slot()
        && worker
            .link
            .carries(address.needs_version, address.needs_features)
        && compatible(worker, address.activity_type, filter)
        && of_deployment(worker, address.deployment)
}

/// Registered with `deployment`, or any worker when none is required.
pub(crate) fn of_deployment(worker: &WorkerCell, deployment: Option<&str>) -> bool {
    deployment.is_none_or(|want| worker.registration.deployment.as_deref() == Some(want))
}

/// Serves `activity` on a node `filter` allows, whatever its slots.
pub(crate) fn compatible(worker: &WorkerCell, activity: &str, filter: NodeFilter<'_>) -> bool {
    worker.registration.activity_types.contains(activity)
        && filter.allows(worker.registration.node.as_deref())
}

/// A census being taken, local workers and then peers' counted into it: the counts a
/// [`Census`] reports, and those of the candidates (deployment workers that can carry the
/// request) the reason is judged on.
#[derive(Debug, Clone)]
pub(crate) struct CensusCount {
    census: Census,
    candidates: Bucketed,
}

/// A number of workers and how many of them are in each exclusion.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bucketed {
    pub(crate) workers: u32,
    pub(crate) draining: u32,
    pub(crate) probation: u32,
    pub(crate) unreachable: u32,
}

impl CensusCount {
    /// Nothing counted yet.
    pub(crate) fn new(last_departure_ms_ago: Option<u64>) -> Self {
        Self {
            census: Census {
                reason: NoWorkerReason::PoolEmpty,
                pool_workers: 0,
                serving_activity: 0,
                compatible_workers: 0,
                deployment_workers: 0,
                at_capacity: 0,
                draining: 0,
                probation: Some(0),
                unreachable: Some(0),
                last_departure_ms_ago,
            },
            candidates: Bucketed::default(),
        }
    }

    /// Counts workers in the pool, whatever their activity types.
    pub(crate) fn pool(&mut self, workers: u32) {
        self.census.pool_workers = self.census.pool_workers.saturating_add(workers);
    }

    /// Counts workers serving the activity type on any node.
    pub(crate) fn serving(&mut self, workers: u32) {
        let census = &mut self.census;
        census.serving_activity = census.serving_activity.saturating_add(workers);
    }

    /// Counts workers serving the activity type on a node the routing allows.
    pub(crate) fn compatible(&mut self, workers: u32) {
        let census = &mut self.census;
        census.compatible_workers = census.compatible_workers.saturating_add(workers);
    }

    /// Counts compatible workers of the required deployment (all of them when none is):
    /// `full` of them at capacity and the rest of `bucketed` in their exclusion; they are
    /// candidates when `can_carry`.
    pub(crate) fn deployment(&mut self, bucketed: Bucketed, full: u32, can_carry: bool) {
        let census = &mut self.census;
        let add = |count: &mut u32, more: u32| *count = count.saturating_add(more);
        add(&mut census.deployment_workers, bucketed.workers);
        add(&mut census.at_capacity, full);
        add(&mut census.draining, bucketed.draining);
        let add_counted = |count: &mut Option<u32>, more: u32| {
            *count = Some(count.unwrap_or(0).saturating_add(more));
        };
        add_counted(&mut census.probation, bucketed.probation);
        add_counted(&mut census.unreachable, bucketed.unreachable);
        if can_carry {
            let candidates = &mut self.candidates;
            add(&mut candidates.workers, bucketed.workers);
            add(&mut candidates.draining, bucketed.draining);
            add(&mut candidates.probation, bucketed.probation);
            add(&mut candidates.unreachable, bucketed.unreachable);
        }
    }

    /// The census, its reason the first that holds in the order `PROTOCOL.md` states:
    /// not index order.
    pub(crate) fn finish(mut self) -> Census {
        let census = &self.census;
        let candidates = self.candidates;
        let excluded = candidates
            .draining
            .saturating_add(candidates.probation)
            .saturating_add(candidates.unreachable);
        self.census.reason = if census.pool_workers == 0 {
            NoWorkerReason::PoolEmpty
        } else if census.serving_activity == 0 {
            NoWorkerReason::NoActivityMatch
        } else if census.compatible_workers == 0 {
            NoWorkerReason::NodeFilterMatchedNobody
        } else if census.deployment_workers == 0 {
            NoWorkerReason::DeploymentMatchedNobody
        } else if candidates.workers == 0 {
            NoWorkerReason::CapabilityMatchedNobody
        } else if candidates.unreachable == candidates.workers {
            NoWorkerReason::AllUnreachable
        } else if candidates.probation == candidates.workers {
            NoWorkerReason::AllInProbation
        } else if excluded >= candidates.workers {
            NoWorkerReason::AllExcluded
        } else {
            NoWorkerReason::AllAtCapacity
        };
        self.census
    }
}

/// Counts the pool's workers against `address` (its activity type, required deployment and
/// the version a worker needs to carry the request) and `filter`, into a tally.
pub(crate) fn census<'a>(
    members: impl Iterator<Item = &'a WorkerCell>,
    address: &Address<'_>,
    filter: NodeFilter<'_>,
    last_departure_ms_ago: Option<u64>,
) -> CensusCount {
    let mut tally = CensusCount::new(last_departure_ms_ago);
    for worker in members {
        tally.pool(1);
        if !worker
            .registration
            .activity_types
            .contains(address.activity_type)
        {
            continue;
        }
        tally.serving(1);
        if !filter.allows(worker.registration.node.as_deref()) {
            continue;
        }
        tally.compatible(1);
        if !of_deployment(worker, address.deployment) {
            continue;
        }
        // Each worker in one bucket: its state (unreachable before draining before probation),
        // else at capacity.
        let state = worker.state();
        let bucketed = Bucketed {
            workers: 1,
            draining: u32::from(state == Standing::Draining),
            probation: u32::from(state == Standing::Probation),
            unreachable: u32::from(state == Standing::Unreachable),
        };
        let full = u32::from(state == Standing::Eligible && worker.is_full());
        let can_carry = worker
            .link
            .carries(address.needs_version, address.needs_features);
        tally.deployment(bucketed, full, can_carry);
    }
    tally
}
