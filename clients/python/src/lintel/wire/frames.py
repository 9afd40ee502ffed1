"""One dataclass per frame body of PROTOCOL.md section 3, and the table of kinds.

:data:`FRAMES` is the one list of kinds: number, name, body class and the protocol version
that introduced it. The class of a kind is named as the frame in PROTOCOL.md, but for
``Error`` (:class:`ErrorFrame`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from .schema import U16, U32, U64
from .types import (
    Correlations,
    Details,
    DispatchRequest,
    DispatchResponse,
    DispatchResult,
    ErrorCode,
    EventTopic,
    Extension,
    HeaderLimits,
    Limits,
    NodeEvent,
    NodeRouting,
    NodeStatus,
    PeerAddress,
    PeerStatus,
    PoolPresence,
    PoolPresence3,
    PoolSetting,
    RefusalCode,
    RequestExtras,
    Role,
    Token,
)


@dataclass
class Hello:
    min_version: U16
    max_version: U16
    role: Role
    name: str
    auth_token: Optional[str]


@dataclass
class Welcome:
    version: U16
    node_id: str
    pid: U64
    limits: Limits


@dataclass
class HelloRefused:
    code: RefusalCode
    reason: str


@dataclass
class Register:
    namespaces: list[str]
    task_queue: str
    node: Optional[str]
    activity_types: list[str]
    identity: str
    max_concurrency: U32


@dataclass
class Registered:
    worker_id: U64


@dataclass
class RegisterRefused:
    code: RefusalCode
    reason: str


@dataclass
class CapacityUpdate:
    max_concurrency: U32


@dataclass
class Push:
    correlation: U64
    request: DispatchRequest


@dataclass
class Reply:
    correlation: U64
    response: DispatchResponse


@dataclass
class Submit:
    correlation: U64
    request: DispatchRequest
    wait_for_worker_ms: Optional[U64]
    reply_timeout_ms: Optional[U64]
    routing: NodeRouting


@dataclass
class Outcome:
    correlation: U64
    result: DispatchResult


@dataclass
class Cancel:
    correlation: U64


@dataclass
class Ping:
    nonce: U64


@dataclass
class Pong:
    nonce: U64


@dataclass
class Drain:
    grace_ms: U64


@dataclass
class Drained:
    completed: U64


@dataclass
class Goodbye:
    reason: str


@dataclass
class ErrorFrame:
    """The ``Error`` frame (kind 17)."""

    code: ErrorCode
    reason: str


@dataclass
class StatusQuery:
    correlation: U64


@dataclass
class Status:
    correlation: U64
    status: NodeStatus


@dataclass
class PeerHello:
    node_id: str
    incarnation: U64
    advertise: str
    peers: list[PeerAddress]


@dataclass
class Presence:
    reset: bool
    synced: bool
    draining: bool
    pools: list[PoolPresence]


@dataclass
class Relay:
    correlation: U64
    request: DispatchRequest
    routing: NodeRouting
    reply_timeout_ms: U64


@dataclass
class RelayOutcome:
    correlation: U64
    result: DispatchResult


@dataclass
class ServedOutcome:
    correlation: U64
    served_by: str
    result: DispatchResult


@dataclass
class ClusterStatus:
    correlation: U64
    status: NodeStatus
    peers: list[PeerStatus]
    peer_lost: U64


@dataclass
class Submit3:
    correlation: U64
    request: DispatchRequest
    extras: RequestExtras
    wait_for_worker_ms: Optional[U64]
    reply_timeout_ms: Optional[U64]
    routing: NodeRouting


@dataclass
class Push3:
    correlation: U64
    request: DispatchRequest
    extras: RequestExtras


@dataclass
class Relay3:
    correlation: U64
    request: DispatchRequest
    extras: RequestExtras
    routing: NodeRouting
    reply_timeout_ms: U64


@dataclass
class Register3:
    namespaces: list[str]
    task_queue: str
    node: Optional[str]
    activity_types: list[str]
    identity: str
    max_concurrency: U32
    deployment: Optional[str] = None
    instance_id: Optional[str] = None
    extensions: list[Extension] = field(default_factory=list)


@dataclass
class Welcome3:
    version: U16
    node_id: str
    pid: U64
    limits: Limits
    header_limits: HeaderLimits
    features: list[str]


@dataclass
class Presence3:
    reset: bool
    synced: bool
    draining: bool
    pools: list[PoolPresence3]
    extensions: list[Extension]


@dataclass
class PeerHello3:
    node_id: str
    incarnation: U64
    advertise: str
    peers: list[PeerAddress]
    features: list[str]
    extensions: list[Extension]


@dataclass
class Subscribe:
    correlation: U64
    topics: list[EventTopic]


@dataclass
class Event:
    correlation: U64
    seq: U64
    at_unix_ms: U64
    event: NodeEvent


@dataclass
class SubscriptionEnded:
    correlation: U64
    code: RefusalCode
    reason: str


@dataclass
class StatusDocument:
    correlation: U64
    json: bytes


@dataclass
class Farewell:
    reason: str


@dataclass
class RelayAck:
    below: U64
    also: list[U64]


@dataclass
class Resume:
    unanswered: list[U64]
    last: bool


@dataclass
class Resumed:
    handled_up_to: U64
    running: list[U64]
    unknown: list[U64]
    last: bool


@dataclass
class PoolSettings:
    settings: list[PoolSetting]


@dataclass
class Features:
    features: list[str]
    extensions: list[Extension] = field(default_factory=list)


@dataclass
class Session:
    token: Token
    resume_grace_ms: U64


@dataclass
class ResumeSession:
    token: Token
    holding: Correlations


@dataclass
class SessionResumed:
    worker_id: U64
    attached: Correlations
    unknown: Correlations


@dataclass
class Progress:
    correlation: U64
    details: Details


@dataclass(frozen=True)
class Kind:
    """A row of the frame table: kind number, PROTOCOL.md name, body class, first version."""

    number: int
    name: str
    body: type
    version: int


def _rows() -> list[Kind]:
    v1 = [
        Hello, Welcome, HelloRefused, Register, Registered, RegisterRefused, CapacityUpdate,
        Push, Reply, Submit, Outcome, Cancel, Ping, Pong, Drain, Drained, Goodbye, ErrorFrame,
        StatusQuery, Status,
    ]  # fmt: skip
    v2 = [PeerHello, Presence, Relay, RelayOutcome, ServedOutcome, ClusterStatus]
    v3 = [
        Submit3, Push3, Relay3, Register3, Welcome3, Presence3, PeerHello3, Subscribe, Event,
        SubscriptionEnded, StatusDocument, Farewell, RelayAck, Resume, Resumed, PoolSettings,
    ]  # fmt: skip
    v4 = [Features, Session, ResumeSession, SessionResumed, Progress]
    rows: list[Kind] = []
    for version, classes in ((1, v1), (2, v2), (3, v3), (4, v4)):
        for cls in classes:
            name = "Error" if cls is ErrorFrame else cls.__name__
            rows.append(Kind(len(rows), name, cls, version))
    return rows


#: Every frame kind, indexed by its number.
FRAMES: list[Kind] = _rows()
#: Kind row of each body class.
KIND_OF: dict[type, Kind] = {row.body: row for row in FRAMES}

Frame = Union[
    Hello, Welcome, HelloRefused, Register, Registered, RegisterRefused, CapacityUpdate, Push,
    Reply, Submit, Outcome, Cancel, Ping, Pong, Drain, Drained, Goodbye, ErrorFrame,
    StatusQuery, Status, PeerHello, Presence, Relay, RelayOutcome, ServedOutcome, ClusterStatus,
    Submit3, Push3, Relay3, Register3, Welcome3, Presence3, PeerHello3, Subscribe, Event,
    SubscriptionEnded, StatusDocument, Farewell, RelayAck, Resume, Resumed, PoolSettings,
    Features, Session, ResumeSession, SessionResumed, Progress,
]  # fmt: skip
