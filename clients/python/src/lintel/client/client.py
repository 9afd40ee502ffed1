"""The producer: one node at a time out of several, moving on its goodbye, its loss or a
``Draining`` answer, retrying only what proves nothing ran (unless told the work is
idempotent), as the Rust SDK's ``Client::connect_nodes``."""

from __future__ import annotations

import asyncio
import re
import ssl
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Iterable

from ..errors import (
    ClientClosed,
    ConnectError,
    ConnectionLost,
    HandshakeRefused,
    InvalidDispatch,
    NodeError,
    Unreachable,
    WireError,
)
from ..nodes import Backoff, Nodes
from ..transport import Handshake, Welcomed
from ..wire import frames as f
from ..wire import types as t
from ..wire.framing import DEFAULT_MAX_FRAME_LEN
from .link import Answer, Link, SubscriptionState
from .options import MAX_WAIT_MS, Dispatch, DispatchOptions, RetryReason

#: Features of version 4 a producer understands.
UNDERSTANDS = ("heartbeat-timeout", "progress", "role-not-granted")
#: Room a push needs beside a request's input and ids (section 8).
PUSH_RESERVE = 16384
_HEADER_NAME = re.compile(r"^[a-z0-9!#$%&'*+\-.^_`|~]+$")


@dataclass
class ClientConfig:
    """How a client introduces itself and reconnects."""

    name: str = "lintel-python-producer"
    auth_token: str | None = None
    handshake_timeout: float = 10.0
    max_frame_len: int = DEFAULT_MAX_FRAME_LEN
    ssl: ssl.SSLContext | None = None
    server_hostname: str | None = None
    reconnect: Backoff = field(default_factory=Backoff)


@dataclass
class Retried:
    """An attempt that was tried again: where it went and why it did not stand."""

    node: str | None
    served_by: str | None
    reason: RetryReason


@dataclass
class Dispatched:
    """A dispatch's result, the node that served it, and the attempts before it."""

    result: Any
    served_by: str | None
    node: str | None
    retried: list[Retried] = field(default_factory=list)


