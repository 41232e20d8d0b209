"""The async half of a checkpoint saver, run on its sync implementation in worker threads.

LangGraph's async savers (``AsyncSqliteSaver``, ``AsyncPostgresSaver``) bind their connection to the
event loop that created them, so one object cannot serve a sync run, an ``asyncio.run`` script and a
pytest or FastAPI loop alike. Running the sync methods in a worker thread works from every loop, never
blocks the loop, and keeps one connection (or pool) and one lock per saver.

It is also where these savers' writes pass `without_error_text`: a failed task's exception is stored as its
class name, never its text (which may quote a key or the run's context).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio.to_thread
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from ai_utils.memory._error_writes import without_error_text
from ai_utils.memory._methods import offloaded, offloaded_iter

__all__ = ["ThreadedAsyncSaver"]

R = TypeVar("R")


class ThreadedAsyncSaver(BaseCheckpointSaver[str]):
    """Mixin: ``aget_tuple``/``alist``/``aput``/``aput_writes``/``adelete_thread`` call the sync twins in a thread.

    Put it first in the bases, before the class with the sync implementation. A subclass whose sync
    methods may run on some event loops directly (cheaper than a thread hop) overrides `_runs_inline`.
    ``put_writes`` stores a failed task's exception as its class name only (`without_error_text`); a class
    that implements ``put_writes`` itself calls `without_error_text` there.
    """

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """The sync implementation's ``put_writes``, with a failed task's exception stored as its class name."""
        super().put_writes(config, without_error_text(writes), task_id, task_path)

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
