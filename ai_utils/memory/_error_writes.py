"""A failed task's exception as our savers store it: its class name, never its text.

LangGraph stores a failed task's exception as a pending write (channel ``__error__``). Its text may quote a key
(a provider's 401 does) or a value of the run's ``context`` (a tool's "db down for <token>"), and a checkpoint
keeps it for good. Every saver ai_utils builds passes its writes through `without_error_text` before storing them:
`ThreadedAsyncSaver` (``sqlite_saver``, ``postgres_saver`` and the durable sessions' savers built on them),
`SupabaseCheckpointSaver` (its own ``put_writes``) and `SmartCheckpointSaver` (whatever saver it wraps).

Nothing that reads the write back needs more: LangGraph turns a stored value that is not an exception into
``Exception(str(value))``, ``get_state().tasks[i].error`` shows the class name, and a failed thread is continued
as before (the failed task has no result, so its node runs again). The text stays where it is safe: the raised
exception in the caller's hands (and, in sessions, the turn's safe ``turn_end`` error and the server's log).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ai_utils._compat.langgraph import ERROR_CHANNEL

__all__ = ["without_error_text"]


def without_error_text(writes: Sequence[tuple[str, Any]]) -> Sequence[tuple[str, Any]]:
    """``writes`` with each stored exception replaced by its class name (a new list; LangGraph keeps its own)."""
    if not any(channel == ERROR_CHANNEL and isinstance(value, BaseException) for channel, value in writes):
        return writes
    return [
        (channel, f"{type(value).__name__} (its message is not stored: it may quote a key or the run's context)")
        if channel == ERROR_CHANNEL and isinstance(value, BaseException)
        else (channel, value)
        for channel, value in writes
    ]
