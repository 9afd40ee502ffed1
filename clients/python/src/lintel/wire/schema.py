"""Postcard (PROTOCOL.md section 2) encoders and decoders compiled from type annotations.

A body or type is a dataclass whose fields are annotated with the wire types below; an enum
with payloads is ``Annotated[Union[variant classes in index order], Variants(name)]``, each
variant a dataclass (a unit variant has no fields, a newtype variant is marked
:func:`newtype` and has one); an enum without payloads is an :class:`enum.IntEnum`. Codecs are
compiled once per type and cached. Decoders never allocate more than the input holds: every
length and count is checked against the bytes left before anything is built.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Annotated, Any, Callable, Optional, TypeVar, Union, get_args, get_origin

from ..errors import EncodeError, Malformed, UnknownVariant
from .varint import decode_varint, encode_varint


class Int:
    """An unsigned integer of ``bits`` bits: ``u8`` is one raw byte, the others varints."""

    def __init__(self, bits: int):
        self.bits = bits


class Bounded:
    """A length bound on a ``bytes``, ``str`` or list field, checked on read and on write."""

    def __init__(self, min_len: int = 0, max_len: int | None = None):
        self.min_len = min_len
        self.max_len = max_len


class Variants:
    """Marks a ``Union`` of variant dataclasses as the enum ``name``, indices in order."""

    def __init__(self, name: str):
        self.name = name


U8 = Annotated[int, Int(8)]
U16 = Annotated[int, Int(16)]
U32 = Annotated[int, Int(32)]
U64 = Annotated[int, Int(64)]

T = TypeVar("T")


def newtype(cls: T) -> T:
    """Marks a one-field variant dataclass as a newtype variant (``Pin(String)``)."""
    setattr(cls, "__lintel_newtype__", True)
    return cls


def variant_name(cls: type) -> str:
    """The variant's name as PROTOCOL.md (and serde) spell it."""
    return str(getattr(cls, "__lintel_name__", cls.__name__))


def is_newtype(cls: type) -> bool:
    """Whether the variant class is a newtype variant."""
    return bool(getattr(cls, "__lintel_newtype__", False))


Encoder = Callable[[Any, bytearray], None]
Decoder = Callable[[bytes, int], "tuple[Any, int]"]


@dataclasses.dataclass(frozen=True)
class Codec:
    """One type's encoder (appends to a ``bytearray``) and decoder (``(value, next pos)``)."""

    encode: Encoder
    decode: Decoder


_STRUCTS: dict[type, Codec] = {}


def codec_of(cls: type) -> Codec:
    """The codec of a dataclass (compiled on first use)."""
    found = _STRUCTS.get(cls)
    if found is None:
        found = _struct(cls)
        _STRUCTS[cls] = found
    return found


