//! Status: a point-in-time view of a node for operators.

use serde::{Deserialize, Serialize};

use super::dispatch::Census;

/// Producer to node: report your status, tagged with `correlation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusQuery {
    pub correlation: u64,
}

/// Node to producer: the status for the query with `correlation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReport {
    pub correlation: u64,
    pub status: NodeStatus,
}

/// Version 3, node to producer: the status for the query with `correlation`, as a UTF-8
/// JSON object (the schema of `lintel status --json`); readers ignore keys they do not know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusDocument {
    pub correlation: u64,
    pub json: bytes::Bytes,
}

/// A node's pools, workers and waiting dispatches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub node_id: String,
    pub uptime_ms: u64,
    pub connections: u32,
    pub draining: bool,
    pub pools: Vec<PoolStatus>,
    pub waiting: Vec<WaitingStatus>,
    pub counters: Counters,
}

/// One pool `(namespace, task_queue)` and its workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStatus {
    pub namespace: String,
    pub task_queue: String,
    /// The pool's channel name.
    pub channel: String,
    pub workers: Vec<WorkerStatus>,
}

/// One registered worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStatus {
    pub worker_id: u64,
    pub pid: u64,
    pub identity: String,
    pub node: Option<String>,
    pub activity_types: Vec<String>,
    pub max_concurrency: u32,
    pub in_flight: u32,
    pub draining: bool,
}

/// Dispatches waiting for a worker at one address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingStatus {
    pub namespace: String,
    pub task_queue: String,
    pub activity_type: String,
    pub waiting: u32,
    /// Why they wait; a status report carries it as a version-2 census.
    #[serde(
        serialize_with = "crate::body::write_version_2_census",
        deserialize_with = "crate::body::read_version_2_census"
    )]
    pub census: Census,
}

/// Totals since the node started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Dispatches that entered the node, whatever became of them.
    pub submitted: u64,
    /// Pushes queued on worker connections.
    pub pushed: u64,
    /// Dispatches that ended with the worker's reply.
    pub completed: u64,
    pub no_worker: u64,
    pub worker_lost: u64,
    pub timed_out: u64,
    pub refused: u64,
    pub cancelled: u64,
    pub draining: u64,
    /// Replies to pushes that had already ended (timed out or cancelled).
    pub late_replies: u64,
    /// Replies whose correlation id named no push on their connection.
    pub dropped_replies: u64,
    /// Slots of ended pushes freed because no reply came within the grace.
    pub reclaimed_slots: u64,
}
