"""lintel: an asyncio worker and producer SDK for the lintel node, standard library only.

- :class:`Worker` / :class:`WorkerConfig` / :class:`Request`: serve pushed requests.
- :class:`Client` / :class:`Dispatch` / :class:`DispatchOptions`: dispatch and read outcomes
  (the ``DispatchResult`` dataclasses: :class:`Completed`, :class:`NoWorker3`, ...).
- :mod:`lintel.wire`: the protocol codec; :mod:`lintel.errors`: every exception, under
  :class:`LintelError`.
"""

from .client import (
    Client,
    ClientConfig,
    Dispatch,
    Dispatched,
    DispatchOptions,
    RetryPolicy,
    RetryReason,
    Subscription,
)
from .errors import *  # noqa: F401,F403
from .errors import LintelError
from .nodes import Backoff
from .tls import client_context
from .trace import TraceContext
from .wire.frames import Event
from .wire.types import *  # noqa: F401,F403
from .worker import ActivityError, Request, Worker, WorkerConfig, WorkerConfigError

__all__ = [
    "ActivityError",
    "Backoff",
    "Client",
    "ClientConfig",
    "Dispatch",
    "DispatchOptions",
    "Dispatched",
    "Event",
    "LintelError",
    "Request",
    "RetryPolicy",
    "RetryReason",
    "Subscription",
    "TraceContext",
    "Worker",
    "WorkerConfig",
    "WorkerConfigError",
    "client_context",
]
