//! Peer links (protocol versions 2 and 3): membership, pool presence, relayed dispatches.

use serde::{Deserialize, Serialize};

use super::dispatch::{DispatchResult, NodeRouting};
use super::items::Extension;
use crate::ownership::{Owned, Ownership};

/// A member of the mesh, as one node tells another.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PeerAddress {
    pub node_id: String,
    /// Where the member's listener is dialled.
    pub address: String,
}

/// Peer to peer: who the sender is, which members it knows and what it implements. The
/// dialler sends it first after `Welcome`, the acceptor answers with its own, and either
/// resends it when it learns of new members.
///
/// A version-3 link carries it as `PeerHello3` (its serde form, hence the name); a version-2
/// one as `PeerHello`, which has no room for features or extensions: none are read from it,
/// and a hello that has some is refused there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename = "PeerHello3")]
pub struct PeerHello {
    pub node_id: String,
    /// Chosen at random when the node starts: a restarted node is a new peer.
    pub incarnation: u64,
    /// Where other nodes dial the sender.
    pub advertise: String,
    /// Other members the sender knows of.
    pub peers: Vec<PeerAddress>,
    /// Version 3: what the sender implements (`feature::*`).
    pub features: Vec<String>,
    /// Version 3: room to grow.
    pub extensions: Vec<Extension>,
}

/// Origin to serving node: run `request` on your own workers, never relaying it again, and
/// answer with a `RelayOutcome` of the same correlation.
///
/// A version-3 link carries it as `Relay3`, extras and all; a version-2 one as `Relay`, which
/// has no room for extras: its priority and fairness are left behind (not critical, PROTOCOL.md
/// section 8), anything else is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relay<O: Ownership = Owned> {
    /// Unique among the sender's relays in flight on this link.
    pub correlation: u64,
    pub request: O::Request,
    /// Version 3: the request's headers, scheduling fields and required deployment.
    pub extras: O::Extras,
    pub routing: NodeRouting<O>,
    /// What is left of the caller's reply budget, as a duration.
    pub reply_timeout_ms: u64,
}

/// Serving node to origin: how the relay with `correlation` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayOutcome<O: Ownership = Owned> {
    pub correlation: u64,
    pub result: DispatchResult<O>,
}

/// Node to a version-2 or later producer: how a submission ended and which node served it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedOutcome<O: Ownership = Owned> {
    pub correlation: u64,
    /// The node whose worker ran it, or that decided the outcome.
    pub served_by: O::Str,
    pub result: DispatchResult<O>,
}

/// Workers of one activity type, node label and deployment, within a pool. Its serde form is
/// version 3's (`PresenceGroup3`); a version-2 link is told each (activity type, node label)
/// pair's groups merged ([`PresenceGroup::merge`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename = "PresenceGroup3")]
pub struct PresenceGroup {
    pub activity_type: String,
    /// The workers' node label; `None` for workers registered without one.
    pub node: Option<String>,
    /// The workers' deployment; `None` for workers without one, or groups merged past the
    /// receiver's bound (their deployment is then unknown).
    pub deployment: Option<String>,
    pub workers: u32,
    /// Sum of the workers' `max_concurrency`.
    pub slots: u32,
    /// Slots free for dispatches relayed by the receiver.
    pub free: u32,
    /// Workers with every slot taken.
    pub full: u32,
    /// Workers draining.
    pub draining: u32,
    /// Workers in their opening probation.
    pub probation: u32,
    /// Workers with a ping outstanding too long.
    pub unreachable: u32,
}

/// One pool `(namespace, task_queue)` of the sender (serde: `PoolPresence3`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename = "PoolPresence3")]
pub struct PoolPresence {
    /// `dispatch_channel_name(namespace, task_queue, None)`.
    pub channel: String,
    /// Distinct workers in the pool, whatever their activity types; zero removes the pool.
    pub workers: u32,
    pub groups: Vec<PresenceGroup>,
}

/// Peer to peer: the sender's own pools. Each listed pool replaces what the receiver held for
/// that channel; pools not listed are unchanged.
///
/// A version-3 link carries it as `Presence3` (its serde form, hence the name); a version-2 one
/// as `Presence`: each (activity type, node label) pair's groups merged into one, its excluded
/// workers counted as draining, and no extensions (a presence that has some is refused there).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename = "Presence3")]
pub struct Presence {
    /// Forget every pool learned from the sender before applying this frame.
    pub reset: bool,
    /// After this frame the receiver holds the sender's whole state.
    pub synced: bool,
    /// The sender is draining and answers new relays `Draining`.
    pub draining: bool,
    pub pools: Vec<PoolPresence>,
    /// Version 3: room to grow.
    pub extensions: Vec<Extension>,
}

/// Version 3, origin to serving node: the relay outcomes the origin holds, every correlation
/// below `below` and each in `also`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayAck {
    pub below: u64,
    pub also: Vec<u64>,
}

/// Version 3, origin to serving node after a relink: the origin's relays still without an
/// outcome, in chunks, the last with `last` set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    pub unanswered: Vec<u64>,
    pub last: bool,
}

/// Version 3, serving node to origin, answering `Resume`: a listed correlation above
/// `handled_up_to` was never read; one in `running` gets its outcome later; one in `unknown`
/// ends `PeerLost`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resumed {
    pub handled_up_to: u64,
    pub running: Vec<u64>,
    pub unknown: Vec<u64>,
    pub last: bool,
}

/// Version 3: a pool's current deployment, used when a dispatch names none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSetting {
    /// `dispatch_channel_name(namespace, task_queue, None)`.
    pub channel: String,
    pub current_deployment: Option<String>,
    /// When it was set; the latest `(set_at_unix_ms, set_by)` wins.
    pub set_at_unix_ms: u64,
    /// The node id that set it.
    pub set_by: String,
}

/// Version 3, peer to peer: pool settings, all of them after the hellos, then each change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSettings {
    pub settings: Vec<PoolSetting>,
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
