"""What a handler is given: one pushed request, its headers and trace context, its cancel
event and its heartbeat."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import LintelError, ProgressTooLarge
from ..trace import TRACEPARENT, TRACESTATE, TraceContext
from ..wire.types import DispatchRequest, Failure, Header, RequestExtras, Success


class ActivityError(LintelError):
    """Raised by a handler: the activity failed, answered as ``Failure(message, retryable)``."""

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class Request:
    """One pushed request, as a handler sees it.

    ``cancelled`` is set when the node cancels the push (the producer cancelled, its reply
    timeout passed, the worker drains past its grace); the handler's task is then cancelled
    too, so ``asyncio.CancelledError`` is raised at its next ``await``. It is also set when
    the request's deadline passes, the task left running: the handler decides what to do
    then, as with the Rust and TypeScript SDKs. A handler that does blocking work in a thread
    polls ``cancelled.is_set()`` (thread-safe to read).
    """

    def __init__(
        self,
        request: DispatchRequest,
        extras: RequestExtras,
        heartbeat: Callable[[bytes], None],
    ):
        self.request = request
        self.extras = extras
        self.cancelled = asyncio.Event()
        self._heartbeat = heartbeat
        # Set when the worker aborts the handler, which then answers nothing.
        self._aborted = False

    # The request's fields ----------------------------------------------------------------------

    @property
    def input(self) -> bytes:
        return self.request.input

    @property
    def namespace(self) -> str:
        return self.request.namespace

    @property
    def task_queue(self) -> str:
        return self.request.task_queue

    @property
    def activity_type(self) -> str:
        return self.request.activity_type

    @property
    def workflow_id(self) -> str:
        return self.request.workflow_id

    @property
    def ordinal(self) -> int:
        return self.request.ordinal

    @property
    def attempt(self) -> int:
        return self.request.attempt

    @property
    def deadline_unix_ms(self) -> int | None:
        return self.request.deadline_unix_ms

    @property
    def headers(self) -> list[Header]:
        """The request's headers in order (a name may repeat)."""
        return self.extras.headers

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lowercase), if any."""
        for h in self.extras.headers:
            if h.name == name:
                return h.value
        return None

    @property
    def trace_context(self) -> TraceContext | None:
        """The W3C trace context the producer attached, when its ``traceparent`` is valid."""
        parents = [h.value for h in self.extras.headers if h.name == TRACEPARENT]
        if len(parents) != 1:
            return None
        return TraceContext.parse(parents[0], self.header(TRACESTATE))

    @property
    def deployment(self) -> str | None:
        """The deployment the request requires, if any."""
        return self.extras.deployment

    @property
    def heartbeat_timeout_ms(self) -> int | None:
        """How often the handler must call :meth:`heartbeat`, when the producer asked."""
        return self.extras.heartbeat_timeout_ms()

    def heartbeat(self, details: bytes | str = b"") -> None:
        """Tells the node the request still runs (``Progress``), with ``details`` (at most
        4096 bytes) for a producer that asked. Thread-safe; never blocks. While the worker
        has no connection the heartbeat is not sent."""
        if isinstance(details, str):
            details = details.encode()
        if len(details) > 4096:
            raise ProgressTooLarge("progress details are at most 4096 bytes")
        self._heartbeat(bytes(details))


Outcome = Any


def to_outcome(result: Any) -> Success | Failure:
    """A handler's return value as an ``ActivityOutcome``: ``Success``/``Failure`` as they are,
    ``bytes`` and ``str`` (UTF-8) as ``Success``, ``None`` as an empty ``Success``."""
    if isinstance(result, (Success, Failure)):
        return result
    if result is None:
        return Success(b"")
    if isinstance(result, (bytes, bytearray, memoryview)):
        return Success(bytes(result))
    if isinstance(result, str):
        return Success(result.encode())
    raise TypeError(f"a handler returned {type(result).__name__}: return bytes, str, Success or Failure")


@dataclass
class Answer:
    """A finished handler's outcome, crossing to the connection thread by ticket."""

    ticket: int
    outcome: Success | Failure
