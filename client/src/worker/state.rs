//! Where the worker runtime is, and how one of its connections ended.

use std::fmt;
use std::sync::Arc;

use lintel_wire::Refusal;

use crate::connect::ConnectError;

/// Where the worker runtime is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerState {
    /// Connecting, registering, or waiting to reconnect.
    Connecting,
    /// Registered on the node's connection `pid`.
    Registered {
        /// The node's id for this worker.
        worker_id: u64,
        /// The node's id for this connection.
        pid: u64,
    },
    /// Finishing in-flight work before it closes; no new work is taken.
    Draining {
        /// The node's id for this worker.
        worker_id: u64,
    },
    /// The node refused us for good; the runtime has stopped.
    Refused(Refusal),
    /// The node cannot be used as configured (TLS, another protocol, a version); the runtime
    /// has stopped.
    Failed(Fatal),
    /// The runtime has stopped.
    Stopped,
}

/// A connection failure retrying cannot fix ([`ConnectError::is_permanent`]), shared by every
/// copy of the state; copies are equal when they are the same failure.
#[derive(Debug, Clone)]
pub struct Fatal(Arc<ConnectError>);

impl Fatal {
    pub(super) fn new(err: ConnectError) -> Self {
        Self(Arc::new(err))
    }

    /// What failed.
    pub fn error(&self) -> &ConnectError {
        &self.0
    }
}

impl PartialEq for Fatal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Fatal {}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// How one connection ended.
#[derive(Debug)]
pub(super) enum SessionEnd {
    /// No registration happened; back off further.
    Unreachable(ConnectError),
    /// The connection was lost after registering; back off from the start. A session kept
    /// through it may be resumed when `resumable` (not after a goodbye or a protocol error).
    Lost {
        /// Whether the node keeps the session through this loss.
        resumable: bool,
    },
    /// The node drained us; we may be wanted again later.
    NodeDrained,
    /// The handle's drain is done.
    SelfDrained,
    /// A refusal retrying cannot change.
    Refused(Refusal),
    /// A failure to connect retrying cannot change.
    Failed(ConnectError),
}
