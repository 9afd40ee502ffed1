"""The lintel wire protocol for workers and producers, in the Python standard library alone.

Written from ``wire/PROTOCOL.md``, which is the contract; section numbers below refer to it.

Layout:

- ``Reader`` / ``Writer``: postcard values over bytes (section 2): varints with their
  per-type byte limits, strings, bytes, options, vectors, enum indices.
- Frame and type classes: one dataclass per frame body and per type of section 4, each with
  ``encode(w)`` and ``decode(r)``. Enums with payloads are one class per variant; enums
  without payloads are the variant's name as a string.
- ``encode_frame`` / ``decode_body`` / ``FrameDecoder``: framing (section 1), pure functions
  over bytes, no I/O. ``FrameDecoder.next_frame()`` returns ``None`` for partial input.
- ``Connection`` / ``connect``: a blocking TCP socket and the handshake (section 5), a thin
  layer over the above; ``TlsSocket`` and ``tls_context``: the same over TLS (section 5 of
  the README: TLS wraps the byte stream, the frames do not change).

This module speaks versions 1 and 2 (``Hello{min_version: 1, max_version: 2}``). It decodes
every frame a node sends to a worker or a producer; the peer-link frames (kinds 20 to 23)
are known kinds a client never receives, and decoding one raises ``UnexpectedFrame``.
"""

import os
import socket
import ssl
import struct
import threading
from dataclasses import dataclass, field
from typing import Callable, List, Optional

PROTOCOL_VERSION = 2
MIN_PROTOCOL_VERSION = 1
DEFAULT_MAX_FRAME_LEN = 4 * 1024 * 1024
U16_MAX = (1 << 16) - 1
U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1


# Errors -------------------------------------------------------------------------------------


class WireError(Exception):
    """Bytes from the wire that break the protocol. ``code`` is the ErrorCode to answer."""

    code = "Malformed"


class Malformed(WireError):
    """A body that does not decode: bad field, bad tag, overflowing varint, cut short."""


class TrailingBytes(Malformed):
    """A body that decodes with bytes left over."""


class MissingKind(Malformed):
    """An empty body, or a kind varint that is truncated, non-canonical or too large."""


class Truncated(Malformed):
    """The stream ended in the middle of a frame."""


class Oversize(WireError):
    """A length prefix above the receiver's maximum body length."""

    code = "Oversize"


class UnknownKind(WireError):
    """A frame kind this side does not know (26 or more)."""

    code = "UnknownFrameKind"


class UnexpectedFrame(WireError):
    """A known kind this side does not handle in its role."""

    code = "UnexpectedFrame"


class Refused(Exception):
    """The node answered ``Hello`` with ``HelloRefused``, or closed during the handshake."""

    def __init__(self, code: str, reason: str):
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


# Postcard values (section 2) ----------------------------------------------------------------

# (most bytes, largest byte allowed in the last position)
_VARINT_LIMITS = {16: (3, 0x03), 32: (5, 0x0F), 64: (10, 0x01)}


def encode_varint(value: int, bits: int = 64) -> bytes:
    """The canonical (shortest) unsigned LEB128 encoding of ``value`` as a ``u<bits>``."""
    if not 0 <= value < (1 << bits):
        raise ValueError(f"{value} does not fit in u{bits}")
    out = bytearray()
    while True:
        group = value & 0x7F
        value >>= 7
        if value:
            out.append(group | 0x80)
        else:
            out.append(group)
            return bytes(out)


class Reader:
    """Reads postcard values from one frame body; every error is a ``Malformed``."""

    def __init__(self, data: bytes, pos: int = 0):
        self.data = bytes(data)
        self.pos = pos

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def u8(self) -> int:
        if self.pos >= len(self.data):
            raise Malformed("body ends inside a field")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self, bits: int) -> int:
        most, last_max = _VARINT_LIMITS[bits]
        value = 0
        for i in range(most):
            byte = self.u8()
            if i == most - 1 and byte > last_max:
                raise Malformed(f"varint overflows u{bits}")
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                return value
        raise Malformed(f"varint longer than {most} bytes")

    def u16(self) -> int:
        return self.varint(16)

    def u32(self) -> int:
        return self.varint(32)

    def u64(self) -> int:
        return self.varint(64)

    def bool(self) -> bool:
        byte = self.u8()
        if byte > 1:
            raise Malformed(f"bool byte {byte:#04x}")
        return byte == 1

    def raw(self) -> bytes:
        length = self.u64()
        # Checked against what is left before slicing: a length never allocates on its own.
        if length > self.remaining():
            raise Malformed(f"length {length} beyond the body's {self.remaining()} bytes")
        value = self.data[self.pos : self.pos + length]
        self.pos += length
        return value

    def string(self) -> str:
        try:
            return self.raw().decode("utf-8")
        except UnicodeDecodeError as err:
            raise Malformed(f"invalid UTF-8: {err}") from None

    def option(self, read: Callable[["Reader"], object]):
        tag = self.u8()
        if tag == 0:
            return None
        if tag == 1:
            return read(self)
        raise Malformed(f"option tag {tag:#04x}")

    def vec(self, read: Callable[["Reader"], object]) -> list:
        count = self.u64()
        # Every element in this protocol takes at least one byte.
        if count > self.remaining():
            raise Malformed(f"count {count} beyond the body's {self.remaining()} bytes")
        return [read(self) for _ in range(count)]

    def index(self, names) -> int:
        index = self.u32()
        if index >= len(names):
            raise Malformed(f"unknown variant index {index}")
        return index

    def name(self, names) -> str:
        return names[self.index(names)]

    def finish(self) -> None:
        if self.pos != len(self.data):
            raise TrailingBytes(f"{self.remaining()} bytes left after the body")


