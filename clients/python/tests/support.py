"""Test support: a real ``lintel serve`` on an ephemeral port, a cuttable TCP proxy, bounded
waits, and a throwaway PKI made with the ``openssl`` command."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[3]
T = TypeVar("T")


def lintel_bin() -> str:
    """``LINTEL_BIN``, else the repo's debug then release build; fails the test when none."""
    found = os.environ.get("LINTEL_BIN")
    if found:
        return found
    for profile in ("debug", "release"):
        path = REPO / "target" / profile / "lintel"
        if path.exists():
            return str(path)
    pytest.fail("no lintel node binary: set LINTEL_BIN or run `cargo build --bin lintel` first")


class Node:
    """``lintel serve`` on 127.0.0.1, port chosen by the OS; ``env`` adds LINTEL_* settings."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, listen: str = "127.0.0.1:0"):
        clean = {k: v for k, v in os.environ.items() if not k.startswith("LINTEL_")}
        clean.update(env or {})
        self.proc = subprocess.Popen(
            [lintel_bin(), "serve", "--listen", listen, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=clean,
        )
        self.lines: list[str] = []
        found = threading.Event()
        self.addr = ""

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.search(r"listening addr=(\S+)", line)
                if m and not self.addr:
                    self.addr = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(20) or not self.addr:
            self.stop()
            raise RuntimeError("the node did not start:\n" + "".join(self.lines))

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def nodes() -> Any:
    """Starts nodes (``nodes(*args, env=...)``) and kills them after the test."""
    started: list[Node] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Node:
        node = Node(*args, env=env)
        started.append(node)
        return node

    yield start
    for node in started:
        node.stop()


async def within(seconds: float, what: str, check: Callable[[], bool]) -> None:
    """Waits until ``check()`` holds, polling, at most ``seconds``; fails naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not within {seconds} s")
        await asyncio.sleep(0.01)


async def bounded(seconds: float, awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, seconds)


class Proxy:
    """A TCP proxy to ``target`` on an ephemeral port: :meth:`cut` closes every connection
    through it; while ``refusing`` it closes new ones at once."""

    def __init__(self, target: str):
        self.target = target
        self.refusing = False
        self.links: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.addr = ""
        self.accepted = 0

    async def start(self) -> "Proxy":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.addr = "127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        self.accepted += 1
        host, port = self.target.rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        self.links += [writer, up_writer]

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except (OSError, ConnectionError):
                pass
            finally:
                w.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for w in self.links:
            transport = w.transport
            transport.abort()
        self.links.clear()

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


class Pki:
    """A CA, a node certificate for 127.0.0.1/localhost and client certificates."""

    def __init__(self, root: Path):
        if shutil.which("openssl") is None:
            if os.environ.get("CI_REQUIRE_SDKS") == "1":
                pytest.fail("the openssl command is not installed (CI_REQUIRE_SDKS=1 requires it)")
            pytest.skip("the openssl command is not installed")
        self.root = root
        self._run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca")  # fmt: skip
        self.ca = str(root / "ca.pem")

    def _run(self, *args: str) -> None:
        subprocess.run(["openssl", *args], cwd=self.root, check=True, capture_output=True)

    def leaf(self, name: str, san: str) -> tuple[str, str]:
        """Signs a certificate for ``name`` with subjectAltName ``san``; (cert, key) paths."""
        ext = self.root / f"{name}.ext"
        ext.write_text(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n")
        self._run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")  # fmt: skip
        self._run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                  "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", ext.name)  # fmt: skip
        return str(self.root / f"{name}.pem"), str(self.root / f"{name}.key")


class FakeNode:
    """A scripted version-4 node on an ephemeral port for workers: it welcomes, registers
    (worker id = the connection's number) and answers pings by itself; every other frame a
    worker sends goes to :attr:`received` as ``(connection number, frame)``; :meth:`send`
    writes to the latest connection. ``on_hello`` may return False to close a connection
    right after its welcome."""

    def __init__(self, ping_interval_ms: int = 60000, session_grace_ms: int | None = None, answer_pings: bool = True):
        from lintel.wire import types as t

        self.limits = t.Limits(1 << 22, 1024, ping_interval_ms, 3, 255, 64)
        self.header_limits = t.HeaderLimits(32, 8192)
        self.session_grace_ms = session_grace_ms
        self.answer_pings = answer_pings
        self.received: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
        self.accepted = 0
        self.accepted_at: list[float] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.close_after_welcome = False
        self.server: asyncio.Server | None = None
        self.addr = ""

    async def start(self) -> "FakeNode":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.addr = "127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from lintel.wire import FrameDecoder, encode_frame
        from lintel.wire import frames as f

        self.accepted += 1
        self.accepted_at.append(asyncio.get_running_loop().time())
        number = self.accepted
        self.writers.append(writer)
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not None:
                    match frame:
                        case f.Hello():
                            writer.write(encode_frame(f.Welcome3(4, "fake", 1, self.limits, self.header_limits, [])))
                            if self.close_after_welcome:
                                await writer.drain()
                                writer.close()
                                return
                        case f.Features():
                            pass
                        case f.Register3():
                            writer.write(encode_frame(f.Registered(number)))
                            if self.session_grace_ms is not None:
                                writer.write(encode_frame(f.Session(b"t" * 16, self.session_grace_ms)))
                        case f.Ping(nonce) if self.answer_pings:
                            writer.write(encode_frame(f.Pong(nonce)))
                        case _:
                            self.received.put_nowait((number, frame))
        except (OSError, ConnectionError):
            pass
        finally:
            writer.close()

    def send(self, *frames: Any) -> None:
        from lintel.wire import encode_frame

        self.writers[-1].write(b"".join(encode_frame(frame) for frame in frames))

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()

    async def next(self, kind: type, seconds: float = 10) -> Any:
        """The next frame of type ``kind`` a worker sent (others before it are skipped)."""
        while True:
            _, frame = await asyncio.wait_for(self.received.get(), seconds)
            if isinstance(frame, kind):
                return frame

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


def push(correlation: int, data: bytes = b"") -> Any:
    """A ``Push3`` of activity ``run`` in namespace ``py``."""
    from lintel.wire import frames as f
    from lintel.wire import types as t

    request = t.DispatchRequest("py", "", "run", None, f"wf-{correlation}", 0, None, 1, data, None)
    return f.Push3(correlation, request, t.RequestExtras())
