"""How a worker connects and registers."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from ..errors import LintelError
from ..nodes import Backoff
from ..wire.framing import DEFAULT_MAX_FRAME_LEN


class WorkerConfigError(LintelError, ValueError):
    """The configuration cannot register: it names what is missing or out of range."""


@dataclass
class WorkerConfig:
    """A worker's nodes, pools and identity.

    ``nodes`` are ``host:port`` addresses, tried in turn; ``namespaces`` and
    ``activity_types`` are required. ``concurrency`` is the most requests run at once.
    ``deployment`` and ``instance_id`` need a version-3 node (a later worker with the same
    pair supersedes an earlier one). ``ssl`` speaks TLS (a client certificate loaded in it
    is mutual TLS). ``leave_on_node_drain`` stops the worker when its node drains it (by
    default it moves to another node).
    """

    nodes: list[str]
    namespaces: list[str]
    activity_types: list[str]
    task_queue: str = ""
    label: str | None = None
    identity: str = "lintel-python-worker"
    concurrency: int = 1
    deployment: str | None = None
    instance_id: str | None = None
    name: str = "lintel-python-worker"
    auth_token: str | None = None
    ssl: ssl.SSLContext | None = None
    server_hostname: str | None = None
    handshake_timeout: float = 10.0
    backoff: Backoff = field(default_factory=Backoff)
    max_frame_len: int = DEFAULT_MAX_FRAME_LEN
    #: Stop once a node has drained this worker, instead of moving to another node.
    leave_on_node_drain: bool = False

    def check(self) -> None:
        """Raises :class:`WorkerConfigError` when the configuration cannot register."""
        if isinstance(self.nodes, str):
            self.nodes = [self.nodes]
        if not [n for n in self.nodes if n.strip()]:
            raise WorkerConfigError("no node address")
        if not self.namespaces:
            raise WorkerConfigError("no namespace")
        if not self.activity_types:
            raise WorkerConfigError("no activity type")
        if not 1 <= self.concurrency <= 0xFFFFFFFF:
            raise WorkerConfigError("concurrency must be 1 to 2^32-1")
