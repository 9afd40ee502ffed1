"""Every exception the SDK raises, one hierarchy under :class:`LintelError`.

- :class:`WireError`: bytes from the node that break the protocol (section 1 of PROTOCOL.md);
  ``code`` is the ``ErrorCode`` name a receiver answers with.
- :class:`EncodeError`: a value this side cannot write (out of range, too long, needs a later
  protocol version); nothing was sent.
- :class:`ConnectError`: the connection or the handshake failed.
- :class:`ClientError`: a producer call has no answer from the node.
- :class:`WorkerError`: the worker cannot go on as configured.
"""

from __future__ import annotations

from typing import Sequence


class LintelError(Exception):
    """Base class of every error this package raises."""


# Wire ----------------------------------------------------------------------------------------


class WireError(LintelError):
    """Bytes that break the protocol. ``code`` is the ``ErrorCode`` to answer with."""

    code = "Malformed"


class Malformed(WireError):
    """A body that does not decode: bad field, bad tag, overflowing varint, cut short."""


class TrailingBytes(Malformed):
    """A body that decodes with bytes left over."""


class MissingKind(Malformed):
    """An empty body, or a kind varint that is truncated, non-canonical or above ``u32::MAX``."""


class Truncated(Malformed):
    """The stream ended in the middle of a frame."""


class UnknownVariant(Malformed):
    """An enum index this side does not know (from a newer node): the body is malformed.

    ``enum`` names the enum (``DispatchResult``, ``RefusalCode``...), ``index`` the variant.
    """

    def __init__(self, enum: str, index: int):
        super().__init__(f"unknown {enum} variant {index}")
        self.enum = enum
        self.index = index


class Oversize(WireError):
    """A length prefix above the receiver's maximum body length; nothing was read or allocated."""

    code = "Oversize"

    def __init__(self, length: int, max_len: int):
        super().__init__(f"frame body of {length} bytes exceeds the maximum of {max_len}")
        self.length = length
        self.max_len = max_len


class UnknownKind(WireError):
    """A frame kind this side does not know (47 or more)."""

    code = "UnknownFrameKind"

    def __init__(self, kind: int):
        super().__init__(f"unknown frame kind {kind}")
        self.kind = kind


class UnexpectedFrame(WireError):
    """A known kind the connection's role, state or negotiated version does not allow."""

    code = "UnexpectedFrame"


class KindTooNew(UnexpectedFrame):
    """A known kind that the connection's negotiated version does not know."""

    def __init__(self, kind: int, version: int):
        super().__init__(f"frame kind {kind} is not part of protocol version {version}")
        self.kind = kind
        self.version = version


# Encoding ------------------------------------------------------------------------------------


class EncodeError(LintelError):
    """A value that cannot be written as the protocol says; nothing was sent."""


class FrameTooLarge(EncodeError):
    """A frame body longer than the largest both sides accept."""

    def __init__(self, length: int, max_len: int):
        super().__init__(f"frame body of {length} bytes exceeds the maximum of {max_len}")
        self.length = length
        self.max_len = max_len


class ProgressTooLarge(EncodeError, ValueError):
    """Heartbeat details longer than the 4096 bytes a ``Progress`` carries; nothing was sent."""


class NeedsVersion(EncodeError):
    """What is being written needs a later protocol version (or a feature) than the reader's."""

    def __init__(self, what: str, version: int):
        super().__init__(f"{what} cannot be carried on a protocol version {version} connection")
        self.what = what
        self.version = version


# Connections ---------------------------------------------------------------------------------


class ConnectError(LintelError):
    """The connection or the handshake failed."""


class HandshakeRefused(ConnectError):
    """The node answered ``Hello`` with ``HelloRefused``. ``code`` is the ``RefusalCode`` name."""

    def __init__(self, code: str, reason: str):
        super().__init__(f"hello refused ({code}): {reason}")
        self.code = code
        self.reason = reason


class AllNodesFailed(ConnectError):
    """No node of several answered; ``attempts`` lists each address and its error."""

    def __init__(self, attempts: Sequence[tuple[str, BaseException]]):
        detail = "; ".join(f"{address}: {error}" for address, error in attempts)
        super().__init__(f"no node could be reached: {detail}")
        self.attempts = list(attempts)


class NodeError(LintelError):
    """The node sent ``Error{code, reason}`` (a protocol violation) and closed."""

    def __init__(self, code: str, reason: str):
        super().__init__(f"node error ({code}): {reason}")
        self.code = code
        self.reason = reason


# Producer ------------------------------------------------------------------------------------


class ClientError(LintelError):
    """A producer call has no answer from the node."""


class ConnectionLost(ClientError):
    """The connection was lost before the answer. ``may_have_run`` is true when the submission
    was handed to the socket: the node may have run it."""

    def __init__(self, reason: str, may_have_run: bool):
        super().__init__(f"connection lost ({reason}); may have run: {may_have_run}")
        self.reason = reason
        self.may_have_run = may_have_run


class ClientClosed(ClientError):
    """The client was closed; nothing was sent."""


class InvalidDispatch(ClientError):
    """The dispatch breaks a limit the node stated at the handshake; nothing was sent."""


class AnswerTimeout(ClientError, TimeoutError):
    """A status query, or the status query behind a subscription, got no answer within its
    timeout (a subscription that timed out is cancelled)."""


class Unreachable(ClientError):
    """The connection was gone and no node could be reached again; nothing was sent."""


class SubscriptionRefused(ClientError):
    """The node ended a subscription (``SubscriptionEnded``) other than by our cancel."""

    def __init__(self, code: str, reason: str):
        super().__init__(f"subscription ended ({code}): {reason}")
        self.code = code
        self.reason = reason


class UnknownOutcome(ClientError):
    """The node answered a dispatch with an outcome variant this SDK does not know (a newer
    node): the dispatch ended, how is unknown; it may have run. The connection stays up."""

    def __init__(self, index: int):
        super().__init__(f"the node sent an unknown DispatchResult variant {index}")
        self.index = index
        self.may_have_run = True


# Worker --------------------------------------------------------------------------------------


class WorkerError(LintelError):
    """The worker cannot go on as configured."""


class RegistrationRefused(WorkerError):
    """The node refused the registration for good (``RegisterRefused`` or ``HelloRefused``)."""

    def __init__(self, code: str, reason: str):
        super().__init__(f"registration refused ({code}): {reason}")
        self.code = code
        self.reason = reason


class WorkerStopped(WorkerError):
    """The worker has stopped."""


class RegistrationTimeout(WorkerError, TimeoutError):
    """The worker was not registered within the time waited; it goes on trying."""
