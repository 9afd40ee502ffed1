"""One asyncio connection to a node: TCP (or TLS), the handshake (PROTOCOL.md section 5) and
frames both ways, bounded by the negotiated maximum body length.

Frames are read in bursts (:meth:`Connection.read_burst`): every whole body one socket read
brought, so a burst of pushes costs one wake-up. Bodies are decoded by the caller
(:meth:`Connection.decode`), which may handle a body that does not decode without closing.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from typing import Any, Collection

from .errors import (
    ConnectError,
    HandshakeRefused,
    LintelError,
    NodeError,
    UnexpectedFrame,
    WireError,
)
from .wire import frames as f
from .wire.framing import DEFAULT_MAX_FRAME_LEN, PROTOCOL_VERSION, FrameDecoder, decode_body, encode_frame
from .wire.lower import lower_frame
from .wire.types import ErrorCode, HeaderLimits, Limits, Role

#: The lowest protocol version this package speaks.
MIN_PROTOCOL_VERSION = 1
READ_CHUNK = 256 * 1024


@dataclass
class Handshake:
    """How a connection introduces itself."""

    role: Role
    name: str = "lintel-python"
    auth_token: str | None = None
    #: Features of version 4 this side understands, sent in ``Features``.
    listed: Collection[str] = ()
    timeout: float = 10.0
    max_frame_len: int = DEFAULT_MAX_FRAME_LEN
    ssl: ssl.SSLContext | None = None
    #: TLS server name; ``None`` checks the host the address was given as.
    server_hostname: str | None = None
    max_version: int = PROTOCOL_VERSION


@dataclass
class Welcomed:
    """What the node said in its welcome."""

    version: int
    node_id: str
    pid: int
    limits: Limits
    header_limits: HeaderLimits | None
    features: list[str] = field(default_factory=list)


class Connection:
    """A welcomed connection. Not thread-safe: use it from the loop that made it."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        welcome: Welcomed,
        handshake: Handshake,
        address: str,
    ):
        self.reader = reader
        self.writer = writer
        self.welcome = welcome
        self.version = welcome.version
        #: What this side listed in ``Features``: what the node may send it.
        self.listed = frozenset(handshake.listed) if welcome.version >= 4 else frozenset()
        #: What the node implements: what it may be sent (the reader of what this side writes).
        self.node_features = frozenset(welcome.features)
        self.address = address
        # The negotiated bound: the node sends no body over its own maximum, nor may we.
        self.read_limit = min(handshake.max_frame_len, welcome.limits.max_frame_len)
        self.write_limit = self.read_limit
        self._decoder = FrameDecoder(self.read_limit)
        self.closed = False

    # Writing ---------------------------------------------------------------------------------

    def encode(self, frame: Any) -> bytes | None:
        """The bytes of ``frame`` as this connection's version carries it (``None``: not sent).

        Raises :class:`~lintel.errors.EncodeError` when it cannot be carried or is too long.
        """
        lowered = lower_frame(frame, self.version, self.node_features)
        if lowered is None:
            return None
        return encode_frame(lowered, self.write_limit)

    def write(self, frame: Any) -> bool:
        """Queues ``frame`` on the socket; ``False`` when the connection is closing."""
        data = self.encode(frame)
        if data is None:
            return True
        return self.write_bytes(data)

    def write_bytes(self, data: bytes) -> bool:
        if self.closed or self.writer.is_closing():
            return False
        self.writer.write(data)
        return True

    async def drain(self) -> None:
        await self.writer.drain()

    # Reading ---------------------------------------------------------------------------------

    async def read_burst(self) -> list[bytes]:
        """The whole frame bodies next available (at least one); ``[]`` at a clean end of
        stream. Raises :class:`~lintel.errors.Truncated` when it ends mid-frame,
        :class:`~lintel.errors.Oversize` over the maximum, ``OSError`` on a socket error."""
        bodies: list[bytes] = []
        while True:
            body = self._decoder.next_body()
            while body is not None:
                bodies.append(body)
                body = self._decoder.next_body()
            if bodies:
                return bodies
            data = await self.reader.read(READ_CHUNK)
            if not data:
                self._decoder.finish()
                return []
            self._decoder.feed(data)

    def decode(self, body: bytes) -> f.Frame:
        """Decodes a body for this connection's version; raises :class:`WireError`."""
        return decode_body(body, self.version)

    # Closing ---------------------------------------------------------------------------------

    def fail(self, error: WireError) -> None:
        """Answers bad bytes from the node as section 1 says (``Error{code}``), then closes."""
        try:
            self.write(f.ErrorFrame(ErrorCode[error.code], str(error)[:200]))
        except LintelError:
            pass
        self.abort()

    def abort(self) -> None:
        """Closes at once, without a goodbye."""
        self.closed = True
        try:
            self.writer.close()
        except Exception:  # pragma: no cover - closing a broken transport
            pass

    async def goodbye(self, reason: str, flush_timeout: float = 1.0) -> None:
        """Says ``Goodbye{reason}``, flushes (bounded) and closes."""
        if not self.closed:
            self.write(f.Goodbye(reason))
            try:
                await asyncio.wait_for(self.writer.drain(), flush_timeout)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                pass
        self.abort()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), flush_timeout)
        except (OSError, asyncio.TimeoutError, ConnectionError, ssl.SSLError):
            pass


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for IPv6) to host and port."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConnectError(f"{address!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


async def connect(address: str, handshake: Handshake, host: str | None = None) -> Connection:
    """Connects to ``address`` (``host:port``) and runs the handshake, all within
    ``handshake.timeout``. ``host`` names the TLS server when the address is an IP address
    resolved from a name.

    Raises :class:`HandshakeRefused`, :class:`ConnectError` (timeout, closed, refused),
    :class:`NodeError` or a :class:`WireError`.
    """
    try:
        return await asyncio.wait_for(_connect(address, handshake, host), handshake.timeout)
    except asyncio.TimeoutError:
        raise ConnectError(f"{address}: no welcome within {handshake.timeout} s") from None
    except (OSError, ssl.SSLError) as err:
        raise ConnectError(f"{address}: {err}") from err


async def _connect(address: str, handshake: Handshake, host: str | None) -> Connection:
    ip, port = split_address(address)
    kwargs: dict[str, Any] = {"limit": READ_CHUNK}
    if handshake.ssl is not None:
        kwargs["ssl"] = handshake.ssl
        kwargs["server_hostname"] = handshake.server_hostname or host or ip
    reader, writer = await asyncio.open_connection(ip, port, **kwargs)
    try:
        return await _handshake(reader, writer, handshake, address)
    except BaseException:
        writer.close()
        raise


async def _handshake(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handshake: Handshake, address: str
) -> Connection:
    hello = f.Hello(MIN_PROTOCOL_VERSION, handshake.max_version, handshake.role, handshake.name, handshake.auth_token)
    writer.write(encode_frame(hello))
    decoder = FrameDecoder(handshake.max_frame_len)
    frame: Any = None
    first = b""
    try:
        while frame is None:
            data = await reader.read(READ_CHUNK)
            first = first or data
            if not data:
                decoder.finish()
                raise ConnectError(f"{address}: the node closed the connection during the handshake")
            decoder.feed(data)
            frame = decoder.next_frame()
    except WireError:
        # A TLS alert record (content type 21, version 3.x) answering a plaintext Hello.
        if handshake.ssl is None and first[:2] == b"\x15\x03":
            raise ConnectError(f"{address}: the node speaks TLS: connect with an ssl context") from None
        raise
    match frame:
        case f.Welcome3():
            welcome = Welcomed(frame.version, frame.node_id, frame.pid, frame.limits, frame.header_limits, frame.features)
        case f.Welcome():
            welcome = Welcomed(frame.version, frame.node_id, frame.pid, frame.limits, None, [])
        case f.HelloRefused():
            raise HandshakeRefused(frame.code.name, frame.reason)
        case f.ErrorFrame():
            raise NodeError(frame.code.name, frame.reason)
        case f.Goodbye():
            raise ConnectError(f"{address}: the node said goodbye during the handshake: {frame.reason}")
        case _:
            raise UnexpectedFrame(f"{type(frame).__name__} in place of a welcome")
    if not MIN_PROTOCOL_VERSION <= welcome.version <= handshake.max_version:
        raise ConnectError(f"{address}: the node chose protocol version {welcome.version}")
    conn = Connection(reader, writer, welcome, handshake, address)
    # Bytes after the welcome (a frame sent right behind it) stay with the connection.
    conn._decoder = decoder
    decoder.max_frame_len = conn.read_limit
    if welcome.version >= 4:
        conn.write(f.Features(sorted(handshake.listed), []))
    return conn
