"""The lintel wire protocol (PROTOCOL.md), pure and I/O-free.

- ``varint``: canonical LEB128 varints; ``schema``: postcard codecs compiled from annotations;
- ``types``: section 4's types; ``frames``: section 3's bodies and the kind table;
- ``framing``: length-prefixed frames, ``FrameDecoder``; ``lower``: what an older reader is
  sent; ``view``: a JSON-shaped view of decoded values.
"""

from .frames import FRAMES, KIND_OF, Frame, Kind
from .framing import (
    DEFAULT_MAX_FRAME_LEN,
    PROTOCOL_VERSION,
    FrameDecoder,
    decode_body,
    encode_body,
    encode_frame,
    frame_length,
)
from .lower import lower_frame, lower_result
from .view import view

__all__ = [
    "DEFAULT_MAX_FRAME_LEN",
    "FRAMES",
    "KIND_OF",
    "PROTOCOL_VERSION",
    "Frame",
    "FrameDecoder",
    "Kind",
    "decode_body",
    "encode_body",
    "encode_frame",
    "frame_length",
    "lower_frame",
    "lower_result",
    "view",
]
