//! Worker registration and capacity.

use serde::{Deserialize, Serialize};

use super::items::Extension;

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

/// Version 3: a registration with a deployment identity. Fields 1 to 6 are `Register`'s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Register3 {
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
    /// The deployment (version) this worker runs.
    pub deployment: Option<String>,
    /// This instance's id, unique per deployment on a node.
    pub instance_id: Option<String>,
    pub extensions: Vec<Extension>,
}

impl Register3 {
    /// A version-3 registration of `register` with no deployment identity.
    pub fn of(register: Register) -> Self {
        Register3 {
            namespaces: register.namespaces,
            task_queue: register.task_queue,
            node: register.node,
            activity_types: register.activity_types,
            identity: register.identity,
            max_concurrency: register.max_concurrency,
            deployment: None,
            instance_id: None,
            extensions: Vec::new(),
        }
    }

    /// Its first six fields, as a `Register`.
    pub fn register(&self) -> Register {
        Register {
            namespaces: self.namespaces.clone(),
            task_queue: self.task_queue.clone(),
            node: self.node.clone(),
            activity_types: self.activity_types.clone(),
            identity: self.identity.clone(),
            max_concurrency: self.max_concurrency,
        }
    }
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
