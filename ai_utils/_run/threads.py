"""Reading a thread's stored state: ``pending`` (the interrupt it waits on) and LangGraph's ``get_state`` family.

A mixin of `GraphRunner`; it reads ``checkpointer``, ``graph`` and ``_owner`` of the wrapper.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import StateSnapshot

from ai_utils._run.args import config_thread_id, merge_run_config
from ai_utils._run.calls import Graph, Interrupt, run_config
from ai_utils.exceptions import UserError
from ai_utils.streaming._interrupts import interrupt_chunk

__all__ = ["ThreadState"]


class ThreadState:
    """``pending`` / ``get_state`` / ``get_state_history`` and their async twins."""

    _owner: str
    checkpointer: Any

    @property
    def graph(self) -> Graph:
        raise NotImplementedError

    def _pending_config(self, thread_id: str) -> RunnableConfig:
        if self.checkpointer is None:
            raise UserError(
                f"{self._owner}.pending and get_state read the thread from a checkpointer; create the agent with one."
            )
        return run_config(thread_id)

    def pending(self, thread_id: str) -> Interrupt | None:
        """The interrupt chunk the thread waits on (e.g. after a page reload), or ``None``.

        Raises:
            UserError: when the agent has no checkpointer to read from.
        """
        state = self.graph.get_state(self._pending_config(thread_id))
        return interrupt_chunk(state.interrupts)

    async def apending(self, thread_id: str) -> Interrupt | None:
        """Async twin of `pending` (needed for async-only savers)."""
        state = await self.graph.aget_state(self._pending_config(thread_id))
        return interrupt_chunk(state.interrupts)

    def _state_config(self, thread: str | RunnableConfig) -> RunnableConfig:
        if isinstance(thread, str):
            return self._pending_config(thread)
        thread_id = config_thread_id(None, thread) if isinstance(thread, Mapping) else None
        if not thread_id:
            raise UserError(f"{self._owner}.get_state needs a thread: pass its thread_id (a str), got {thread!r}.")
        return merge_run_config(self._pending_config(thread_id), thread)

    def get_state(self, thread: str | RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """The thread's current LangGraph ``StateSnapshot`` (``values``, ``next``, ``interrupts``, ...).

        Args:
            thread: the ``thread_id``, or a LangChain config ``{"configurable": {"thread_id": ...}}``
                (optionally with a ``checkpoint_id``).
            subgraphs: include the state of paused subgraphs.

        Raises:
            UserError: when the agent has no checkpointer.
        """
        return self.graph.get_state(self._state_config(thread), subgraphs=subgraphs)

    async def aget_state(self, thread: str | RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """Async twin of `get_state`."""
        return await self.graph.aget_state(self._state_config(thread), subgraphs=subgraphs)

    def get_state_history(
        self, thread: str | RunnableConfig, *, limit: int | None = None, before: RunnableConfig | None = None
    ) -> Iterator[StateSnapshot]:
        """The thread's checkpoints as ``StateSnapshot``s, newest first (LangGraph's ``get_state_history``)."""
        return self.graph.get_state_history(self._state_config(thread), limit=limit, before=before)

    def aget_state_history(
        self, thread: str | RunnableConfig, *, limit: int | None = None, before: RunnableConfig | None = None
    ) -> AsyncIterator[StateSnapshot]:
        """Async twin of `get_state_history`."""
        return self.graph.aget_state_history(self._state_config(thread), limit=limit, before=before)
