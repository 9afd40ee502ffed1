//! Worker registration and capacity.

use serde::{Deserialize, Serialize};

/// A worker joins the pools `(namespace, task_queue)` for each of its namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Register {
    /// Non-empty; duplicates are ignored.
    pub namespaces: Vec<String>,
    /// Empty means `default`.
    pub task_queue: String,
    /// `None` or empty means the worker has no node.
    pub node: Option<String>,
    /// Non-empty; duplicates are ignored.
    pub activity_types: Vec<String>,
    /// Free-form worker identity, for status and logs.
    pub identity: String,
    /// Most pushes in flight at once; zero is refused.
    pub max_concurrency: u32,
}

/// The registration was admitted under this worker id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registered {
    pub worker_id: u64,
}

/// A registered worker's new capacity; zero is a protocol error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityUpdate {
    pub max_concurrency: u32,
}
