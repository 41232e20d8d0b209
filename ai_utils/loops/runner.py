"""`LoopRunner`: runs a `Loop` on LangGraph with the caller's checkpointer, model and tools.

``invoke``/``ainvoke``/``stream``/``astream`` share one core: the checks and the graph input before the
run, the outcome after it. Approvals use the project's one decision mapper and chunk adapter, so a
paused loop looks like a paused `Agent`: an ``{"kind": "interrupt", ...}`` chunk, resumed with
``decision="approve"`` or ``decision="reject"``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import GraphOutput, StateSnapshot

from ai_utils._run.calls import Interrupt, run_config
from ai_utils.client import Decision, StreamChunk
from ai_utils.exceptions import LoopDefinitionError, LoopError, LoopPermissionDeniedError, UserError
from ai_utils.guard._trust import context_trust_middleware
from ai_utils.loops._context import LoopResult, jsonable, project
from ai_utils.loops._events import Events, OnEvent
from ai_utils.loops._graph import build_graph
from ai_utils.loops._loop import Loop
from ai_utils.loops._permissions import APPROVAL_KIND
from ai_utils.loops._steps import AgentStep
from ai_utils.streaming._adapter import ChunkAdapter, aadapt, adapt, stream_kwargs
from ai_utils.streaming._decisions import to_resume
from ai_utils.streaming._interrupts import interrupt_chunk
from ai_utils.tools._normalize import normalize_tools

__all__ = ["LoopRunner", "RunState"]

RunState = Literal["running", "awaiting_approval", "completed", "failed"]
_ANSWERS = '"approve", "reject", {"type": "approve"} or {"type": "reject", "message": "..."}'


def _check_decision(decision: object, pending: Sequence[Any]) -> None:
    """A loop approval takes approve/reject only; other interrupts (e.g. guardrails') are the mapper's to check."""
    gates = [i for i in pending if isinstance(i.value, Mapping) and i.value.get("type") == APPROVAL_KIND]
    kind = decision.get("type") if isinstance(decision, Mapping) else decision
    if gates and kind not in ("approve", "reject"):
        raise UserError(f"A loop approval takes {_ANSWERS}; got decision={decision!r}.")


def _raise_failure(error: Mapping[str, Any]) -> None:
    message = str(error.get("message"))
    step_key = error.get("step_key")
    if error.get("type") == "LoopPermissionDeniedError":
        raise LoopPermissionDeniedError(
            message, step_key=step_key, rule_id=error.get("rule_id"), tool=str(error.get("tool") or "")
        )
    raise LoopError(message, step_key=step_key, path=error.get("path"))


def _error_type(error: object) -> str:
    """The exception class name of a stored task error (a checkpoint keeps it as ``"Name('message')"``)."""
    if isinstance(error, BaseException):
        return type(error).__name__
    return str(error).split("(", 1)[0]


class LoopRunner:
    """Runs a governed `Loop`: steps, permissions on every tool call, approvals that survive restarts.

    Example:
        ```python
        runner = LoopRunner(loop, llm=get_llm(), tools=[read, search_docs, issue_refund],
                            checkpointer=sqlite_saver("loops.db"))
        out = runner.invoke({"request": {"order_id": "A-1", "text": "Refund please"}}, thread_id="t1")
        if is_interrupt(out):                      # an approval rule paused the run
            out = runner.invoke(thread_id="t1", decision="approve")
        print(out.data, out.presentation)
        ```

    Args:
        loop: the definition (`define_loop` or `Loop.from_json`).
        llm: the chat model of the agent steps (needed when the loop has any).
        tools: every tool the steps name (`BaseTool`s or functions with docstrings).
        checkpointer: where runs are stored (``sqlite_saver(path)``, ``postgres_saver(...)``, ...); the same
            checkpointer in another process resumes the run. ``None``: an in-memory saver.
        gateway_callbacks: ``[gateway.callback(feature, actor=...)]``: every model call is audited and every
            loop event is written to the gateway's audit sink as a row (``provider="ai_utils.loops"``).
        on_event: a sync function called with each loop event (a dict with ``type``, ``loop``, ``thread_id``,
            ...); an error it raises is logged, never fails the run.
        middleware: `create_agent` middleware (one, or a list) for every agent step (e.g.
            ``guardrails("standard")``), run before the loop's permission check. Its own approvals (e.g.
            `HumanInTheLoopMiddleware`) pause the loop with the usual interrupt chunk and take its decisions.
        context_trust: ``"enforce"``: in agent steps every tool result enters the history as a data block
            (`trust_segment`) and each model call is told such blocks are not instructions. Default ``"off"``.

    Attributes:
        loop: the definition.
        graph: the compiled LangGraph `StateGraph` (one node per step; ``graph.get_graph().draw_mermaid()``).

    Raises:
        LoopDefinitionError: a step names a tool that is not in ``tools``, or agent steps without ``llm``.
        UserError: bad ``tools``, or an async ``on_event``.
    """

    def __init__(
        self,
        loop: Loop,
        *,
        llm: BaseChatModel | None = None,
        tools: Sequence[BaseTool | Callable[..., Any]] = (),
        checkpointer: Any = None,
        gateway_callbacks: Sequence[BaseCallbackHandler] | None = None,
        on_event: OnEvent | None = None,
        middleware: Sequence[Any] = (),
        context_trust: Literal["enforce", "off"] = "off",
    ) -> None:
        if inspect.iscoroutinefunction(on_event):
            raise UserError("LoopRunner(on_event=...) must be a plain (sync) function; it is called inside the run.")
        if isinstance(middleware, AgentMiddleware):
            middleware = [middleware]
        # The step's prompt is the loop's, so the trust rule rides on each model call of the step.
        middleware = [*context_trust_middleware(context_trust, owner="LoopRunner", instruct=True), *middleware]
        if not isinstance(loop, Loop):
            raise UserError(f"LoopRunner needs a Loop from define_loop(...), got {loop!r}.")
        by_name = {t.name: t for t in normalize_tools(tools)}
        for key, step in loop.steps.items():
            names = step.tools if isinstance(step, AgentStep) else (step.tool,)
            missing = [n for n in names if n not in by_name]
            if missing:
                raise LoopDefinitionError(
                    f"Step {key!r} uses tool(s) {missing!r} that LoopRunner was not given; tools: "
                    f"{sorted(by_name)!r}. Pass them in `tools=[...]`.",
                    step_key=key,
                )
            if isinstance(step, AgentStep) and llm is None:
                raise LoopDefinitionError(
                    f"Step {key!r} is an agent step, so LoopRunner needs `llm=` (e.g. get_llm()).", step_key=key
                )
        if checkpointer is None:
            from langgraph.checkpoint.memory import InMemorySaver

            checkpointer = InMemorySaver()
        self.loop = loop
        self.checkpointer = checkpointer
        self.callbacks = list(gateway_callbacks or ())
        self.events = Events(loop.name, on_event, self.callbacks)
        self.graph = build_graph(
            loop, llm=llm, tools=by_name, middleware=tuple(middleware), events=self.events, checkpointer=checkpointer
        )
        self._agent_keys = frozenset(k for k, s in loop.steps.items() if isinstance(s, AgentStep))
        self._written = {loop.writes(k).split(".", 1)[0] for k in loop.steps}

    # --- shared core ----------------------------------------------------------------------------------------

    def _config(self, thread_id: str) -> RunnableConfig:
        if not isinstance(thread_id, str) or not thread_id:
            raise UserError(f"LoopRunner needs `thread_id` (a non-empty str naming the run), got {thread_id!r}.")
        return run_config(thread_id, callbacks=self.callbacks or None)

    def _start_input(self, input: Any, thread_id: str) -> dict[str, Any]:
        if not isinstance(input, Mapping):
            raise UserError(
                f"LoopRunner input must be the context mapping, e.g. {{'request': {{...}}}}; got {input!r}."
            )
        clash = sorted(set(map(str, input)) & self._written)
        if clash:
            raise UserError(
                f"Input roots {clash!r} are written by steps of loop {self.loop.name!r}; caller-seeded roots cannot "
                "be overwritten. Seed them under another name (e.g. inside 'request')."
            )
        self.events.emit("loop.step.started", thread_id=thread_id, step_key=self.loop.start)
        return {"context": jsonable(dict(input)), "status": "running", "error": None, "taken": []}

    def _graph_input(self, input: Any, thread_id: str, decision: Decision | None, snapshot: StateSnapshot) -> Any:
        if decision is not None:
            if input is not None:
                raise UserError("Pass either `input` (start a run) or `decision` (answer its approval), not both.")
            _check_decision(decision, snapshot.interrupts)
            return to_resume(decision, None, pending=snapshot.interrupts)
        if input is None:
            if snapshot.next and not snapshot.interrupts:
                return None  # a run cut short (a raising tool, a crash): go on from its last stored step
            raise UserError(
                f"Nothing to run on thread {thread_id!r}: pass `input` (the context), `decision` to answer a "
                "pending approval, or neither to continue a run that stopped half-way."
            )
        if snapshot.interrupts:
            raise UserError(
                f"Thread {thread_id!r} waits for an approval; answer it with `decision='approve'` or "
                "`decision='reject'` before starting a new run."
            )
        return self._start_input(input, thread_id)

    def _outcome(self, values: Mapping[str, Any], interrupts: Sequence[Any], thread_id: str) -> LoopResult | Interrupt:
        if interrupts:
            chunk = interrupt_chunk(interrupts)
            if chunk is not None:
                return chunk
        if values.get("status") == "failed" and values.get("error"):
            _raise_failure(values["error"])
        ran = set(values.get("taken") or ())
        roots = {key: self.loop.writes(key).split(".", 1)[0] for key in self.loop.steps}
        # A result may name both branches; the roots of steps this run did not take project to None.
        absent = {root for key, root in roots.items() if key not in ran} - {roots[key] for key in ran}
        return project(self.loop.result, dict(values.get("context") or {}), absent_roots=absent, thread_id=thread_id)

    def _lift(self, part: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
        """An agent step's subgraph parts as root parts (its text is the loop's text); remember the status."""
        ns = part["ns"]
        if ns and ns[0].split(":", 1)[0] in self._agent_keys:
            return {**part, "ns": ns[1:]}
        if not ns and part["type"] == "updates":
            for update in part["data"].values():
                if isinstance(update, Mapping) and "status" in update:
                    last.update(update)
        return part

    # --- invoke ---------------------------------------------------------------------------------------------

    def invoke(
        self, input: Mapping[str, Any] | None = None, *, thread_id: str, decision: Decision | None = None
    ) -> LoopResult | Interrupt:
        """Run the loop from its start, or resume a paused run with ``decision``.

        With neither ``input`` nor ``decision``, a run that stopped half-way (a tool raised, the process died)
        continues from its last stored step; steps that completed do not run again.

        Args:
            input: the caller-seeded context, e.g. ``{"request": {"order_id": "A-1"}}``.
            thread_id: the run's id (its checkpoint thread).
            decision: the answer to a pending approval: ``"approve"``/``"reject"`` (or
                ``{"type": "reject", "message": "why"}``).

        Returns:
            A `LoopResult` (``.data``, ``.presentation``, ``.context``) when the run completed, or an
            interrupt chunk (``{"kind": "interrupt", "question", ...}``) when it waits for an approval.

        Raises:
            LoopPermissionDeniedError: a tool step's call was denied (or rejected).
            LoopError: a missing ``ctx`` path, no matching transition, an unsafe ``open_url`` URL.
            UserError: bad arguments (no thread id, input and decision together, ...).
        """
        config = self._config(thread_id)
        graph_input = self._graph_input(input, thread_id, decision, self.graph.get_state(config))
        output: GraphOutput[Any] = self.graph.invoke(graph_input, config, durability="sync", version="v2")
        return self._outcome(output.value, output.interrupts, thread_id)

    async def ainvoke(
        self, input: Mapping[str, Any] | None = None, *, thread_id: str, decision: Decision | None = None
    ) -> LoopResult | Interrupt:
        """Async twin of `invoke`."""
        config = self._config(thread_id)
        graph_input = self._graph_input(input, thread_id, decision, await self.graph.aget_state(config))
        output: GraphOutput[Any] = await self.graph.ainvoke(graph_input, config, durability="sync", version="v2")
        return self._outcome(output.value, output.interrupts, thread_id)

    # --- stream ---------------------------------------------------------------------------------------------

    def stream(
        self,
        input: Mapping[str, Any] | None = None,
        *,
        thread_id: str,
        decision: Decision | None = None,
        show_tool_calls: bool = False,
    ) -> Iterator[StreamChunk]:
        """Run (or resume) the loop and yield the agent steps' text and, when asked, tool events.

        A paused run ends with one ``{"kind": "interrupt", ...}`` chunk; read a completed run's projection
        with `result`. Arguments as in `invoke`; they are checked before this returns.

        Raises:
            LoopPermissionDeniedError, LoopError: after the last chunk, when the run failed.
        """
        config = self._config(thread_id)
        graph_input = self._graph_input(input, thread_id, decision, self.graph.get_state(config))
        parts = self.graph.stream(graph_input, config, durability="sync", **stream_kwargs())
        return self._chunks(parts, ChunkAdapter(show_tool_calls=show_tool_calls))

    def _chunks(self, parts: Iterator[Any], adapter: ChunkAdapter) -> Iterator[StreamChunk]:
        last: dict[str, Any] = {}

        def lifted() -> Iterator[dict[str, Any]]:
            try:
                for part in parts:
                    yield self._lift(part, last)
            finally:
                parts.close()  # type: ignore[attr-defined]  # a consumer that stops early stops the run

        yield from adapt(lifted(), adapter)
        if last.get("status") == "failed" and last.get("error"):
            _raise_failure(last["error"])

    def astream(
        self,
        input: Mapping[str, Any] | None = None,
        *,
        thread_id: str,
        decision: Decision | None = None,
        show_tool_calls: bool = False,
    ) -> AsyncIterator[StreamChunk]:
        """Async twin of `stream` (the thread's pending approval is read when iteration starts)."""
        config = self._config(thread_id)
        return self._achunks(input, thread_id, decision, config, ChunkAdapter(show_tool_calls=show_tool_calls))

    async def _achunks(
        self,
        input: Mapping[str, Any] | None,
        thread_id: str,
        decision: Decision | None,
        config: RunnableConfig,
        adapter: ChunkAdapter,
    ) -> AsyncIterator[StreamChunk]:
        graph_input = self._graph_input(input, thread_id, decision, await self.graph.aget_state(config))
        parts = self.graph.astream(graph_input, config, durability="sync", **stream_kwargs())
        last: dict[str, Any] = {}

        async def lifted() -> AsyncIterator[dict[str, Any]]:
            try:
                async for part in parts:
                    yield self._lift(part, last)
            finally:
                await parts.aclose()  # a consumer that stops early stops the run

        async for chunk in aadapt(lifted(), adapter):
            yield chunk
        if last.get("status") == "failed" and last.get("error"):
            _raise_failure(last["error"])

    # --- reading a run --------------------------------------------------------------------------------------

    def _snapshot_state(self, snapshot: StateSnapshot, thread_id: str) -> RunState:
        if not snapshot.values and not snapshot.next:
            raise UserError(f"Thread {thread_id!r} has no run of loop {self.loop.name!r}. Start one with invoke().")
        if snapshot.interrupts:
            return "awaiting_approval"
        if snapshot.values.get("status") == "failed" or any(task.error for task in snapshot.tasks):
            return "failed"
        if not snapshot.next and snapshot.values.get("status") == "completed":
            return "completed"
        return "running"

    def state(self, thread_id: str) -> RunState:
        """The run's state: ``running``, ``awaiting_approval``, ``completed`` or ``failed``.

        Raises:
            UserError: the thread has no run.
        """
        return self._snapshot_state(self.graph.get_state(self._config(thread_id)), thread_id)

    async def astate(self, thread_id: str) -> RunState:
        """Async twin of `state` (for async-only savers)."""
        return self._snapshot_state(await self.graph.aget_state(self._config(thread_id)), thread_id)

    def result(self, thread_id: str) -> LoopResult | Interrupt:
        """The run's outcome read from its checkpoint (after `stream`, or in another process).

        Raises:
            LoopError: the run failed (the error it failed with), or it is still running.
        """
        return self._stored_outcome(self.graph.get_state(self._config(thread_id)), thread_id)

    async def aresult(self, thread_id: str) -> LoopResult | Interrupt:
        """Async twin of `result`."""
        return self._stored_outcome(await self.graph.aget_state(self._config(thread_id)), thread_id)

    def _stored_outcome(self, snapshot: StateSnapshot, thread_id: str) -> LoopResult | Interrupt:
        state = self._snapshot_state(snapshot, thread_id)
        if state == "running":
            raise LoopError(f"Thread {thread_id!r} is still running; its result is not there yet.")
        crashed = next((task for task in snapshot.tasks if task.error), None)
        if crashed is not None:
            raise LoopError(
                f"Thread {thread_id!r} failed in step {crashed.name!r} ({_error_type(crashed.error)}). "
                "Continue it with invoke(thread_id=...) once the cause is fixed.",
                step_key=crashed.name,
            )
        return self._outcome(snapshot.values, snapshot.interrupts, thread_id)

    def __repr__(self) -> str:
        return f"LoopRunner({self.loop.name!r}, steps={list(self.loop.steps)!r})"