class Writer:
    """Writes postcard values; values out of their type's range raise ``ValueError``."""

    def __init__(self):
        self.out = bytearray()

    def u8(self, value: int) -> None:
        self.out.append(value)

    def u16(self, value: int) -> None:
        self.out += encode_varint(value, 16)

    def u32(self, value: int) -> None:
        self.out += encode_varint(value, 32)

    def u64(self, value: int) -> None:
        self.out += encode_varint(value, 64)

    def bool(self, value: bool) -> None:
        self.out.append(1 if value else 0)

    def raw(self, value: bytes) -> None:
        self.u64(len(value))
        self.out += value

    def string(self, value: str) -> None:
        self.raw(value.encode("utf-8"))

    def option(self, value, write: Callable[["Writer", object], None]) -> None:
        if value is None:
            self.u8(0)
        else:
            self.u8(1)
            write(self, value)

    def vec(self, values, write: Callable[["Writer", object], None]) -> None:
        self.u64(len(values))
        for value in values:
            write(self, value)

    def name(self, value: str, names) -> None:
        self.u32(names.index(value))


def _str(r: Reader) -> str:
    return r.string()


def _u64(r: Reader) -> int:
    return r.u64()


def _wstr(w: Writer, value: str) -> None:
    w.string(value)


def _wu64(w: Writer, value: int) -> None:
    w.u64(value)


# Enums without payloads, by index (sections 4 and 10) ----------------------------------------

ROLES = ("Worker", "Producer", "Peer")
REFUSAL_CODES = (
    "VersionMismatch",
    "Unauthorized",
    "RoleNotSupported",
    "TooManyConnections",
    "Draining",
    "EmptyNamespaces",
    "EmptyActivityTypes",
    "ZeroCapacity",
    "InvalidField",
    "LimitExceeded",
    "Rejected",
)
ERROR_CODES = (
    "Malformed",
    "Oversize",
    "UnknownFrameKind",
    "UnexpectedFrame",
    "HandshakeTimeout",
    "LivenessTimeout",
    "ZeroCapacity",
    "ShuttingDown",
    "LimitExceeded",
)
NO_WORKER_REASONS = (
    "PoolEmpty",
    "NoActivityMatch",
    "NodeFilterMatchedNobody",
    "AllAtCapacity",
    "AllExcluded",
)
REFUSED_REASONS = (
    "InvalidRequest",
    "WorkerBackpressure",
    "TooManyInFlight",
    "DuplicateCorrelation",
    "NamespaceNotGranted",
)
PEER_LINK_STATES = ("Connecting", "Up")


# Types (section 4) --------------------------------------------------------------------------


@dataclass
class Limits:
    max_frame_len: int
    max_in_flight: int
    ping_interval_ms: int
    max_missed_pings: int
    max_name_len: int
    max_set_len: int

    def encode(self, w: Writer) -> None:
        w.u32(self.max_frame_len)
        w.u32(self.max_in_flight)
        w.u64(self.ping_interval_ms)
        w.u32(self.max_missed_pings)
        w.u32(self.max_name_len)
        w.u32(self.max_set_len)

    @classmethod
    def decode(cls, r: Reader) -> "Limits":
        return cls(r.u32(), r.u32(), r.u64(), r.u32(), r.u32(), r.u32())


