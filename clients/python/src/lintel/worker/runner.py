"""The handlers' side of a worker, on the caller's event loop: starts a task per request,
cancels it when told, and posts each outcome back to the connection thread."""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Union

from ..mailbox import Mailbox
from ..wire.types import DispatchRequest, Failure, RequestExtras, Success
from .request import ActivityError, Answer, Request, to_outcome

Handler = Callable[[Request], Union[Awaitable[Any], Any]]


@dataclass
class Start:
    ticket: int
    request: DispatchRequest
    extras: RequestExtras


@dataclass
class Abort:
    ticket: int


@dataclass
class Beat:
    """A heartbeat from a handler, crossing to the connection thread."""

    ticket: int
    details: bytes


class Runner:
    """Runs handlers on ``loop``. ``inbox`` takes :class:`Start` and :class:`Abort` from the
    connection thread; answers and heartbeats go to ``to_connection``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, handler: Handler):
        self.loop = loop
        self.handler = handler
        self.inbox: Mailbox[Start | Abort] = Mailbox(loop, self._on_batch)
        self.to_connection: Mailbox[Answer | Beat] | None = None
        self.tasks: dict[int, tuple[asyncio.Task[None], Request]] = {}

    def _on_batch(self, items: list[Start | Abort]) -> None:
        for item in items:
            if isinstance(item, Start):
                ticket = item.ticket
                request = Request(item.request, item.extras, functools.partial(self._beat, ticket))
                task = self.loop.create_task(self._run(ticket, request))
                self.tasks[ticket] = (task, request)
            else:
                found = self.tasks.pop(item.ticket, None)
                if found is not None:
                    abort(*found)

    def _beat(self, ticket: int, details: bytes) -> None:
        if self.to_connection is not None:
            self.to_connection.post((Beat(ticket, details),))

    async def _run(self, ticket: int, request: Request) -> None:
        outcome: Success | Failure
        deadline = request.deadline_unix_ms
        # The deadline sets the signal on this machine's clock; the task runs on.
        timer = None
        if deadline is not None:
            timer = self.loop.call_later(max(0.0, deadline / 1000 - time.time()), request.cancelled.set)
        try:
            result = self.handler(request)
            if inspect.isawaitable(result):
                result = await result
            outcome = to_outcome(result)
        except asyncio.CancelledError:
            if request._aborted:
                return  # aborted: the connection thread has answered already
            raise
        except ActivityError as err:
            outcome = Failure(err.message, err.retryable)
        except Exception as err:  # a handler's bug is the activity's failure, not the worker's
            outcome = Failure(f"{type(err).__name__}: {err}", False)
        finally:
            if timer is not None:
                timer.cancel()
            self.tasks.pop(ticket, None)
        if self.to_connection is not None:
            self.to_connection.post((Answer(ticket, outcome),))

    def abort_all(self) -> None:
        for task, request in self.tasks.values():
            abort(task, request)
        self.tasks.clear()


def abort(task: asyncio.Task[None], request: Request) -> None:
    """Cancels a handler whose answer is no longer wanted, setting its signal first."""
    request._aborted = True
    request.cancelled.set()
    task.cancel()
