//! One registered worker's shared record: its registration, link and slot counters.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use lintel_wire::WorkerStatus;

use super::admission::Registration;
use crate::link::WorkerLink;

/// A registered worker's id, unique for the registry's lifetime.
pub type WorkerId = u64;

/// One worker's record. Its atomics change only under the registry lock; they are atomics so
/// the pools of several namespaces can share the record.
#[derive(Debug)]
pub(crate) struct WorkerCell {
    pub(super) id: WorkerId,
    pub(super) pid: u64,
    pub(super) registration: Registration,
    pub(super) link: WorkerLink,
    pub(super) max_concurrency: AtomicU32,
    pub(super) in_flight: AtomicU32,
    pub(super) excluded: AtomicBool,
}

impl WorkerCell {
    /// A record for a validated registration, with no slot taken.
    pub(super) fn new(
        id: WorkerId,
        pid: u64,
        registration: Registration,
        link: WorkerLink,
    ) -> Self {
        Self {
            id,
            pid,
            max_concurrency: AtomicU32::new(registration.max_concurrency),
            in_flight: AtomicU32::new(0),
            excluded: AtomicBool::new(false),
            registration,
            link,
        }
    }

    /// True while the worker has a free slot and is not excluded.
    pub(super) fn has_free_slot(&self) -> bool {
        !self.excluded.load(Ordering::Relaxed)
            && self.in_flight.load(Ordering::Relaxed) < self.max_concurrency.load(Ordering::Relaxed)
    }

    /// Slots free now; zero while excluded.
    pub(super) fn free_slots(&self) -> u32 {
        if self.excluded.load(Ordering::Relaxed) {
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

    /// Whether the worker serves `activity` in `namespace` of its task queue `task_queue`.
    pub(super) fn serves(&self, namespace: &str, task_queue: &str, activity: &str) -> bool {
        self.registration.task_queue == task_queue
            && self.registration.namespaces.contains(namespace)
            && self.registration.activity_types.contains(activity)
    }

    pub(super) fn status(&self) -> WorkerStatus {
        WorkerStatus {
            worker_id: self.id,
            pid: self.pid,
            identity: self.registration.identity.clone(),
            node: self.registration.node.clone(),
            activity_types: self.registration.activity_types.iter().cloned().collect(),
            max_concurrency: self.max_concurrency.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            draining: self.excluded.load(Ordering::Relaxed),
        }
    }
}
