//! Worker registration and capacity.

use serde::{Deserialize, Serialize};

use super::items::Extension;

/// A worker joins the pools `(namespace, task_queue)` for each of its namespaces.
///
/// Goes as `Register` when it states no deployment identity and no extension, as `Register3`
/// (its serde form, hence the name) otherwise, on version 3 only: an earlier node is refused
/// it, unless [`Register::carried_at`] leaves the identity behind as PROTOCOL.md allows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename = "Register3")]
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
    /// Version 3: the deployment (version) this worker runs.
    pub deployment: Option<String>,
    /// Version 3: this instance's id, unique per deployment on a node.
    pub instance_id: Option<String>,
    /// Version 3: room to grow.
    pub extensions: Vec<Extension>,
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
