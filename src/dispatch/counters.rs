//! Outcome totals since the node started, cheap to bump from any task.

use std::sync::atomic::{AtomicU64, Ordering};

use lintel_wire::{Counters, DispatchResult};

/// One counter per outcome class, plus dropped replies.
#[derive(Debug, Default)]
pub struct DispatchCounters {
    dispatched: AtomicU64,
    completed: AtomicU64,
    no_worker: AtomicU64,
    worker_lost: AtomicU64,
    timed_out: AtomicU64,
    refused: AtomicU64,
    cancelled: AtomicU64,
    draining: AtomicU64,
    dropped_replies: AtomicU64,
}

impl DispatchCounters {
    pub(crate) fn started(&self) {
        self.dispatched.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn ended(&self, result: &DispatchResult) {
        let counter = match result {
            DispatchResult::Completed(_) => &self.completed,
            DispatchResult::NoWorker(_) => &self.no_worker,
            DispatchResult::WorkerLost { .. } => &self.worker_lost,
            DispatchResult::Timeout { .. } => &self.timed_out,
            DispatchResult::Refused(_) => &self.refused,
            DispatchResult::Cancelled => &self.cancelled,
            DispatchResult::Draining => &self.draining,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a reply whose correlation id matched nothing in flight on its connection.
    pub fn reply_dropped(&self) {
        self.dropped_replies.fetch_add(1, Ordering::Relaxed);
    }

    /// The totals now.
    pub fn snapshot(&self) -> Counters {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Counters {
            dispatched: get(&self.dispatched),
            completed: get(&self.completed),
            no_worker: get(&self.no_worker),
            worker_lost: get(&self.worker_lost),
            timed_out: get(&self.timed_out),
            refused: get(&self.refused),
            cancelled: get(&self.cancelled),
            draining: get(&self.draining),
            dropped_replies: get(&self.dropped_replies),
        }
    }
}
