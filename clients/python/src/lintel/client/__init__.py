"""The producer SDK: :class:`Client`, :class:`Dispatch`, :class:`DispatchOptions`."""

from .client import Client, ClientConfig, Dispatched, Retried, Subscription
from .options import DEFAULT_REPLY_TIMEOUT, Dispatch, DispatchOptions, RetryPolicy, RetryReason

__all__ = [
    "DEFAULT_REPLY_TIMEOUT",
    "Client",
    "ClientConfig",
    "Dispatch",
    "DispatchOptions",
    "Dispatched",
    "Retried",
    "RetryPolicy",
    "RetryReason",
    "Subscription",
]