@dataclass
class DispatchRequest:
    namespace: str
    activity_type: str
    input: bytes = b""
    task_queue: str = ""
    node: Optional[str] = None
    workflow_id: str = ""
    ordinal: int = 0
    run_id: Optional[str] = None
    attempt: int = 1
    deadline_unix_ms: Optional[int] = None

    def encode(self, w: Writer) -> None:
        w.string(self.namespace)
        w.string(self.task_queue)
        w.string(self.activity_type)
        w.option(self.node, _wstr)
        w.string(self.workflow_id)
        w.u64(self.ordinal)
        w.option(self.run_id, _wstr)
        w.u32(self.attempt)
        w.raw(self.input)
        w.option(self.deadline_unix_ms, _wu64)

    @classmethod
    def decode(cls, r: Reader) -> "DispatchRequest":
        namespace = r.string()
        task_queue = r.string()
        activity_type = r.string()
        node = r.option(_str)
        workflow_id = r.string()
        ordinal = r.u64()
        run_id = r.option(_str)
        attempt = r.u32()
        data = r.raw()
        deadline = r.option(_u64)
        return cls(
            namespace=namespace,
            activity_type=activity_type,
            input=data,
            task_queue=task_queue,
            node=node,
            workflow_id=workflow_id,
            ordinal=ordinal,
            run_id=run_id,
            attempt=attempt,
            deadline_unix_ms=deadline,
        )


@dataclass
class Success:
    """ActivityOutcome variant 0: the activity's result bytes."""

    data: bytes

    def encode(self, w: Writer) -> None:
        w.u32(0)
        w.raw(self.data)


@dataclass
class Failure:
    """ActivityOutcome variant 1: the activity failed; still a completed dispatch."""

    message: str
    retryable: bool = False

    def encode(self, w: Writer) -> None:
        w.u32(1)
        w.string(self.message)
        w.bool(self.retryable)


def decode_activity_outcome(r: Reader):
    index = r.index(("Success", "Failure"))
    if index == 0:
        return Success(r.raw())
    return Failure(r.string(), r.bool())


@dataclass
class DispatchResponse:
    workflow_id: str
    ordinal: int
    run_id: Optional[str]
    outcome: object  # Success or Failure

    def encode(self, w: Writer) -> None:
        w.string(self.workflow_id)
        w.u64(self.ordinal)
        w.option(self.run_id, _wstr)
        self.outcome.encode(w)

    @classmethod
    def decode(cls, r: Reader) -> "DispatchResponse":
        return cls(r.string(), r.u64(), r.option(_str), decode_activity_outcome(r))

    @classmethod
    def to(cls, request: DispatchRequest, outcome) -> "DispatchResponse":
        """The response to ``request``, its identity copied as section 7 requires."""
        return cls(request.workflow_id, request.ordinal, request.run_id, outcome)


@dataclass
class RouteAny:
    """NodeRouting variant 0."""

    def encode(self, w: Writer) -> None:
        w.u32(0)


@dataclass
class Pin:
    """NodeRouting variant 1."""

    node: str

    def encode(self, w: Writer) -> None:
        w.u32(1)
        w.string(self.node)


@dataclass
class Prefer:
    """NodeRouting variant 2."""

    nodes: List[str]

    def encode(self, w: Writer) -> None:
        w.u32(2)
        w.vec(self.nodes, _wstr)


@dataclass
class Require:
    """NodeRouting variant 3."""

    nodes: List[str]

    def encode(self, w: Writer) -> None:
        w.u32(3)
        w.vec(self.nodes, _wstr)


def decode_routing(r: Reader):
    index = r.index(("Any", "Pin", "Prefer", "Require"))
    if index == 0:
        return RouteAny()
    if index == 1:
        return Pin(r.string())
    if index == 2:
        return Prefer(r.vec(_str))
    return Require(r.vec(_str))


@dataclass
class Census:
    reason: str  # one of NO_WORKER_REASONS
    pool_workers: int
    serving_activity: int
    compatible_workers: int
    at_capacity: int
    excluded: int
    last_departure_ms_ago: Optional[int]

    def encode(self, w: Writer) -> None:
        w.name(self.reason, NO_WORKER_REASONS)
        w.u32(self.pool_workers)
        w.u32(self.serving_activity)
        w.u32(self.compatible_workers)
        w.u32(self.at_capacity)
        w.u32(self.excluded)
        w.option(self.last_departure_ms_ago, _wu64)

    @classmethod
    def decode(cls, r: Reader) -> "Census":
        return cls(
            r.name(NO_WORKER_REASONS),
            r.u32(),
            r.u32(),
            r.u32(),
            r.u32(),
            r.u32(),
            r.option(_u64),
        )


# DispatchResult, one class per variant. ``label`` is how the examples print the class.


@dataclass
class Completed:
    response: DispatchResponse
    label = "completed"

    def encode(self, w: Writer) -> None:
        w.u32(0)
        self.response.encode(w)


@dataclass
class NoWorker:
    census: Census
    label = "no-worker"

    def encode(self, w: Writer) -> None:
        w.u32(1)
        self.census.encode(w)


@dataclass
class WorkerLost:
    worker_id: int
    label = "worker-lost"

    def encode(self, w: Writer) -> None:
        w.u32(2)
        w.u64(self.worker_id)


