"""The connection side of a worker, on a thread of its own with its own event loop: connect,
register (or resume the session), serve pushes, answer pings, drain, reconnect.

Everything here runs on that loop alone; handlers never do, so a handler that blocks the
caller's loop cannot delay a ``Pong``. Requests go to the :class:`~.runner.Runner` and
answers come back through mailboxes, one wake-up per batch each way.

What outlives a connection (``Held``): the requests still running by ticket, the results not
sent and those sent but not proved read (a ``Pong`` to a later ``Ping`` proves them), and the
session the node gave. Within the session's grace a new connection resumes it, listing all
of them; past it, or refused ``SessionUnknown``, the worker registers anew and drops them.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import (
    ConnectError,
    EncodeError,
    FrameTooLarge,
    HandshakeRefused,
    LintelError,
    NodeError,
    RegistrationRefused,
    Truncated,
    WireError,
)
from ..mailbox import Mailbox
from ..nodes import Nodes
from ..transport import Connection, Handshake
from ..wire import frames as f
from ..wire.types import (
    DispatchRequest,
    DispatchResponse,
    Failure,
    RefusalCode,
    RequestExtras,
    Role,
    Success,
)
from .config import WorkerConfig
from .request import Answer
from .runner import Abort, Beat, Runner, Start

log = logging.getLogger("lintel.worker")

#: Features of version 4 a worker understands.
UNDERSTANDS = ("heartbeat-timeout", "worker-resume")
#: Refusals at the hello that retrying cannot fix.
FINAL_HELLO = {"VersionMismatch", "Unauthorized", "RoleNotSupported"}
#: Most correlations one resume lists.
MAX_HOLDING = 65536


class End(enum.Enum):
    """How a connection ended, and so what the worker does next."""

    LOST = "lost"  # closed or failed: the session may be resumed
    CLOSED = "closed"  # goodbye, error, protocol violation: no session
    NODE_DRAINED = "node-drained"  # the node drained us: go to another node
    SELF_DRAINED = "self-drained"  # our drain finished: stop
    STOPPED = "stopped"  # closed by the handle
    SUPERSEDED = "superseded"  # a later instance replaced us: stop


@dataclass
class Pushed:
    """A request in flight: its correlation on the node and the ids its reply echoes."""

    correlation: int
    workflow_id: str
    ordinal: int
    run_id: str | None


@dataclass
class Kept:
    token: bytes
    grace: float
    address: str
    lost_at: float | None = None


@dataclass
class Draining:
    by_handle: bool
    completed: int = 0
    timer: asyncio.TimerHandle | None = None


@dataclass
class Held:
    """What outlives a connection."""

    #: ticket -> request in flight (reply owed)
    tickets: dict[int, Pushed] = field(default_factory=dict)
    #: correlation -> ticket, for the node's cancels
    by_correlation: dict[int, int] = field(default_factory=dict)
    #: correlation -> reply finished while no connection could take it
    unsent: "OrderedDict[int, f.Reply]" = field(default_factory=OrderedDict)
    #: correlation -> (reply sent, sequence number): not yet proved read; the newest
    #: :func:`unproven_bound` of them, oldest dropped first
    unproven: "OrderedDict[int, tuple[f.Reply, int]]" = field(default_factory=OrderedDict)
    session: Kept | None = None

    def holding(self) -> list[int]:
        out = list(self.by_correlation) + list(self.unsent) + list(self.unproven)
        return list(dict.fromkeys(out))[:MAX_HOLDING]


class Runtime:
    """The worker's connection loop; :meth:`main` runs on the connection thread."""

    def __init__(
        self,
        config: WorkerConfig,
        runner: Runner,
        notify: Callable[[str, Any], None],
    ):
        self.config = config
        self.runner = runner
        self.notify = notify
        self.nodes = Nodes(config.nodes)
        self.handshake = Handshake(
            role=Role.Worker,
            name=config.name,
            auth_token=config.auth_token,
            listed=UNDERSTANDS,
            timeout=config.handshake_timeout,
            max_frame_len=config.max_frame_len,
            ssl=config.ssl,
            server_hostname=config.server_hostname,
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self.held = Held()
        self.capacity = config.concurrency
        self.conn: Connection | None = None
        self.registered = False
        self.end: End | None = None
        self.draining: Draining | None = None
        self.stopping = False
        self.wake = asyncio.Event()
        self._next_ticket = 1
        self._to_runner: list[Start | Abort] = []
        self._seq = 0
        self._pings: "OrderedDict[int, int]" = OrderedDict()
        self._nonce = 0
        self._heard = True

    # Entry points from the handle (called on this loop) ---------------------------------------

    def request_drain(self, grace: float | None) -> None:
        if self.draining is None:
            self._begin_drain(by_handle=True, grace=grace)

    def request_stop(self) -> None:
        self.stopping = True
        self.wake.set()
        if self.conn is not None:
            self._close(End.STOPPED, goodbye="worker stopped")

    def set_capacity(self, capacity: int) -> None:
        self.capacity = capacity
        if self.conn is not None and self.registered:
            self.conn.write(f.CapacityUpdate(capacity))

    # The loop ----------------------------------------------------------------------------------

    async def main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.runner.to_connection = Mailbox(self.loop, self._from_runner)
        failures = 0  # failed attempts to reach a node in a row
        losses = 0  # connections lost in a row, each within backoff.max of being made
        backoff = self.config.backoff
        avoid: str | None = None
        try:
            while not self.stopping:
                session = self.held.session
                prefer = session.address if session is not None else None
                try:
                    conn = await self.nodes.connect(self.handshake, avoid=avoid, prefer=prefer)
                except HandshakeRefused as err:
                    if err.code in FINAL_HELLO:
                        self.notify("fatal", RegistrationRefused(err.code, err.reason))
                        return
                    conn = None
                    log.warning("hello refused (%s): %s", err.code, err.reason)
                except (ConnectError, WireError, NodeError, OSError) as err:
                    conn = None
                    log.warning("cannot reach a node: %s", err)
                if conn is None:
                    self._expire_session()
                    await self._sleep(backoff.delay(failures))
                    failures += 1
                    continue
                avoid = None
                if self.stopping:
                    await conn.goodbye("worker stopped")
                    return
                served_from = time.monotonic()
                end = await self._serve(conn)
                self.conn = None
                self.registered = False
                self.notify("unregistered", None)
                if end is End.LOST and self.held.session is not None:
                    self.held.session.lost_at = time.monotonic()
                elif end is not End.LOST:
                    self._drop_held()
                if end in (End.SELF_DRAINED, End.STOPPED):
                    return
                if self.draining is not None and self.draining.by_handle:
                    return  # the connection ended before the drain did: nothing to finish on
                self._end_node_drain()
                if end is End.SUPERSEDED:
                    self.notify("fatal", RegistrationRefused("Superseded", "a later registration replaced this worker"))
                    return
                if end is End.NODE_DRAINED and self.config.leave_on_node_drain:
                    self.notify("node-drained", None)
                    return
                if end is End.NODE_DRAINED:
                    avoid = conn.address
                if end is End.LOST:
                    failures = 0
                    if time.monotonic() - served_from >= backoff.max:
                        losses = 0
                    delay = self._loss_delay(losses)
                    losses += 1
                elif end is End.CLOSED:
                    failures += 1
                    delay = backoff.delay(failures)
                else:  # drained by the node: another node at once, the same one after a while
                    failures = 0
                    delay = 0.0 if len(self.nodes.targets) > 1 else backoff.delay(0)
                await self._sleep(delay)
        finally:
            try:
                self.runner.loop.call_soon_threadsafe(self.runner.abort_all)
            except RuntimeError:
                pass  # the caller's loop is closed: its handlers ended with it
            self.notify("stopped", None)

    def _loss_delay(self, losses: int) -> float:
        """The wait before reconnecting after ``losses`` quick losses in a row: the backoff's,
        growing with them, at most half the grace of a session kept (it is resumed in time),
        and at least the backoff's first."""
        delay = self.config.backoff.delay(losses)
        session = self.held.session
        if session is not None:
            delay = min(delay, session.grace / 2)
        return max(delay, self.config.backoff.delay(0))

    async def _sleep(self, delay: float) -> None:
        self.wake.clear()
        try:
            await asyncio.wait_for(self.wake.wait(), delay)
        except asyncio.TimeoutError:
            pass

    def _expire_session(self) -> None:
        s = self.held.session
        if s is not None and s.lost_at is not None and time.monotonic() - s.lost_at > s.grace:
            self._drop_held()

    def _drop_held(self) -> None:
        """The node has ended what the session held: abort its handlers, forget its results."""
        for ticket in self.held.tickets:
            self._to_runner.append(Abort(ticket))
        self.held = Held()
        self._flush_runner()

    # One connection ----------------------------------------------------------------------------

    async def _serve(self, conn: Connection) -> End:
        self.conn = conn
        self.end = None
        self._pings.clear()
        self._heard = True
        session = self.held.session
        if session is not None and session.lost_at is not None and time.monotonic() - session.lost_at <= session.grace:
            conn.write(f.ResumeSession(session.token, self.held.holding()))
        else:
            self._drop_held()
            if not self._register(conn):
                return End.CLOSED
        keepalive = asyncio.ensure_future(self._keepalive(conn))
        try:
            while self.end is None:
                try:
                    bodies = await conn.read_burst()
                except Truncated:
                    return self.end or End.LOST
                except WireError as err:
                    conn.fail(err)
                    return self.end or End.CLOSED
                except (OSError, ConnectionError):
                    return self.end or End.LOST
                if not bodies:
                    return self.end or End.LOST
                self._heard = True
                for body in bodies:
                    try:
                        frame = conn.decode(body)
                    except WireError as err:
                        log.warning("bad frame from the node: %s", err)
                        conn.fail(err)
                        return End.CLOSED
                    self._on_frame(conn, frame)
                    if self.end is not None:
                        break
                self._flush_runner()
            return self.end
        finally:
            keepalive.cancel()
            self._flush_runner()
            conn.abort()
            # What was written before the close (a Drained, a Goodbye) is flushed first.
            try:
                await asyncio.wait_for(conn.writer.wait_closed(), 5)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                pass

    def _register(self, conn: Connection) -> bool:
        c = self.config
        frame = f.Register3(
            list(c.namespaces), c.task_queue, c.label, list(c.activity_types), c.identity,
            self.capacity, c.deployment, c.instance_id, [],
        )  # fmt: skip
        try:
            conn.write(frame)
        except EncodeError as err:
            self.notify("fatal", RegistrationRefused("Unsupported", str(err)))
            self.stopping = True
            return False
        return True

    async def _keepalive(self, conn: Connection) -> None:
        interval = max(0.05, conn.welcome.limits.ping_interval_ms / 1000)
        max_missed = max(1, conn.welcome.limits.max_missed_pings)
        missed = 0
        while True:
            await asyncio.sleep(interval)
            missed = 0 if self._heard else missed + 1
            self._heard = False
            if missed >= max_missed:
                log.warning("the node stopped answering pings; reconnecting")
                self._close(End.LOST)
                return
            self._ping(conn)

    def _ping(self, conn: Connection) -> None:
        self._nonce += 1
        self._pings[self._nonce] = self._seq
        while len(self._pings) > 16:
            self._pings.popitem(last=False)
        conn.write(f.Ping(self._nonce))

    def _close(self, end: End, goodbye: str | None = None) -> None:
        conn = self.conn
        if self.end is None:
            self.end = end
        if conn is not None:
            if goodbye is not None:
                conn.write(f.Goodbye(goodbye))
            conn.abort()

    # Frames from the node ----------------------------------------------------------------------

    def _on_frame(self, conn: Connection, frame: Any) -> None:
        match frame:
            case f.Push3(correlation, request, extras):
                self._start(conn, correlation, request, extras)
            case f.Push(correlation, request):
                self._start(conn, correlation, request, RequestExtras())
            case f.Cancel(correlation):
                self._cancel(conn, correlation)
            case f.Ping(nonce):
                conn.write(f.Pong(nonce))
            case f.Pong(nonce):
                self._proven(nonce)
            case f.Registered(worker_id):
                self.registered = True
                self.notify("registered", (worker_id, conn.welcome.node_id, conn.version))
                if self.capacity != self.config.concurrency:
                    conn.write(f.CapacityUpdate(self.capacity))
                if self.draining is not None and self.draining.by_handle:
                    conn.write(f.Drain(0))
                    self._check_drain()
            case f.Session(token, grace_ms):
                self.held.session = Kept(token, grace_ms / 1000, conn.address)
            case f.SessionResumed(worker_id, attached, unknown):
                self._resumed(conn, worker_id, attached, unknown)
            case f.RegisterRefused(code, reason):
                if code == RefusalCode.SessionUnknown:
                    self._drop_held()
                    self._register(conn)
                elif code == RefusalCode.Draining:
                    self._close(End.NODE_DRAINED)
                else:
                    self.notify("fatal", RegistrationRefused(code.name, reason))
                    self.stopping = True
                    self._close(End.STOPPED)
            case f.Drain(grace_ms):
                if self.draining is None:
                    self._begin_drain(by_handle=False, grace=grace_ms / 1000)
            case f.Goodbye(reason):
                self._close(End.SUPERSEDED if reason == "superseded" else End.CLOSED)
            case f.ErrorFrame(code, reason):
                log.warning("the node closed with %s: %s", code.name, reason)
                self._close(End.CLOSED)
            case _:
                conn.fail(_unexpected(frame))
                self.end = End.CLOSED

    def _start(self, conn: Connection, correlation: int, request: DispatchRequest, extras: RequestExtras) -> None:
        """Hands a push to the runner, or refuses it at once (retryable) beyond capacity; a
        correlation already in flight or with its reply unsent is ignored.

        Pushes that arrive while draining still run: the node sent them before it saw the
        drain; the grace bounds them."""
        if not self.registered:
            conn.fail(_unexpected(f.Push(correlation, request)))
            self.end = End.CLOSED
            return
        if correlation in self.held.by_correlation or correlation in self.held.unsent:
            log.warning("the node reused correlation %d, in flight; ignoring it", correlation)
            return
        if len(self.held.tickets) + len(self.held.unsent) >= self.capacity:
            log.warning("push %d beyond capacity refused", correlation)
            failure = Failure(f"worker is at its capacity of {self.capacity} requests", True)
            self._reply(f.Reply(correlation, DispatchResponse(request.workflow_id, request.ordinal, request.run_id, failure)), completed=False)
            return
        ticket = self._next_ticket
        self._next_ticket += 1
        self.held.tickets[ticket] = Pushed(correlation, request.workflow_id, request.ordinal, request.run_id)
        self.held.by_correlation[correlation] = ticket
        self._to_runner.append(Start(ticket, request, extras))

    def _cancel(self, conn: Connection, correlation: int) -> None:
        ticket = self.held.by_correlation.pop(correlation, None)
        if ticket is None:
            return
        pushed = self.held.tickets.pop(ticket)
        self._to_runner.append(Abort(ticket))
        # The node holds the push's slot until the worker lets go of it: say so now.
        self._reply(f.Reply(correlation, DispatchResponse(pushed.workflow_id, pushed.ordinal, pushed.run_id, Failure("cancelled", False))))

    def _resumed(self, conn: Connection, worker_id: int, attached: list[int], unknown: list[int]) -> None:
        self.registered = True
        self.notify("registered", (worker_id, conn.welcome.node_id, conn.version))
        if self.held.session is not None:
            self.held.session.lost_at = None
            self.held.session.address = conn.address
        for correlation in unknown:
            ticket = self.held.by_correlation.pop(correlation, None)
            if ticket is not None:
                self.held.tickets.pop(ticket, None)
                self._to_runner.append(Abort(ticket))
            self.held.unsent.pop(correlation, None)
            self.held.unproven.pop(correlation, None)
        resend = [r for c, (r, _) in self.held.unproven.items() if c in attached]
        resend += [r for c, r in self.held.unsent.items() if c in attached]
        self.held.unproven.clear()
        self.held.unsent.clear()
        for reply in resend:
            self._send_reply(conn, reply)
        if self.draining is not None and self.draining.by_handle:
            conn.write(f.Drain(0))
        self._check_drain()

    def _proven(self, nonce: int) -> None:
        seq = self._pings.get(nonce)
        if seq is None:
            return
        while self._pings and next(iter(self._pings)) <= nonce:
            self._pings.popitem(last=False)
        for correlation in [c for c, (_, s) in self.held.unproven.items() if s <= seq]:
            del self.held.unproven[correlation]

    # Answers from the handlers -----------------------------------------------------------------

    def _from_runner(self, items: list[Answer | Beat]) -> None:
        conn = self.conn if self.registered else None
        for item in items:
            if isinstance(item, Beat):
                pushed = self.held.tickets.get(item.ticket)
                if pushed is not None and conn is not None:
                    conn.write(f.Progress(pushed.correlation, item.details))
                continue
            pushed = self.held.tickets.pop(item.ticket, None)
            if pushed is None:
                continue  # cancelled, or dropped with its session
            self.held.by_correlation.pop(pushed.correlation, None)
            response = DispatchResponse(pushed.workflow_id, pushed.ordinal, pushed.run_id, item.outcome)
            self._reply(f.Reply(pushed.correlation, response))
        if conn is not None and self.held.unproven and not self._pings:
            self._ping(conn)
        self._check_drain()

    def _reply(self, reply: f.Reply, completed: bool = True) -> None:
        """Sends ``reply`` now, or keeps it unsent; ``completed`` counts it in a drain's
        ``Drained`` (a handler's result, not a refusal)."""
        if self.draining is not None and completed:
            self.draining.completed += 1
        conn = self.conn if self.registered else None
        if conn is None:
            self.held.unsent[reply.correlation] = reply
            return
        self._send_reply(conn, reply)

    def _send_reply(self, conn: Connection, reply: f.Reply) -> None:
        try:
            data = conn.encode(reply)
        except FrameTooLarge as err:
            failure = Failure(f"the result does not fit in a frame ({err.length} bytes)", False)
            reply = f.Reply(reply.correlation, DispatchResponse(reply.response.workflow_id, reply.response.ordinal, reply.response.run_id, failure))
            data = conn.encode(reply)
        if data is None or not conn.write_bytes(data):
            self.held.unsent[reply.correlation] = reply
            return
        self._seq += 1
        self.held.unproven[reply.correlation] = (reply, self._seq)
        while len(self.held.unproven) > unproven_bound(self.capacity):
            self.held.unproven.popitem(last=False)

    def _flush_runner(self) -> None:
        if self._to_runner:
            items, self._to_runner = self._to_runner, []
            self.runner.inbox.post(items)

    # Drain -------------------------------------------------------------------------------------

    def _begin_drain(self, by_handle: bool, grace: float | None) -> None:
        """Starts a drain. The handle's, with no connection to finish on (the node is
        unreachable), stops at once: the handlers still running are aborted on the way out."""
        assert self.loop is not None
        self.draining = Draining(by_handle)
        if by_handle and self.conn is None:
            self.stopping = True
            self.wake.set()
            return
        if grace is not None:
            self.draining.timer = self.loop.call_later(grace, self._drain_grace_over)
        if self.conn is None or not self.registered:
            if by_handle and not self.held.tickets:
                self.stopping = True
                self.wake.set()
                if self.conn is not None:
                    self._close(End.SELF_DRAINED, goodbye="drained")
            return
        if by_handle:
            self.conn.write(f.Drain(0 if grace is None else round(grace * 1000)))
        self._check_drain()

    def _end_node_drain(self) -> None:
        """A drain the node asked for belongs to its connection: it ends with it."""
        if self.draining is not None and self.draining.timer is not None:
            self.draining.timer.cancel()
        self.draining = None

    def _drain_grace_over(self) -> None:
        """The grace passed: the handlers still running are aborted and their requests, with
        the results not yet sent, forgotten, answered nothing (the node ends those dispatches,
        as the Rust and TypeScript workers leave them); then ``Drained`` goes out."""
        if self.held.tickets:
            log.warning("drain grace expired; aborting %d requests in flight", len(self.held.tickets))
        for ticket, pushed in list(self.held.tickets.items()):
            self._to_runner.append(Abort(ticket))
            del self.held.tickets[ticket]
            self.held.by_correlation.pop(pushed.correlation, None)
        self.held.unsent.clear()
        self._flush_runner()
        self._check_drain()

    def _check_drain(self) -> None:
        d = self.draining
        conn = self.conn
        if d is None or self.held.tickets or self.held.unsent:
            return
        if conn is None or not self.registered:
            return
        if d.timer is not None:
            d.timer.cancel()
        conn.write(f.Drained(d.completed))
        if d.by_handle:
            self.stopping = True
        self._close(End.SELF_DRAINED if d.by_handle else End.NODE_DRAINED, goodbye="drained")


def unproven_bound(capacity: int) -> int:
    """Most replies kept after sending until a ``Pong`` proves them read: the capacity (at
    least 1), as the Rust worker's ``Held::unacked_bound``. Older ones are dropped: a resume
    cannot resend them, and the node ends them ``WorkerLost`` if it never read them."""
    return max(1, capacity)


def _unexpected(frame: Any) -> WireError:
    from ..errors import UnexpectedFrame

    return UnexpectedFrame(f"{type(frame).__name__} on a worker connection")


__all__ = ["Runtime", "End", "UNDERSTANDS", "LintelError", "Success"]
