//! Worker registration and capacity.

use std::ops::RangeInclusive;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::bounded::{self, BoundedBytes, BoundedVec, Holding, Token};
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

/// Version 4, node to a worker that listed `worker-resume`, right after `Registered`: the
/// session its pushes belong to, which a new connection may resume within `resume_grace_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Opaque to the worker; [`Session::TOKEN_LEN`] bytes.
    #[serde(with = "BoundedBytes::<Token>")]
    pub token: Bytes,
    /// How long after the connection is lost the session may still be resumed.
    pub resume_grace_ms: u64,
}

impl Session {
    /// The bytes a session token takes.
    pub const TOKEN_LEN: RangeInclusive<usize> = bounded::TOKEN_LEN;
}

/// Version 4, worker to node on a new connection, in place of `Register`: resume the session
/// of `token`, holding the pushes of `holding` (running, or finished with the reply unsent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeSession {
    /// The token of a `Session`.
    #[serde(with = "BoundedBytes::<Token>")]
    pub token: Bytes,
    /// The correlations of the old connection's pushes the worker holds; at most
    /// [`ResumeSession::MAX_HOLDING`].
    #[serde(with = "BoundedVec::<Holding, u64>")]
    pub holding: Vec<u64>,
}

impl ResumeSession {
    /// Most correlations one resume lists.
    pub const MAX_HOLDING: usize = bounded::MAX_HOLDING;
}

/// Version 4, node to worker, answering `ResumeSession`: the worker is registered again as
/// `worker_id`; each correlation it listed is `attached` (its reply is awaited on this
/// connection) or `unknown` (its dispatch ended meanwhile; drop it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionResumed {
    pub worker_id: u64,
    /// At most [`ResumeSession::MAX_HOLDING`].
    #[serde(with = "BoundedVec::<Holding, u64>")]
    pub attached: Vec<u64>,
    /// At most [`ResumeSession::MAX_HOLDING`].
    #[serde(with = "BoundedVec::<Holding, u64>")]
    pub unknown: Vec<u64>,
}