@dataclass
class Timeout:
    worker_id: int
    after_ms: int
    label = "timeout"

    def encode(self, w: Writer) -> None:
        w.u32(3)
        w.u64(self.worker_id)
        w.u64(self.after_ms)


@dataclass
class RefusedDispatch:
    reason: str  # one of REFUSED_REASONS
    detail: str
    label = "refused"

    def encode(self, w: Writer) -> None:
        w.u32(4)
        w.name(self.reason, REFUSED_REASONS)
        w.string(self.detail)


@dataclass
class Cancelled:
    label = "cancelled"

    def encode(self, w: Writer) -> None:
        w.u32(5)


@dataclass
class Draining:
    label = "draining"

    def encode(self, w: Writer) -> None:
        w.u32(6)


@dataclass
class PeerLost:
    """Version 2."""

    peer: str
    after_ms: int
    label = "peer-lost"

    def encode(self, w: Writer) -> None:
        w.u32(7)
        w.string(self.peer)
        w.u64(self.after_ms)


@dataclass
class ShutDown:
    """Version 2."""

    after_ms: int
    label = "shut-down"

    def encode(self, w: Writer) -> None:
        w.u32(8)
        w.u64(self.after_ms)


_RESULT_VARIANTS = (
    "Completed",
    "NoWorker",
    "WorkerLost",
    "Timeout",
    "Refused",
    "Cancelled",
    "Draining",
    "PeerLost",
    "ShutDown",
)


def decode_result(r: Reader, version: int = PROTOCOL_VERSION):
    """A DispatchResult; variants 7 and 8 exist only on version 2 (section 6)."""
    index = r.index(_RESULT_VARIANTS)
    if index >= 7 and version < 2:
        raise Malformed(f"DispatchResult variant {index} on a version-1 connection")
    if index == 0:
        return Completed(DispatchResponse.decode(r))
    if index == 1:
        return NoWorker(Census.decode(r))
    if index == 2:
        return WorkerLost(r.u64())
    if index == 3:
        return Timeout(r.u64(), r.u64())
    if index == 4:
        reason = r.index(REFUSED_REASONS)
        if reason == 4 and version < 2:
            raise Malformed("RefusedReason NamespaceNotGranted on a version-1 connection")
        return RefusedDispatch(REFUSED_REASONS[reason], r.string())
    if index == 5:
        return Cancelled()
    if index == 6:
        return Draining()
    if index == 7:
        return PeerLost(r.string(), r.u64())
    return ShutDown(r.u64())


# Status types (section 4, "Status types"; version-2 "PeerStatus").


@dataclass
class WorkerStatus:
    worker_id: int
    pid: int
    identity: str
    node: Optional[str]
    activity_types: List[str]
    max_concurrency: int
    in_flight: int
    draining: bool

    @classmethod
    def decode(cls, r: Reader) -> "WorkerStatus":
        return cls(
            r.u64(),
            r.u64(),
            r.string(),
            r.option(_str),
            r.vec(_str),
            r.u32(),
            r.u32(),
            r.bool(),
        )


@dataclass
class PoolStatus:
    namespace: str
    task_queue: str
    channel: str
    workers: List[WorkerStatus]

    @classmethod
    def decode(cls, r: Reader) -> "PoolStatus":
        return cls(r.string(), r.string(), r.string(), r.vec(WorkerStatus.decode))


@dataclass
class WaitingStatus:
    namespace: str
    task_queue: str
    activity_type: str
    waiting: int
    census: Census

    @classmethod
    def decode(cls, r: Reader) -> "WaitingStatus":
        return cls(r.string(), r.string(), r.string(), r.u32(), Census.decode(r))


COUNTER_NAMES = (
    "submitted",
    "pushed",
    "completed",
    "no_worker",
    "worker_lost",
    "timed_out",
    "refused",
    "cancelled",
    "draining",
    "late_replies",
    "dropped_replies",
    "reclaimed_slots",
)


@dataclass
class NodeStatus:
    node_id: str
    uptime_ms: int
    connections: int
    draining: bool
    pools: List[PoolStatus]
    waiting: List[WaitingStatus]
    counters: dict  # COUNTER_NAMES -> int, in wire order

    @classmethod
    def decode(cls, r: Reader) -> "NodeStatus":
        node_id = r.string()
        uptime_ms = r.u64()
        connections = r.u32()
        draining = r.bool()
        pools = r.vec(PoolStatus.decode)
        waiting = r.vec(WaitingStatus.decode)
        counters = {name: r.u64() for name in COUNTER_NAMES}
        return cls(node_id, uptime_ms, connections, draining, pools, waiting, counters)


