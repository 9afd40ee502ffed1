//! Dispatch totals since the node started, cheap to bump from any task.

use std::sync::atomic::{AtomicU64, Ordering};

use lintel_wire::{Counters, DispatchResult, Ownership, RefusedReason};

use super::outcome::{class_of, Class, CLASSES};
use crate::latency::Latency;
use crate::pool_metrics::OUTCOME_CLASSES;

/// One counter per outcome class, plus submissions, pushes and what became of late replies,
/// and the time from admission to outcome.
#[derive(Debug, Default)]
pub struct DispatchCounters {
    /// Seconds from admission to outcome.
    latency: Latency,
    submitted: AtomicU64,
    pushed: AtomicU64,
    /// Dispatches ended, by class in `outcome::CLASSES` order.
    outcomes: [AtomicU64; OUTCOME_CLASSES],
    late_replies: AtomicU64,
    dropped_replies: AtomicU64,
    reclaimed_slots: AtomicU64,
    /// Workers' progress past the per-push rate bound, dropped.
    dropped_progress: AtomicU64,
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

    /// A dispatch ended with `result`; returns its class's index in `outcome::CLASSES`.
    pub(crate) fn ended<O: Ownership>(&self, result: &DispatchResult<O>) -> usize {
        let class = class_of(result) as usize;
        if let Some(counter) = self.outcomes.get(class) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if let DispatchResult::Refused(refused) = result {
            let at = REFUSED_REASONS
                .iter()
                .position(|reason| *reason == refused.reason);
            if let Some(count) = at.and_then(|at| self.refused_by.get(at)) {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        class
    }

    /// Dispatches that ended in `class`.
    fn of_class(&self, class: Class) -> u64 {
        self.outcomes
            .get(class as usize)
            .map_or(0, |counter| counter.load(Ordering::Relaxed))
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

    /// A worker's progress came past the per-push rate bound and was not passed on.
    pub(crate) fn progress_dropped(&self) {
        self.dropped_progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Workers' progress dropped past the per-push rate bound; no status field holds it.
    pub fn dropped_progress(&self) -> u64 {
        self.dropped_progress.load(Ordering::Relaxed)
    }

    /// Dispatches that ended `PeerLost`; version-1 counters have no field for them.
    pub fn peer_lost(&self) -> u64 {
        self.of_class(Class::PeerLost)
    }

    /// Dispatches that ended `ShutDown`; version-1 counters have no field for them.
    pub fn shut_down(&self) -> u64 {
        self.of_class(Class::ShutDown)
    }

    /// Dispatches ended so far by outcome class, named as `outcome::class` names them, in
    /// that order.
    pub fn by_outcome(&self) -> [(&'static str, u64); OUTCOME_CLASSES] {
        std::array::from_fn(|at| {
            let name = CLASSES.get(at).copied().unwrap_or_default();
            let value = self
                .outcomes
                .get(at)
                .map_or(0, |counter| counter.load(Ordering::Relaxed));
            (name, value)
        })
    }

    /// The totals now.
    pub fn snapshot(&self) -> Counters {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Counters {
            submitted: get(&self.submitted),
            pushed: get(&self.pushed),
            completed: self.of_class(Class::Completed),
            no_worker: self.of_class(Class::NoWorker),
            worker_lost: self.of_class(Class::WorkerLost),
            timed_out: self.of_class(Class::Timeout),
            refused: self.of_class(Class::Refused),
            cancelled: self.of_class(Class::Cancelled),
            draining: self.of_class(Class::Draining),
            late_replies: get(&self.late_replies),
            dropped_replies: get(&self.dropped_replies),
            reclaimed_slots: get(&self.reclaimed_slots),
        }
    }
}