def fields_of(cls: type) -> list[tuple[str, Any]]:
    """A dataclass's fields and their resolved wire annotations, in wire order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return [(f.name, hints[f.name]) for f in dataclasses.fields(cls)]


def _struct(cls: type) -> Codec:
    fields = fields_of(cls)
    # Placeholder for recursive types; none exist in the protocol, but fail loudly if so.
    parts = [(name, _compile(hint)) for name, hint in fields]
    names = [name for name, _ in parts]
    encoders = [c.encode for _, c in parts]
    decoders = [c.decode for _, c in parts]

    def encode(value: Any, out: bytearray) -> None:
        if not isinstance(value, cls):
            raise EncodeError(f"expected {cls.__name__}, got {type(value).__name__}")
        for name, enc in zip(names, encoders):
            enc(getattr(value, name), out)

    def decode(data: bytes, pos: int) -> tuple[Any, int]:
        values = []
        for dec in decoders:
            v, pos = dec(data, pos)
            values.append(v)
        return cls(*values), pos

    return Codec(encode, decode)


def _compile(hint: Any) -> Codec:
    bound: Bounded | None = None
    if get_origin(hint) is Annotated:
        base, *meta = get_args(hint)
        for m in meta:
            if isinstance(m, Int):
                return _int(m.bits)
            if isinstance(m, Variants):
                return _variants(m.name, get_args(base))
            if isinstance(m, Bounded):
                bound = m
        hint = base
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(get_args(hint)) == 2:
            return _option(_compile(args[0]))
        raise TypeError(f"unsupported union {hint!r}")
    if origin is list:
        (item,) = get_args(hint)
        return _list(_compile(item), bound)
    if hint is bool:
        return _BOOL
    if hint is str:
        return _string(bound)
    if hint is bytes:
        return _bytes(bound)
    if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
        return _unit_enum(hint)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return codec_of(hint)
    raise TypeError(f"no wire codec for {hint!r}")


# Primitives ----------------------------------------------------------------------------------


def _int(bits: int) -> Codec:
    if bits == 8:

        def enc8(v: Any, out: bytearray) -> None:
            if type(v) is not int or not 0 <= v <= 0xFF:
                raise EncodeError(f"{v!r} is not a u8")
            out.append(v)

        def dec8(data: bytes, pos: int) -> tuple[int, int]:
            if pos >= len(data):
                raise Malformed("u8 cut short")
            return data[pos], pos + 1

        return Codec(enc8, dec8)
    top = 1 << bits

    def enc(v: Any, out: bytearray) -> None:
        if type(v) is not int or not 0 <= v < top:
            raise EncodeError(f"{v!r} is not a u{bits}")
        out += encode_varint(v, bits)

    def dec(data: bytes, pos: int) -> tuple[int, int]:
        # Fast path: one byte.
        if pos < len(data) and data[pos] < 0x80:
            return data[pos], pos + 1
        return decode_varint(data, pos, bits)

    return Codec(enc, dec)


_U32 = _int(32)
_U64 = _int(64)


def _bool_enc(v: Any, out: bytearray) -> None:
    if type(v) is not bool:
        raise EncodeError(f"{v!r} is not a bool")
    out.append(1 if v else 0)


def _bool_dec(data: bytes, pos: int) -> tuple[bool, int]:
    if pos >= len(data):
        raise Malformed("bool cut short")
    b = data[pos]
    if b > 1:
        raise Malformed(f"bool byte {b:#04x}")
    return b == 1, pos + 1


_BOOL = Codec(_bool_enc, _bool_dec)


def _check_len(n: int, bound: Bounded | None, what: str, exc: type[Exception]) -> None:
    if bound is not None and (n < bound.min_len or (bound.max_len is not None and n > bound.max_len)):
        raise exc(f"{what} of length {n} outside {bound.min_len}..={bound.max_len}")


def _length(data: bytes, pos: int, bound: Bounded | None, what: str) -> tuple[int, int]:
    n, pos = _U64.decode(data, pos)
    _check_len(n, bound, what, Malformed)
    if n > len(data) - pos:
        raise Malformed(f"{what} of length {n} runs past the body")
    return n, pos


def _string(bound: Bounded | None) -> Codec:
    def enc(v: Any, out: bytearray) -> None:
        if type(v) is not str:
            raise EncodeError(f"{v!r} is not a str")
        raw = v.encode("utf-8")
        _check_len(len(raw), bound, "string", EncodeError)
        _U64.encode(len(raw), out)
        out += raw

    def dec(data: bytes, pos: int) -> tuple[str, int]:
        n, pos = _length(data, pos, bound, "string")
        try:
            return data[pos : pos + n].decode("utf-8"), pos + n
        except UnicodeDecodeError as err:
            raise Malformed(f"invalid UTF-8: {err}") from None

    return Codec(enc, dec)


def _bytes(bound: Bounded | None) -> Codec:
    def enc(v: Any, out: bytearray) -> None:
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise EncodeError(f"{type(v).__name__} is not bytes")
        _check_len(len(v), bound, "bytes", EncodeError)
        _U64.encode(len(v), out)
        out += v

    def dec(data: bytes, pos: int) -> tuple[bytes, int]:
        n, pos = _length(data, pos, bound, "bytes")
        return bytes(data[pos : pos + n]), pos + n

    return Codec(enc, dec)


def _option(inner: Codec) -> Codec:
    def enc(v: Any, out: bytearray) -> None:
        if v is None:
            out.append(0)
        else:
            out.append(1)
            inner.encode(v, out)

    def dec(data: bytes, pos: int) -> tuple[Any, int]:
        if pos >= len(data):
            raise Malformed("option tag cut short")
        tag = data[pos]
        if tag == 0:
            return None, pos + 1
        if tag == 1:
            return inner.decode(data, pos + 1)
        raise Malformed(f"option tag {tag:#04x}")

    return Codec(enc, dec)


def _list(item: Codec, bound: Bounded | None) -> Codec:
    def enc(v: Any, out: bytearray) -> None:
        if not isinstance(v, (list, tuple)):
            raise EncodeError(f"{type(v).__name__} is not a list")
        _check_len(len(v), bound, "list", EncodeError)
        _U64.encode(len(v), out)
        for x in v:
            item.encode(x, out)

    def dec(data: bytes, pos: int) -> tuple[list[Any], int]:
        # Every element takes at least one byte, so the count is bounded by what is left.
        n, pos = _length(data, pos, bound, "list")
        out = []
        for _ in range(n):
            x, pos = item.decode(data, pos)
            out.append(x)
        return out, pos

    return Codec(enc, dec)


def _unit_enum(cls: type[enum.IntEnum]) -> Codec:
    members = {m.value: m for m in cls}

    def enc(v: Any, out: bytearray) -> None:
        if not isinstance(v, cls):
            raise EncodeError(f"{v!r} is not a {cls.__name__}")
        _U32.encode(int(v), out)

    def dec(data: bytes, pos: int) -> tuple[Any, int]:
        index, pos = _U32.decode(data, pos)
        member = members.get(index)
        if member is None:
            raise UnknownVariant(cls.__name__, index)
        return member, pos

    return Codec(enc, dec)


def _variants(name: str, classes: tuple[type, ...]) -> Codec:
    index_of = {cls: i for i, cls in enumerate(classes)}
    bodies = [codec_of(cls) for cls in classes]

    def enc(v: Any, out: bytearray) -> None:
        index = index_of.get(type(v))
        if index is None:
            raise EncodeError(f"{type(v).__name__} is not a {name} variant")
        _U32.encode(index, out)
        bodies[index].encode(v, out)

    def dec(data: bytes, pos: int) -> tuple[Any, int]:
        index, pos = _U32.decode(data, pos)
        if index >= len(bodies):
            raise UnknownVariant(name, index)
        return bodies[index].decode(data, pos)

    return Codec(enc, dec)


def variants_of(hint: Any) -> tuple[str, tuple[type, ...]] | None:
    """For an ``Annotated[Union[...], Variants(name)]`` alias: its name and classes."""
    if get_origin(hint) is Annotated:
        base, *meta = get_args(hint)
        for m in meta:
            if isinstance(m, Variants):
                return m.name, get_args(base)
    return None


__all__ = [
    "U8",
    "U16",
    "U32",
    "U64",
    "Bounded",
    "Codec",
    "Int",
    "Variants",
    "codec_of",
    "fields_of",
    "is_newtype",
    "newtype",
    "variant_name",
    "variants_of",
    "Optional",
]