@dataclass
class PeerStatus:
    node_id: str
    address: str
    state: str  # one of PEER_LINK_STATES
    synced: bool
    relays_sent: int
    relays_received: int
    relays_in_flight: int
    pools: List[str]

    @classmethod
    def decode(cls, r: Reader) -> "PeerStatus":
        return cls(
            r.string(),
            r.string(),
            r.name(PEER_LINK_STATES),
            r.bool(),
            r.u64(),
            r.u64(),
            r.u32(),
            r.vec(_str),
        )


# Frames (section 3) -------------------------------------------------------------------------
#
# Each frame class has KIND, ``encode_fields(w)`` and ``decode_fields(r, version)``. Frames a
# client only sends still decode, and frames it only receives still encode, so every frame
# round-trips (the tests rely on it).


@dataclass
class Hello:
    KIND = 0
    role: str  # one of ROLES
    name: str
    auth_token: Optional[str] = None
    min_version: int = MIN_PROTOCOL_VERSION
    max_version: int = PROTOCOL_VERSION

    def encode_fields(self, w: Writer) -> None:
        w.u16(self.min_version)
        w.u16(self.max_version)
        w.name(self.role, ROLES)
        w.string(self.name)
        w.option(self.auth_token, _wstr)

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "Hello":
        min_version, max_version = r.u16(), r.u16()
        role, name = r.name(ROLES), r.string()
        return cls(role, name, r.option(_str), min_version, max_version)


@dataclass
class Welcome:
    KIND = 1
    version: int
    node_id: str
    pid: int
    limits: Limits

    def encode_fields(self, w: Writer) -> None:
        w.u16(self.version)
        w.string(self.node_id)
        w.u64(self.pid)
        self.limits.encode(w)

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "Welcome":
        return cls(r.u16(), r.string(), r.u64(), Limits.decode(r))


@dataclass
class HelloRefused:
    KIND = 2
    code: str  # one of REFUSAL_CODES
    reason: str

    def encode_fields(self, w: Writer) -> None:
        w.name(self.code, REFUSAL_CODES)
        w.string(self.reason)

    @classmethod
    def decode_fields(cls, r: Reader, version: int):
        return cls(r.name(REFUSAL_CODES), r.string())


@dataclass
class Register:
    KIND = 3
    namespaces: List[str]
    activity_types: List[str]
    max_concurrency: int
    identity: str = ""
    task_queue: str = ""
    node: Optional[str] = None

    def encode_fields(self, w: Writer) -> None:
        w.vec(self.namespaces, _wstr)
        w.string(self.task_queue)
        w.option(self.node, _wstr)
        w.vec(self.activity_types, _wstr)
        w.string(self.identity)
        w.u32(self.max_concurrency)

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "Register":
        namespaces, task_queue, node = r.vec(_str), r.string(), r.option(_str)
        activity_types, identity, capacity = r.vec(_str), r.string(), r.u32()
        return cls(namespaces, activity_types, capacity, identity, task_queue, node)


@dataclass
class Registered:
    KIND = 4
    worker_id: int

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.worker_id)

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "Registered":
        return cls(r.u64())


@dataclass
class RegisterRefused:
    KIND = 5
    code: str  # one of REFUSAL_CODES
    reason: str

    def encode_fields(self, w: Writer) -> None:
        w.name(self.code, REFUSAL_CODES)
        w.string(self.reason)

    @classmethod
    def decode_fields(cls, r: Reader, version: int):
        return cls(r.name(REFUSAL_CODES), r.string())


@dataclass
class CapacityUpdate:
    KIND = 6
    max_concurrency: int

    def encode_fields(self, w: Writer) -> None:
        w.u32(self.max_concurrency)

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "CapacityUpdate":
        return cls(r.u32())


@dataclass
class Push:
    KIND = 7
    correlation: int
    request: DispatchRequest

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.correlation)
        self.request.encode(w)

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "Push":
        return cls(r.u64(), DispatchRequest.decode(r))


@dataclass
class Reply:
    KIND = 8
    correlation: int
    response: DispatchResponse

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.correlation)
        self.response.encode(w)

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "Reply":
        return cls(r.u64(), DispatchResponse.decode(r))


@dataclass
class Submit:
    KIND = 9
    correlation: int
    request: DispatchRequest
    wait_for_worker_ms: Optional[int] = None
    reply_timeout_ms: Optional[int] = None
    routing: object = field(default_factory=RouteAny)

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.correlation)
        self.request.encode(w)
        w.option(self.wait_for_worker_ms, _wu64)
        w.option(self.reply_timeout_ms, _wu64)
        self.routing.encode(w)

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "Submit":
        correlation, request = r.u64(), DispatchRequest.decode(r)
        wait, timeout = r.option(_u64), r.option(_u64)
        return cls(correlation, request, wait, timeout, decode_routing(r))


@dataclass
class Outcome:
    """Version 1's outcome; ``served_by`` is not on the wire and stays None."""

    KIND = 10
    correlation: int
    result: object  # one of the DispatchResult classes
    served_by = None

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.correlation)
        self.result.encode(w)

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "Outcome":
        return cls(r.u64(), decode_result(r, version))


