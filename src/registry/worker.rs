//! One registered worker's shared record: its registration, link, slot counters and why it is
//! out of selection, if it is.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use lintel_client::status::Standing;
use lintel_wire::channel::dispatch_channel_name;
use lintel_wire::{ExclusionReason, WorkerEvent, WorkerStatus};

use super::admission::Registration;
use crate::link::WorkerLink;

/// A registered worker's id, unique for the registry's lifetime.
pub type WorkerId = u64;

/// Why a worker is out of selection. Several may hold at once; each is set and cleared on its
/// own, and the worker is selected again only when none holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    /// It or its node drains.
    Draining,
    /// Newly registered, it has not answered its opening pings yet.
    Probation,
    /// A ping has waited for its answer longer than the node's ping timeout.
    Unreachable,
}

impl Exclusion {
    /// The reason an event gives for it.
    pub(super) fn reason(self) -> ExclusionReason {
        match self {
            Exclusion::Draining => ExclusionReason::Draining,
            Exclusion::Probation => ExclusionReason::Probation,
            Exclusion::Unreachable => ExclusionReason::Unreachable,
        }
    }

    fn bit(self) -> u8 {
        match self {
            Exclusion::Draining => 1,
            Exclusion::Probation => 2,
            Exclusion::Unreachable => 4,
        }
    }
}

/// One worker's record. Its atomics change only under the registry lock; they are atomics so
/// the pools of several namespaces can share the record.
#[derive(Debug)]
pub(crate) struct WorkerCell {
    pub(super) id: WorkerId,
    /// The connection it is registered on; a resumed session moves it to another.
    pub(super) pid: AtomicU64,
    pub(super) registration: Registration,
    pub(super) link: WorkerLink,
    pub(super) max_concurrency: AtomicU32,
    pub(super) in_flight: AtomicU32,
    /// The [`Exclusion`]s holding, as bits; zero when it may be selected.
    excluded: AtomicU8,
}

impl WorkerCell {
    /// A record for a validated registration, with no slot taken, excluded for `exclusion`
    /// from the start when given.
    pub(super) fn new(
        id: WorkerId,
        pid: u64,
        registration: Registration,
        link: WorkerLink,
        exclusion: Option<Exclusion>,
    ) -> Self {
        Self {
            id,
            pid: AtomicU64::new(pid),
            max_concurrency: AtomicU32::new(registration.max_concurrency),
            in_flight: AtomicU32::new(0),
            excluded: AtomicU8::new(exclusion.map_or(0, Exclusion::bit)),
            registration,
            link,
        }
    }

    /// True while the worker has a free slot and is not excluded.
    pub(super) fn has_free_slot(&self) -> bool {
        !self.is_excluded()
            && self.in_flight.load(Ordering::Relaxed) < self.max_concurrency.load(Ordering::Relaxed)
    }

    /// Slots free now; zero while excluded.
    pub(super) fn free_slots(&self) -> u32 {
        if self.is_excluded() {
            return 0;
        }
        self.max_concurrency
            .load(Ordering::Relaxed)
            .saturating_sub(self.in_flight.load(Ordering::Relaxed))
    }

    /// True when every slot is taken.
    pub(super) fn is_full(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) >= self.max_concurrency.load(Ordering::Relaxed)
    }

    /// True while any exclusion holds.
    pub(super) fn is_excluded(&self) -> bool {
        self.excluded.load(Ordering::Relaxed) != 0
    }

    /// True until the worker has answered its opening pings, whatever else holds.
    pub(super) fn in_probation(&self) -> bool {
        self.excluded.load(Ordering::Relaxed) & Exclusion::Probation.bit() != 0
    }

    /// Sets or clears one exclusion; true when that changed it.
    pub(super) fn set_excluded(&self, exclusion: Exclusion, on: bool) -> bool {
        let bit = exclusion.bit();
        let before = if on {
            self.excluded.fetch_or(bit, Ordering::Relaxed)
        } else {
            self.excluded.fetch_and(!bit, Ordering::Relaxed)
        };
        (before & bit != 0) != on
    }

    /// The state operators see: unreachable before draining before probation, as the census
    /// counts them.
    pub(super) fn state(&self) -> Standing {
        let excluded = self.excluded.load(Ordering::Relaxed);
        if excluded & Exclusion::Unreachable.bit() != 0 {
            Standing::Unreachable
        } else if excluded & Exclusion::Draining.bit() != 0 {
            Standing::Draining
        } else if excluded & Exclusion::Probation.bit() != 0 {
            Standing::Probation
        } else {
            Standing::Eligible
        }
    }

    /// Whether the worker serves `activity` in `namespace` of its task queue `task_queue`.
    pub(super) fn serves(&self, namespace: &str, task_queue: &str, activity: &str) -> bool {
        self.registration.task_queue == task_queue
            && self.registration.namespaces.contains(namespace)
            && self.registration.activity_types.contains(activity)
    }

    /// The worker as an event names it.
    pub(super) fn event(&self) -> WorkerEvent {
        let registration = &self.registration;
        WorkerEvent {
            worker_id: self.id,
            identity: registration.identity.clone(),
            deployment: registration.deployment.clone(),
            instance_id: registration.instance_id.clone(),
            channels: registration
                .namespaces
                .iter()
                .map(|namespace| dispatch_channel_name(namespace, &registration.task_queue, None))
                .collect(),
        }
    }

    /// The worker as the wire's status tells it: `draining` says it is excluded, whatever why.
    pub(super) fn status(&self) -> WorkerStatus {
        WorkerStatus {
            worker_id: self.id,
            pid: self.pid.load(Ordering::Relaxed),
            identity: self.registration.identity.clone(),
            node: self.registration.node.clone(),
            activity_types: self.registration.activity_types.iter().cloned().collect(),
            max_concurrency: self.max_concurrency.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            draining: self.is_excluded(),
        }
    }
}
