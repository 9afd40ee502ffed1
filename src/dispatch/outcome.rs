//! Names and descriptions of outcome classes, for people and exit codes.

use lintel_wire::{ActivityOutcome, DispatchResult, Ownership};

/// Every outcome class, in the order counters and `/metrics` list them.
pub const CLASSES: [&str; crate::pool_metrics::OUTCOME_CLASSES] = [
    "completed",
    "no-worker",
    "worker-lost",
    "timeout",
    "refused",
    "cancelled",
    "draining",
    "peer-lost",
    "shut-down",
];

/// An outcome's class; `as usize` is its place in [`CLASSES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Completed,
    NoWorker,
    WorkerLost,
    Timeout,
    Refused,
    Cancelled,
    Draining,
    PeerLost,
    ShutDown,
}

/// The class of `result`.
pub fn class_of<O: Ownership>(result: &DispatchResult<O>) -> Class {
    match result {
        DispatchResult::Completed(_) => Class::Completed,
        DispatchResult::NoWorker(_) => Class::NoWorker,
        DispatchResult::WorkerLost { .. } => Class::WorkerLost,
        DispatchResult::Timeout { .. } | DispatchResult::HeartbeatTimeout { .. } => Class::Timeout,
        DispatchResult::Refused(_) => Class::Refused,
        DispatchResult::Cancelled => Class::Cancelled,
        DispatchResult::Draining => Class::Draining,
        DispatchResult::PeerLost { .. } => Class::PeerLost,
        DispatchResult::ShutDown { .. } => Class::ShutDown,
    }
}

/// The class of an outcome: `completed`, `no-worker`, `worker-lost`, `timeout`, `refused`,
/// `cancelled`, `draining`, `peer-lost` or `shut-down`.
pub fn class<O: Ownership>(result: &DispatchResult<O>) -> &'static str {
    CLASSES
        .get(class_of(result) as usize)
        .copied()
        .unwrap_or_default()
}

/// One line saying what happened, without the result bytes.
pub fn describe(result: &DispatchResult) -> String {
    match result {
        DispatchResult::Completed(response) => match &response.outcome {
            ActivityOutcome::Success(bytes) => format!("completed with {} bytes", bytes.len()),
            ActivityOutcome::Failure { message, retryable } => {
                format!("activity failed (retryable: {retryable}): {message}")
            }
        },
        DispatchResult::NoWorker(census) => {
            let left = census
                .last_departure_ms_ago
                .map(|ms| format!(", a compatible worker left {ms} ms ago"))
                .unwrap_or_default();
            format!(
                "{:?}: {} in pool, {} serve the activity, {} on an allowed node, {} of the deployment, {} at capacity, {} draining, {} in probation, {} unreachable{left}",
                census.reason,
                census.pool_workers,
                census.serving_activity,
                census.compatible_workers,
                census.deployment_workers,
                census.at_capacity,
                census.draining,
                census.probation.unwrap_or(0),
                census.unreachable.unwrap_or(0),
            )
        }
        DispatchResult::WorkerLost { worker_id } => {
            format!("worker {worker_id} disconnected before replying")
        }
        DispatchResult::Timeout {
            worker_id,
            after_ms,
        } => {
            format!("worker {worker_id} did not reply within {after_ms} ms")
        }
        DispatchResult::Refused(refused) => format!("{:?}: {}", refused.reason, refused.detail),
        DispatchResult::Cancelled => "cancelled".into(),
        DispatchResult::Draining => "the node is draining".into(),
        DispatchResult::PeerLost { peer, after_ms } => {
            format!("the link to node {peer} died {after_ms} ms after the relay; it may have run")
        }
        DispatchResult::ShutDown { after_ms } => {
            format!("the node shut down {after_ms} ms after the push; it may have run")
        }
        DispatchResult::HeartbeatTimeout {
            worker_id,
            after_ms,
        } => {
            format!(
                "worker {worker_id} missed its heartbeat; given up {after_ms} ms after the push"
            )
        }
    }
}