@dataclass
class Cancel:
    KIND = 11
    correlation: int

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.correlation)

    @classmethod
    def decode_fields(cls, r: Reader, version: int):
        return cls(r.u64())


@dataclass
class Ping:
    KIND = 12
    nonce: int

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.nonce)

    @classmethod
    def decode_fields(cls, r: Reader, version: int):
        return cls(r.u64())


@dataclass
class Pong:
    KIND = 13
    nonce: int

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.nonce)

    @classmethod
    def decode_fields(cls, r: Reader, version: int):
        return cls(r.u64())


@dataclass
class Drain:
    KIND = 14
    grace_ms: int

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.grace_ms)

    @classmethod
    def decode_fields(cls, r: Reader, version: int):
        return cls(r.u64())


@dataclass
class Drained:
    KIND = 15
    completed: int

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.completed)

    @classmethod
    def decode_fields(cls, r: Reader, version: int):
        return cls(r.u64())


@dataclass
class Goodbye:
    KIND = 16
    reason: str

    def encode_fields(self, w: Writer) -> None:
        w.string(self.reason)

    @classmethod
    def decode_fields(cls, r: Reader, version: int):
        return cls(r.string())


@dataclass
class Error:
    KIND = 17
    code: str  # one of ERROR_CODES
    reason: str

    def encode_fields(self, w: Writer) -> None:
        w.name(self.code, ERROR_CODES)
        w.string(self.reason)

    @classmethod
    def decode_fields(cls, r: Reader, version: int):
        return cls(r.name(ERROR_CODES), r.string())


@dataclass
class StatusQuery:
    KIND = 18
    correlation: int

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.correlation)

    @classmethod
    def decode_fields(cls, r: Reader, version: int):
        return cls(r.u64())


@dataclass
class Status:
    """Version 1's answer to StatusQuery. Decode only."""

    KIND = 19
    correlation: int
    status: NodeStatus

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "Status":
        return cls(r.u64(), NodeStatus.decode(r))


@dataclass
class ServedOutcome:
    """Version 2's outcome: which node ran the dispatch or decided how it ended."""

    KIND = 24
    correlation: int
    served_by: str
    result: object  # one of the DispatchResult classes

    def encode_fields(self, w: Writer) -> None:
        w.u64(self.correlation)
        w.string(self.served_by)
        self.result.encode(w)

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "ServedOutcome":
        return cls(r.u64(), r.string(), decode_result(r, version))


@dataclass
class ClusterStatus:
    """Version 2's answer to StatusQuery. Decode only."""

    KIND = 25
    correlation: int
    status: NodeStatus
    peers: List[PeerStatus]
    peer_lost: int

    @classmethod
    def decode_fields(cls, r: Reader, version: int) -> "ClusterStatus":
        return cls(r.u64(), NodeStatus.decode(r), r.vec(PeerStatus.decode), r.u64())


FRAMES = {
    cls.KIND: cls
    for cls in (
        Hello,
        Welcome,
        HelloRefused,
        Register,
        Registered,
        RegisterRefused,
        CapacityUpdate,
        Push,
        Reply,
        Submit,
        Outcome,
        Cancel,
        Ping,
        Pong,
        Drain,
        Drained,
        Goodbye,
        Error,
        StatusQuery,
        Status,
        ServedOutcome,
        ClusterStatus,
    )
}
KIND_NAMES = (
    "Hello Welcome HelloRefused Register Registered RegisterRefused CapacityUpdate Push Reply "
    "Submit Outcome Cancel Ping Pong Drain Drained Goodbye Error StatusQuery Status PeerHello "
    "Presence Relay RelayOutcome ServedOutcome ClusterStatus"
).split()
VERSION_2_KINDS = range(20, 26)


# Framing (section 1) ------------------------------------------------------------------------


def encode_body(frame) -> bytes:
    w = Writer()
    w.u32(frame.KIND)
    frame.encode_fields(w)
    return bytes(w.out)


def encode_frame(frame, max_len: int = DEFAULT_MAX_FRAME_LEN) -> bytes:
    """The length prefix and body of ``frame``; ``Oversize`` if the body exceeds ``max_len``."""
    body = encode_body(frame)
    if len(body) > max_len:
        raise Oversize(f"{KIND_NAMES[frame.KIND]} body of {len(body)} bytes over {max_len}")
    return struct.pack(">I", len(body)) + body


