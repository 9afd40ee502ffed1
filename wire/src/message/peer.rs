//! Peer links (protocol version 2): membership, pool presence, relayed dispatches.

use serde::{Deserialize, Serialize};

use super::dispatch::{DispatchRequest, DispatchResult, NodeRouting};
use crate::ownership::{Owned, Ownership};

/// A member of the mesh, as one node tells another.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PeerAddress {
    pub node_id: String,
    /// Where the member's listener is dialled.
    pub address: String,
}

/// Peer to peer: who the sender is and which members it knows. The dialler sends it first
/// after `Welcome`, the acceptor answers with its own, and either resends it when it learns
/// of new members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerHello {
    pub node_id: String,
    /// Chosen at random when the node starts: a restarted node is a new peer.
    pub incarnation: u64,
    /// Where other nodes dial the sender.
    pub advertise: String,
    /// Other members the sender knows of.
    pub peers: Vec<PeerAddress>,
}

/// Workers of one activity type on one worker node label, within a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresenceGroup {
    pub activity_type: String,
    /// The workers' node label; `None` for workers registered without one.
    pub node: Option<String>,
    pub workers: u32,
    /// Sum of the workers' `max_concurrency`.
    pub slots: u32,
    /// Slots free for dispatches relayed by the receiver (its own relays in flight count as
    /// free, since the receiver already counts them).
    pub free: u32,
    /// Workers with every slot taken.
    pub full: u32,
    /// Workers excluded from selection (draining).
    pub draining: u32,
}

/// One pool `(namespace, task_queue)` of the sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolPresence {
    /// `dispatch_channel_name(namespace, task_queue, None)`.
    pub channel: String,
    /// Distinct workers in the pool, whatever their activity types; zero removes the pool.
    pub workers: u32,
    pub groups: Vec<PresenceGroup>,
}

/// Peer to peer: the sender's own pools. Each listed pool replaces what the receiver held for
/// that channel; pools not listed are unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presence {
    /// Forget every pool learned from the sender before applying this frame.
    pub reset: bool,
    /// After this frame the receiver holds the sender's whole state.
    pub synced: bool,
    /// The sender is draining and answers new relays `Draining`.
    pub draining: bool,
    pub pools: Vec<PoolPresence>,
}

/// Origin to serving node: run `request` on your own workers, never relaying it again, and
/// answer with a `RelayOutcome` of the same correlation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "O::Str: Serialize, O::Payload: Serialize, O::Names: Serialize",
    deserialize = "O::Str: Deserialize<'de>, O::Payload: Deserialize<'de>, O::Names: Deserialize<'de>"
))]
pub struct Relay<O: Ownership = Owned> {
    /// Unique among the sender's relays in flight on this link.
    pub correlation: u64,
    pub request: DispatchRequest<O>,
    pub routing: NodeRouting<O>,
    /// What is left of the caller's reply budget, as a duration.
    pub reply_timeout_ms: u64,
}

/// Serving node to origin: how the relay with `correlation` ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "O::Str: Serialize, O::Payload: Serialize, O::Names: Serialize",
    deserialize = "O::Str: Deserialize<'de>, O::Payload: Deserialize<'de>, O::Names: Deserialize<'de>"
))]
pub struct RelayOutcome<O: Ownership = Owned> {
    pub correlation: u64,
    pub result: DispatchResult<O>,
}

/// Node to a version-2 producer: how a submission ended and which node served it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "O::Str: Serialize, O::Payload: Serialize, O::Names: Serialize",
    deserialize = "O::Str: Deserialize<'de>, O::Payload: Deserialize<'de>, O::Names: Deserialize<'de>"
))]
pub struct ServedOutcome<O: Ownership = Owned> {
    pub correlation: u64,
    /// The node whose worker ran it, or that decided the outcome.
    pub served_by: O::Str,
    pub result: DispatchResult<O>,
}

/// Whether a peer link is usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PeerLinkState {
    /// Known, no link yet or dialling again.
    Connecting,
    /// The link is up.
    Up,
}

/// One peer as the reporting node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStatus {
    /// Empty until a link to it came up once.
    pub node_id: String,
    pub address: String,
    pub state: PeerLinkState,
    /// The peer's whole presence has arrived on the current link.
    pub synced: bool,
    pub relays_sent: u64,
    pub relays_received: u64,
    /// Relays sent to it without an outcome yet.
    pub relays_in_flight: u32,
    /// Channel names of the pools it announced.
    pub pools: Vec<String>,
}

/// Node to a version-2 producer: the status for the query with `correlation`, with peers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatusReport {
    pub correlation: u64,
    pub status: super::status::NodeStatus,
    pub peers: Vec<PeerStatus>,
    /// Dispatches that ended `PeerLost`.
    pub peer_lost: u64,
}
