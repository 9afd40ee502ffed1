"""W3C trace context in a dispatch's headers: ``traceparent`` and ``tracestate``."""

from __future__ import annotations

import re
from dataclasses import dataclass

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_SHAPE = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True)
class TraceContext:
    """A parsed ``traceparent`` and the ``tracestate`` passed on as it is."""

    trace_id: str
    parent_id: str
    flags: int
    state: str | None = None

    @classmethod
    def parse(cls, traceparent: str, tracestate: str | None = None) -> "TraceContext | None":
        """The context of a valid ``traceparent``; ``None`` for one that is not."""
        m = _SHAPE.match(traceparent)
        if m is None or m.group(1) == "ff":
            return None
        if set(m.group(2)) == {"0"} or set(m.group(3)) == {"0"}:
            return None
        return cls(m.group(2), m.group(3), int(m.group(4), 16), tracestate)

    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.parent_id}-{self.flags:02x}"

    def headers(self) -> list[tuple[str, str]]:
        """The headers that carry it."""
        out = [(TRACEPARENT, self.traceparent())]
        if self.state is not None:
            out.append((TRACESTATE, self.state))
        return out
