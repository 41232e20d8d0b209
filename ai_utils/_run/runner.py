"""`GraphRunner`: the one run path of the graph wrappers (`Agent`, `DeepAgent`): invoke, stream, MCP scope.

A subclass sets ``_owner``, ``checkpointer``, ``output``, ``callbacks``, ``_tools``, ``_servers``, ``_durability``
and ``_graph`` (``None`` with MCP servers: their sessions exist only per run) and implements ``_build(tools)``;
`ai_utils._run.setup.Wrapper` does all of that from the constructor options. With MCP servers the graph is built
on the first run, with tools routed to the sessions of whichever run calls them, and kept until the servers list
different tools.

Each public method turns its options into one `RunCall`; the sync and async shells share the checks, the config,
the input-or-resume step and the result mapping (`ai_utils._run.calls`) and differ only in the graph method they
call. A sync call with MCP servers drives the async shell (`run_sync` / `iterate_sync`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Generic, Literal, Union, cast, overload

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.graph import Graph as DrawableGraph
from langchain_core.tools import BaseTool
from langgraph.types import Durability, StateSnapshot
from pydantic import BaseModel
from typing_extensions import TypeVar, Unpack

from ai_utils._compat.langchain import untraced_hooks
from ai_utils._run.args import merge_run_config, warn_unstored_thread
from ai_utils._run.calls import (
    Decisions,
    Graph,
    InputGuard,
    Interrupt,
    RunCall,
    RunInput,
    RunOptions,
    RunResult,
    StreamOptions,
    check_allowed_tools,
    check_call,
    chunk_adapter,
    final_result,
    finished_calls,
    graph_input,
    graph_tool_names,
    redact_input,
    run_config,
)
from ai_utils._run.context import check_context
from ai_utils._run.durable import SessionMethods
from ai_utils._run.hooks import langsmith_tracing, traced_hooks
from ai_utils._run.locks import ahold_thread, hold_thread
from ai_utils._run.record import AgentRun, TraceSink, aemit_trace, bind_record, emit_trace
from ai_utils._run.runnable import WrapperRunnable, warn_sync_in_loop
from ai_utils._run.threads import ThreadState
from ai_utils._run.tracing import Frame, RunTracer, asteps, end_run, paused, start_run, steps
from ai_utils._utils import iterate_sync, run_sync
from ai_utils.client import Decision, InterruptBatch, InterruptEvent, StreamChunk, is_interrupt
from ai_utils.exceptions import UserError
from ai_utils.streaming._adapter import ChunkAdapter, aadapt, adapt, stream_kwargs
from ai_utils.tools._mcp_config import MCPServer
from ai_utils.tools._normalize import check_unique

__all__ = ["Graph", "GraphRunner"]

OutputT = TypeVar("OutputT", covariant=True, default="str | BaseModel")
"""What ``invoke`` answers besides an interrupt (each wrapper binds it through its constructor overloads)."""


class GraphRunner(ThreadState, SessionMethods, WrapperRunnable["OutputT | Interrupt"], Generic[OutputT]):
    """Base of the graph wrappers: the sync/async run shells around `ai_utils._run.calls`, as a LangChain `Runnable`.

    The graph's own root run is the wrapper's run in callbacks (``astream_events``, LangSmith): the caller's
    ``config`` (callbacks, tags, metadata, ``run_id``, ``run_name``) goes to the graph call, so no second run
    wraps it.
    """

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
    # For runs LangSmith traces: (the fast graph, its twin with hooks traced for their whole duration).
    _traced_graph: tuple[Graph, Graph] | None = None
    _traced_mcp_graph: tuple[Any, Graph] | None = None
    # Tool names in ``interrupt_on``: each must name a tool of the built graph.
    _gated: tuple[str, ...] = ()
    # Sees the graph input of every new turn and may add to it (the mode router stores the turn's mode there:
    # decided once, from the message that started the turn).
    _start_hook: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # ``on_trace``: where the run's trace events go (`ai_utils._run.record`).
    _on_trace: TraceSink | None = None
    name: str | None = None
    # Middleware that see the user's input before anything stores it (`ai_utils._run.calls.InputGuard`).
    _input_guards: tuple[InputGuard, ...] = ()
    # ``tracer_provider=``'s span maker (`ai_utils._run.tracing`); ``None``: ``instrument()``'s, if any.
    _tracer: RunTracer | None = None

    def _build(self, tools: Sequence[BaseTool]) -> Graph:
        raise NotImplementedError

    def _compile(self, tools: Sequence[BaseTool], *, gated: bool = True, traced: bool = False) -> Graph:
        """``_build(tools)``, once the tool names are known to be unique; else `UserError`.

        With ``gated`` (``tools`` are all the run's tools), every ``interrupt_on`` key must name one of them.
        Without ``traced`` the middleware hooks go into the graph without langsmith's ``traceable`` wrapper (it
        only costs time when LangSmith does not trace the run; traced runs get the `_compile_traced` twin).
        """
        check_unique(t.name for t in tools)
        with contextlib.nullcontext() if traced else untraced_hooks():
            graph = self._build(tools)
        if not gated or not self._gated:
            return graph
        known = graph_tool_names(graph)
        unknown = sorted(set(self._gated) - known)
        if unknown:
            raise UserError(
                f"interrupt_on names tools the {self._owner} does not have: {unknown!r}; known tools: "
                f"{sorted(known)!r}. Fix the name (MCP tools are named `<server>__<tool>`) or add the tool."
            )
        return graph

    def _middleware_in_use(self) -> list[Any]:
        """Every middleware instance `_build` hands the graph factory (for `traced_hooks`)."""
        return list(getattr(self, "_middleware", ()))

    def _compile_traced(self, tools: Sequence[BaseTool], *, gated: bool = True) -> Graph:
        """`_compile`, with plain async hooks traced for their whole duration (see ``_run/hooks.py``)."""
        with traced_hooks(self._middleware_in_use()):
            return self._compile(tools, gated=gated, traced=True)

    def _run_graph(self, config: RunnableConfig) -> Graph:
        """The compiled graph for one run: the fast one, or its traced twin when LangSmith traces the run."""
        graph = cast("Graph", self._graph)
        if not langsmith_tracing(config):
            return graph
        traced = self._traced_graph
        if traced is None or traced[0] is not graph:
            traced = (graph, self._compile_traced(self._tools))
            self._traced_graph = traced
        return traced[1]

    @property
    def graph(self) -> Graph:
        """The compiled LangGraph graph (with MCP servers: the latest run's, or one without their tools)."""
        if self._graph is not None:
            return self._graph
        return self._mcp_graph[1] if self._mcp_graph is not None else self._build(self._tools)

    # --- public run methods -------------------------------------------------------------------------------

    @overload  # type: ignore[override]  # Runnable's **kwargs: Any, narrowed to the typed run options
    def invoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        details: Literal[False] = False,
        **options: Unpack[RunOptions],
    ) -> OutputT | Interrupt: ...

    @overload
    def invoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        details: Literal[True],
        **options: Unpack[RunOptions],
    ) -> AgentRun[OutputT] | Interrupt: ...

    def invoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        details: bool = False,
        **options: Unpack[RunOptions],
    ) -> OutputT | AgentRun[OutputT] | Interrupt:
        """Run one turn (or resume a paused one) to the end.

        Args:
            input: the user's message (a str, LangChain messages or a prompt value); leave it out to answer a
                pending approval with ``decision``/``decisions``, or to continue a run that stopped (e.g. in a
                crash).
            config: a LangChain ``RunnableConfig`` (callbacks, tags, metadata, run_name, recursion_limit,
                ``configurable``), merged with ours; its ``configurable.thread_id`` names the thread too.
            details: return an `AgentRun` (the answer with the run's model calls, usage, model, the actions its
                tools proposed and its ``trace_id``) instead of the bare answer; an interrupt is still returned
                as the interrupt.
            **options: ``thread_id``, ``context``, ``decision``, ``decisions``, ``callbacks``, ``allowed_tools``,
                ``trace_id`` (see `RunOptions`).

        Returns:
            The answer text, the ``output`` model instance, or an interrupt chunk (``{"kind": "interrupt", ...}``)
            when a tool waits for approval (with ``details=True``: an `AgentRun` instead of the answer).

        Raises:
            UserError: a bad call (input and a decision, no ``thread_id`` with a checkpointer, a ``thread_id``
                that differs from the config's, an unknown option or tool name in ``allowed_tools``).
        """
        self._warn_in_loop("invoke")
        call = RunCall.of(self._owner, "invoke", input, options, config)
        return self._answered(self._answer(call, self._invoke(call), details))

    @overload  # type: ignore[override]  # see invoke
    async def ainvoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        details: Literal[False] = False,
        **options: Unpack[RunOptions],
    ) -> OutputT | Interrupt: ...

    @overload
    async def ainvoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        details: Literal[True],
        **options: Unpack[RunOptions],
    ) -> AgentRun[OutputT] | Interrupt: ...

    async def ainvoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        details: bool = False,
        **options: Unpack[RunOptions],
    ) -> OutputT | AgentRun[OutputT] | Interrupt:
        """Async twin of `invoke`."""
        call = RunCall.of(self._owner, "ainvoke", input, options, config)
        result = self._answer(call, await self._ainvoke(call), details)
        await call.record.flush()
        return self._answered(result)

    def stream(  # type: ignore[override]  # yields our chunks (ai_utils.client), not answers
        self, input: RunInput = None, config: RunnableConfig | None = None, **options: Unpack[StreamOptions]
    ) -> Iterator[StreamChunk]:
        """Run one turn (or resume one) and yield its chunks as they come.

        Text ``str``s and, when asked for (``show_tool_calls``, ``show_reasoning``, ``show_subagents``), tool /
        reasoning / subagent events (shapes: `ai_utils.client`); a paused run ends with one interrupt chunk, also
        when a subagent paused; ``get_stream_writer()`` data arrives as ``{"kind": "custom", "data": ...}``.
        Other options as in `invoke` (see `StreamOptions`); the call is checked when iteration starts, so a
        `UserError` comes from the first ``next()`` (before the first chunk); an unknown option fails at once. A
        run started (first ``next()``) on a thread that runs an event loop warns, naming `astream` (iterating in
        a worker thread, as ``StreamResponse`` does with a sync iterator, is fine).
        """
        return self._stream(RunCall.of(self._owner, "stream", input, options, config), chunk_adapter(options))

    def astream(  # type: ignore[override]  # see stream
        self, input: RunInput = None, config: RunnableConfig | None = None, **options: Unpack[StreamOptions]
    ) -> AsyncIterator[StreamChunk]:
        """Async twin of `stream`."""
        return self._arun_stream(RunCall.of(self._owner, "astream", input, options, config), chunk_adapter(options))

    # --- the Runnable face ----------------------------------------------------------------------------------

    def _warn_in_loop(self, method: str) -> None:
        # With MCP servers a sync call inside a loop fails anyway (run_sync refuses, naming the async twin).
        if self._graph is not None:
            warn_sync_in_loop(self._owner, method, stacklevel=4)

    def _input_type(self) -> Any:
        return RunInput

    def _output_type(self) -> Any:
        return Union[self.output or str, InterruptEvent, InterruptBatch]  # noqa: UP007 - built at run time

    def get_graph(self, config: RunnableConfig | None = None) -> DrawableGraph:
        """The compiled graph's drawable graph (``agent.get_graph().draw_mermaid()``)."""
        return self.graph.get_graph(config)

    def _typed(self, result: RunResult) -> OutputT | Interrupt:
        # The constructor overloads tie OutputT to ``output`` (and ``actions``), which decide what a run returns.
        return cast("OutputT | Interrupt", result)

    def _answered(self, result: Any) -> OutputT | AgentRun[OutputT] | Interrupt:
        # As `_typed`, for a result that may be an `AgentRun` (``details=True``).
        return cast("OutputT | AgentRun[OutputT] | Interrupt", result)

    def _answer(self, call: RunCall, result: Any, details: bool) -> Any:
        """The end of an ``invoke``: the ``completed`` trace event, and with ``details`` the `AgentRun`.

        A wrapper that post-processes the answer (the actions agent) does so first and hands the result here.
        """
        interrupted = is_interrupt(result)
        emit_trace(call.record, "completed", call.record.summary(interrupted=interrupted))
        return call.record.result(result) if details and not interrupted else result

    def _bind(self, call: RunCall, config: RunnableConfig) -> RunnableConfig:
        """``config`` carrying the call's `RunRecord` (named after the agent, with its trace sink)."""
        record = call.record
        record.agent = self.name or self._owner
        record.sink = self._on_trace
        return bind_record(config, record)

    @contextlib.contextmanager
    def _traced(self, call: RunCall, config: RunnableConfig, state: StateSnapshot | None) -> Iterator[Frame | None]:
        """``started`` now, ``failed`` (with the error's class) if the block raises; the run's span around it."""
        emit_trace(call.record, "started", _started(call, config, state))
        frame = start_run(self._tracer, call.record.agent, config)
        try:
            yield frame
        except BaseException as error:
            end_run(frame, error)
            emit_trace(call.record, "failed", {"error_type": type(error).__name__})
            raise
        end_run(frame)

    @contextlib.asynccontextmanager
    async def _atraced(
        self, call: RunCall, config: RunnableConfig, state: StateSnapshot | None
    ) -> AsyncIterator[Frame | None]:
        """Async twin of `_traced`."""
        await aemit_trace(call.record, "started", _started(call, config, state))
        frame = start_run(self._tracer, call.record.agent, config)
        try:
            yield frame
        except BaseException as error:
            end_run(frame, error)
            await aemit_trace(call.record, "failed", {"error_type": type(error).__name__})
            raise
        end_run(frame)

    # --- the shells over the shared steps ----------------------------------------------------------------

    def _config(
        self, thread_id: str | None, callbacks: Sequence[BaseCallbackHandler], config: RunnableConfig | None = None
    ) -> RunnableConfig:
        handlers = [*self.callbacks, *callbacks]
        ours = run_config(thread_id, callbacks=handlers or None)
        if not self.name:
            ours["run_name"] = self._owner  # the run's name in traces and astream_events (else "LangGraph")
        return merge_run_config(ours, config)

    def _checked_config(self, call: RunCall) -> RunnableConfig:
        """The run's config, once the call is known to be valid (else `UserError`)."""
        check_context(getattr(self, "context_schema", None), call.context, owner=self._owner)
        check_call(
            owner=self._owner,
            input=call.input,
            thread_id=call.thread_id,
            decision=call.decision,
            decisions=call.decisions,
            has_checkpointer=self.checkpointer is not None,
        )
        warn_unstored_thread(self, call.thread_id)
        return self._bind(call, self._config(call.thread_id, call.callbacks, call.config))

    def _graph_input(self, call: RunCall, config: RunnableConfig, state: Any) -> Any:
        """`graph_input` (the input guards first), and for a new turn (an input) the wrapper's start hook on it."""
        value = graph_input(call, config, state, self._input_guards)
        if call.input is not None and self._start_hook is not None:
            value = self._start_hook(value)
        return value

    def _graph_options(self, call: RunCall) -> dict[str, Any]:
        return {"context": call.context, "durability": self._durability}

    def _thread(self, config: RunnableConfig) -> str | None:
        """The run's thread when the wrapper keeps threads (its runs on it are serialised), else ``None``."""
        thread_id = (config.get("configurable") or {}).get("thread_id")
        return thread_id if self.checkpointer is not None and isinstance(thread_id, str) else None

    def _hold(self, config: RunnableConfig) -> contextlib.AbstractContextManager[Any]:
        thread_id = self._thread(config)
        if thread_id is None:
            return contextlib.nullcontext()
        return hold_thread(self.checkpointer, thread_id, across_processes=self._across_processes)

    @property
    def _across_processes(self) -> bool:
        # Durable sessions serialise turns with a lease (and take sessions over from stuck processes).
        return getattr(self, "sessions", None) is None

    @contextlib.asynccontextmanager
    async def _open(self, config: RunnableConfig) -> AsyncIterator[tuple[Graph, RunnableConfig]]:
        """The graph and config for one async run, the thread's lock held; with MCP servers, their sessions open."""
        thread_id = self._thread(config)
        held = (
            ahold_thread(self.checkpointer, thread_id, across_processes=self._across_processes)
            if thread_id is not None
            else contextlib.nullcontext()
        )
        async with held:
            if self._graph is not None:
                yield self._run_graph(config), config
                return
            from ai_utils.tools.mcp import mcp_scope

            async with mcp_scope(self._servers) as scope:
                traced = langsmith_tracing(config)
                cached = self._traced_mcp_graph if traced else self._mcp_graph
                if cached is not None and cached[0] == scope.signature:
                    graph = cached[1]
                else:
                    # Built once per distinct tool listing, not per run (deepagents takes 13-19 ms to build a graph).
                    tools = [*self._tools, *scope.routed_tools()]
                    graph = self._compile_traced(tools) if traced else self._compile(tools)
                    if traced:
                        self._traced_mcp_graph = (scope.signature, graph)
                    else:
                        self._mcp_graph = (scope.signature, graph)
                yield graph, scope.bind(config)

    def _invoke(self, call: RunCall) -> RunResult:
        config = self._checked_config(call)
        if self._graph is None:
            return run_sync(lambda: self._ainvoke(call), what=f"{self._owner}.invoke with MCP servers")
        graph = self._run_graph(config)
        check_allowed_tools(graph, call.record, owner=self._owner)
        with self._hold(config):
            state = _continued(call, graph.get_state(config)) if call.input is None else None
            with self._traced(call, config, state) as frame:
                output = graph.invoke(
                    self._graph_input(call, config, state), config, **self._graph_options(call), version="v2"
                )
                paused(frame, output.interrupts)
        return final_result(output, structured=self.output is not None)

    async def _ainvoke(self, call: RunCall) -> RunResult:
        async with self._open(self._checked_config(call)) as (graph, config):
            check_allowed_tools(graph, call.record, owner=self._owner)
            state = _continued(call, await graph.aget_state(config)) if call.input is None else None
            async with self._atraced(call, config, state) as frame:
                output = await graph.ainvoke(
                    self._graph_input(call, config, state), config, **self._graph_options(call), version="v2"
                )
                paused(frame, output.interrupts)
        return final_result(output, structured=self.output is not None)

    def _stream(self, call: RunCall, adapter: ChunkAdapter) -> Iterator[StreamChunk]:
        # Checked on the first next(), not here: StreamResponse then answers a bad call with a 400 JSON body.
        self._warn_in_loop("stream")
        config = self._checked_config(call)
        if self._graph is None:
            yield from iterate_sync(
                lambda: self._arun_stream(call, adapter, config), what=f"{self._owner}.stream with MCP servers"
            )
            return
        graph = self._run_graph(config)
        check_allowed_tools(graph, call.record, owner=self._owner)
        with self._hold(config):
            state = _continued(call, graph.get_state(config)) if call.input is None else None
            with self._traced(call, config, state) as frame:
                parts = graph.stream(
                    self._graph_input(call, config, state), config, **self._graph_options(call), **stream_kwargs()
                )
                yield from steps(frame, adapt(parts, adapter))  # closing this generator closes the run
                paused(frame, adapter.interrupts)
        emit_trace(call.record, "completed", call.record.summary(interrupted=bool(adapter.interrupts)))

    async def _arun_stream(
        self, call: RunCall, adapter: ChunkAdapter, config: RunnableConfig | None = None
    ) -> AsyncIterator[StreamChunk]:
        # Without ``config`` the call is checked here, at the first __anext__, so the error surfaces inside the
        # stream (StreamResponse answers it with a 400 JSON body).
        config = self._checked_config(call) if config is None else self._bind(call, config)
        async with self._open(config) as (graph, config):
            check_allowed_tools(graph, call.record, owner=self._owner)
            state = _continued(call, await graph.aget_state(config)) if call.input is None else None
            async with self._atraced(call, config, state) as frame:
                parts = graph.astream(
                    self._graph_input(call, config, state), config, **self._graph_options(call), **stream_kwargs()
                )
                chunks = aadapt(parts, adapter)
                try:
                    async for chunk in asteps(frame, chunks):
                        yield chunk
                finally:
                    # A consumer that stops early must stop the graph run now, before the MCP sessions close;
                    # left to the garbage collector, the run would go on in the background for a while.
                    await cast("Any", chunks).aclose()
                paused(frame, adapter.interrupts)
        await aemit_trace(call.record, "completed", call.record.summary(interrupted=bool(adapter.interrupts)))

    def _redact_input(self, value: Any) -> Any:
        """A prompt or steer as a durable session may store it (its input guards applied)."""
        return redact_input(value, self._input_guards)

    def _astream_run(
        self,
        input: Any,
        config: RunnableConfig,
        context: Any,
        decision: Decision | None,
        decisions: Decisions | None,
        adapter: ChunkAdapter,
    ) -> AsyncIterator[StreamChunk]:
        """One run on a config the caller built with `_config` (a durable session's turn: ``sessions._turns``)."""
        return self._arun_stream(
            RunCall(input, context=context, decision=decision, decisions=decisions), adapter, config
        )


def _continued(call: RunCall, state: StateSnapshot) -> StateSnapshot:
    """Note the tool calls a stopped step already finished (they never run again; later calls must not wait)."""
    call.record.ended = finished_calls(state)
    return state


def _started(call: RunCall, config: RunnableConfig, state: StateSnapshot | None) -> dict[str, Any]:
    thread_id = (config.get("configurable") or {}).get("thread_id")
    kind = "message" if call.input is not None else "resume" if state is not None and state.interrupts else "continue"
    return {"thread_id": thread_id, "input": kind}
