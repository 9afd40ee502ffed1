"""Every feature-matrix scenario with the Python agent in both roles, run as the runner runs
them (tests/feature_matrix.rs): processes, their stdout lines, signals and stdin."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from support import REPO


class Agent:
    def __init__(self, role: str, addr: str, scenario: str, *extra: str):
        env = dict(os.environ)
        env["PYTHONPATH"] = "clients/python/src:clients/python/matrix"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lintel_matrix", role, "--addr", addr, "--scenario", scenario, *extra],
            cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.lines: "queue.Queue[str | None]" = queue.Queue()
        self.seen: list[str] = []

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.put(line.rstrip("\n"))
            self.lines.put(None)

        threading.Thread(target=read, daemon=True).start()

    def until(self, wanted: str, seconds: float = 15) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {wanted!r} within {seconds} s; saw {self.seen}") from None
            if line is None:
                raise AssertionError(f"exited without {wanted!r}; saw {self.seen}")
            self.seen.append(line)
            if line == wanted:
                return

    def exit_code(self, seconds: float = 30) -> int:
        return self.proc.wait(seconds)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def agents() -> Any:
    started: list[Agent] = []

    def start(*args: str) -> Agent:
        agent = Agent(*args)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.kill()


def producer_passes(producer: Agent) -> None:
    producer.until("pass", 30)
    assert producer.exit_code() == 0


@pytest.mark.parametrize("scenario", ["echo", "headers", "heartbeat"])
def test_a_plain_scenario(nodes: Any, agents: Any, scenario: str) -> None:
    node = nodes()
    worker = agents("worker", node.addr, scenario)
    worker.until("ready")
    producer_passes(agents("producer", node.addr, scenario))


def test_no_worker(nodes: Any, agents: Any) -> None:
    producer_passes(agents("producer", nodes().addr, "no-worker"))


def test_worker_lost(nodes: Any, agents: Any) -> None:
    node = nodes(env={"LINTEL_WORKER_RESUME_GRACE_MS": "300"})
    worker = agents("worker", node.addr, "worker-lost")
    worker.until("ready")
    producer = agents("producer", node.addr, "worker-lost")
    worker.until("started")
    worker.kill()
    producer_passes(producer)


def test_timeout(nodes: Any, agents: Any) -> None:
    node = nodes()
    worker = agents("worker", node.addr, "timeout")
    worker.until("ready")
    producer = agents("producer", node.addr, "timeout")
    worker.until("started")
    producer_passes(producer)
    worker.until("cancelled")
    assert worker.exit_code() == 0


def test_cancel(nodes: Any, agents: Any) -> None:
    node = nodes()
    worker = agents("worker", node.addr, "cancel")
    worker.until("ready")
    producer = agents("producer", node.addr, "cancel")
    producer.until("ready")
    worker.until("started")
    assert producer.proc.stdin is not None
    producer.proc.stdin.write("go\n")
    producer.proc.stdin.flush()
    worker.until("cancelled", 10)
    producer_passes(producer)


def test_drain(nodes: Any, agents: Any) -> None:
    node = nodes()
    worker = agents("worker", node.addr, "drain")
    worker.until("ready")
    producer = agents("producer", node.addr, "drain")
    worker.until("started")
    worker.proc.send_signal(signal.SIGTERM)
    producer_passes(producer)
    worker.until("drained")
    assert worker.exit_code() == 0


def test_deployment(nodes: Any, agents: Any) -> None:
    node = nodes()
    blue = agents("worker", node.addr, "deployment", "--deployment", "blue", "--identity", "matrix-blue")
    green = agents("worker", node.addr, "deployment", "--deployment", "green", "--identity", "matrix-green")
    blue.until("ready")
    green.until("ready")
    producer_passes(agents("producer", node.addr, "deployment"))


def test_events(nodes: Any, agents: Any) -> None:
    node = nodes()
    producer = agents("producer", node.addr, "events")
    producer.until("ready")
    worker = agents("worker", node.addr, "events", "--identity", "matrix-events")
    worker.until("ready")
    producer_passes(producer)
