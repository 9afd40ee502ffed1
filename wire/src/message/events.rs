//! Version 3: the node's lifecycle events, for a subscriber.

use serde::{Deserialize, Serialize};

use super::handshake::RefusalCode;

/// Which events a subscription asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventTopic {
    /// Workers registering, excluded, restored and departing.
    Workers,
    /// Peer links coming up and going down.
    Peers,
}

/// Producer to node: send the events of `topics` (every topic when empty), tagged with
/// `correlation`, until `Cancel` of the same correlation or the connection's end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscribe {
    pub correlation: u64,
    pub topics: Vec<EventTopic>,
}

/// A worker as an event names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerEvent {
    pub worker_id: u64,
    pub identity: String,
    pub deployment: Option<String>,
    pub instance_id: Option<String>,
    /// Channel names of the pools it is in.
    pub channels: Vec<String>,
}

/// Why a worker was excluded from selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExclusionReason {
    /// A ping was outstanding too long.
    Unreachable,
    Draining,
    /// Its opening probation.
    Probation,
}

/// Why a worker left, as far as the node can prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DepartureReason {
    /// Its connection closed.
    Disconnected,
    /// Too many pings went unanswered.
    MissedPings,
    /// It drained and left.
    Drained,
    /// The node shut down.
    NodeShutdown,
    /// Its registration was refused.
    RefusedAtRegistration,
    /// Another registration with its deployment and instance id replaced it.
    Superseded,
    /// It broke the protocol.
    ProtocolError,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeEvent {
    WorkerRegistered(WorkerEvent),
    WorkerExcluded {
        worker: WorkerEvent,
        reason: ExclusionReason,
    },
    WorkerRestored(WorkerEvent),
    WorkerDeparted {
        worker: WorkerEvent,
        reason: DepartureReason,
    },
    PeerUp {
        node_id: String,
        incarnation: u64,
        address: String,
    },
    PeerDown {
        node_id: String,
        incarnation: u64,
        reason: String,
    },
    /// The subscriber fell behind: `count` events were dropped for it.
    Missed {
        count: u64,
    },
}

/// Node to subscriber: one event of the subscription `correlation`, numbered `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub correlation: u64,
    pub seq: u64,
    pub at_unix_ms: u64,
    pub event: NodeEvent,
}

/// Node to subscriber: the subscription `correlation` ended, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionEnded {
    pub correlation: u64,
    pub code: RefusalCode,
    pub reason: String,
}