def decode_body(body: bytes, version: int = PROTOCOL_VERSION):
    """One frame from its body (the bytes after the length prefix).

    Raises ``MissingKind`` for an empty, truncated, non-canonical or too large kind;
    ``UnknownKind`` for a kind this version does not know; ``UnexpectedFrame`` for a
    peer-link kind; ``Malformed`` / ``TrailingBytes`` for a body that does not decode.
    """
    r = Reader(body)
    try:
        kind = r.u32()
    except Malformed:
        raise MissingKind("missing or invalid frame kind") from None
    if r.pos != len(encode_varint(kind, 32)):
        raise MissingKind(f"non-canonical varint for kind {kind}")
    if kind >= len(KIND_NAMES):
        raise UnknownKind(f"frame kind {kind}")
    if kind in VERSION_2_KINDS and version < 2:
        raise UnexpectedFrame(f"{KIND_NAMES[kind]} on a version-1 connection")
    cls = FRAMES.get(kind)
    if cls is None:
        raise UnexpectedFrame(f"{KIND_NAMES[kind]} is a peer-link frame")
    frame = cls.decode_fields(r, version)
    r.finish()
    return frame


class FrameDecoder:
    """Splits a byte stream into frames. No I/O: feed it bytes, take frames out."""

    def __init__(self, max_len: int = DEFAULT_MAX_FRAME_LEN, version: int = PROTOCOL_VERSION):
        self.max_len = max_len
        self.version = version
        self.buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def next_frame(self):
        """The next whole frame, or None until more bytes arrive."""
        if len(self.buffer) < 4:
            return None
        (length,) = struct.unpack_from(">I", self.buffer)
        # Judged before the body is read: an oversize length reserves nothing.
        if length > self.max_len:
            raise Oversize(f"length {length} over the maximum {self.max_len}")
        if length == 0:
            raise MissingKind("empty body")
        if len(self.buffer) < 4 + length:
            return None
        body = bytes(self.buffer[4 : 4 + length])
        del self.buffer[: 4 + length]
        return decode_body(body, self.version)

    def at_frame_boundary(self) -> bool:
        return not self.buffer


# A blocking connection ----------------------------------------------------------------------


class Connection:
    """Frames over a blocking TCP socket, or a ``TlsSocket``. ``send`` may be called from any
    thread; ``recv`` from one thread at a time."""

    def __init__(self, sock):
        self.sock = sock
        self.decoder = FrameDecoder()
        self.max_send_len = DEFAULT_MAX_FRAME_LEN
        self.version = PROTOCOL_VERSION
        self.welcome: Optional[Welcome] = None
        self._send_lock = threading.Lock()

    def send(self, frame) -> None:
        data = encode_frame(frame, self.max_send_len)
        with self._send_lock:
            self.sock.sendall(data)

    def recv(self):
        """The next frame; None on a clean close at a frame boundary; ``Truncated`` if the
        stream ends mid-frame."""
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                return frame
            data = self.sock.recv(65536)
            if not data:
                if self.decoder.at_frame_boundary():
                    return None
                raise Truncated("the stream ended in the middle of a frame")
            self.decoder.feed(data)

    def report(self, err: WireError) -> None:
        """Tells the node what was wrong with its frame, as section 1 asks, then closes."""
        try:
            self.send(Error(err.code, str(err)[:200]))
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class TlsSocket:
    """TLS over a blocking TCP socket, with the ``sendall``/``recv`` a ``Connection`` uses.

    One thread may block in ``recv`` while others ``sendall``, which an ``ssl.SSLSocket`` does
    not allow: the TLS state lives in an ``ssl.SSLObject`` over memory buffers, touched only
    under ``_tls_lock``, and every TLS record goes out under ``_send_lock`` (always taken
    first), so records leave in the order they were made."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_name: str):
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_name)
        self._send_lock = threading.Lock()
        self._tls_lock = threading.Lock()
        self._handshake()

    def _flush(self) -> None:
        """Sends what the TLS state made; the caller holds ``_send_lock``."""
        data = self._outgoing.read()
        if data:
            self.sock.sendall(data)

    def _feed(self) -> bool:
        """Reads TLS bytes from the socket into the TLS state; False at the end of the stream."""
        data = self.sock.recv(65536)
        if not data:
            return False
        with self._tls_lock:
            self._incoming.write(data)
        return True

    def _handshake(self) -> None:
        while True:
            with self._send_lock:
                with self._tls_lock:
                    try:
                        self._tls.do_handshake()
                        done = True
                    except ssl.SSLWantReadError:
                        done = False
                self._flush()
            if done:
                return
            if not self._feed():
                raise ConnectionError("the node closed the connection during the TLS handshake")

    def sendall(self, data: bytes) -> None:
        with self._send_lock:
            with self._tls_lock:
                view = memoryview(data)
                while view:
                    view = view[self._tls.write(view):]
            self._flush()

    def recv(self, size: int) -> bytes:
        """Up to ``size`` bytes; ``b""`` at the end of the stream."""
        while True:
            with self._send_lock:
                with self._tls_lock:
                    try:
                        data = self._tls.read(size)
                    except ssl.SSLWantReadError:
                        data = None
                    except ssl.SSLZeroReturnError:
                        data = b""
                self._flush()
            if data is not None:
                return data
            if not self._feed():
                return b""

    def settimeout(self, timeout) -> None:
        self.sock.settimeout(timeout)

    def shutdown(self, how) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()


def tls_context(
    ca_file: str, cert_file: Optional[str] = None, key_file: Optional[str] = None
) -> ssl.SSLContext:
    """Trusts only the CA certificates in ``ca_file`` and checks the node's name; presents
    ``cert_file`` (with ``key_file``) to a node that asks for a client certificate. Build one
    per connection to take up files that were rotated since."""
    context = ssl.create_default_context(cafile=ca_file)
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    return context


def add_tls_arguments(parser) -> None:
    """The ``--tls-*`` flags of ``lintel``'s client commands, on an ``argparse`` parser, with
    the same ``LINTEL_CLIENT_TLS_*`` variables as defaults."""
    for flag, metavar, meaning in (
        ("--tls-ca", "FILE", "PEM CA certificates to trust; with it the connection speaks TLS"),
        ("--tls-server-name", "NAME", "the name the node's certificate must carry (default: "
         "the host of --addr)"),
        ("--tls-cert", "FILE", "PEM client certificate chain, for a node that requires one"),
        ("--tls-key", "FILE", "the PEM private key of --tls-cert"),
    ):
        variable = "LINTEL_CLIENT_" + flag[2:].upper().replace("-", "_")
        parser.add_argument(
            flag, default=os.environ.get(variable), metavar=metavar, help=f"{meaning} ({variable})"
        )


def tls_from_arguments(args) -> Optional[ssl.SSLContext]:
    """The TLS context ``add_tls_arguments``'s flags ask for; ``None`` without ``--tls-ca``."""
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    if args.tls_ca is None:
        if args.tls_cert is not None or args.tls_server_name is not None:
            raise ValueError("--tls-cert and --tls-server-name need --tls-ca")
        return None
    return tls_context(args.tls_ca, args.tls_cert, args.tls_key)


