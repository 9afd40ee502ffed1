"""lintel: an asyncio worker and producer SDK for the lintel node, standard library only."""

from .errors import *  # noqa: F401,F403
from .errors import LintelError
from .wire.types import *  # noqa: F401,F403

__all__ = ["LintelError"]
