//! Dispatch: the request, the worker's response, the producer's submission and its outcome.
//!
//! The bodies sent for every dispatch take their [`Ownership`] as a type parameter: `Owned`
//! (the default) to build and keep them, `Borrowed` to read them where they lie in a frame.

use serde::{Deserialize, Serialize};

use crate::dialect::{Dialect, FeatureSet};
use crate::ownership::{Borrowed, Owned, Ownership};

/// One unit of work for a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "O::Str: Serialize, O::Payload: Serialize, O::Names: Serialize",
    deserialize = "O::Str: Deserialize<'de>, O::Payload: Deserialize<'de>, O::Names: Deserialize<'de>"
))]
pub struct DispatchRequest<O: Ownership = Owned> {
    pub namespace: O::Str,
    /// Empty means `default`.
    pub task_queue: O::Str,
    pub activity_type: O::Str,
    /// Require this node; `None` or empty means any node.
    pub node: Option<O::Str>,
    pub workflow_id: O::Str,
    pub ordinal: u64,
    pub run_id: Option<O::Str>,
    /// One-based attempt number.
    pub attempt: u32,
    /// Opaque to the node.
    pub input: O::Payload,
    /// Wall-clock deadline, milliseconds since the Unix epoch; advisory for the worker.
    pub deadline_unix_ms: Option<u64>,
}

/// What an activity produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "O::Str: Serialize, O::Payload: Serialize, O::Names: Serialize",
    deserialize = "O::Str: Deserialize<'de>, O::Payload: Deserialize<'de>, O::Names: Deserialize<'de>"
))]
pub enum ActivityOutcome<O: Ownership = Owned> {
    /// Result bytes, opaque to the node.
    Success(O::Payload),
    /// The activity failed; `retryable` tells the engine whether another attempt may help.
    Failure { message: O::Str, retryable: bool },
}

/// A worker's answer to a request, echoing its identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "O::Str: Serialize, O::Payload: Serialize, O::Names: Serialize",
    deserialize = "O::Str: Deserialize<'de>, O::Payload: Deserialize<'de>, O::Names: Deserialize<'de>"
))]
pub struct DispatchResponse<O: Ownership = Owned> {
    pub workflow_id: O::Str,
    pub ordinal: u64,
    pub run_id: Option<O::Str>,
    pub outcome: ActivityOutcome<O>,
}

/// Node to worker: execute `request` and reply with `correlation`.
///
/// A version-3 connection carries it as `Push3`, extras and all; an earlier one as `Push`,
/// which has no room for extras: its priority and fairness are left behind (not critical,
/// PROTOCOL.md section 8), anything else is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Push<O: Ownership = Owned> {
    /// Unique among this connection's pushes.
    pub correlation: u64,
    pub request: O::Request,
    /// Version 3: the request's headers, scheduling fields and required deployment; none is
    /// the default.
    pub extras: O::Extras,
}

/// Worker to node: the response to the push with `correlation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "O::Str: Serialize, O::Payload: Serialize, O::Names: Serialize",
    deserialize = "O::Str: Deserialize<'de>, O::Payload: Deserialize<'de>, O::Names: Deserialize<'de>"
))]
pub struct Reply<O: Ownership = Owned> {
    pub correlation: u64,
    pub response: DispatchResponse<O>,
}

/// Which nodes may serve a dispatch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "O::Str: Serialize, O::Payload: Serialize, O::Names: Serialize",
    deserialize = "O::Str: Deserialize<'de>, O::Payload: Deserialize<'de>, O::Names: Deserialize<'de>"
))]
pub enum NodeRouting<O: Ownership = Owned> {
    /// Any worker in the pool; a `node` in the request pins it instead.
    #[default]
    Any,
    /// Only workers on this node.
    Pin(O::Str),
    /// Try each node in order, then spill to any worker in the pool.
    Prefer(O::Names),
    /// Only workers on one of these nodes, never spilling.
    Require(O::Names),
}

