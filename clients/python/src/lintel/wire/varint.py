"""Unsigned LEB128 varints (PROTOCOL.md section 2), canonical on write, bounded on read."""

from __future__ import annotations

from ..errors import EncodeError, Malformed

#: bits -> (most bytes, largest byte allowed in the last position)
LIMITS = {16: (3, 0x03), 32: (5, 0x0F), 64: (10, 0x01)}


def encode_varint(value: int, bits: int = 64) -> bytes:
    """The canonical (shortest) encoding of ``value`` as a ``u<bits>``.

    Raises :class:`EncodeError` when ``value`` does not fit.
    """
    if value < 0 or value >> bits:
        raise EncodeError(f"{value} does not fit in u{bits}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes, pos: int, bits: int = 64) -> tuple[int, int]:
    """Reads a ``u<bits>`` at ``pos``; returns ``(value, next position)``.

    Raises :class:`Malformed` when it is cut short, still continues at its last position, or
    overflows the type. An overlong form within the byte limit is accepted, as postcard does.
    """
    most, last_max = LIMITS[bits]
    value = 0
    shift = 0
    end = len(data)
    for i in range(most):
        if pos >= end:
            raise Malformed(f"u{bits} varint cut short")
        byte = data[pos]
        pos += 1
        if i == most - 1:
            if byte > last_max:
                raise Malformed(f"u{bits} varint overflows")
            return value | (byte << shift), pos
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise Malformed(f"u{bits} varint too long")  # pragma: no cover - loop always returns


def decode_kind(body: bytes) -> tuple[int, int] | None:
    """The frame kind at the start of ``body`` and where its fields start, or ``None`` when
    the body is empty or its kind is truncated, non-canonical, too long or above ``u32::MAX``."""
    try:
        kind, pos = decode_varint(body, 0, 32)
    except Malformed:
        return None
    if pos != len(encode_varint(kind, 32)):
        return None
    return kind, pos
