"""A JSON-shaped view of decoded values, as serde's JSON of the Rust types writes them:
structs are objects by field name, options ``None`` or the value, unit variants their name,
variants with data ``{"Name": value-or-object}``, bytes lists of numbers."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from .schema import is_newtype, variant_name

# Variant classes are the members of the Variants unions; plain structs are the rest.
_VARIANT_CLASSES: set[type] = set()


def _register_variants() -> None:
    from typing import get_args

    from . import types as t

    for alias in (t.NodeRouting, t.ActivityOutcome, t.DispatchResult, t.NodeEvent):
        union = get_args(alias)[0]
        _VARIANT_CLASSES.update(get_args(union))


def view(value: Any) -> Any:
    """The JSON-shaped view of ``value`` (a frame, a type of section 4, or a primitive)."""
    if not _VARIANT_CLASSES:
        _register_variants()
    return _view(value)


def _view(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.IntEnum):
        return value.name
    if isinstance(value, int):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return list(bytes(value))
    if isinstance(value, list):
        return [_view(v) for v in value]
    if dataclasses.is_dataclass(value):
        cls = type(value)
        fields = {f.name: _view(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if cls in _VARIANT_CLASSES:
            name = variant_name(cls)
            if not fields:
                return name
            if is_newtype(cls):
                return {name: next(iter(fields.values()))}
            return {name: fields}
        return fields
    raise TypeError(f"no view of {type(value).__name__}")
