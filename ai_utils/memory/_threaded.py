"""The async half of a checkpoint saver, run on its sync implementation in worker threads.

LangGraph's async savers (``AsyncSqliteSaver``, ``AsyncPostgresSaver``) bind their connection to the
event loop that created them, so one object cannot serve a sync run, an ``asyncio.run`` script and a
pytest or FastAPI loop alike. Running the sync methods in a worker thread works from every loop, never
blocks the loop, and keeps one connection (or pool) and one lock per saver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread
from langgraph.checkpoint.base import BaseCheckpointSaver

from ai_utils.memory._methods import offloaded, offloaded_iter

__all__ = ["ThreadedAsyncSaver"]

R = TypeVar("R")


class ThreadedAsyncSaver(BaseCheckpointSaver[str]):
    """Mixin: ``aget_tuple``/``alist``/``aput``/``aput_writes``/``adelete_thread`` call the sync twins in a thread.

    Put it first in the bases, before the class with the sync implementation. A subclass whose sync
    methods may run on some event loops directly (cheaper than a thread hop) overrides `_runs_inline`.
    """

    def _runs_inline(self) -> bool:
        """Whether the sync methods run on the current event loop itself instead of a worker thread (never here)."""
        return False

    async def _run_sync(self, call: Callable[[], R]) -> R:
        """Run ``call`` (a sync method with its arguments) in a worker thread, or inline where `_runs_inline` says."""
        if self._runs_inline():
            return call()
        return await anyio.to_thread.run_sync(call)

    aget_tuple = offloaded(BaseCheckpointSaver.get_tuple)
    alist = offloaded_iter(BaseCheckpointSaver.list)
    aput = offloaded(BaseCheckpointSaver.put)
    aput_writes = offloaded(BaseCheckpointSaver.put_writes)
    adelete_thread = offloaded(BaseCheckpointSaver.delete_thread)
    aget_delta_channel_history = offloaded(BaseCheckpointSaver.get_delta_channel_history)