/// Producer to node: dispatch `request`; answered by an outcome with the same correlation.
///
/// Goes as `Submit` when it has no extras, as `Submit3` with them (version 3 only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submit<O: Ownership = Owned> {
    /// Unique among this connection's submissions in flight.
    pub correlation: u64,
    pub request: O::Request,
    /// Version 3: the request's headers, scheduling fields and required deployment; none is
    /// the default.
    pub extras: O::Extras,
    /// How long to wait for an eligible worker; `None` fails at once with `NoWorker`.
    pub wait_for_worker_ms: Option<u64>,
    /// How long to wait for the reply once pushed; `None` takes the node's default.
    pub reply_timeout_ms: Option<u64>,
    pub routing: NodeRouting<O>,
}

/// Why no worker was selected, as far as the node knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NoWorkerReason {
    /// No worker is registered in the pool.
    PoolEmpty,
    /// Workers are in the pool but none serves the activity type.
    NoActivityMatch,
    /// Workers serve the activity but none on an allowed node.
    NodeFilterMatchedNobody,
    /// Every compatible worker is at its capacity.
    AllAtCapacity,
    /// Every compatible worker is excluded from selection: draining, or a mix of exclusions.
    AllExcluded,
    /// Version 3: every candidate is unreachable (a ping outstanding too long).
    AllUnreachable,
    /// Version 3: every candidate is in its opening probation.
    AllInProbation,
    /// Version 3: compatible workers exist but none of the required deployment.
    DeploymentMatchedNobody,
    /// Version 3: compatible workers exist but none can carry the request (a version-2
    /// worker or peer link for a request with headers or a required deployment).
    CapabilityMatchedNobody,
}

impl NoWorkerReason {
    /// The reason as a version-1 or version-2 connection reads it.
    pub(crate) fn for_version_2(self) -> Self {
        match self {
            NoWorkerReason::AllUnreachable | NoWorkerReason::AllInProbation => {
                NoWorkerReason::AllExcluded
            }
            NoWorkerReason::DeploymentMatchedNobody | NoWorkerReason::CapabilityMatchedNobody => {
                NoWorkerReason::NodeFilterMatchedNobody
            }
            other => other,
        }
    }
}

/// What the node knew about an address `(namespace, task_queue, activity_type)` when it found
/// no eligible worker: version 3's counts. A version-1 or version-2 node counts its excluded
/// workers as one, read here as `draining`, with `probation` and `unreachable` absent (`None`),
/// and does not count `compatible_workers` apart from `deployment_workers`; written back to such
/// a connection it is the census that node sent, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Census {
    pub reason: NoWorkerReason,
    /// Workers in the pool, whatever their activity types.
    pub pool_workers: u32,
    /// Workers in the pool serving the activity type, on any node.
    pub serving_activity: u32,
    /// Workers serving the activity type on an allowed node.
    pub compatible_workers: u32,
    /// Compatible workers of the required deployment, or every compatible worker when none is
    /// required.
    pub deployment_workers: u32,
    /// Of those, workers with every slot taken.
    pub at_capacity: u32,
    /// Of those, workers draining; from a version-1 or version-2 node, every excluded worker.
    pub draining: u32,
    /// Of those, workers in their opening probation; `None` from a version-1 or version-2 node.
    pub probation: Option<u32>,
    /// Of those, workers with a ping outstanding too long; `None` from a version-1 or
    /// version-2 node.
    pub unreachable: Option<u32>,
    /// Milliseconds since a compatible worker last left, if one has.
    pub last_departure_ms_ago: Option<u64>,
}

impl Census {
    /// Workers excluded from selection, for whatever reason.
    pub fn excluded(&self) -> u32 {
        self.draining
            .saturating_add(self.probation.unwrap_or(0))
            .saturating_add(self.unreachable.unwrap_or(0))
    }
}

/// Why the node refused a dispatch without running it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RefusedReason {
    /// The request is malformed (empty namespace or activity type, too-long field).
    InvalidRequest,
    /// The selected worker's outbound queue is full; it stays registered.
    WorkerBackpressure,
    /// The producer connection has too many submissions in flight.
    TooManyInFlight,
    /// The correlation id is already in flight on this connection.
    DuplicateCorrelation,
    /// Version 2: the producer's credentials do not grant the request's namespace.
    NamespaceNotGranted,
    /// Version 3: the request needs what the node does not implement (a feature, a critical
    /// extension); the detail names it.
    Unsupported,
    /// Version 3: the request's fairness key is at its cap and the dispatch may not wait.
    FairnessCapReached,
    /// Version 4: the producer's credentials do not grant the role the request needs; the
    /// detail names it. Sent only to a reader that listed `role-not-granted`.
    RoleNotGranted,
}