class Client:
    """A producer. Make it with ``await Client.connect(nodes)``; close it with
    ``await client.close()`` (or ``async with``)."""

    def __init__(self, nodes: Nodes, config: ClientConfig, link: Link):
        self._nodes = nodes
        self._config = config
        self._link = link
        self._redial = asyncio.Lock()
        self._failures = 0
        self._not_before = 0.0
        self._closed = False
        #: Connections left for another, each closing once its pending answers are in.
        self._retiring: dict[Link, asyncio.Task[None]] = {}

    @classmethod
    async def connect(cls, nodes: str | Iterable[str], config: ClientConfig | None = None) -> "Client":
        """Connects to one of ``nodes`` (``host:port`` each).

        Raises :class:`~lintel.errors.ConnectError` (a subclass names why) when none welcomes.
        """
        config = config or ClientConfig()
        targets = [nodes] if isinstance(nodes, str) else list(nodes)
        pool = Nodes(targets)
        conn = await pool.connect(_handshake(config))
        return cls(pool, config, Link(conn))

    @property
    def welcome(self) -> Welcomed:
        """What the node in use said in its welcome."""
        return self._link.conn.welcome

    @property
    def node_addr(self) -> str:
        return self._link.address

    async def close(self) -> None:
        """Says goodbye; what is pending fails with ``ConnectionLost``, also on a connection
        left for another (a draining node's) that was still waiting for answers."""
        self._closed = True
        retiring = list(self._retiring.items())
        for _, task in retiring:
            task.cancel()
        await self._link.close()
        for old, _ in retiring:
            await old.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # Dispatching -------------------------------------------------------------------------------

    async def dispatch(self, dispatch: Dispatch, options: DispatchOptions | None = None) -> Any:
        """Submits ``dispatch`` and returns how it ended: one of the ``DispatchResult``
        dataclasses (``Completed``, ``NoWorker3``, ``WorkerLost``, ``Timeout``, ``Refused``,
        ``Cancelled``, ``Draining``, ``PeerLost``, ``ShutDown``, ``HeartbeatTimeout``...).
        Cancelling the awaiting task sends ``Cancel`` to the node.

        Raises :class:`InvalidDispatch` before sending when it breaks a limit;
        :class:`ConnectionLost` (``may_have_run``), :class:`Unreachable`,
        :class:`ClientClosed`, :class:`~lintel.errors.UnknownOutcome`.
        """
        return (await self.submit(dispatch, options)).result

    async def submit(self, dispatch: Dispatch, options: DispatchOptions | None = None) -> Dispatched:
        """As :meth:`dispatch`, with the node that served it and the attempts retried."""
        if self._closed:
            raise ClientClosed("the client is closed")
        options = options or DispatchOptions()
        request = dispatch.request()
        extras = options.extras()
        routing = options.routing()
        _check(request, extras, options, self._link.conn.welcome)
        loop = asyncio.get_running_loop()
        start = loop.time()
        budget = options.budget()
        policy = options.retry
        retried: list[Retried] = []
        progress = _progress_sink(options)

        def again(reason: RetryReason) -> bool:
            attempts = policy.max_unsent_attempts() if reason.proves_unsent() else policy.max_attempts
            return len(retried) + 1 < attempts and loop.time() - start < budget

        while True:
            try:
                link = await self._usable(start + budget)
            except Unreachable:
                if again(RetryReason.UNREACHABLE):
                    retried.append(Retried(None, None, RetryReason.UNREACHABLE))
                    continue
                raise
            frame = f.Submit3(
                link.correlation(), request, extras, options.wait_for_worker_ms,
                options.reply_timeout_ms, routing,
            )  # fmt: skip
            answer: Answer | None = None
            reason: RetryReason | None
            try:
                answer = await link.submit(frame, progress)
                reason = policy.retries(answer.result)
            except ConnectionLost as err:
                if not err.may_have_run:
                    reason = RetryReason.NOT_SENT
                elif policy.idempotent:
                    reason = RetryReason.MAY_HAVE_RUN
                else:
                    raise
                if not again(reason):
                    raise
                retried.append(Retried(link.address, None, reason))
                continue
            if reason is not None and again(reason):
                retried.append(Retried(link.address, answer.served_by, reason))
                continue
            return Dispatched(answer.result, answer.served_by, link.address, retried)

    async def _usable(self, deadline: float) -> Link:
        """The connection in use while it is open and not draining, else a new one to another
        node (the one just left last), with jittered backoff between failed rounds."""
        link = self._link
        if link.usable:
            return link
        if self._closed:
            raise ClientClosed("the client is closed")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                async with self._redial:
                    link = self._link
                    if link.usable:
                        return link
                    wait = self._not_before - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    try:
                        conn = await self._nodes.connect(_handshake(self._config), avoid=link.address)
                    except (ConnectError, HandshakeRefused, NodeError, WireError, OSError) as err:
                        self._not_before = loop.time() + self._config.reconnect.delay(self._failures)
                        self._failures += 1
                        raise Unreachable(str(err)) from err
                    self._failures = 0
                    self._not_before = 0.0
                    self._retire(self._link)
                    self._link = Link(conn)
                    if self._closed:
                        await self._link.close()
                        raise ClientClosed("the client is closed")
                    return self._link
        except TimeoutError:
            raise Unreachable("no node could be reached within the dispatch's budget") from None

    def _retire(self, old: Link) -> None:
        """Closes ``old`` once the answers pending on it are in (a draining node still sends
        them), keeping the task until then."""
        task = asyncio.ensure_future(old.retire())
        self._retiring[old] = task
        task.add_done_callback(lambda _: self._retiring.pop(old, None))

    # Status and events -------------------------------------------------------------------------

    async def status(self, timeout: float = 10.0) -> Any:
        """The node's status as operators read it: the JSON document of ``lintel status
        --json`` (version 3+), else the status report's JSON-shaped view.

        Raises :class:`~lintel.errors.AnswerTimeout` when the node does not answer within
        ``timeout`` seconds, :class:`Unreachable` when no node could be reached in it.
        """
        link = await self._usable(asyncio.get_running_loop().time() + timeout)
        return await link.status(timeout)

    async def subscribe(self, topics: Iterable[t.EventTopic] = (), timeout: float = 10.0) -> "Subscription":
        """Subscribes to the node's lifecycle events (every topic when ``topics`` is empty);
        returns once the node has read the subscription (a status query behind it answered).

        Raises :class:`~lintel.errors.AnswerTimeout` (the subscription is cancelled) when the
        node does not answer within ``timeout`` seconds.
        """
        link = await self._usable(asyncio.get_running_loop().time() + timeout)
        correlation, state = link.subscribe(list(topics))
        try:
            await link.status(timeout)
        except BaseException:
            link.forget_subscription(correlation)
            raise
        return Subscription(link, correlation, state)


