"""Items posted from one thread to an asyncio loop on another, delivered in batches: however
many are posted before the loop runs, it is woken once and handles them together."""

from __future__ import annotations

import asyncio
import threading
from typing import Callable, Generic, Iterable, TypeVar

T = TypeVar("T")


class Mailbox(Generic[T]):
    """Delivers posted items to ``on_batch`` on ``loop``, in order, one wake-up per batch."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_batch: Callable[[list[T]], None]):
        self._loop = loop
        self._on_batch = on_batch
        self._lock = threading.Lock()
        self._items: list[T] = []
        self._scheduled = False

    def post(self, items: Iterable[T]) -> None:
        """Posts ``items`` from any thread; dropped when the loop is closed."""
        with self._lock:
            before = len(self._items)
            self._items.extend(items)
            if len(self._items) == before or self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody is left to deliver to
            pass

    def _deliver(self) -> None:
        with self._lock:
            items, self._items = self._items, []
            self._scheduled = False
        if items:
            self._on_batch(items)
