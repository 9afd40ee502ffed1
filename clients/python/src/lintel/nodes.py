"""The nodes a worker or a producer may use: each ``host:port`` resolved to every address it
names, tried from a rotating start (the node just left last, the node keeping a session
first), staggered: the next is dialled when the last fails or after :data:`STAGGER` without
an answer; the whole round within the handshake timeout. Also the reconnect backoff."""

from __future__ import annotations

import asyncio
import random
import socket
from dataclasses import dataclass
from typing import Iterable

from .errors import AllNodesFailed, ConnectError
from .transport import Connection, Handshake, connect, split_address

#: Most node addresses one client or worker is given.
MAX_NODES = 64
#: How long a dial may go unanswered before the next address is dialled beside it.
STAGGER = 0.25


@dataclass
class Backoff:
    """Delays between rounds of reconnecting: ``initial`` doubling to ``max``, each with
    jitter (half of it fixed, half random)."""

    initial: float = 0.1
    max: float = 10.0

    def delay(self, failures: int) -> float:
        base = float(min(self.max, self.initial * (2 ** min(failures, 30))))
        return base / 2 + random.uniform(0, base / 2)


class Nodes:
    """The addresses given, and where the next round starts."""

    def __init__(self, targets: Iterable[str]):
        self.targets = [t.strip() for t in targets if t.strip()][:MAX_NODES]
        if not self.targets:
            raise ConnectError("no node address given")
        for target in self.targets:
            split_address(target)
        self._start = random.randrange(MAX_NODES)

    async def _resolve(self, target: str) -> list[tuple[str, str]]:
        host, port = split_address(target)
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        out: list[tuple[str, str]] = []
        for family, _, _, _, sockaddr in infos:
            ip = str(sockaddr[0])
            address = f"[{ip}]:{port}" if family == socket.AF_INET6 else f"{ip}:{port}"
            if (target, address) not in out:
                out.append((target, address))
        return out

    async def connect(
        self, handshake: Handshake, avoid: str | None = None, prefer: str | None = None
    ) -> Connection:
        """Connects to one of the nodes; the first to welcome wins.

        Raises the one error with one address, else :class:`AllNodesFailed` naming each.
        Refusals (:class:`~lintel.errors.HandshakeRefused`) count as failures of that node.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + handshake.timeout
        failed: list[tuple[str, BaseException]] = []
        candidates: list[tuple[str, str]] = []
        for target in self.targets:
            try:
                left = max(0.001, deadline - loop.time())
                candidates += await asyncio.wait_for(self._resolve(target), left)
            except (OSError, asyncio.TimeoutError) as err:
                failed.append((target, ConnectError(f"{target}: lookup failed: {err}")))
        if candidates:
            start = self._start % len(candidates)
            self._start += 1
            candidates = candidates[start:] + candidates[:start]
        if avoid is not None:
            candidates.sort(key=lambda c: c[1] == avoid or c[0] == avoid)
        if prefer is not None:
            candidates.sort(key=lambda c: not (c[1] == prefer or c[0] == prefer))
        total = len(failed) + len(candidates)
        waiting = list(candidates)
        dialling: dict[asyncio.Task[Connection], tuple[str, str]] = {}

        def dial_next() -> None:
            target, address = waiting.pop(0)
            host, _ = split_address(target)
            left = max(0.001, deadline - loop.time())
            shaken = Handshake(**{**handshake.__dict__, "timeout": left})
            task = asyncio.ensure_future(connect(address, shaken, host))
            dialling[task] = (target, address)

        try:
            while waiting or dialling:
                if not dialling:
                    dial_next()
                timeout = STAGGER if waiting else max(0.0, deadline - loop.time()) + 0.1
                done, _ = await asyncio.wait(dialling, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    target, address = dialling.pop(task)
                    error = task.exception()
                    if error is None:
                        return task.result()
                    failed.append((address if target == address else f"{target} ({address})", error))
                    if waiting:
                        dial_next()
                if not done and waiting:
                    dial_next()
                if loop.time() >= deadline and not dialling:
                    break
            for target, address in waiting:
                failed.append((address, ConnectError(f"{address}: not dialled within the handshake timeout")))
        finally:
            for task in dialling:
                task.cancel()
                task.add_done_callback(_close_won)
        if total == 1 and failed:
            raise failed[-1][1]
        raise AllNodesFailed(failed)


def _close_won(task: "asyncio.Task[Connection]") -> None:
    if not task.cancelled() and task.exception() is None:
        task.result().abort()
