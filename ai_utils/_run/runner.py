"""The run shells shared by the graph wrappers (`Agent`, `DeepAgent`): invoke, stream, MCP scope, pending.

A subclass sets ``_owner``, ``checkpointer``, ``output``, ``_tools``, ``_servers``, ``_durability`` and
``_graph`` (``None`` with MCP servers: their sessions exist only per run) and implements ``_build(tools)``.
With MCP servers the graph is built on the first run, with tools routed to the sessions of whichever run calls
them, and kept until the servers list different tools.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Durability, StateSnapshot
from pydantic import BaseModel

from ai_utils._run.args import config_thread_id, merge_run_config, warn_unstored_thread
from ai_utils._run.calls import (
    Decisions,
    Interrupt,
    RunResult,
    aresume_input,
    astream_run,
    check_call,
    final_result,
    resume_input,
    run_config,
    start_input,
    stream_run,
)
from ai_utils._run.context import check_context
from ai_utils._run.locks import RunLock, thread_lock
from ai_utils._utils import iterate_sync, run_sync
from ai_utils.client import Decision, StreamChunk
from ai_utils.exceptions import UserError
from ai_utils.streaming._adapter import ChunkAdapter
from ai_utils.streaming._interrupts import interrupt_chunk
from ai_utils.tools._mcp_config import MCPServer

__all__ = ["Graph", "GraphRunner"]

Graph = CompiledStateGraph[Any, Any, Any, Any]


def _held(lock: RunLock, chunks: Iterator[StreamChunk]) -> Iterator[StreamChunk]:
    """``chunks`` with ``lock`` held from the first chunk until the run ends or the consumer stops."""
    with lock.hold():
        try:
            yield from chunks
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()


class GraphRunner:
    """Base of the graph wrappers: the sync/async run shells around `ai_utils._run.calls`."""

    _owner = "Agent"
    checkpointer: Any
    output: type[BaseModel] | None
    callbacks: list[BaseCallbackHandler]
    _tools: list[BaseTool]
    _servers: Sequence[MCPServer]
    _durability: Durability | None
    _graph: Graph | None
    # With MCP servers: the graph of the latest run and the MCP tool signature it was built for.
    _mcp_graph: tuple[Any, Graph] | None = None
    # Tool names in ``interrupt_on``: each must name a tool of the built graph.
    _gated: tuple[str, ...] = ()

    def _build(self, tools: Sequence[BaseTool]) -> Graph:
        raise NotImplementedError

    def _check_gated(self, graph: Graph) -> Graph:
        """``graph``, once every ``interrupt_on`` key is known to name one of its tools (else `UserError`)."""
        if not self._gated:
            return graph
        node = graph.nodes.get("tools")
        known = set(getattr(node.bound, "tools_by_name", {})) if node is not None else set()
        unknown = sorted(set(self._gated) - known)
        if unknown:
            raise UserError(
                f"interrupt_on names tools the {self._owner} does not have: {unknown!r}; known tools: "
                f"{sorted(known)!r}. Fix the name (MCP tools are named `<server>__<tool>`) or add the tool."
            )
        return graph

    @property
    def graph(self) -> Graph:
        """The compiled LangGraph graph (with MCP servers: the latest run's, or one without their tools)."""
        if self._graph is not None:
            return self._graph
        return self._mcp_graph[1] if self._mcp_graph is not None else self._build(self._tools)

    def _config(
        self, thread_id: str | None, callbacks: Sequence[BaseCallbackHandler], config: RunnableConfig | None = None
    ) -> RunnableConfig:
        handlers = [*self.callbacks, *callbacks]
        return merge_run_config(run_config(thread_id, callbacks=handlers or None), config)

    def _check(self, input: Any, thread_id: str | None, decision: Any, decisions: Any, context: Any = None) -> None:
        check_context(getattr(self, "context_schema", None), context, owner=self._owner)
        check_call(
            owner=self._owner,
            input=input,
            thread_id=thread_id,
            decision=decision,
            decisions=decisions,
            has_checkpointer=self.checkpointer is not None,
        )
        warn_unstored_thread(self, thread_id)

    @contextlib.asynccontextmanager
    async def _run_graph(self, config: RunnableConfig) -> AsyncIterator[tuple[Graph, RunnableConfig]]:
        """The graph and config for one run; with MCP servers, their sessions stay open until the run ends."""
        if self._graph is not None:
            yield self._graph, config
            return
        from ai_utils.tools.mcp import mcp_scope

        async with mcp_scope(self._servers) as scope:
            cached = self._mcp_graph
            if cached is not None and cached[0] == scope.signature:
                graph = cached[1]
            else:
                # Built once per distinct tool listing, not per run (deepagents takes 13-19 ms to build a graph).
                graph = self._check_gated(self._build([*self._tools, *scope.routed_tools()]))
                self._mcp_graph = (scope.signature, graph)
            yield graph, scope.bind(config)

    def _run_lock(self, config: RunnableConfig) -> RunLock | None:
        """The lock that serialises runs on this thread in this process (``None`` without a checkpointer)."""
        thread_id = (config.get("configurable") or {}).get("thread_id")
        if self.checkpointer is None or not isinstance(thread_id, str):
            return None
        return thread_lock(self.checkpointer, thread_id)

    # --- durable sessions (SPEC §14; the wrapper was created with ``sessions=``) -----------------------------

    def session(self, session_id: str | None = None, *, context: Any = None) -> Any:
        """Open a durable session (a new id when ``None``); ``context`` reaches its tools and is never stored.

        Raises:
            UserError: the agent has no ``sessions=``, a bad id, or a session of an agent with another name.
        """
        from ai_utils.sessions._attach import open_session

        return open_session(self, session_id, context)

    def recover(self) -> int:
        """Continue every session of this agent whose worker stopped mid-turn; returns how many."""
        from ai_utils.sessions._attach import recover

        return recover(self)

    async def arecover(self) -> int:
        """Async twin of `recover` (the continued turns run as tasks on this loop)."""
        from ai_utils.sessions._attach import recover

        return recover(self, here=True)

    # --- pending -------------------------------------------------------------------------------------------

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

    # --- state (LangGraph's names) ---------------------------------------------------------------------

    def _state_config(self, thread: str | RunnableConfig) -> RunnableConfig:
        if isinstance(thread, str):
            return self._pending_config(thread)
        thread_id = config_thread_id(None, thread)
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

    # --- run shells ----------------------------------------------------------------------------------------

    # --- public stream pair (each wrapper has its own invoke) ---------------------------------------

    def stream(
        self,
        input: Any = None,
        *,
        thread_id: str | None = None,
        context: Any = None,
        decision: Decision | None = None,
        decisions: Decisions | None = None,
        show_tool_calls: bool = False,
        show_reasoning: bool = False,
        show_subagents: bool = False,
        callbacks: Sequence[BaseCallbackHandler] = (),
        config: RunnableConfig | None = None,
    ) -> Iterator[StreamChunk]:
        """Run one turn (or resume one) and yield its chunks as they come.

        Text ``str``s and, when asked for, tool / reasoning / subagent events (shapes: `ai_utils.client`); a
        paused run ends with one interrupt chunk, also when a subagent paused; ``get_stream_writer()`` data
        arrives as ``{"kind": "custom", "data": ...}``. Arguments as in `invoke`; the call is checked when
        iteration starts, so a `UserError` comes from the first ``next()`` (before the first chunk).
        """
        adapter = ChunkAdapter(
            show_tool_calls=show_tool_calls, show_reasoning=show_reasoning, show_subagents=show_subagents
        )
        thread_id = config_thread_id(thread_id, config)
        return self._stream(input, thread_id, context, decision, decisions, adapter, callbacks, config)

    def astream(
        self,
        input: Any = None,
        *,
        thread_id: str | None = None,
        context: Any = None,
        decision: Decision | None = None,
        decisions: Decisions | None = None,
        show_tool_calls: bool = False,
        show_reasoning: bool = False,
        show_subagents: bool = False,
        callbacks: Sequence[BaseCallbackHandler] = (),
        config: RunnableConfig | None = None,
    ) -> AsyncIterator[StreamChunk]:
        """Async twin of `stream`."""
        adapter = ChunkAdapter(
            show_tool_calls=show_tool_calls, show_reasoning=show_reasoning, show_subagents=show_subagents
        )
        thread_id = config_thread_id(thread_id, config)
        return self._astream(input, thread_id, context, decision, decisions, adapter, callbacks, config)

    def _invoke(
        self,
        input: Any,
        thread_id: str | None,
        context: Any,
        decision: Decision | None,
        decisions: Decisions | None,
        callbacks: Sequence[BaseCallbackHandler],
        run_config: RunnableConfig | None = None,
    ) -> RunResult:
        thread_id = config_thread_id(thread_id, run_config)
        self._check(input, thread_id, decision, decisions, context)
        if self._graph is None:
            return run_sync(
                lambda: self._ainvoke(input, thread_id, context, decision, decisions, callbacks, run_config),
                what=f"{self._owner}.invoke with MCP servers",
            )
        config = self._config(thread_id, callbacks, run_config)
        lock = self._run_lock(config)
        with lock.hold() if lock is not None else contextlib.nullcontext():
            graph_input = (
                start_input(input) if input is not None else resume_input(self._graph, config, decision, decisions)
            )
            output = self._graph.invoke(graph_input, config, context=context, durability=self._durability, version="v2")
        return final_result(output, structured=self.output is not None)

    async def _ainvoke(
        self,
        input: Any,
        thread_id: str | None,
        context: Any,
        decision: Decision | None,
        decisions: Decisions | None,
        callbacks: Sequence[BaseCallbackHandler],
        run_config: RunnableConfig | None = None,
    ) -> RunResult:
        thread_id = config_thread_id(thread_id, run_config)
        self._check(input, thread_id, decision, decisions, context)
        run = self._config(thread_id, callbacks, run_config)
        lock = self._run_lock(run)
        async with (
            lock.ahold() if lock is not None else contextlib.nullcontext(),
            self._run_graph(run) as (graph, config),
        ):
            if input is None:
                graph_input: Any = await aresume_input(graph, config, decision, decisions)
            else:
                graph_input = start_input(input)
            output = await graph.ainvoke(
                graph_input, config, context=context, durability=self._durability, version="v2"
            )
        return final_result(output, structured=self.output is not None)

    def _stream(
        self,
        input: Any,
        thread_id: str | None,
        context: Any,
        decision: Decision | None,
        decisions: Decisions | None,
        adapter: ChunkAdapter,
        callbacks: Sequence[BaseCallbackHandler],
        run_config: RunnableConfig | None = None,
    ) -> Iterator[StreamChunk]:
        # Checked on the first next(), not here: StreamResponse then answers a bad call with a 400 JSON body.
        yield from self._stream_now(input, thread_id, context, decision, decisions, adapter, callbacks, run_config)

    def _stream_now(
        self,
        input: Any,
        thread_id: str | None,
        context: Any,
        decision: Decision | None,
        decisions: Decisions | None,
        adapter: ChunkAdapter,
        callbacks: Sequence[BaseCallbackHandler],
        run_config: RunnableConfig | None,
    ) -> Iterator[StreamChunk]:
        self._check(input, thread_id, decision, decisions, context)
        config = self._config(thread_id, callbacks, run_config)
        if self._graph is None:
            return iterate_sync(
                lambda: self._astream_run(input, config, context, decision, decisions, adapter),
                what=f"{self._owner}.stream with MCP servers",
            )
        graph_input = (
            start_input(input) if input is not None else resume_input(self._graph, config, decision, decisions)
        )
        chunks = stream_run(self._graph, graph_input, config, adapter, context=context, durability=self._durability)
        lock = self._run_lock(config)
        return chunks if lock is None else _held(lock, chunks)

    def _astream(
        self,
        input: Any,
        thread_id: str | None,
        context: Any,
        decision: Decision | None,
        decisions: Decisions | None,
        adapter: ChunkAdapter,
        callbacks: Sequence[BaseCallbackHandler],
        run_config: RunnableConfig | None = None,
    ) -> AsyncIterator[StreamChunk]:
        # Checked on the first __anext__, not here: StreamResponse then answers a bad call with a 400 JSON body.
        return self._astream_run(
            input, None, context, decision, decisions, adapter, check=(thread_id, callbacks, run_config)
        )

    async def _astream_run(
        self,
        input: Any,
        config: RunnableConfig | None,
        context: Any,
        decision: Decision | None,
        decisions: Decisions | None,
        adapter: ChunkAdapter,
        *,
        check: tuple[str | None, Sequence[BaseCallbackHandler], RunnableConfig | None] | None = None,
    ) -> AsyncIterator[StreamChunk]:
        # ``check`` (thread_id, callbacks, caller config): validate and build the config here, at the first
        # __anext__, so the error surfaces inside the stream (StreamResponse answers it with a 400 JSON body).
        if check is not None:
            self._check(input, check[0], decision, decisions, context)
            config = self._config(*check)
        elif config is None:
            raise TypeError("_astream_run needs a config or a check")
        lock = self._run_lock(config)
        async with (
            lock.ahold() if lock is not None else contextlib.nullcontext(),
            self._run_graph(config) as (graph, config),
        ):
            if input is None:
                graph_input: Any = await aresume_input(graph, config, decision, decisions)
            else:
                graph_input = start_input(input)
            chunks = astream_run(graph, graph_input, config, adapter, context=context, durability=self._durability)
            try:
                async for chunk in chunks:
                    yield chunk
            finally:
                # A consumer that stops early must stop the graph run now, before the MCP sessions close;
                # left to the garbage collector, the run would go on in the background for a while.
                aclose = getattr(chunks, "aclose", None)
                if aclose is not None:
                    await aclose()
