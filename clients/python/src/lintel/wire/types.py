"""The types of PROTOCOL.md section 4, fields in wire order.

Enums without payloads are :class:`enum.IntEnum` (the value is the variant index). Enums with
payloads are unions of one dataclass per variant (``DispatchResult``, ``ActivityOutcome``,
``NodeRouting``, ``NodeEvent``), matchable with ``match``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Annotated, Optional, Union

from .schema import U8, U16, U32, U64, Bounded, Variants, newtype

# Unit enums ----------------------------------------------------------------------------------


class Role(enum.IntEnum):
    Worker = 0
    Producer = 1
    Peer = 2


class RefusalCode(enum.IntEnum):
    VersionMismatch = 0
    Unauthorized = 1
    RoleNotSupported = 2
    TooManyConnections = 3
    Draining = 4
    EmptyNamespaces = 5
    EmptyActivityTypes = 6
    ZeroCapacity = 7
    InvalidField = 8
    LimitExceeded = 9
    Rejected = 10
    Unsupported = 11
    Superseded = 12
    Cancelled = 13
    SessionUnknown = 14


class ErrorCode(enum.IntEnum):
    Malformed = 0
    Oversize = 1
    UnknownFrameKind = 2
    UnexpectedFrame = 3
    HandshakeTimeout = 4
    LivenessTimeout = 5
    ZeroCapacity = 6
    ShuttingDown = 7
    LimitExceeded = 8
    FrameTimeout = 9
    SlowConsumer = 10
    Unsupported = 11


class NoWorkerReason(enum.IntEnum):
    PoolEmpty = 0
    NoActivityMatch = 1
    NodeFilterMatchedNobody = 2
    AllAtCapacity = 3
    AllExcluded = 4
    AllUnreachable = 5
    AllInProbation = 6
    DeploymentMatchedNobody = 7
    CapabilityMatchedNobody = 8


class RefusedReason(enum.IntEnum):
    InvalidRequest = 0
    WorkerBackpressure = 1
    TooManyInFlight = 2
    DuplicateCorrelation = 3
    NamespaceNotGranted = 4
    Unsupported = 5
    FairnessCapReached = 6
    RoleNotGranted = 7


class PeerLinkState(enum.IntEnum):
    Connecting = 0
    Up = 1


class EventTopic(enum.IntEnum):
    Workers = 0
    Peers = 1


class ExclusionReason(enum.IntEnum):
    Unreachable = 0
    Draining = 1
    Probation = 2


class DepartureReason(enum.IntEnum):
    Disconnected = 0
    MissedPings = 1
    Drained = 2
    NodeShutdown = 3
    RefusedAtRegistration = 4
    Superseded = 5
    ProtocolError = 6


# Handshake -----------------------------------------------------------------------------------


@dataclass
class Limits:
    max_frame_len: U32
    max_in_flight: U32
    ping_interval_ms: U64
    max_missed_pings: U32
    max_name_len: U32
    max_set_len: U32


@dataclass
class HeaderLimits:
    max_headers: U32
    max_header_bytes: U32


@dataclass
class Extension:
    """A tagged value a receiver ignores when it does not know ``tag``, unless ``critical``."""

    tag: U32
    critical: bool
    value: bytes


# Requests ------------------------------------------------------------------------------------


@dataclass
class DispatchRequest:
    namespace: str
    task_queue: str
    activity_type: str
    node: Optional[str]
    workflow_id: str
    ordinal: U64
    run_id: Optional[str]
    attempt: U32
    input: bytes
    deadline_unix_ms: Optional[U64]


@dataclass
class Header:
    name: str
    value: str


#: Extension tags of version 4 (section 4, Extension tags).
TAG_HEARTBEAT_TIMEOUT = 1
TAG_PROGRESS = 2
TAG_LOST_LINK_TO = 3


@dataclass
class RequestExtras:
    headers: list[Header] = field(default_factory=list)
    priority: Optional[U8] = None
    fairness_key: Optional[str] = None
    fairness_weight: Optional[U32] = None
    deployment: Optional[str] = None
    extensions: list[Extension] = field(default_factory=list)

    def is_empty(self) -> bool:
        """Whether every field is absent: what a version-2 request means."""
        return not (
            self.headers
            or self.priority is not None
            or self.fairness_key is not None
            or self.fairness_weight is not None
            or self.deployment is not None
            or self.extensions
        )

    def extension(self, tag: int) -> Extension | None:
        """The first extension of ``tag``, if any."""
        for ext in self.extensions:
            if ext.tag == tag:
                return ext
        return None

    def heartbeat_timeout_ms(self) -> int | None:
        """The request's heartbeat timeout (tag 1), when present and well formed."""
        from .varint import decode_varint

        ext = self.extension(TAG_HEARTBEAT_TIMEOUT)
        if ext is None:
            return None
        try:
            value, end = decode_varint(ext.value, 0, 64)
        except Exception:
            return None
        return value if end == len(ext.value) else None

    def set_heartbeat_timeout_ms(self, ms: int | None) -> None:
        """Sets (or clears) tag 1, critical, its value a ``u64`` varint."""
        from .varint import encode_varint

        self.extensions = [e for e in self.extensions if e.tag != TAG_HEARTBEAT_TIMEOUT]
        if ms is not None:
            self.extensions.append(Extension(TAG_HEARTBEAT_TIMEOUT, True, encode_varint(ms, 64)))

    def wants_progress(self) -> bool:
        return self.extension(TAG_PROGRESS) is not None

    def set_progress(self, wanted: bool) -> None:
        """Sets (or clears) tag 2, not critical, empty."""
        self.extensions = [e for e in self.extensions if e.tag != TAG_PROGRESS]
        if wanted:
            self.extensions.append(Extension(TAG_PROGRESS, False, b""))


