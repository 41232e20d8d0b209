"""Fenced checkpoint writes: the part both session savers (SQLite, Postgres) share.

While this worker leases a session, every checkpoint write for its thread runs with ``FENCE`` set to
``(session_id, token)``; each dialect's saver reads it where it opens the write transaction and checks the
lease there, so a replaced worker's write never becomes visible (`SessionFencedError`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata

__all__ = ["FENCE", "FencedWrites"]

# (session_id, token) of the checkpoint write in progress in this context.
FENCE: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("ai_utils_session_fence", default=None)


class FencedWrites(BaseCheckpointSaver[Any]):
    """Mixin (first base) for a saver: ``put``/``put_writes`` run with ``FENCE`` set for leased threads."""

    leases: dict[str, int]

    def _fence(self, config: RunnableConfig) -> tuple[str, int] | None:
        thread = (config.get("configurable") or {}).get("thread_id")
        token = self.leases.get(thread) if isinstance(thread, str) else None
        return None if token is None else (thread, token)  # type: ignore[return-value]

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint (fenced while this worker leases the thread's session)."""
        reset = FENCE.set(self._fence(config))
        try:
            return super().put(config, checkpoint, metadata, new_versions)
        finally:
            FENCE.reset(reset)

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Store a task's writes (fenced while this worker leases the thread's session)."""
        reset = FENCE.set(self._fence(config))
        try:
            super().put_writes(config, writes, task_id, task_path)
        finally:
            FENCE.reset(reset)