def parse_addr(addr: str):
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address {addr!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def connect(
    addr: str,
    role: str,
    name: str,
    auth_token: Optional[str] = None,
    min_version: int = MIN_PROTOCOL_VERSION,
    max_version: int = PROTOCOL_VERSION,
    timeout: float = 5.0,
    tls: Optional[ssl.SSLContext] = None,
    server_name: Optional[str] = None,
) -> Connection:
    """Dials ``addr`` (HOST:PORT), over TLS when ``tls`` is given (checking the node's
    certificate against ``server_name``, else the host of ``addr``), says Hello and reads
    Welcome (section 5).

    Returns a connection whose ``welcome``, ``version`` and limits are set. Raises
    ``Refused`` on HelloRefused or a Goodbye during the handshake, ``WireError`` on a bad
    answer, ``OSError`` when the node cannot be reached or does not answer in ``timeout``
    (``ssl.SSLError``, one of them, when the TLS handshake fails).
    """
    host, port = parse_addr(addr)
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls is not None:
        try:
            sock = TlsSocket(sock, tls, server_name or host)
        except BaseException:
            sock.close()
            raise
    conn = Connection(sock)
    try:
        conn.send(Hello(role, name, auth_token, min_version, max_version))
        # Before Welcome the limit is unknown; the handshake frames are a few dozen bytes.
        frame = conn.recv()
        if isinstance(frame, HelloRefused):
            raise Refused(frame.code, frame.reason)
        if isinstance(frame, Goodbye):
            raise Refused("Goodbye", frame.reason)
        if isinstance(frame, Error):
            raise Refused(frame.code, frame.reason)
        if frame is None:
            raise Refused("Closed", "the node closed the connection during the handshake")
        if not isinstance(frame, Welcome):
            raise UnexpectedFrame(f"{type(frame).__name__} instead of Welcome")
        if not min_version <= frame.version <= max_version:
            raise UnexpectedFrame(f"Welcome names version {frame.version}")
    except WireError as err:
        conn.close()
        # A TLS alert record (content type 21, version 3.x) answering a plaintext Hello.
        if tls is None and conn.decoder.buffer[:2] == b"\x15\x03":
            raise Refused("Tls", "the node speaks TLS: pass --tls-ca") from err
        raise
    except BaseException:
        conn.close()
        raise
    sock.settimeout(None)
    conn.welcome = frame
    conn.version = frame.version
    conn.decoder.version = frame.version
    # The node never sends more than its own maximum and accepts no more than it.
    conn.decoder.max_len = frame.limits.max_frame_len
    conn.max_send_len = frame.limits.max_frame_len
    return conn
