"""The async half of a checkpoint saver, run on its sync implementation in worker threads.

LangGraph's async savers (``AsyncSqliteSaver``, ``AsyncPostgresSaver``) bind their connection to the
event loop that created them, so one object cannot serve a sync run, an ``asyncio.run`` script and a
pytest or FastAPI loop alike. Running the sync methods in a worker thread works from every loop, never
blocks the loop, and keeps one connection (or pool) and one lock per saver.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio.to_thread
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

__all__ = ["ThreadedAsyncSaver"]


class ThreadedAsyncSaver(BaseCheckpointSaver[str]):
    """Mixin: ``aget_tuple``/``alist``/``aput``/``aput_writes``/``adelete_thread`` call the sync twins in a thread.

    Put it first in the bases, before the class with the sync implementation.
    """

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of ``get_tuple`` (runs in a worker thread)."""
        return await anyio.to_thread.run_sync(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async twin of ``list``: all matching checkpoints are read in a worker thread, then yielded.

        Pass ``limit`` when a thread may hold very many checkpoints.
        """
        read = functools.partial(self.list, config, filter=filter, before=before, limit=limit)
        for item in await anyio.to_thread.run_sync(lambda: [*read()]):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of ``put`` (runs in a worker thread)."""
        return await anyio.to_thread.run_sync(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of ``put_writes`` (runs in a worker thread)."""
        await anyio.to_thread.run_sync(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async twin of ``delete_thread`` (runs in a worker thread)."""
        await anyio.to_thread.run_sync(self.delete_thread, thread_id)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async twin of ``get_delta_channel_history`` (runs in a worker thread)."""
        read = functools.partial(self.get_delta_channel_history, config=config, channels=channels)
        return await anyio.to_thread.run_sync(read)
