//! Where the worker runtime is, and how one of its connections ended.

use lintel_wire::Refusal;

use crate::connect::ConnectError;

/// Where the worker runtime is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerState {
    /// Connecting, registering, or waiting to reconnect.
    Connecting,
    /// Registered on the node's connection `pid`.
    Registered { worker_id: u64, pid: u64 },
    /// Finishing in-flight work before it closes; no new work is taken.
    Draining { worker_id: u64 },
    /// The node refused us for good; the runtime has stopped.
    Refused(Refusal),
    /// The runtime has stopped.
    Stopped,
}

/// How one connection ended.
#[derive(Debug)]
pub(super) enum SessionEnd {
    /// No registration happened; back off further.
    Unreachable(ConnectError),
    /// The connection was lost after registering; back off from the start.
    Lost,
    /// The node drained us; we may be wanted again later.
    NodeDrained,
    /// The handle's drain is done.
    SelfDrained,
    /// A refusal retrying cannot change.
    Refused(Refusal),
}
