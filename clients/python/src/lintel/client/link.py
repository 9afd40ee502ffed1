"""One producer connection: the pending-reply table, the reader task, subscriptions.

The table maps a correlation this side assigned to the waiting call's future; an entry is
removed on its outcome, when the caller is cancelled (then ``Cancel`` goes to the node), and
when the connection ends (then every waiter hears :class:`ConnectionLost` at once, with
``may_have_run`` true exactly when its submission was handed to the socket and the node did
not prove it unread by a goodbye).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import (
    AnswerTimeout,
    ConnectionLost,
    EncodeError,
    InvalidDispatch,
    LintelError,
    SubscriptionRefused,
    UnknownOutcome,
    UnknownVariant,
    WireError,
)
from ..transport import Connection
from ..wire import frames as f
from ..wire import types as t
from ..wire.varint import decode_kind, decode_varint
from ..wire.view import view

log = logging.getLogger("lintel.client")

#: Kinds whose body opens with a dispatch's correlation and carries a ``DispatchResult``.
OUTCOME_KINDS = frozenset(f.KIND_OF[body].number for body in (f.Outcome, f.ServedOutcome))

#: Events a subscription buffers before it drops the newest.
SUBSCRIPTION_BUFFER = 1024


@dataclass
class Answer:
    """A node's answer to one submission."""

    result: Any
    served_by: str | None


@dataclass
class Pending:
    future: "asyncio.Future[Answer]"
    progress: Callable[[bytes], None] | None = None
    written: bool = False


@dataclass
class SubscriptionState:
    queue: "asyncio.Queue[f.Event | BaseException | None]" = field(
        default_factory=lambda: asyncio.Queue(SUBSCRIPTION_BUFFER)
    )
    dropped: int = 0


