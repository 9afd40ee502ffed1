//! The handshake: `Hello`, then `Welcome` or `HelloRefused`.

use serde::{Deserialize, Serialize};

use super::extras::HeaderLimits;
use super::items::Extension;
use crate::dialect::FeatureSet;

/// The highest protocol version this crate speaks.
pub const PROTOCOL_VERSION: u16 = 4;

/// What a connection is for; fixes which frames it may send afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    /// Registers and executes pushed requests.
    Worker,
    /// Submits requests and reads their outcomes.
    Producer,
    /// Another node relaying dispatches.
    Peer,
}

/// First frame from a client: the versions it speaks and who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Lowest protocol version the client accepts.
    pub min_version: u16,
    /// Highest protocol version the client speaks.
    pub max_version: u16,
    pub role: Role,
    /// Free-form client name, for logs and status.
    pub name: String,
    /// Shared secret, checked when the node is configured with one.
    pub auth_token: Option<String>,
}

/// Limits the node enforces on this connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Largest frame body the node accepts, in bytes.
    pub max_frame_len: u32,
    /// Most submissions a producer connection may have in flight.
    pub max_in_flight: u32,
    /// How often the node pings a worker or producer, in milliseconds.
    pub ping_interval_ms: u64,
    /// Consecutive unanswered pings after which the node closes the connection.
    pub max_missed_pings: u32,
    /// Longest namespace, task queue, node, activity type or identity, in bytes.
    pub max_name_len: u32,
    /// Most namespaces or activity types in one registration.
    pub max_set_len: u32,
}

/// The handshake succeeded; on version 3 also what the node implements.
///
/// A version-3 connection carries it as `Welcome3`, an earlier one as `Welcome`, which has no
/// room for header limits or features: none are read from it, and a welcome that states some
/// is refused there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    /// The negotiated version: the highest both sides speak.
    pub version: u16,
    pub node_id: String,
    /// The node's id for this connection, unique for the node's lifetime.
    pub pid: u64,
    pub limits: Limits,
    /// Version 3: the bounds on a request's headers; `None` from an earlier node, which takes
    /// no header (and written as no room for any when a version-3 welcome states none).
    pub header_limits: Option<HeaderLimits>,
    /// Version 3: what the node implements (`feature::*`); a client must not rely on one not
    /// listed. Empty from an earlier node.
    pub features: Vec<String>,
}

impl Welcome {
    /// True when the node lists `feature`.
    pub fn implements(&self, feature: &str) -> bool {
        self.features.iter().any(|listed| listed == feature)
    }
}

/// Version 4, client to node, its first frame after the welcome: the features of version 4
/// and later it understands (`feature::*`), so that the node may send it their kinds and
/// variants. A peer says the same in its `PeerHello3`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    /// At most the welcome's `max_set_len` names, each 1 to `max_name_len` bytes; a name the
    /// node does not know is ignored.
    pub features: Vec<String>,
    /// Room to grow.
    pub extensions: Vec<Extension>,
}

impl Features {
    /// The list of what `listed` holds.
    pub fn of(listed: FeatureSet) -> Self {
        Self {
            features: listed.names(),
            extensions: Vec::new(),
        }
    }

    /// The features listed that this crate knows.
    pub fn listed(&self) -> FeatureSet {
        FeatureSet::named(&self.features)
    }
}

/// Why a handshake or registration was refused. Codes are appended, never renumbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RefusalCode {
    /// No version lies in both the client's and the node's range.
    VersionMismatch,
    /// The auth token is missing or wrong.
    Unauthorized,
    /// The node does not serve this role.
    RoleNotSupported,
    /// The node is at its connection limit.
    TooManyConnections,
    /// The node is draining and admits nothing new.
    Draining,
    /// A registration named no namespace.
    EmptyNamespaces,
    /// A registration named no activity type.
    EmptyActivityTypes,
    /// A registration stated `max_concurrency` zero.
    ZeroCapacity,
    /// A field is empty where it must not be, or too long.
    InvalidField,
    /// A set is larger than the node's `max_set_len`.
    LimitExceeded,
    /// The connection notifier refused the registration.
    Rejected,
    /// Version 3: what was asked needs what the node does not implement (a feature, a
    /// critical extension); the reason names it.
    Unsupported,
    /// Version 3: reserved, to tell a registration it was superseded by another with the
    /// same deployment and instance id.
    Superseded,
    /// Version 3: the subscriber cancelled its subscription.
    Cancelled,
    /// Version 4: a `ResumeSession` named no session the node holds for the worker (expired,
    /// unknown, or another identity's); the worker registers anew.
    SessionUnknown,
}

/// A refusal: a code to match on and a reason for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub code: RefusalCode,
    pub reason: String,
}