# NodeRouting ---------------------------------------------------------------------------------


@dataclass
class AnyNode:
    """Any worker in the pool."""

    __lintel_name__ = "Any"


@newtype
@dataclass
class Pin:
    node: str


@newtype
@dataclass
class Prefer:
    nodes: list[str]


@newtype
@dataclass
class Require:
    nodes: list[str]


NodeRouting = Annotated[Union[AnyNode, Pin, Prefer, Require], Variants("NodeRouting")]


# Responses -----------------------------------------------------------------------------------


@newtype
@dataclass
class Success:
    output: bytes


@dataclass
class Failure:
    message: str
    retryable: bool


ActivityOutcome = Annotated[Union[Success, Failure], Variants("ActivityOutcome")]


@dataclass
class DispatchResponse:
    workflow_id: str
    ordinal: U64
    run_id: Optional[str]
    outcome: ActivityOutcome


@dataclass
class Census:
    reason: NoWorkerReason
    pool_workers: U32
    serving_activity: U32
    compatible_workers: U32
    at_capacity: U32
    excluded: U32
    last_departure_ms_ago: Optional[U64]


@dataclass
class Census3:
    reason: NoWorkerReason
    pool_workers: U32
    serving_activity: U32
    compatible_workers: U32
    deployment_workers: U32
    at_capacity: U32
    draining: U32
    probation: U32
    unreachable: U32
    last_departure_ms_ago: Optional[U64]


@dataclass
class RefusedDispatch:
    reason: RefusedReason
    detail: str


# DispatchResult ------------------------------------------------------------------------------


@newtype
@dataclass
class Completed:
    """The worker replied."""

    response: DispatchResponse


@newtype
@dataclass
class NoWorker:
    """No eligible worker within the wait (versions 1 and 2)."""

    census: Census


@dataclass
class WorkerLost:
    """The worker's connection closed after the push and before its reply."""

    worker_id: U64


@dataclass
class Timeout:
    """No reply came within the reply timeout while the worker's connection stayed up."""

    worker_id: U64
    after_ms: U64


@newtype
@dataclass
class Refused:
    """The node did not run the dispatch."""

    refused: RefusedDispatch


@dataclass
class Cancelled:
    """The producer cancelled it."""


@dataclass
class Draining:
    """The node is draining and takes no new work."""


@dataclass
class PeerLost:
    """The link to the serving peer died before its outcome arrived; it may have run."""

    peer: str
    after_ms: U64


@dataclass
class ShutDown:
    """The node shut down while the dispatch was running; it may have run."""

    after_ms: U64


@newtype
@dataclass
class NoWorker3:
    """No eligible worker within the wait (version 3 and later)."""

    census: Census3