class Link:
    """A welcomed producer connection and what waits on it."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.address = conn.address
        self.pending: dict[int, Pending] = {}
        self.status_waiters: dict[int, "asyncio.Future[Any]"] = {}
        self.subscriptions: dict[int, SubscriptionState] = {}
        self.next_correlation = 1
        self.draining = False
        self.goodbye = False
        self.lost: str | None = None
        #: Set whenever nothing waits on an answer here.
        self._idle = asyncio.Event()
        self._idle.set()
        self.reader = asyncio.ensure_future(self._read())

    @property
    def usable(self) -> bool:
        return self.lost is None and not self.draining

    def correlation(self) -> int:
        c = self.next_correlation
        self.next_correlation += 1
        return c

    # Submissions -------------------------------------------------------------------------------

    async def submit(self, frame: f.Submit3, progress: Callable[[bytes], None] | None) -> Answer:
        """Writes ``frame`` and waits for its outcome. Cancelling the caller sends ``Cancel``."""
        if self.lost is not None:
            raise ConnectionLost(self.lost, may_have_run=False)
        try:
            data = self.conn.encode(frame)
        except EncodeError as err:
            raise InvalidDispatch(str(err)) from err
        assert data is not None
        correlation = frame.correlation
        pending = Pending(asyncio.get_running_loop().create_future(), progress)
        self.pending[correlation] = pending
        self._idle.clear()
        if not self.conn.write_bytes(data):
            del self.pending[correlation]
            self._settled()
            raise ConnectionLost("the connection is closing", may_have_run=False)
        pending.written = True
        try:
            try:
                await self.conn.drain()
            except (OSError, ConnectionError):
                pass  # the reader reports the loss to the future
            return await pending.future
        except asyncio.CancelledError:
            if self.pending.pop(correlation, None) is not None and self.lost is None:
                self.conn.write(f.Cancel(correlation))
            self._settled()
            raise

    # Status and subscriptions ------------------------------------------------------------------

    async def status(self, timeout: float) -> Any:
        """The node's status: the JSON document (version 3+), else the report's view.
        Raises :class:`AnswerTimeout` after ``timeout`` seconds."""
        correlation = self.correlation()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.status_waiters[correlation] = future
        self._idle.clear()
        self.conn.write(f.StatusQuery(correlation))
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise AnswerTimeout(f"the node did not answer a status query within {timeout} s") from None
        finally:
            self.status_waiters.pop(correlation, None)
            self._settled()

    def subscribe(self, topics: list[t.EventTopic]) -> tuple[int, SubscriptionState]:
        correlation = self.correlation()
        state = SubscriptionState()
        self.subscriptions[correlation] = state
        self.conn.write(f.Subscribe(correlation, topics))
        return correlation, state

    def unsubscribe(self, correlation: int) -> None:
        if correlation in self.subscriptions and self.lost is None:
            self.conn.write(f.Cancel(correlation))

    def forget_subscription(self, correlation: int) -> None:
        """Cancels a subscription no one will read: its entry goes now."""
        self.unsubscribe(correlation)
        self.subscriptions.pop(correlation, None)

    # Reading -----------------------------------------------------------------------------------

    async def _read(self) -> None:
        reason = "the node closed the connection"
        try:
            while True:
                bodies = await self.conn.read_burst()
                if not bodies:
                    break
                for body in bodies:
                    if not self._on_body(body):
                        return
        except WireError as err:
            reason = f"bad bytes from the node: {err}"
            self.conn.fail(err)
        except (OSError, ConnectionError) as err:
            reason = f"connection failed: {err}"
        except asyncio.CancelledError:
            reason = "client closed"
            raise
        finally:
            if self.lost is None:
                self._end(reason)

    def _on_body(self, body: bytes) -> bool:
        try:
            frame = self.conn.decode(body)
        except UnknownVariant as err:
            if err.enum == "DispatchResult" and self._unknown_outcome(body, err):
                return True
            self.conn.fail(err)
            self._end(f"bad frame from the node: {err}")
            return False
        except WireError as err:
            self.conn.fail(err)
            self._end(f"bad frame from the node: {err}")
            return False
        match frame:
            case f.ServedOutcome(correlation, served_by, result):
                self._complete(correlation, Answer(result, served_by))
            case f.Outcome(correlation, result):
                self._complete(correlation, Answer(result, None))
            case f.Progress(correlation, details):
                pending = self.pending.get(correlation)
                if pending is not None and pending.progress is not None:
                    try:
                        pending.progress(details)
                    except Exception:  # a caller's callback cannot break the connection
                        log.exception("progress callback failed")
            case f.Ping(nonce):
                self.conn.write(f.Pong(nonce))
            case f.Pong():
                pass
            case f.Event(correlation):
                state = self.subscriptions.get(correlation)
                if state is not None:
                    self._offer(state, frame)
            case f.SubscriptionEnded(correlation, code, reason):
                state = self.subscriptions.pop(correlation, None)
                if state is not None:
                    end = None if code == t.RefusalCode.Cancelled else SubscriptionRefused(code.name, reason)
                    self._offer(state, end, force=True)
            case f.StatusDocument(correlation, data):
                self._status(correlation, lambda: json.loads(data))
            case f.Status(correlation, status) | f.ClusterStatus(correlation, status):
                self._status(correlation, lambda: view(status))
            case f.Goodbye(reason):
                # From version 2 the node answers every submission it read before its goodbye.
                self.goodbye = self.conn.version >= 2
                self.conn.abort()
                self._end(f"the node said goodbye: {reason}")
                return False
            case f.ErrorFrame(code, reason):
                self.conn.abort()
                self._end(f"the node closed with {code.name}: {reason}")
                return False
            case _:
                from ..errors import UnexpectedFrame

                unexpected = UnexpectedFrame(f"{type(frame).__name__} on a producer connection")
                self.conn.fail(unexpected)
                self._end(str(unexpected))
                return False
        return True

    def _unknown_outcome(self, body: bytes, err: UnknownVariant) -> bool:
        """A newer node's outcome variant: that dispatch fails with :class:`UnknownOutcome`,
        the connection goes on (the frame's length bounded it)."""
        found = decode_kind(body)
        if found is None or found[0] not in OUTCOME_KINDS:
            return False
        try:
            correlation, _ = decode_varint(body, found[1], 64)
        except WireError:
            return False
        pending = self.pending.pop(correlation, None)
        if pending is not None and not pending.future.done():
            pending.future.set_exception(UnknownOutcome(err.index))
        self._settled()
        return True

    def _complete(self, correlation: int, answer: Answer) -> None:
        if isinstance(answer.result, t.Draining):
            self.draining = True
        pending = self.pending.pop(correlation, None)
        if pending is not None and not pending.future.done():
            pending.future.set_result(answer)
        self._settled()

    def _status(self, correlation: int, read: Callable[[], Any]) -> None:
        future = self.status_waiters.pop(correlation, None)
        self._settled()
        if future is None or future.done():
            return
        try:
            future.set_result(read())
        except ValueError as err:
            future.set_exception(LintelError(f"the status document is not JSON: {err}"))

    def _offer(self, state: SubscriptionState, item: Any, force: bool = False) -> None:
        if state.queue.full():
            if not force:
                state.dropped += 1
                return
            state.queue.get_nowait()
            state.dropped += 1
        state.queue.put_nowait(item)

    def _end(self, reason: str) -> None:
        """Marks the connection gone: every waiter hears it now."""
        if self.lost is not None:
            return
        self.lost = reason
        self.conn.abort()
        for pending in self.pending.values():
            if not pending.future.done():
                may_have_run = pending.written and not self.goodbye
                pending.future.set_exception(ConnectionLost(reason, may_have_run))
        self.pending.clear()
        for future in self.status_waiters.values():
            if not future.done():
                future.set_exception(ConnectionLost(reason, may_have_run=False))
        self.status_waiters.clear()
        for state in self.subscriptions.values():
            self._offer(state, ConnectionLost(reason, may_have_run=False), force=True)
        self.subscriptions.clear()
        self._idle.set()

    def _settled(self) -> None:
        if not self.pending and not self.status_waiters:
            self._idle.set()

    async def retire(self) -> None:
        """Says goodbye once no dispatch or status query waits on an answer here: a draining
        node still answers what it took before it drained."""
        while self.pending or self.status_waiters:
            self._idle.clear()
            await self._idle.wait()
        await self.close()

    async def close(self) -> None:
        if self.lost is None:
            self.lost = "client closed"
            await self.conn.goodbye("client closed")
            self.lost = None
            self._end("client closed")
        self.reader.cancel()
        try:
            await self.reader
        except (asyncio.CancelledError, Exception):
            pass