class Subscription:
    """Events of one subscription, as an async iterator of ``Event`` frames (``seq``,
    ``at_unix_ms``, ``event``: a ``NodeEvent`` variant). It ends after :meth:`close`; a
    refusal raises :class:`~lintel.errors.SubscriptionRefused`, a lost connection
    :class:`ConnectionLost`. Events past a full buffer are dropped and counted in
    ``dropped``."""

    def __init__(self, link: Link, correlation: int, state: SubscriptionState):
        self._link = link
        self.correlation = correlation
        self._state = state
        self._done = False

    @property
    def dropped(self) -> int:
        return self._state.dropped

    def __aiter__(self) -> AsyncIterator[f.Event]:
        return self

    async def __anext__(self) -> f.Event:
        if self._done:
            raise StopAsyncIteration
        item = await self._state.queue.get()
        if item is None:
            self._done = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        return item

    async def close(self) -> None:
        """Cancels the subscription; events already queued are still delivered."""
        self._link.unsubscribe(self.correlation)


def _handshake(config: ClientConfig) -> Handshake:
    return Handshake(
        role=t.Role.Producer,
        name=config.name,
        auth_token=config.auth_token,
        listed=UNDERSTANDS,
        timeout=config.handshake_timeout,
        max_frame_len=config.max_frame_len,
        ssl=config.ssl,
        server_hostname=config.server_hostname,
    )


def _progress_sink(options: DispatchOptions) -> Any:
    to = options.progress
    if to is None:
        return None
    if isinstance(to, asyncio.Queue):
        queue = to

        def put(details: bytes) -> None:
            try:
                queue.put_nowait(details)
            except asyncio.QueueFull:
                pass

        return put
    return to


def _check(request: t.DispatchRequest, extras: t.RequestExtras, options: DispatchOptions, welcome: Welcomed) -> None:
    """The limits the node stated, checked before anything is sent."""
    limits = welcome.limits
    names = [("namespace", request.namespace), ("activity type", request.activity_type)]
    for what, value in names:
        if not value:
            raise InvalidDispatch(f"the {what} is empty")
    for what, value in names + [("task queue", request.task_queue), ("node", request.node or "")]:
        if len(value.encode()) > limits.max_name_len:
            raise InvalidDispatch(f"the {what} is longer than {limits.max_name_len} bytes")
    for what, ms in (("wait_for_worker_ms", options.wait_for_worker_ms), ("reply_timeout_ms", options.reply_timeout_ms)):
        if ms is not None and not 0 <= ms <= MAX_WAIT_MS:
            raise InvalidDispatch(f"{what} must be 0 to {MAX_WAIT_MS}")
    nodes = options.prefer or options.require or []
    if len(nodes) > limits.max_set_len or any(not n or len(n.encode()) > limits.max_name_len for n in nodes):
        raise InvalidDispatch("the routing's node list is too long or names an empty or too long node")
    if options.priority is not None and not 1 <= options.priority <= 5:
        raise InvalidDispatch("priority must be 1 to 5")
    if options.fairness_weight is not None and not 1 <= options.fairness_weight <= 1_000_000:
        raise InvalidDispatch("fairness_weight must be 1 to 1000000")
    for what, value2 in (("fairness_key", options.fairness_key), ("deployment", options.deployment)):
        if value2 is not None and not 1 <= len(value2.encode()) <= limits.max_name_len:
            raise InvalidDispatch(f"the {what} must be 1 to {limits.max_name_len} bytes")
    if options.heartbeat_timeout_ms is not None and not 1 <= options.heartbeat_timeout_ms <= MAX_WAIT_MS:
        raise InvalidDispatch(f"heartbeat_timeout_ms must be 1 to {MAX_WAIT_MS}")
    header_bytes = 0
    for h in extras.headers:
        if not _HEADER_NAME.match(h.name) or len(h.name) > limits.max_name_len:
            raise InvalidDispatch(f"header name {h.name!r} is not lowercase token characters")
        header_bytes += len(h.name.encode()) + len(h.value.encode())
    header_limits = welcome.header_limits
    if header_limits is not None and (
        len(extras.headers) > header_limits.max_headers or header_bytes > header_limits.max_header_bytes
    ):
        raise InvalidDispatch("too many headers, or too many header bytes")
    size = len(request.input) + len(request.workflow_id.encode()) + len((request.run_id or "").encode())
    size += header_bytes + sum(len(e.value) for e in extras.extensions)
    if size > limits.max_frame_len - PUSH_RESERVE:
        raise InvalidDispatch(f"the input is {size} bytes; at most {limits.max_frame_len - PUSH_RESERVE} fit in a push")
