"""The worker SDK: connect, register, run pushed requests through a handler, reconnect.

Threads: the connection (socket, reader, writer, pings and pongs) runs on a thread of its
own, ``lintel-worker``, with its own asyncio event loop; handlers run as tasks on the event
loop that called :meth:`Worker.start`. Requests reach that loop, and answers come back, in
batches (one ``call_soon_threadsafe`` wake-up each way per burst). A handler that blocks its
loop (``time.sleep``, a long computation) delays the other handlers, never a ``Pong``: the
node keeps the worker eligible.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any, Iterable

from ..errors import LintelError, RegistrationTimeout, WorkerStopped
from .config import WorkerConfig, WorkerConfigError
from .request import ActivityError, Request
from .runner import Handler, Runner
from .runtime import Runtime

__all__ = ["ActivityError", "Handler", "Request", "Worker", "WorkerConfig", "WorkerConfigError"]


class Worker:
    """A worker serving ``handler`` (``async def handler(request) -> bytes | str | Success |
    Failure``; a plain function works too, run on the caller's loop).

    Example::

        worker = Worker(WorkerConfig(["127.0.0.1:7400"], ["demo"], ["upper"]),
                        lambda req: req.input.upper())
        await worker.start()
        await worker.wait_registered(5)
        await worker.drain()
    """

    def __init__(self, config: WorkerConfig, handler: Handler):
        config.check()
        self.config = config
        self.handler = handler
        self.worker_id: int | None = None
        #: The node id and protocol version of the node the worker registered with last.
        self.node_id: str | None = None
        self.version: int | None = None
        #: True once the worker stopped because its node drained it (``leave_on_node_drain``).
        self.drained_by_node = False
        self._runtime: Runtime | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conn_loop: asyncio.AbstractEventLoop | None = None
        self._registered: asyncio.Event | None = None
        self._stopped: asyncio.Event | None = None
        self._fatal: BaseException | None = None

    async def start(self) -> None:
        """Starts the connection thread; handlers will run on the current event loop."""
        if self._thread is not None:
            return
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._registered = asyncio.Event()
        self._stopped = asyncio.Event()
        runner = Runner(loop, self.handler)
        runtime = Runtime(self.config, runner, self._notify)
        self._runtime = runtime
        ready = threading.Event()

        def run() -> None:
            conn_loop = asyncio.new_event_loop()
            self._conn_loop = conn_loop
            ready.set()
            try:
                conn_loop.run_until_complete(runtime.main())
            finally:
                conn_loop.close()

        self._thread = threading.Thread(target=run, name="lintel-worker", daemon=True)
        self._thread.start()
        await loop.run_in_executor(None, ready.wait)

    def _notify(self, what: str, value: Any) -> None:
        """From the connection thread: a change of state, applied on the caller's loop."""
        loop = self._loop
        if loop is None:
            return

        def apply() -> None:
            assert self._registered is not None and self._stopped is not None
            if what == "registered":
                self.worker_id, self.node_id, self.version = value
                self._registered.set()
            elif what == "node-drained":
                self.drained_by_node = True
            elif what == "unregistered":
                self._registered.clear()
            elif what == "fatal":
                self._fatal = value
            elif what == "stopped":
                self._stopped.set()

        try:
            loop.call_soon_threadsafe(apply)
        except RuntimeError:
            pass

    def _call(self, fn: Any, *args: Any) -> None:
        if self._conn_loop is None:
            raise WorkerStopped("the worker was not started")
        try:
            self._conn_loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            raise WorkerStopped("the worker has stopped") from None

    @property
    def registered(self) -> bool:
        return self._registered is not None and self._registered.is_set()

    async def wait_registered(self, timeout: float | None = None) -> int:
        """Waits until the worker is registered; its worker id.

        Raises :class:`~lintel.errors.RegistrationRefused` when the node refused it for good,
        :class:`~lintel.errors.WorkerStopped` when it stopped,
        :class:`~lintel.errors.RegistrationTimeout` (a ``TimeoutError``) after ``timeout``
        seconds.
        """
        assert self._registered is not None and self._stopped is not None
        registered = asyncio.ensure_future(self._registered.wait())
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            done, _ = await asyncio.wait({registered, stopped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            registered.cancel()
            stopped.cancel()
        if self._registered.is_set() and self.worker_id is not None:
            return self.worker_id
        if self._fatal is not None:
            raise self._fatal
        if self._stopped.is_set():
            raise WorkerStopped("the worker stopped before it registered")
        raise RegistrationTimeout(f"not registered within {timeout} s")

    def set_capacity(self, capacity: int) -> None:
        """Changes the most requests run at once (``CapacityUpdate``), 1 to 2^32-1; else
        raises :class:`WorkerConfigError`."""
        if not 1 <= capacity <= 0xFFFFFFFF:
            raise WorkerConfigError("capacity must be 1 to 2^32-1")
        assert self._runtime is not None
        self._call(self._runtime.set_capacity, capacity)

    async def drain(self, grace: float | None = None) -> None:
        """Takes no new work (``Drain``), finishes what is in flight (aborting it after
        ``grace`` seconds, if given), says ``Drained`` and ``Goodbye``, and stops. On a worker
        already stopped (a signal's drain, say) it returns as :meth:`wait_stopped` does."""
        assert self._runtime is not None
        try:
            self._call(self._runtime.request_drain, grace)
        except WorkerStopped:
            pass  # stopped already: wait_stopped raises what stopped it, if anything did
        await self.wait_stopped()

    async def close(self) -> None:
        """Stops at once: says ``Goodbye`` (the node ends what it pushed) and aborts handlers."""
        if self._runtime is None or self._stopped is None or self._stopped.is_set():
            return
        try:
            self._call(self._runtime.request_stop)
        except WorkerStopped:
            pass  # its thread is ending: the stop is on its way
        await self.wait_stopped()

    async def wait_stopped(self) -> None:
        """Waits until the worker has stopped; raises what stopped it, if it was refused."""
        assert self._stopped is not None
        await self._stopped.wait()
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join, 5)
        if self._fatal is not None:
            raise self._fatal

    def drain_on_signals(self, signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT), grace: float | None = None) -> None:
        """Drains when one of ``signals`` arrives (the caller's loop must be the main thread's);
        a signal after the worker stopped is ignored."""
        assert self._loop is not None and self._runtime is not None
        runtime = self._runtime

        def drain() -> None:
            try:
                self._call(runtime.request_drain, grace)
            except WorkerStopped:
                pass

        for sig in signals:
            self._loop.add_signal_handler(sig, drain)

    async def __aenter__(self) -> "Worker":
        await self.start()
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        """Closes the worker; what stopped it is raised only when the body raised nothing."""
        try:
            await self.close()
        except LintelError:
            if exc is None:
                raise