impl RefusedReason {
    /// The reason as a connection of `dialect` reads it: version 1 knows no
    /// `NamespaceNotGranted`, versions 1 and 2 no `Unsupported` or `FairnessCapReached`, and a
    /// reader that did not list `role-not-granted` no `RoleNotGranted` (read as
    /// `NamespaceNotGranted`, whose detail names the role).
    pub(crate) fn for_dialect(self, dialect: Dialect) -> Self {
        let version = dialect.version();
        match self {
            RefusedReason::RoleNotGranted if dialect.lists(FeatureSet::ROLE_NOT_GRANTED) => self,
            RefusedReason::RoleNotGranted => {
                RefusedReason::NamespaceNotGranted.for_dialect(dialect)
            }
            RefusedReason::NamespaceNotGranted if version < 2 => RefusedReason::InvalidRequest,
            RefusedReason::Unsupported if version < 3 => RefusedReason::InvalidRequest,
            RefusedReason::FairnessCapReached if version < 3 => RefusedReason::TooManyInFlight,
            other => other,
        }
    }
}

/// A refused dispatch; `S` holds the detail (`&str` when read in place).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedDispatch<S = String> {
    pub reason: RefusedReason,
    pub detail: S,
}

/// How a dispatch ended; exactly one per submission.
///
/// The one result of every version: where a connection does not know a variant or a reason
/// (its version, or what its reader listed), its codec writes the nearest one it knows
/// (PROTOCOL.md section 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DispatchResult<O: Ownership = Owned> {
    /// The worker replied.
    Completed(DispatchResponse<O>),
    /// No eligible worker within the wait, and why.
    NoWorker(Census),
    /// The worker's connection closed before it replied.
    WorkerLost { worker_id: u64 },
    /// The worker was alive but did not reply in time.
    Timeout { worker_id: u64, after_ms: u64 },
    /// The node would not run the dispatch.
    Refused(RefusedDispatch<O::Str>),
    /// The producer cancelled it.
    Cancelled,
    /// The node is draining and takes no new work.
    Draining,
    /// Version 2: the link to the node serving it died while the dispatch may have been
    /// running there; `after_ms` since it was relayed.
    PeerLost { peer: O::Str, after_ms: u64 },
    /// Version 2: the node shut down while the dispatch was running, `after_ms` after it was
    /// pushed or relayed; it may have run.
    ShutDown { after_ms: u64 },
    /// Version 4: the worker's connection stayed up but sent no `Progress` within the
    /// request's heartbeat timeout; `after_ms` since it was pushed. A reader that did not list
    /// `heartbeat-timeout` reads it as `Timeout`.
    HeartbeatTimeout { worker_id: u64, after_ms: u64 },
}

/// Node to a version-1 producer: the result of the submission with `correlation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeFrame<O: Ownership = Owned> {
    pub correlation: u64,
    pub result: DispatchResult<O>,
}

/// A request read in place or lent: its fields, and, when it was read from a frame, the bytes
/// of the fields before its input, so it is written again as it came without encoding them.
/// Two are equal when their fields are.
#[derive(Debug, Clone)]
pub struct RequestRef<'a> {
    pub(crate) fields: DispatchRequest<Borrowed<'a>>,
    /// The encoded fields from `namespace` to `attempt`, as read; `None` when lent.
    pub(crate) head: Option<&'a [u8]>,
}

impl<'a> RequestRef<'a> {
    /// A request lent field by field.
    pub fn new(fields: DispatchRequest<Borrowed<'a>>) -> Self {
        Self { fields, head: None }
    }
}

impl PartialEq for RequestRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.fields == other.fields
    }
}

impl Eq for RequestRef<'_> {}

impl<'a> std::ops::Deref for RequestRef<'a> {
    type Target = DispatchRequest<Borrowed<'a>>;

    fn deref(&self) -> &Self::Target {
        &self.fields
    }
}
/// A response read in place or lent.
pub type ResponseRef<'a> = DispatchResponse<Borrowed<'a>>;
/// An outcome read in place or lent.
pub type ResultRef<'a> = DispatchResult<Borrowed<'a>>;
/// A routing read in place or lent.
pub type RoutingRef<'a> = NodeRouting<Borrowed<'a>>;
