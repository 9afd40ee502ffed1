"""Framing (PROTOCOL.md section 1): a 4-byte big-endian length, then the kind varint and the
postcard body. Pure functions over bytes, no I/O.

- :func:`encode_frame`: a frame's complete bytes, refused over the maximum body length.
- :func:`decode_body`: one body to a frame, judged against the connection's version.
- :class:`FrameDecoder`: frames out of a byte stream; partial input is ``None``, a length
  over the maximum is :class:`Oversize` before the body is buffered.
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import FrameTooLarge, KindTooNew, MissingKind, Oversize, TrailingBytes, Truncated, UnknownKind
from .frames import FRAMES, KIND_OF, Frame
from .schema import codec_of
from .varint import decode_kind, encode_varint

#: The node's default maximum body length (4 MiB).
DEFAULT_MAX_FRAME_LEN = 4 * 1024 * 1024
#: The highest protocol version this package speaks.
PROTOCOL_VERSION = 4

_PREFIX = struct.Struct(">I")
_KIND_BYTES = [encode_varint(row.number, 32) for row in FRAMES]
_CODECS = [codec_of(row.body) for row in FRAMES]


def encode_body(frame: Any) -> bytes:
    """The frame's body (kind and fields), without the length prefix."""
    row = KIND_OF.get(type(frame))
    if row is None:
        raise TypeError(f"{type(frame).__name__} is not a frame")
    out = bytearray(_KIND_BYTES[row.number])
    _CODECS[row.number].encode(frame, out)
    return bytes(out)


def encode_frame(frame: Any, max_frame_len: int = DEFAULT_MAX_FRAME_LEN) -> bytes:
    """The frame's complete bytes, length prefix included.

    Raises :class:`FrameTooLarge` when the body exceeds ``max_frame_len``, and
    :class:`~lintel.errors.EncodeError` when a field does not fit its wire type.
    """
    row = KIND_OF.get(type(frame))
    if row is None:
        raise TypeError(f"{type(frame).__name__} is not a frame")
    out = bytearray(4)
    out += _KIND_BYTES[row.number]
    _CODECS[row.number].encode(frame, out)
    length = len(out) - 4
    if length > max_frame_len:
        raise FrameTooLarge(length, max_frame_len)
    _PREFIX.pack_into(out, 0, length)
    return bytes(out)


def decode_body(body: bytes, version: int | None = None) -> Frame:
    """Decodes one frame body. With ``version``, a kind that version does not know is
    :class:`KindTooNew`; an unknown kind is :class:`UnknownKind`, judged before the fields.

    Raises a :class:`~lintel.errors.WireError`; never anything else on hostile bytes.
    """
    found = decode_kind(body)
    if found is None:
        raise MissingKind("empty body or malformed frame kind")
    kind, pos = found
    if kind >= len(FRAMES):
        raise UnknownKind(kind)
    if version is not None and FRAMES[kind].version > version:
        raise KindTooNew(kind, version)
    frame, end = _CODECS[kind].decode(body, pos)
    if end != len(body):
        raise TrailingBytes(f"{len(body) - end} bytes after a {FRAMES[kind].name} body")
    result: Frame = frame
    return result


def frame_length(prefix: bytes, max_frame_len: int) -> int:
    """The body length a 4-byte prefix announces; :class:`Oversize` over the maximum,
    :class:`MissingKind` for zero."""
    (length,) = _PREFIX.unpack(prefix)
    if length > max_frame_len:
        raise Oversize(length, max_frame_len)
    if length == 0:
        raise MissingKind("empty frame body")
    return int(length)


class FrameDecoder:
    """Splits a byte stream into frame bodies. Feed bytes as they arrive; take bodies with
    :meth:`next_body` (``None`` until one is whole). :meth:`finish` at end of stream raises
    :class:`Truncated` if a frame was cut."""

    def __init__(self, max_frame_len: int = DEFAULT_MAX_FRAME_LEN):
        self.max_frame_len = max_frame_len
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def next_body(self) -> bytes | None:
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 4:
            return None
        length = frame_length(bytes(buf[pos : pos + 4]), self.max_frame_len)
        end = pos + 4 + length
        if len(buf) < end:
            return None
        body = bytes(buf[pos + 4 : end])
        self._pos = end
        if end > 65536:
            del buf[:end]
            self._pos = 0
        return body

    def next_frame(self, version: int | None = None) -> Frame | None:
        body = self.next_body()
        return None if body is None else decode_body(body, version)

    def buffered(self) -> int:
        """Bytes held that are not yet a whole frame."""
        return len(self._buf) - self._pos

    def finish(self) -> None:
        """At end of stream: :class:`Truncated` when part of a frame is buffered."""
        if self.buffered():
            raise Truncated(f"the stream ended {self.buffered()} bytes into a frame")