@dataclass
class HeartbeatTimeout:
    """No ``Progress`` came within the request's heartbeat timeout."""

    worker_id: U64
    after_ms: U64


DispatchResult = Annotated[
    Union[
        Completed,
        NoWorker,
        WorkerLost,
        Timeout,
        Refused,
        Cancelled,
        Draining,
        PeerLost,
        ShutDown,
        NoWorker3,
        HeartbeatTimeout,
    ],
    Variants("DispatchResult"),
]


# Status --------------------------------------------------------------------------------------


@dataclass
class WorkerStatus:
    worker_id: U64
    pid: U64
    identity: str
    node: Optional[str]
    activity_types: list[str]
    max_concurrency: U32
    in_flight: U32
    draining: bool


@dataclass
class PoolStatus:
    namespace: str
    task_queue: str
    channel: str
    workers: list[WorkerStatus]


@dataclass
class WaitingStatus:
    namespace: str
    task_queue: str
    activity_type: str
    waiting: U32
    census: Census


@dataclass
class Counters:
    submitted: U64
    pushed: U64
    completed: U64
    no_worker: U64
    worker_lost: U64
    timed_out: U64
    refused: U64
    cancelled: U64
    draining: U64
    late_replies: U64
    dropped_replies: U64
    reclaimed_slots: U64


@dataclass
class NodeStatus:
    node_id: str
    uptime_ms: U64
    connections: U32
    draining: bool
    pools: list[PoolStatus]
    waiting: list[WaitingStatus]
    counters: Counters


@dataclass
class PeerStatus:
    node_id: str
    address: str
    state: PeerLinkState
    synced: bool
    relays_sent: U64
    relays_received: U64
    relays_in_flight: U32
    pools: list[str]


# Peer links ----------------------------------------------------------------------------------


@dataclass
class PeerAddress:
    node_id: str
    address: str


@dataclass
class PresenceGroup:
    activity_type: str
    node: Optional[str]
    workers: U32
    slots: U32
    free: U32
    full: U32
    draining: U32


@dataclass
class PoolPresence:
    channel: str
    workers: U32
    groups: list[PresenceGroup]


@dataclass
class PresenceGroup3:
    activity_type: str
    node: Optional[str]
    deployment: Optional[str]
    workers: U32
    slots: U32
    free: U32
    full: U32
    draining: U32
    probation: U32
    unreachable: U32


@dataclass
class PoolPresence3:
    channel: str
    workers: U32
    groups: list[PresenceGroup3]


@dataclass
class PoolSetting:
    channel: str
    current_deployment: Optional[str]
    set_at_unix_ms: U64
    set_by: str


# Events --------------------------------------------------------------------------------------


@dataclass
class WorkerEvent:
    worker_id: U64
    identity: str
    deployment: Optional[str]
    instance_id: Optional[str]
    channels: list[str]


@newtype
@dataclass
class WorkerRegistered:
    worker: WorkerEvent


@dataclass
class WorkerExcluded:
    worker: WorkerEvent
    reason: ExclusionReason


@newtype
@dataclass
class WorkerRestored:
    worker: WorkerEvent


@dataclass
class WorkerDeparted:
    worker: WorkerEvent
    reason: DepartureReason


@dataclass
class PeerUp:
    node_id: str
    incarnation: U64
    address: str


@dataclass
class PeerDown:
    node_id: str
    incarnation: U64
    reason: str


@dataclass
class Missed:
    count: U64


NodeEvent = Annotated[
    Union[
        WorkerRegistered,
        WorkerExcluded,
        WorkerRestored,
        WorkerDeparted,
        PeerUp,
        PeerDown,
        Missed,
    ],
    Variants("NodeEvent"),
]

#: Bounds of section 4, Worker sessions and Progress.
SESSION_TOKEN = Bounded(16, 64)
MAX_CORRELATIONS = Bounded(0, 65536)
MAX_PROGRESS_DETAILS = 4096
PROGRESS_DETAILS = Bounded(0, MAX_PROGRESS_DETAILS)

Token = Annotated[bytes, SESSION_TOKEN]
Correlations = Annotated[list[U64], MAX_CORRELATIONS]
Details = Annotated[bytes, PROGRESS_DETAILS]

__all__ = [name for name in dir() if not name.startswith("_") and name not in ("annotations",)]
_ = U16  # re-exported for frames
