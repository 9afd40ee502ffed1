//! Dispatch totals since the node started, cheap to bump from any task.

use std::sync::atomic::{AtomicU64, Ordering};

use lintel_wire::{Counters, DispatchResult, Ownership, RefusedReason};

use super::latency::Latency;

/// One counter per outcome class, plus submissions, pushes and what became of late replies,
/// and the time from admission to outcome.
#[derive(Debug, Default)]
pub struct DispatchCounters {
    /// Seconds from admission to outcome.
    latency: Latency,
    submitted: AtomicU64,
    pushed: AtomicU64,
    completed: AtomicU64,
    no_worker: AtomicU64,
    worker_lost: AtomicU64,
    timed_out: AtomicU64,
    refused: AtomicU64,
    cancelled: AtomicU64,
    draining: AtomicU64,
    peer_lost: AtomicU64,
    shut_down: AtomicU64,
    late_replies: AtomicU64,
    dropped_replies: AtomicU64,
    reclaimed_slots: AtomicU64,
    /// Refused dispatches by reason, in `RefusedReason` order.
    refused_by: [AtomicU64; REFUSED_REASONS.len()],
}

/// Every refusal reason, in wire order.
const REFUSED_REASONS: [RefusedReason; 8] = [
    RefusedReason::InvalidRequest,
    RefusedReason::WorkerBackpressure,
    RefusedReason::TooManyInFlight,
    RefusedReason::DuplicateCorrelation,
    RefusedReason::NamespaceNotGranted,
    RefusedReason::Unsupported,
    RefusedReason::FairnessCapReached,
    RefusedReason::RoleNotGranted,
];

impl DispatchCounters {
    /// Records how long a dispatch took from admission to its outcome.
    pub(crate) fn took(&self, elapsed: std::time::Duration) {
        self.latency.observe(elapsed);
    }

    /// Seconds from admission to outcome, for the admin listener.
    pub fn latency(&self) -> &Latency {
        &self.latency
    }

    /// A dispatch entered the node, whatever becomes of it.
    pub(crate) fn submitted(&self) {
        self.submitted.fetch_add(1, Ordering::Relaxed);
    }

    /// A push was queued on a worker's connection.
    pub(crate) fn pushed(&self) {
        self.pushed.fetch_add(1, Ordering::Relaxed);
    }

    /// A dispatch ended with `result`.
    pub(crate) fn ended<O: Ownership>(&self, result: &DispatchResult<O>) {
        let counter = match result {
            DispatchResult::Completed(_) => &self.completed,
            DispatchResult::NoWorker(_) => &self.no_worker,
            DispatchResult::WorkerLost { .. } => &self.worker_lost,
            DispatchResult::Timeout { .. } | DispatchResult::HeartbeatTimeout { .. } => {
                &self.timed_out
            }
            DispatchResult::Refused(_) => &self.refused,
            DispatchResult::Cancelled => &self.cancelled,
            DispatchResult::Draining => &self.draining,
            DispatchResult::PeerLost { .. } => &self.peer_lost,
            DispatchResult::ShutDown { .. } => &self.shut_down,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let DispatchResult::Refused(refused) = result {
            let at = REFUSED_REASONS
                .iter()
                .position(|reason| *reason == refused.reason);
            if let Some(count) = at.and_then(|at| self.refused_by.get(at)) {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Refused dispatches by reason.
    pub fn refused_by_reason(&self) -> Vec<(RefusedReason, u64)> {
        REFUSED_REASONS
            .iter()
            .zip(&self.refused_by)
            .map(|(reason, count)| (*reason, count.load(Ordering::Relaxed)))
            .collect()
    }

    /// A worker replied to a push that had already ended (timed out or cancelled).
    pub(crate) fn late_reply(&self) {
        self.late_replies.fetch_add(1, Ordering::Relaxed);
    }

    /// A worker replied with a correlation id that names no push on its connection.
    pub fn reply_dropped(&self) {
        self.dropped_replies.fetch_add(1, Ordering::Relaxed);
    }

    /// An ended push got no reply within the grace, and its slot was freed.
    pub(crate) fn slot_reclaimed(&self) {
        self.reclaimed_slots.fetch_add(1, Ordering::Relaxed);
    }

    /// Dispatches that ended `PeerLost`; version-1 counters have no field for them.
    pub fn peer_lost(&self) -> u64 {
        self.peer_lost.load(Ordering::Relaxed)
    }

    /// Dispatches that ended `ShutDown`; version-1 counters have no field for them.
    pub fn shut_down(&self) -> u64 {
        self.shut_down.load(Ordering::Relaxed)
    }

    /// Dispatches ended so far by outcome class, named as `outcome::class` names them, in
    /// that order.
    pub fn by_outcome(&self) -> [(&'static str, u64); 9] {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        [
            ("completed", get(&self.completed)),
            ("no-worker", get(&self.no_worker)),
            ("worker-lost", get(&self.worker_lost)),
            ("timeout", get(&self.timed_out)),
            ("refused", get(&self.refused)),
            ("cancelled", get(&self.cancelled)),
            ("draining", get(&self.draining)),
            ("peer-lost", get(&self.peer_lost)),
            ("shut-down", get(&self.shut_down)),
        ]
    }

    /// The totals now.
    pub fn snapshot(&self) -> Counters {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Counters {
            submitted: get(&self.submitted),
            pushed: get(&self.pushed),
            completed: get(&self.completed),
            no_worker: get(&self.no_worker),
            worker_lost: get(&self.worker_lost),
            timed_out: get(&self.timed_out),
            refused: get(&self.refused),
            cancelled: get(&self.cancelled),
            draining: get(&self.draining),
            late_replies: get(&self.late_replies),
            dropped_replies: get(&self.dropped_replies),
            reclaimed_slots: get(&self.reclaimed_slots),
        }
    }
}
