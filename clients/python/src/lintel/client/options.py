"""What a producer dispatches and how: :class:`Dispatch` (the request), :class:`DispatchOptions`
(routing, waits, extras, progress, retries) and :class:`RetryPolicy`, as the Rust SDK's
``options.rs`` defines them."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from ..errors import InvalidDispatch
from ..trace import TraceContext
from ..wire import types as t

#: Reply timeout when a caller states none, in seconds.
DEFAULT_REPLY_TIMEOUT = 30.0
#: Attempts in all past which a failure that reached no node is not tried again.
MAX_UNSENT_ATTEMPTS = 64
#: The most a wait or timeout may be, in milliseconds (7 days).
MAX_WAIT_MS = 604_800_000


@dataclass
class Dispatch:
    """One request: its pool address, activity, input and identity (echoed in the reply)."""

    namespace: str
    activity_type: str
    input: bytes | str = b""
    task_queue: str = ""
    workflow_id: str = ""
    ordinal: int = 0
    run_id: str | None = None
    attempt: int = 1
    deadline_unix_ms: int | None = None
    node: str | None = None

    def request(self) -> t.DispatchRequest:
        data = self.input.encode() if isinstance(self.input, str) else bytes(self.input)
        return t.DispatchRequest(
            self.namespace, self.task_queue, self.activity_type, self.node, self.workflow_id,
            self.ordinal, self.run_id, self.attempt, data, self.deadline_unix_ms,
        )  # fmt: skip


class RetryReason(enum.Enum):
    """Why an attempt was tried again."""

    DRAINING = "draining"
    REFUSED = "refused"
    NO_WORKER = "no-worker"
    NOT_SENT = "not-sent"
    UNREACHABLE = "unreachable"
    MAY_HAVE_RUN = "may-have-run"

    def proves_unsent(self) -> bool:
        return self in (RetryReason.NOT_SENT, RetryReason.UNREACHABLE)


_RETRIED_REFUSALS = {
    t.RefusedReason.WorkerBackpressure,
    t.RefusedReason.TooManyInFlight,
    t.RefusedReason.FairnessCapReached,
    t.RefusedReason.Unsupported,
}


@dataclass
class RetryPolicy:
    """What is tried again, and how often, within the time budget.

    By default only what proves nothing ran, up to 3 attempts in all: ``Draining``; a refusal
    before any push another node may not repeat (``WorkerBackpressure``, ``TooManyInFlight``,
    ``FairnessCapReached``, ``Unsupported``); a connection lost before the submission was
    written and no node reachable (these count against :data:`MAX_UNSENT_ATTEMPTS` instead,
    unless ``max_attempts`` is 1). ``NoWorker`` only with ``no_worker``; what may have run
    (``WorkerLost``, ``Timeout``, ``HeartbeatTimeout``, ``PeerLost``, ``ShutDown``, a
    connection lost after the write) only with ``idempotent``. ``budget`` (seconds): no
    attempt starts later than this after the call (default: the reply timeout, else 30 s).
    """

    max_attempts: int = 3
    no_worker: bool = False
    idempotent: bool = False
    budget: float | None = None

    @classmethod
    def never(cls) -> "RetryPolicy":
        return cls(max_attempts=1)

    def max_unsent_attempts(self) -> int:
        return 1 if self.max_attempts <= 1 else max(MAX_UNSENT_ATTEMPTS, self.max_attempts)

    def retries(self, result: Any) -> RetryReason | None:
        """Why ``result`` is worth another attempt under this policy; ``None`` when it stands."""
        if isinstance(result, t.Draining):
            return RetryReason.DRAINING
        if isinstance(result, t.Refused):
            return RetryReason.REFUSED if result.refused.reason in _RETRIED_REFUSALS else None
        if isinstance(result, (t.NoWorker, t.NoWorker3)):
            return RetryReason.NO_WORKER if self.no_worker else None
        if isinstance(result, (t.WorkerLost, t.Timeout, t.HeartbeatTimeout, t.PeerLost, t.ShutDown)):
            return RetryReason.MAY_HAVE_RUN if self.idempotent else None
        return None


Progress = Union[Callable[[bytes], Any], "asyncio.Queue[bytes]"]


@dataclass
class DispatchOptions:
    """Options of one dispatch.

    Routing: at most one of ``pin`` (only workers on that node), ``prefer`` (those nodes in
    turn, then any) and ``require`` (only those nodes); any node by default.
    ``wait_for_worker_ms``: how long to wait for an eligible worker (``None``: fail at once
    with no-worker). ``reply_timeout_ms``: how long to wait for the reply (``None``: the
    node's default). ``headers`` (name, value) in order, ``trace_context``, ``priority`` 1-5,
    ``fairness_key``, ``fairness_weight`` (thousandths), ``deployment``: version 3.
    ``heartbeat_timeout_ms``: the worker must heartbeat at least this often (version 4).
    ``progress``: a callable or an ``asyncio.Queue`` given each progress detail (version 4;
    a full queue drops it). ``extensions``: raw protocol extensions.
    """

    pin: str | None = None
    prefer: list[str] | None = None
    require: list[str] | None = None
    wait_for_worker_ms: int | None = None
    reply_timeout_ms: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    trace_context: TraceContext | None = None
    priority: int | None = None
    fairness_key: str | None = None
    fairness_weight: int | None = None
    deployment: str | None = None
    heartbeat_timeout_ms: int | None = None
    progress: Progress | None = None
    extensions: list[t.Extension] = field(default_factory=list)
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def routing(self) -> Any:
        chosen = [x for x in (self.pin, self.prefer, self.require) if x is not None]
        if len(chosen) > 1:
            raise InvalidDispatch("at most one of pin, prefer and require")
        if self.pin is not None:
            return t.Pin(self.pin)
        if self.prefer is not None:
            return t.Prefer(list(self.prefer))
        if self.require is not None:
            return t.Require(list(self.require))
        return t.AnyNode()

    def extras(self) -> t.RequestExtras:
        headers = [t.Header(name.lower(), value) for name, value in self.headers]
        if self.trace_context is not None:
            headers += [t.Header(n, v) for n, v in self.trace_context.headers()]
        extras = t.RequestExtras(
            headers, self.priority, self.fairness_key, self.fairness_weight, self.deployment,
            list(self.extensions),
        )  # fmt: skip
        if self.heartbeat_timeout_ms is not None:
            extras.set_heartbeat_timeout_ms(self.heartbeat_timeout_ms)
        if self.progress is not None:
            extras.set_progress(True)
        return extras

    def budget(self) -> float:
        if self.retry.budget is not None:
            return self.retry.budget
        if self.reply_timeout_ms is not None:
            return self.reply_timeout_ms / 1000
        return DEFAULT_REPLY_TIMEOUT
