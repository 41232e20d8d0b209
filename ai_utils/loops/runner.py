"""`LoopRunner`: runs a `Loop` on LangGraph with the caller's checkpointer, model, tools and run store.

``invoke``/``ainvoke``/``stream``/``astream`` share one core: the plan of the call and its record in the run store
before the run (`ai_utils.loops._runs`), the outcome and its record after it. Approvals use the project's one
decision mapper and chunk adapter, so a paused loop looks like a paused `Agent`: an ``{"kind": "interrupt", ...}``
chunk (with the loop's ``gate_id``), resumed with ``decision="approve"`` or ``decision="reject"`` (or
``decisions=[...]`` when several items wait at once).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, get_args

from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import GraphOutput, Interrupt, StateSnapshot

from ai_utils._run.args import config_thread_id, merge_run_config
from ai_utils._run.calls import Decisions, run_config
from ai_utils._run.calls import Interrupt as InterruptChunk
from ai_utils._run.runnable import WrapperRunnable, warn_sync_in_loop
from ai_utils.client import Decision, StreamChunk
from ai_utils.exceptions import (
    AiUtilsError,
    LoopDefinitionError,
    LoopError,
    LoopPermissionDeniedError,
    LoopPolicyDeniedError,
    UserError,
)
from ai_utils.guard._trust import context_trust_middleware
from ai_utils.loops._context import LoopResult, jsonable, project
from ai_utils.loops._events import Events, OnEvent
from ai_utils.loops._graph import build_graph, failure_of, run_info
from ai_utils.loops._hooks import CommandHook, check_sandbox
from ai_utils.loops._limits import MAX_CONTEXT_DEPTH, MAX_TEXT_CHARS, data_problem
from ai_utils.loops._loop import Loop
from ai_utils.loops._policy import PolicyEvents
from ai_utils.loops._runs import Plan, begin, finish_twin, plan_call, run_id_of
from ai_utils.loops._steps import AgentStep, ToolStep
from ai_utils.loops._store import TERMINAL, LoopRun, LoopRunStore, RunState, memory_loop_runs, record
from ai_utils.loops._twins import adrive, drive
from ai_utils.streaming._adapter import ChunkAdapter, aadapt, adapt, stream_kwargs
from ai_utils.streaming._interrupts import interrupt_chunk
from ai_utils.tools._normalize import normalize_tools

__all__ = ["LoopRunner", "RunState"]

_STATES = frozenset(get_args(RunState))
_RESUMING = ("approval_approved", "resuming")


def _raise_failure(error: Mapping[str, Any]) -> None:
    message = str(error.get("message"))
    step_key = error.get("step_key")
    if error.get("type") == "LoopPermissionDeniedError":
        raise LoopPermissionDeniedError(
            message, step_key=step_key, rule_id=error.get("rule_id"), tool=str(error.get("tool") or "")
        )
    if error.get("type") == "LoopPolicyDeniedError":
        raise LoopPolicyDeniedError(
            message, step_key=step_key, policy_id=error.get("policy_id"), tool=str(error.get("tool") or "")
        )
    raise LoopError(message, step_key=step_key, path=error.get("path"))


def _gated(chunk: Any) -> Any:
    """Every item of a loop's interrupt chunk names its gate (a guardrail's approval: its interrupt id)."""
    if isinstance(chunk, dict) and chunk.get("kind") == "interrupt":
        for item in chunk.get("items") or [chunk]:
            item.setdefault("gate_id", str(item["id"]).split(":", 1)[0])
    return chunk


def _error_type(error: object) -> str:
    """The exception class name of a stored task error (a checkpoint keeps it as ``"Name('message')"``)."""
    if isinstance(error, BaseException):
        return type(error).__name__
    return str(error).split("(", 1)[0]


class LoopRunner(WrapperRunnable["LoopResult | InterruptChunk"]):
    """Runs a governed `Loop`: steps, permissions on every tool call, approvals that survive restarts.

    A LangChain `Runnable` over `invoke`/`stream` (``batch``, ``with_config``, ``with_retry``, ``|``); the
    thread may also come as ``config["configurable"]["thread_id"]``.

    Example:
        ```python
        runner = LoopRunner(loop, llm=get_llm(), tools=[read, search_docs, issue_refund],
                            checkpointer=sqlite_saver("loops.db"), run_store=sqlite_loop_runs("runs.db"))
        out = runner.invoke({"request": {"order_id": "A-1", "text": "Refund please"}}, thread_id="t1")
        if is_interrupt(out):                      # an approval rule paused the run
            out = runner.invoke(thread_id="t1", decision="approve", gate_id=out["gate_id"])
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
            ``guardrails("standard")``), run before the loop's permission check. Its ``wrap_tool_call`` also wraps
            the call of every ``tool_step``: a guardrail that blocks one fails the run with
            `LoopPolicyDeniedError`. Its approvals (e.g. `HumanInTheLoopMiddleware`) pause the loop with the
            usual interrupt chunk. Guardrail decisions are ``policy.result`` events.
        run_store: where runs are recorded (`memory_loop_runs`, the default; `sqlite_loop_runs`,
            `postgres_loop_runs` to list, approve and steer runs from other processes). See `runs` and `steer`.
        context_trust: ``"enforce"``: in agent steps every tool result enters the history as a data block
            (`trust_segment`) and each model call is told such blocks are not instructions. Default ``"off"``.

    Attributes:
        loop: the definition.
        graph: the compiled LangGraph `StateGraph` (one node per step; ``graph.get_graph().draw_mermaid()``).
        run_store: the run store.

    Raises:
        LoopDefinitionError: a step names a tool that is not in ``tools``, or agent steps without ``llm``.
        UserError: bad ``tools`` or ``run_store``, an async ``on_event``, or command hooks on a host without the
            sandbox (bubblewrap).
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
        run_store: LoopRunStore | None = None,
        context_trust: Literal["enforce", "off"] = "off",
    ) -> None:
        if inspect.iscoroutinefunction(on_event):
            raise UserError("LoopRunner(on_event=...) must be a plain (sync) function; it is called inside the run.")
        if isinstance(middleware, AgentMiddleware):
            middleware = [middleware]
        # The step's prompt is the loop's, so the trust rule rides on each model call of the step. Agent steps
        # only: a tool step's result is data for the context, never model history.
        trust = context_trust_middleware(context_trust, owner="LoopRunner", instruct=True)
        if not isinstance(loop, Loop):
            raise UserError(f"LoopRunner needs a Loop from define_loop(...), got {loop!r}.")
        if run_store is not None and not isinstance(run_store, LoopRunStore):
            raise UserError(
                f"LoopRunner(run_store=...) must be memory_loop_runs(), sqlite_loop_runs(path) or "
                f"postgres_loop_runs(conn), got {run_store!r}."
            )
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
        if any(isinstance(hook, CommandHook) for hooks in loop.hooks.values() for hook in hooks):
            check_sandbox()
        if checkpointer is None:
            from langgraph.checkpoint.memory import InMemorySaver

            checkpointer = InMemorySaver()
        self.loop = loop
        self.checkpointer = checkpointer
        self.run_store: LoopRunStore = run_store if run_store is not None else memory_loop_runs()
        self.callbacks = list(gateway_callbacks or ())
        self.events = Events(loop.name, on_event, self.callbacks)
        middleware = tuple(middleware)
        # Guardrail decisions become policy.result events: read from the same tap the gateway audit reads.
        self._run_callbacks = [*self.callbacks, *([PolicyEvents(self.events)] if middleware else [])]
        self.graph = build_graph(
            loop,
            llm=llm,
            tools=by_name,
            middleware=middleware,
            step_middleware=trust,
            events=self.events,
            checkpointer=checkpointer,
            store=self.run_store,
        )
        self._agent_keys = frozenset(k for k, s in loop.steps.items() if isinstance(s, AgentStep))
        self._lifted = self._agent_keys
        hook_roots = {h.save_as.split(".", 1)[0] for hs in loop.hooks.values() for h in hs if h.save_as}
        self._written = {loop.writes(k).split(".", 1)[0] for k in loop.steps} | hook_roots

    # --- shared core ----------------------------------------------------------------------------------------

    def _config(
        self, thread_id: str | None, config: RunnableConfig | None = None, method: str = "invoke"
    ) -> RunnableConfig:
        thread_id = config_thread_id(thread_id, config, owner=f"LoopRunner.{method}")
        if not isinstance(thread_id, str) or not thread_id or len(thread_id) > 256 or "\n" in thread_id:
            raise UserError(
                f"LoopRunner needs `thread_id` (a non-empty str of at most 256 characters, one line), "
                f"got {repr(thread_id)[:80]}."
            )
        return merge_run_config(run_config(thread_id, callbacks=self._run_callbacks or None), config)

    @staticmethod
    def _thread(config: RunnableConfig) -> str:
        return str((config.get("configurable") or {})["thread_id"])

    def _input_type(self) -> Any:
        return Mapping[str, Any] | None

    def _output_type(self) -> Any:
        from ai_utils.client import InterruptBatch, InterruptEvent

        return LoopResult | InterruptEvent | InterruptBatch

    def _start_input(self, input: Any, thread_id: str, run_id: str) -> dict[str, Any]:
        if not isinstance(input, Mapping):
            raise UserError(
                f"LoopRunner input must be the context mapping, e.g. {{'request': {{...}}}}; got {repr(input)[:80]}."
            )
        problem = data_problem(input, max_depth=MAX_CONTEXT_DEPTH, max_nodes=1_000_000, max_text=1 << 24)
        if problem is not None:
            raise UserError(f"LoopRunner input must be JSON data of bounded size; it has {problem}.")
        clash = sorted(set(map(str, input)) & self._written)
        if clash:
            raise UserError(
                f"Input roots {clash!r} are written by steps or hooks of loop {self.loop.name!r}; caller-seeded roots "
                "cannot be overwritten. Seed them under another name (e.g. inside 'request')."
            )
        return {"context": jsonable(dict(input)), "run": {"run_id": run_id, "status": "running", "taken": []}}

    def _plan(
        self,
        input: Any,
        thread_id: str,
        decision: Decision | None,
        decisions: Decisions | None,
        gate_id: str | None,
        snapshot: StateSnapshot,
    ) -> Plan:
        def start(run_id: str) -> dict[str, Any]:
            return self._start_input(input, thread_id, run_id)

        plan = plan_call(
            input,
            thread_id=thread_id,
            decision=decision,
            decisions=decisions,
            gate_id=gate_id,
            snapshot=snapshot,
            start=start,
        )
        return plan

    def _started(self, plan: Plan) -> None:
        if plan.action == "start":
            self.events.emit("loop.step.started", thread_id=plan.thread_id, step_key=self.loop.start)

    def _outcome(self, values: Mapping[str, Any], interrupts: Sequence[Interrupt], thread_id: str) -> Any:
        if interrupts:
            chunk = interrupt_chunk(interrupts)
            if chunk is not None:
                return _gated(chunk)
        run = run_info(values)
        failure = run.get("error")
        if run.get("status") == "failed" and failure:
            _raise_failure(failure)
        context = dict(values.get("context") or {})
        result = run.get("result")
        if not isinstance(result, Mapping):
            # A run stored before the projection moved into the graph.
            ran = set(run.get("taken") or ())
            roots = {key: self.loop.writes(key).split(".", 1)[0] for key in self.loop.steps}
            absent = {root for key, root in roots.items() if key not in ran} - {roots[key] for key in ran}
            result = project(self.loop.result, context, absent_roots=absent)
        return LoopResult(
            data=result.get("data"),
            presentation=result.get("presentation"),
            context=context,
            thread_id=thread_id,
            run_id=run_id_of(values, thread_id),
            follow_ups=tuple(run.get("follow_ups") or ()),
        )

    def _lift(self, part: dict[str, Any]) -> dict[str, Any]:
        """An agent step's subgraph parts as root parts (its text is the loop's text)."""
        ns = part["ns"]
        if ns and ns[0].split(":", 1)[0] in self._lifted:
            return {**part, "ns": ns[1:]}
        return part

    # --- invoke ---------------------------------------------------------------------------------------------

    def invoke(  # type: ignore[override]  # Runnable's **kwargs: Any, narrowed to the loop's options
        self,
        input: Mapping[str, Any] | None = None,
        config: RunnableConfig | None = None,
        *,
        thread_id: str | None = None,
        decision: Decision | None = None,
        decisions: Decisions | None = None,
        gate_id: str | None = None,
    ) -> LoopResult | InterruptChunk:
        """Run the loop from its start, or answer a paused run's gate with ``decision``.

        With neither ``input`` nor ``decision``, a run that stopped half-way (a tool raised, the process died)
        continues from its last stored step; steps that completed do not run again. That includes a run whose
        process died right after a decision was accepted (``approval_approved``/``resuming``): it resumes with
        that decision.

        Args:
            input: the caller-seeded context, e.g. ``{"request": {"order_id": "A-1"}}``.
            config: a LangChain ``RunnableConfig`` (callbacks, tags, metadata) merged with ours; its
                ``configurable.thread_id`` may name the run instead of ``thread_id``.
            thread_id: the run's id (its checkpoint thread); required (here or in ``config``).
            decision: the answer to a pending approval: ``"approve"``/``"reject"`` (or
                ``{"type": "reject", "message": "why"}``).
            decisions: one answer per pending item when several wait at once (an agent step's model asked for
                several gated calls): a list in the interrupt chunk's ``items`` order, or a mapping keyed by item id
                or ``gate_id``; ``approve_all(chunk)`` approves them all. A single ``decision`` for several pending
                items is a `UserError` (it would approve calls nobody looked at).
            gate_id: the gate the decision answers (the interrupt chunk's ``gate_id``). Without it a decision
                answers the gate waiting now, but only for the run's first gate: from the second gate on a
                decision must name its gate, so an answer sent twice never approves a gate nobody saw.

        Returns:
            A `LoopResult` (``.data``, ``.presentation``, ``.context``, ``.run_id``, ``.follow_ups``) when the run
            completed, or an interrupt chunk (``{"kind": "interrupt", "question", "gate_id", ...}``) when it waits.

        Raises:
            LoopPermissionDeniedError: a tool step's call was denied (or rejected).
            LoopPolicyDeniedError: a guardrail blocked a tool step's call.
            LoopError: a missing ``ctx`` path, no matching transition, an unsafe ``open_url`` URL, a failed hook, a
                failed result projection; or the run store is unreachable (before any step ran).
            UserError: bad arguments (no thread id, input and decision together, a gate that is not waiting, a
                bare decision for a run's second gate, one ``decision`` for several pending items, ...).
        """
        warn_sync_in_loop("LoopRunner", "invoke")
        config = self._config(thread_id, config)
        thread = self._thread(config)
        snapshot = self.graph.get_state(config)
        plan = self._plan(input, thread, decision, decisions, gate_id, snapshot)
        drive(begin(self.run_store, plan, self.loop.name, snapshot))
        self._started(plan)
        try:
            output: GraphOutput[Any] = self.graph.invoke(plan.graph_input, config, durability="sync", version="v2")
        except BaseException as error:
            raised = self._record_crash(plan.run_id, config, error)
            if raised is error:
                raise
            raise raised from error
        drive(self._finished(plan.run_id, output.value, output.interrupts))
        return self._outcome(output.value, output.interrupts, thread)  # type: ignore[no-any-return]

    async def ainvoke(  # type: ignore[override]  # see invoke
        self,
        input: Mapping[str, Any] | None = None,
        config: RunnableConfig | None = None,
        *,
        thread_id: str | None = None,
        decision: Decision | None = None,
        decisions: Decisions | None = None,
        gate_id: str | None = None,
    ) -> LoopResult | InterruptChunk:
        """Async twin of `invoke`."""
        config = self._config(thread_id, config, "ainvoke")
        thread = self._thread(config)
        snapshot = await self.graph.aget_state(config)
        plan = self._plan(input, thread, decision, decisions, gate_id, snapshot)
        await adrive(begin(self.run_store, plan, self.loop.name, snapshot))
        self._started(plan)
        try:
            output: GraphOutput[Any] = await self.graph.ainvoke(
                plan.graph_input, config, durability="sync", version="v2"
            )
        except BaseException as error:
            raised = await self._arecord_crash(plan.run_id, config, error)
            if raised is error:
                raise
            raise raised from error
        await adrive(self._finished(plan.run_id, output.value, output.interrupts))
        return self._outcome(output.value, output.interrupts, thread)  # type: ignore[no-any-return]

    def _finished(self, run_id: str, values: Mapping[str, Any], interrupts: Sequence[Interrupt]) -> Any:
        run = run_info(values)
        if interrupts or run.get("status") != "completed" or not run.get("run_id"):
            yield finish_twin(self.run_store, run_id, values, interrupts)
        # A completed run recorded itself at its last boundary (`LoopRunStore.complete`, with the steering seal).

    def _record_crash(self, run_id: str, config: RunnableConfig, error: BaseException) -> BaseException:
        """A run that raised (a tool error, a cancel) is recorded as it stands; it can be continued.

        Still waiting at the gate it was resumed from, the record keeps ``resuming`` and the decision. Returns
        the error the caller gets (`_crash_error`).
        """
        try:
            snapshot = self.graph.get_state(config)
        except Exception:  # the run's own error is what the caller must see
            return error
        raised = self._crash_error(error, snapshot)
        try:
            if not snapshot.interrupts:
                state = self._snapshot_state(snapshot, str(config["configurable"]["thread_id"]))
                failed = type(raised).__name__ if state == "failed" else None
                keys = run_info(snapshot.values).get("taken") or ()
                self.run_store.update(run_id, state=state, step_keys=keys, error=failed)
        except Exception:
            pass
        return raised

    async def _arecord_crash(self, run_id: str, config: RunnableConfig, error: BaseException) -> BaseException:
        try:
            snapshot = await self.graph.aget_state(config)
        except Exception:
            return error
        raised = self._crash_error(error, snapshot)
        try:
            if not snapshot.interrupts:
                state = self._snapshot_state(snapshot, str(config["configurable"]["thread_id"]))
                failed = type(raised).__name__ if state == "failed" else None
                keys = run_info(snapshot.values).get("taken") or ()
                await self.run_store.aupdate(run_id, state=state, step_keys=keys, error=failed)
        except Exception:
            pass
        return raised

    def _crash_error(self, error: BaseException, snapshot: StateSnapshot) -> BaseException:
        """A ``tool_step`` whose tool raised fails the run with `LoopError` (the tool's exception is its cause).

        Only the exception's type is in the message: its text may quote context values. The run stays
        continuable: ``invoke(thread_id=...)`` runs the step again once the cause is fixed. Anything else (a
        cancel, our own errors, an agent step's model error) is raised as it is.
        """
        if not isinstance(error, Exception) or isinstance(error, AiUtilsError):
            return error
        crashed = next((task.name for task in snapshot.tasks if task.error), None)
        step = self.loop.steps.get(crashed) if crashed else None
        if not isinstance(step, ToolStep):
            return error
        return LoopError(
            f"Step {crashed!r}: the tool {step.tool!r} raised {type(error).__name__}; the run failed. Fix the cause "
            "and continue it with invoke(thread_id=...) (the step runs again), or start a new run.",
            step_key=crashed,
        )

    # --- stream ---------------------------------------------------------------------------------------------

    def stream(  # type: ignore[override]  # yields our chunks (ai_utils.client), not results
        self,
        input: Mapping[str, Any] | None = None,
        config: RunnableConfig | None = None,
        *,
        thread_id: str | None = None,
        decision: Decision | None = None,
        decisions: Decisions | None = None,
        gate_id: str | None = None,
        show_tool_calls: bool = False,
    ) -> Iterator[StreamChunk]:
        """Run (or resume) the loop and yield the agent steps' text and, when asked, tool events.

        A paused run ends with one ``{"kind": "interrupt", ...}`` chunk; read a completed run's projection
        with `result`. An agent step's structured answer is a ``{"kind": "custom", "data": {"type":
        "loop.step.output", "step_key", "output"}}`` chunk (never a tool call); steers that join a step are
        ``{"kind": "user_message", ...}`` chunks. Arguments as in `invoke`; they are checked before this returns.

        Raises:
            LoopPermissionDeniedError, LoopPolicyDeniedError, LoopError: after the last chunk, when the run failed.
        """
        config = self._config(thread_id, config, "stream")
        snapshot = self.graph.get_state(config)
        plan = self._plan(input, self._thread(config), decision, decisions, gate_id, snapshot)
        drive(begin(self.run_store, plan, self.loop.name, snapshot))
        self._started(plan)
        parts = self.graph.stream(plan.graph_input, config, durability="sync", **stream_kwargs())
        return self._chunks(parts, ChunkAdapter(show_tool_calls=show_tool_calls), plan.run_id, config)

    def _chunks(
        self, parts: Iterator[Any], adapter: ChunkAdapter, run_id: str, config: RunnableConfig
    ) -> Iterator[StreamChunk]:
        warn_sync_in_loop("LoopRunner", "stream")  # where the run happens (a worker thread is fine)

        def lifted() -> Iterator[dict[str, Any]]:
            try:
                for part in parts:
                    yield self._lift(part)
            finally:
                parts.close()  # type: ignore[attr-defined]  # a consumer that stops early stops the run

        try:
            for chunk in adapt(lifted(), adapter):
                yield _gated(chunk)
        except BaseException as error:
            raised = self._record_crash(run_id, config, error)
            if raised is error:
                raise
            raise raised from error
        snapshot = self.graph.get_state(config)
        drive(self._finished(run_id, snapshot.values, snapshot.interrupts))
        failure = failure_of(snapshot.values)
        if not snapshot.interrupts and run_info(snapshot.values).get("status") == "failed" and failure:
            _raise_failure(failure)

    def astream(  # type: ignore[override]  # see stream
        self,
        input: Mapping[str, Any] | None = None,
        config: RunnableConfig | None = None,
        *,
        thread_id: str | None = None,
        decision: Decision | None = None,
        decisions: Decisions | None = None,
        gate_id: str | None = None,
        show_tool_calls: bool = False,
    ) -> AsyncIterator[StreamChunk]:
        """Async twin of `stream` (the thread's pending approval is read when iteration starts)."""
        config = self._config(thread_id, config, "astream")
        adapter = ChunkAdapter(show_tool_calls=show_tool_calls)
        return self._achunks(input, self._thread(config), (decision, decisions, gate_id), config, adapter)

    async def _achunks(
        self,
        input: Mapping[str, Any] | None,
        thread_id: str,
        answer: tuple[Decision | None, Decisions | None, str | None],
        config: RunnableConfig,
        adapter: ChunkAdapter,
    ) -> AsyncIterator[StreamChunk]:
        snapshot = await self.graph.aget_state(config)
        plan = self._plan(input, thread_id, *answer, snapshot)
        await adrive(begin(self.run_store, plan, self.loop.name, snapshot))
        self._started(plan)
        parts = self.graph.astream(plan.graph_input, config, durability="sync", **stream_kwargs())

        async def lifted() -> AsyncIterator[dict[str, Any]]:
            try:
                async for part in parts:
                    yield self._lift(part)
            finally:
                await parts.aclose()  # a consumer that stops early stops the run

        try:
            async for chunk in aadapt(lifted(), adapter):
                yield _gated(chunk)
        except BaseException as error:
            raised = await self._arecord_crash(plan.run_id, config, error)
            if raised is error:
                raise
            raise raised from error
        final = await self.graph.aget_state(config)
        await adrive(self._finished(plan.run_id, final.values, final.interrupts))
        failure = failure_of(final.values)
        if not final.interrupts and run_info(final.values).get("status") == "failed" and failure:
            _raise_failure(failure)

    # --- reading a run --------------------------------------------------------------------------------------

    def _snapshot_state(self, snapshot: StateSnapshot, thread_id: str) -> RunState:
        if not snapshot.values and not snapshot.next:
            raise UserError(f"Thread {thread_id!r} has no run of loop {self.loop.name!r}. Start one with invoke().")
        if snapshot.interrupts:
            return "awaiting_approval"
        status = run_info(snapshot.values).get("status")
        if status == "failed" or any(task.error for task in snapshot.tasks):
            return "failed"
        if not snapshot.next and status == "completed":
            return "completed"
        return "running"

    def _overlay(self, state: RunState, run: LoopRun | None) -> RunState:
        """The store knows a run is being resumed: its checkpoint still shows the gate (or ``running``) meanwhile."""
        if state in ("running", "awaiting_approval") and run is not None and run.state in _RESUMING:
            return run.state
        return state

    def state(self, thread_id: str) -> RunState:
        """The run's state, from its checkpoint (and the run store while it is being resumed).

        One of ``running``, ``awaiting_approval``, ``approval_approved`` (a gate was approved, the run is about
        to resume), ``resuming``, ``completed`` or ``failed``.

        Raises:
            UserError: the thread has no run.
        """
        snapshot = self.graph.get_state(self._config(thread_id))
        state = self._snapshot_state(snapshot, thread_id)
        if state not in ("running", "awaiting_approval"):
            return state
        return self._overlay(state, self.run_store.get(run_id_of(snapshot.values, thread_id)))

    async def astate(self, thread_id: str) -> RunState:
        """Async twin of `state` (for async-only savers)."""
        snapshot = await self.graph.aget_state(self._config(thread_id))
        state = self._snapshot_state(snapshot, thread_id)
        if state not in ("running", "awaiting_approval"):
            return state
        return self._overlay(state, await self.run_store.aget(run_id_of(snapshot.values, thread_id)))

    def result(self, thread_id: str) -> LoopResult | InterruptChunk:
        """The run's outcome read from its checkpoint (after `stream`, or in another process).

        Raises:
            LoopError: the run failed (the error it failed with), or it is still running.
        """
        return self._stored_outcome(self.graph.get_state(self._config(thread_id)), thread_id)

    async def aresult(self, thread_id: str) -> LoopResult | InterruptChunk:
        """Async twin of `result`."""
        return self._stored_outcome(await self.graph.aget_state(self._config(thread_id)), thread_id)

    def _stored_outcome(self, snapshot: StateSnapshot, thread_id: str) -> LoopResult | InterruptChunk:
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
        return self._outcome(snapshot.values, snapshot.interrupts, thread_id)  # type: ignore[no-any-return]

    # --- the run store ----------------------------------------------------------------------------------------

    def _runs_args(self, state: object, thread_id: object, limit: object) -> None:
        if state is not None and state not in _STATES:
            raise UserError(f"runs(state=...) must be one of {sorted(_STATES)!r}, got {state!r}.")
        if thread_id is not None and (not isinstance(thread_id, str) or not thread_id):
            raise UserError(f"runs(thread_id=...) must be a thread id string, got {thread_id!r}.")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise UserError(f"runs(limit=...) must be an int from 1 to 10000, got {limit!r}.")

    def runs(self, *, state: RunState | None = None, thread_id: str | None = None, limit: int = 100) -> list[LoopRun]:
        """The recorded runs of this loop in the run store (every process sharing it), newest first.

        Example:
            ```python
            for run in runner.runs(state="awaiting_approval"):
                print(run.run_id, run.thread_id, run.gate_ids, run.step_keys, run.updated_at)
            ```

        Args:
            state: only runs in this state (``"running"``, ``"awaiting_approval"``, ``"approval_approved"``,
                ``"resuming"``, ``"completed"``, ``"failed"``).
            thread_id: only runs on this thread.
            limit: at most this many (1 to 10,000).

        Raises:
            UserError: a bad filter. LoopError: the run store is unreachable.
        """
        self._runs_args(state, thread_id, limit)
        return self.run_store.runs(loop=self.loop.name, state=state, thread_id=thread_id, limit=limit)

    async def aruns(
        self, *, state: RunState | None = None, thread_id: str | None = None, limit: int = 100
    ) -> list[LoopRun]:
        """Async twin of `runs`."""
        self._runs_args(state, thread_id, limit)
        return await self.run_store.aruns(loop=self.loop.name, state=state, thread_id=thread_id, limit=limit)

    def _steer_target(self, thread_id: str, text: object, follow_up: object) -> LoopRun:
        self._config(thread_id)
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT_CHARS:
            raise UserError(
                f"steer(text=...) must be a non-empty str of at most {MAX_TEXT_CHARS} characters, "
                f"got {repr(text)[:80]}."
            )
        if not isinstance(follow_up, bool):
            raise UserError(f"steer(follow_up=...) must be True or False, got {follow_up!r}.")
        if not self._agent_keys:
            raise UserError(
                f"Loop {self.loop.name!r} has no agent step, so there is no model a steer could reach. Steer a loop "
                "with agent_step(...)s."
            )
        run = self.run_store.latest(thread_id, self.loop.name)
        if run is None:
            snapshot = self.graph.get_state(self._config(thread_id))
            state = self._snapshot_state(snapshot, thread_id)  # UserError: no run on the thread
            run = record(run_id_of(snapshot.values, thread_id), thread_id, self.loop.name, state)
            self.run_store.put(run)
        return run

    def steer(self, thread_id: str, text: str, *, follow_up: bool = False) -> int:
        """Send a message to the thread's running loop run.

        A steer joins the running agent step as a user message before its next model call (or the next agent
        step, if none is running); a steer that no step took before the run ended is answered like a
        follow-up. A follow-up (``follow_up=True``) waits until the loop would end, then the last agent step that
        ran answers it (with the final context); its answers are `LoopResult.follow_ups`. Steers go through the
        run store, so with a shared store (`sqlite_loop_runs`, `postgres_loop_runs`) any process may steer.
        Accepted messages are never lost: the run takes every queued message at its last boundary before it
        seals itself.

        Args:
            thread_id: the run's thread.
            text: the message (at most 64 KiB).
            follow_up: wait for the loop to end instead of joining the running step.

        Returns:
            The message's sequence number in the run's queue.

        Raises:
            UserError: the thread's latest run has finished (``completed``/``failed``, or sealed at its last
                boundary) — start a new run with `invoke` —, the thread has no run, the loop has no agent step,
                or a bad argument.
            LoopError: the run store is unreachable.
        """
        run = self._steer_target(thread_id, text, follow_up)
        seq = self.run_store.enqueue(run.run_id, "follow_up" if follow_up else "steer", text)
        if seq is None:
            raise self._finished_error(thread_id, run)
        return seq

    async def asteer(self, thread_id: str, text: str, *, follow_up: bool = False) -> int:
        """Async twin of `steer` (the store call runs in a worker thread)."""
        import asyncio

        return await asyncio.to_thread(self.steer, thread_id, text, follow_up=follow_up)

    def _finished_error(self, thread_id: str, run: LoopRun) -> UserError:
        latest = self.run_store.get(run.run_id) or run
        state = latest.state if latest.state in TERMINAL else "finishing"
        return UserError(
            f"Run {run.run_id!r} on thread {thread_id!r} has finished ({state}); a steer only reaches a running "
            "loop. Start a new run with invoke(...) and steer that one."
        )

    def __repr__(self) -> str:
        return f"LoopRunner({self.loop.name!r}, steps={list(self.loop.steps)!r})"
