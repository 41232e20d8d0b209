"""A `Loop` compiled to a LangGraph `StateGraph`: one node per step, routed with ``Command(goto=...)``.

State: two channels, ``context`` (the loop's context bag, checkpointed after every step) and ``run`` (`RunInfo`:
the run id, its status (``running``/``completed``/``failed``), the completed step keys, a failed run's error, the
steering cursors, follow-ups, the projected result). Every channel costs LangGraph work on each step, so a step
writes those two only. Runs stored before the status and step keys moved into ``run`` kept them in channels of
their own (``status``, ``taken``, and earlier ``error``): the state still declares them, never written, and
`run_info` reads a run of either shape.
An agent step's node runs that step's `create_agent` graph as a subgraph under the same checkpointer, so a
paused model tool call resumes inside it, and neither the loop's completed steps nor the step's own completed
model and tool calls run again.

Each node is one generator (`_Node.steps`) that yields its I/O as a `Twin` (a sync and an async thunk) — the
step's subgraph or tool call, hooks, the run store — and `drive`/`adrive` run it, so the sync and async runs
share every line of the loop's logic.

Hooks ride on the nodes: ``step:end`` of a step and then ``step:start`` of the next run at the end of the
step's node (a step resumed after an approval does not start twice); ``loop:start`` (and the first step's
``step:start``) run in a ``hooks-start`` node that exists only when the loop has such hooks; ``loop:end`` runs
where the steps end (once: follow-ups come after). At its last boundary a run completes itself in its run store
(sealing its steering queue), or hands what is still queued to the last agent step that ran, whose node answers
those follow-ups. The result is projected inside the graph, so a projection that fails leaves the run ``failed``.

Events: a node sends ``loop.step.completed``, ``loop.transition`` and the next step's ``loop.step.started``
when it finishes (the runner sends the first step's ``started``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any, TypeAlias, cast

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langchain_core.tools import BaseTool
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Checkpointer, Command, GraphOutput
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python
from typing_extensions import TypedDict

from ai_utils._run.state import AgentState
from ai_utils._run.toolloop import ToolCalls, ToolLoopOptions
from ai_utils._structured import InvalidReply, parse_json_reply
from ai_utils.exceptions import LoopError, LoopPermissionDeniedError, LoopPolicyDeniedError
from ai_utils.loops._context import jsonable, project, resolve, write_path
from ai_utils.loops._events import Events, current_thread_id
from ai_utils.loops._hooks import HookEvent, Hooks, arun_hooks, run_hooks
from ai_utils.loops._loop import Loop
from ai_utils.loops._permissions import LoopToolChoice, LoopToolGate, ask_approval, check
from ai_utils.loops._policy import decisions_of, emit_decisions, wraps_tools
from ai_utils.loops._steering import STEER_CONFIG, LoopSteering, LoopStepRepair, steer_cursor, steer_message
from ai_utils.loops._steps import END as END_KEY
from ai_utils.loops._steps import AgentStep, Otherwise, RequireTool, ToolStep, When
from ai_utils.loops._store import LoopRunStore
from ai_utils.loops._twins import Twin, adrive, drive
from ai_utils.tools.results import ToolResult

__all__ = ["HOOKS_START", "LoopState", "RunInfo", "build_graph", "error_state", "failure_of", "run_info"]

logger = logging.getLogger("ai_utils.loops")

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
HOOKS_START = "hooks-start"
"""The node that runs ``loop:start`` hooks (a name no step key can have)."""

Steps: TypeAlias = "Generator[Twin, Any, Command[Any]]"


class RunInfo(TypedDict, total=False):
    """What the loop state keeps about the run itself."""

    run_id: str
    steer_after: int  # the last steer sequence number a step took
    follow_after: int  # the last follow-up answered
    pending: list[list[Any]]  # (seq, kind, text) queued at the last boundary, for the last agent step to answer
    follow_ups: list[Any]  # their answers
    status: str  # running | completed | failed
    taken: list[str]  # the completed step keys, in order
    ended: bool  # the loop:end hooks ran (before the follow-ups)
    result: dict[str, Any]  # the projection of a completed run
    error: dict[str, Any]  # why a failed run failed (the runner raises it again from this)


class LoopState(TypedDict, total=False):
    """The loop graph's state."""

    context: dict[str, Any]
    run: RunInfo
    # Read only, never written: where runs stored before `RunInfo` held them kept their status, step keys and error.
    status: str
    taken: list[str]
    error: dict[str, Any] | None


def run_info(state: Mapping[str, Any]) -> RunInfo:
    """The state's `RunInfo`, with ``status`` and ``taken`` (and ``error``) for a run of the older shapes too.

    A run stored with ``status``/``taken`` channels of their own (and, before `RunInfo`, an ``error`` one) reads
    as if they were in ``run``; the first step it takes under this version writes them there.
    """
    run = cast("RunInfo", state.get("run") or {})
    if "status" in run or not state.get("status"):
        return run
    legacy: RunInfo = {**run, "status": str(state["status"]), "taken": list(state.get("taken") or ())}
    error = run.get("error") or state.get("error")
    if error:
        legacy["error"] = error
    return legacy


def failure_of(values: Mapping[str, Any]) -> dict[str, Any] | None:
    """A failed run's stored error."""
    return run_info(values).get("error") or None


def error_state(error: LoopError) -> dict[str, Any]:
    """A loop error as checkpointable data (the runner raises it again from this)."""
    data: dict[str, Any] = {"type": type(error).__name__, "message": str(error), "step_key": error.step_key}
    if error.path is not None:
        data["path"] = error.path
    if isinstance(error, LoopPermissionDeniedError):
        data["rule_id"] = error.rule_id
        data["tool"] = error.tool
    if isinstance(error, LoopPolicyDeniedError):
        data["policy_id"] = error.policy_id
        data["tool"] = error.tool
    return data


class _Run:
    """What every node of one compiled loop shares: the loop, events, hooks, the run store."""

    def __init__(self, loop: Loop, events: Events, store: LoopRunStore) -> None:
        self.loop = loop
        self.events = events
        self.store = store
        self.hooks: Hooks = loop.hooks
        self.agents = [k for k, s in loop.steps.items() if isinstance(s, AgentStep)]
        roots = {key: loop.writes(key).split(".", 1)[0] for key in loop.steps}
        self.roots = roots

    def hooks_of(
        self,
        event: HookEvent,
        state: LoopState,
        context: dict[str, Any],
        *,
        step_key: str | None = None,
        status: str | None = None,
    ) -> Twin:
        base = {"loop": self.loop.name, "thread_id": current_thread_id(), "run_id": run_info(state).get("run_id")}
        return (
            lambda: run_hooks(self.hooks, event, context, base, step_key=step_key, status=status),
            lambda: arun_hooks(self.hooks, event, context, base, step_key=step_key, status=status),
        )

    def absent(self, taken: Sequence[str]) -> set[str]:
        """Roots of steps this run did not take (a result may name both branches; those project to ``None``)."""
        ran = set(taken)
        return {root for key, root in self.roots.items() if key not in ran} - {self.roots[key] for key in ran}

    def end(self, state: LoopState, context: dict[str, Any], taken: list[str], patch: RunInfo) -> Steps:
        """The last boundary: project, run ``loop:end`` hooks (once), then complete the run in its store.

        When steers or follow-ups are still queued, they go to the last agent step that ran instead.
        """
        run: RunInfo = {**run_info(state), **patch}
        try:
            result = project(self.loop.result, context, absent_roots=self.absent(taken))
        except LoopError as error:
            return (yield from self.failed(state, error, context, taken, patch))
        if self.hooks.get("loop:end") and not run.get("ended"):
            context = yield self.hooks_of("loop:end", state, context, status="completed")
        run_id = run.get("run_id")
        if run_id:
            steer_after, follow_after = run.get("steer_after", 0), run.get("follow_after", 0)
            pending = yield (
                lambda: self.store.complete(
                    run_id, steer_after=steer_after, follow_after=follow_after, step_keys=taken
                ),
                lambda: self.store.acomplete(
                    run_id, steer_after=steer_after, follow_after=follow_after, step_keys=taken
                ),
            )
            if pending and self.agents:
                # The last agent step that ran answers them (the first one declared, if none ran).
                key = next((k for k in reversed(taken) if k in self.agents), self.agents[0])
                run = {**run, "status": "running", "taken": taken, "pending": pending, "ended": True}
                return Command(goto=key, update={"context": context, "run": run})
        run = {**run, "status": "completed", "taken": taken, "result": result}
        return Command(goto=END, update={"context": context, "run": run})

    def failed(
        self,
        state: LoopState,
        error: LoopError,
        context: dict[str, Any] | None = None,
        taken: list[str] | None = None,
        patch: RunInfo | None = None,
    ) -> Steps:
        """End the run as failed (``loop:end`` hooks see ``status="failed"``); the checkpoint keeps why."""
        context = dict(state.get("context") or {}) if context is None else context
        if self.hooks.get("loop:end"):
            try:
                context = yield self.hooks_of("loop:end", state, context, status="failed")
            except LoopError as hook_error:
                # The run's own error is what the caller must see; the hook's is logged.
                logger.warning("loop %r: a loop:end hook failed after the run failed: %s", self.loop.name, hook_error)
        run: RunInfo = {**run_info(state), **(patch or {}), "status": "failed", "error": error_state(error)}
        if taken is not None:
            run["taken"] = taken
        return Command(goto=END, update={"context": context, "run": run})


class _Node:
    """A step's node: its body (a subgraph or a tool call), then saving, hooks, routing."""

    def __init__(self, run: _Run, key: str) -> None:
        self.run = run
        self.loop = run.loop
        self.key = key
        self.events = run.events
        self.next = run.loop.steps[key].next
        self.writes = run.loop.writes(key)

    def body(self, state: LoopState, config: RunnableConfig) -> Generator[Twin, Any, tuple[Any, RunInfo]]:
        raise NotImplementedError

    def steps(self, state: LoopState, config: RunnableConfig) -> Steps:
        try:
            value, patch = yield from self.body(state, config)
            return (yield from self.tail(state, value, patch))
        except LoopError as error:
            return (yield from self.run.failed(state, error))

    def _route(self, context: Mapping[str, Any]) -> str:
        if isinstance(self.next, str):
            return self.next
        for item in self.next:
            if isinstance(item, Otherwise):
                return item.target
            if self._holds(item, context):
                return item.target
        raise LoopError(
            f"Step {self.key!r}: no transition matched ({[t.expr for t in self.next if isinstance(t, When)]!r}) "
            "and there is no otherwise(...). Add otherwise(target) as the last transition.",
            step_key=self.key,
        )

    def _holds(self, item: When, context: Mapping[str, Any]) -> bool:
        try:
            value = self.loop.programs[item.expr].evaluate(context)
        except ValueError as error:
            raise LoopError(
                f"Step {self.key!r}: when({item.expr!r}) failed on the context: {error}. "
                "Guard optional fields with has(...).",
                step_key=self.key,
            ) from error
        if not isinstance(value, bool):
            raise LoopError(
                # The type only: the value comes from the context and may be a secret.
                f"Step {self.key!r}: when({item.expr!r}) gave a {type(value).__name__}, not a bool. "
                "Make it a condition.",
                step_key=self.key,
            )
        return value

    def tail(self, state: LoopState, value: Any, patch: RunInfo) -> Steps:
        """Save the step's result, run its ``step:end`` hooks, pick the next step, run its ``step:start`` hooks."""
        context = write_path(state.get("context") or {}, self.writes, value)
        taken = [*(run_info(state).get("taken") or ()), self.key]
        hooks = self.run.hooks
        if hooks.get("step:end"):
            context = yield self.run.hooks_of("step:end", state, context, step_key=self.key)
        target = self._route(context)
        self.events.emit("loop.step.completed", step_key=self.key)
        self.events.emit("loop.transition", from_step_key=self.key, to_step_key=target)
        if target == END_KEY:
            return (yield from self.run.end(state, context, taken, patch))
        if hooks.get("step:start"):
            context = yield self.run.hooks_of("step:start", state, context, step_key=target)
        self.events.emit("loop.step.started", step_key=target)
        run: RunInfo = {**run_info(state), **patch, "status": "running", "taken": taken}
        return Command(goto=target, update={"context": context, "run": run})


def steering_config(config: RunnableConfig, run_id: str | None, after: int) -> RunnableConfig:
    """The step's config: the run and the steers it has taken, for `LoopSteering`."""
    if not run_id:
        return config
    return {**config, "configurable": {**config.get("configurable", {}), STEER_CONFIG: (run_id, after)}}


def context_message(state: LoopState) -> HumanMessage:
    """The loop context as an agent step's one input message."""
    context = json.dumps(state.get("context") or {}, ensure_ascii=False, sort_keys=True, default=str)
    return HumanMessage(f"Loop context (JSON):\n{context}")


class _AgentNode(_Node):
    def __init__(self, run: _Run, key: str, graph: Any, step: AgentStep) -> None:
        super().__init__(run, key)
        self.graph = graph
        self.step = step

    def steps(self, state: LoopState, config: RunnableConfig) -> Steps:
        if run_info(state).get("pending"):
            return (yield from self.follow_ups(state, config))
        return (yield from super().steps(state, config))

    def body(self, state: LoopState, config: RunnableConfig) -> Generator[Twin, Any, tuple[Any, RunInfo]]:
        run = run_info(state)
        after = run.get("steer_after", 0)
        inner = steering_config(config, run.get("run_id"), after)
        graph_input = {"messages": [context_message(state)]}
        output = yield (
            lambda: self.graph.invoke(graph_input, inner, version="v2"),
            lambda: self.graph.ainvoke(graph_input, inner, version="v2"),
        )
        value = self.value(output)
        cursor = steer_cursor(output.value.get("messages", ()), after)
        return value, ({"steer_after": cursor} if cursor != after else {})

    def follow_ups(self, state: LoopState, config: RunnableConfig) -> Steps:
        """Answer the follow-ups queued at the run's last boundary (this was the last agent step that ran)."""
        run = run_info(state)
        taken = list(run.get("taken") or ())
        run_id = str(run.get("run_id") or "")
        pending = [(int(seq), str(kind), str(text)) for seq, kind, text in run.get("pending") or ()]
        steer_after = max([run.get("steer_after", 0), *(s for s, k, _ in pending if k == "steer")])
        follow_after = max([run.get("follow_after", 0), *(s for s, k, _ in pending if k == "follow_up")])
        messages = [context_message(state), *(steer_message(run_id, seq, text) for seq, _, text in pending)]
        inner = steering_config(config, run_id, steer_after)
        try:
            output = yield (
                lambda: self.graph.invoke({"messages": messages}, inner, version="v2"),
                lambda: self.graph.ainvoke({"messages": messages}, inner, version="v2"),
            )
            value = self.value(output)
        except LoopError as error:
            return (yield from self.run.failed(state, error, patch={"pending": []}))
        patch: RunInfo = {
            "steer_after": steer_cursor(output.value.get("messages", ()), steer_after),
            "follow_after": follow_after,
            "follow_ups": [*(run.get("follow_ups") or ()), value],
            "pending": [],
        }
        return (yield from self.run.end(state, dict(state.get("context") or {}), taken, patch))

    def value(self, output: GraphOutput[Any]) -> Any:
        values = output.value
        messages = values.get("messages", [])
        choice = self.step.tool_choice
        if isinstance(choice, RequireTool) and not any(
            isinstance(m, ToolMessage) and m.name == choice.name for m in messages
        ):
            raise LoopError(
                f"Step {self.key!r} requires the tool {choice.name!r}, but the model answered without calling it.",
                step_key=self.key,
            )
        text = next((m.text for m in reversed(messages) if isinstance(m, AIMessage)), "")
        if self.step.output_model is None:
            return {"text": text}
        structured = values.get("structured_response")
        value = jsonable(structured if structured is not None else self._parse(text))
        # The structured answer is the step's output, not a tool call: streamed as the step's own event.
        get_stream_writer()({"type": "loop.step.output", "step_key": self.key, "output": value})
        return value

    def _parse(self, text: str) -> Any:
        """A structured answer the model gave as JSON text instead of through the schema tool."""
        model = self.step.output_model
        assert model is not None
        try:
            return parse_json_reply(text, model)
        except (InvalidReply, ValueError):
            pass
        raise LoopError(
            f"Step {self.key!r} needs a structured answer ({model.__name__}), but the model gave none that "
            "validates. Use a model with tool calling or structured output.",
            step_key=self.key,
        )


def _tool_value(raw: Any) -> Any:
    """A `ToolResult` as the JSON a model would see (``{"status", "message", "data"}``); other values as they are.

    Its action and images have no place in the loop context (plain JSON data).
    """
    if isinstance(raw, ToolResult):
        return {"status": raw.status, "message": raw.message, "data": to_jsonable_python(raw.data)}
    return raw


class _ToolNode(_Node):
    def __init__(self, run: _Run, key: str, tool: BaseTool, step: ToolStep, middleware: Sequence[Any]) -> None:
        super().__init__(run, key)
        self.tool = tool
        self.step = step
        self.middleware = [m for m in middleware if wraps_tools(m)]

    def _validate(self, args: dict[str, Any]) -> None:
        schema = self.tool.args_schema
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            try:
                schema.model_validate(args)
            except ValidationError as error:
                # Without the input values: they come from the context and may be secrets.
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
                raise LoopError(
                    f"Step {self.key!r}: the input for {self.step.tool!r} does not match the tool's schema "
                    f"({problems}). Fix the step's input bindings.",
                    step_key=self.key,
                ) from None

    def _permit(self, args: dict[str, Any]) -> None:
        """The permission check of the call (an approval pauses here)."""
        name = self.step.tool
        verdict = check(self.loop.permissions, name, self.key)
        if verdict.effect == "approval":
            approved, reason = ask_approval(self.events, verdict, name, args, self.key)
            if approved:
                return
            why = f": {reason}" if reason else ""
            raise LoopPermissionDeniedError(
                f"Step {self.key!r}: the approver rejected calling {name!r}{why}.",
                step_key=self.key,
                rule_id=verdict.rule_id,
                tool=name,
            )
        self.events.emit(
            "permission.result", rule_id=verdict.rule_id, effect=verdict.effect, tool=name, step_key=self.key
        )
        if verdict.effect == "deny":
            raise LoopPermissionDeniedError(
                f"Step {self.key!r}: {verdict.reason(name)} Add a permission(...) that allows it.",
                step_key=self.key,
                rule_id=verdict.rule_id,
                tool=name,
            )

    def _saved(self, raw: Any) -> Any:
        try:
            return jsonable(raw)
        except ValueError as error:
            raise LoopError(
                f"Step {self.key!r}: the result of {self.step.tool!r} is {error}; return flatter data.",
                step_key=self.key,
            ) from None

    def body(self, state: LoopState, config: RunnableConfig) -> Generator[Twin, Any, tuple[Any, RunInfo]]:
        args: dict[str, Any] = resolve(self.step.input, state.get("context") or {}, step_key=self.key)
        self._validate(args)
        if not self.middleware:
            self._permit(args)
            raw = yield (lambda: self.tool.invoke(args, config), lambda: self.tool.ainvoke(args, config))
            return self._saved(_tool_value(raw)), {}
        value = yield from self._wrapped(state, args, config)
        return value, {}

    def _wrapped(self, state: LoopState, args: dict[str, Any], config: RunnableConfig) -> Generator[Twin, Any, Any]:
        """The call through the user's tool middleware (e.g. guardrails), outermost first."""
        ran: list[Any] = []
        call_id = f"{run_info(state).get('run_id') or 'run'}:{self.key}"

        def answer(raw: Any) -> ToolMessage:
            raw = _tool_value(raw)
            ran.append(raw)
            content = raw if isinstance(raw, str) else json.dumps(jsonable(raw), ensure_ascii=False, default=str)
            return ToolMessage(content, tool_call_id=call_id, name=self.step.tool)

        def inner(request: ToolCallRequest) -> ToolMessage:
            self._permit(dict(request.tool_call["args"]))
            return answer(self.tool.invoke(dict(request.tool_call["args"]), config))

        async def ainner(request: ToolCallRequest) -> ToolMessage:
            self._permit(dict(request.tool_call["args"]))
            return answer(await self.tool.ainvoke(dict(request.tool_call["args"]), config))

        sync_call: Callable[[ToolCallRequest], Any] = inner
        async_call: Callable[[ToolCallRequest], Awaitable[Any]] = ainner
        for middleware in reversed(self.middleware):
            sync_call = (lambda m, h: lambda r: m.wrap_tool_call(r, h))(middleware, sync_call)
            async_call = (lambda m, h: lambda r: m.awrap_tool_call(r, h))(middleware, async_call)
        runtime: ToolRuntime[Any, Any] = ToolRuntime(
            state={}, context=None, config=config, stream_writer=get_stream_writer(), tool_call_id=call_id, store=None
        )
        request = ToolCallRequest(
            tool_call={"name": self.step.tool, "args": args, "id": call_id, "type": "tool_call"},
            tool=self.tool,
            state={},
            runtime=runtime,
        )
        result = yield (lambda: sync_call(request), lambda: async_call(request))
        message = result if isinstance(result, ToolMessage) else None
        decisions = decisions_of(message.response_metadata) if message is not None else []
        emit_decisions(self.events, decisions, self.key)
        block = next((d for d in decisions if d.get("action") in ("block", "rejected")), None)
        if block is not None or not ran or message is None:
            policy = str(block.get("policy_id")) if block is not None else None
            why = f"guardrail policy {policy!r}" if policy else "the step's middleware"
            raise LoopPolicyDeniedError(
                f"Step {self.key!r}: {why} blocked the call to {self.step.tool!r}; the tool "
                f"{'did not run' if not ran else 'result was withheld'}. Change the step's input or the policy.",
                step_key=self.key,
                policy_id=policy,
                tool=self.step.tool,
            )
        raw = ran[0]
        if message.text != answer_text(raw):
            # A guardrail changed the result (e.g. redacted a secret): keep what it let through.
            try:
                raw = message.text if isinstance(raw, str) else json.loads(message.text)
            except ValueError:
                raw = message.text
        return self._saved(raw)


def answer_text(raw: Any) -> str:
    """The text a tool result becomes for middleware."""
    return raw if isinstance(raw, str) else json.dumps(jsonable(raw), ensure_ascii=False, default=str)


class _StartNode(_Node):
    """``loop:start`` hooks, then the first step's ``step:start`` hooks."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.loop = run.loop
        self.key = HOOKS_START

    def steps(self, state: LoopState, config: RunnableConfig) -> Steps:
        context = dict(state.get("context") or {})
        try:
            if self.run.hooks.get("loop:start"):
                context = yield self.run.hooks_of("loop:start", state, context)
            if self.run.hooks.get("step:start"):
                context = yield self.run.hooks_of("step:start", state, context, step_key=self.loop.start)
        except LoopError as error:
            return (yield from self.run.failed(state, error, context))
        return Command(goto=self.loop.start, update={"context": context})


class _StepRunnable(Runnable[LoopState, Command[Any]]):
    """A node with a sync and an async body.

    `RunnableLambda(func, afunc=...)` would do, but it opens a child callback run around every step; LangGraph
    already traces the node, and a loop step should cost what a hand-written node costs.
    """

    def __init__(self, node: _Node, name: str) -> None:
        self.node = node
        self.name = name

    def invoke(self, input: LoopState, config: RunnableConfig | None = None, **kwargs: Any) -> Command[Any]:
        return drive(self.node.steps(input, ensure_config(config)))

    async def ainvoke(self, input: LoopState, config: RunnableConfig | None = None, **kwargs: Any) -> Command[Any]:
        return await adrive(self.node.steps(input, ensure_config(config)))


def agent_graph(
    loop: Loop,
    key: str,
    step: AgentStep,
    llm: BaseChatModel,
    tools: Sequence[BaseTool],
    middleware: Sequence[Any],
    events: Events,
    store: LoopRunStore,
) -> Any:
    """The `create_agent` graph of one agent step (the same construction as `Agent`'s: tool loop, repair step)."""
    # The same hooks as `Agent`'s, no graph node of their own (a node costs a superstep and a checkpoint write per
    # model call): the tool loop first, then steering (its steers pass every hook inside, e.g. guardrails), the
    # user's middleware and the permission check; the repair step innermost, with the tool loop's model-call part
    # and the joined steers stored with the model's answer (`ai_utils._run.repair`).
    tool_calls = ToolCalls(ToolLoopOptions(), llm)
    steering = LoopSteering(store)
    between = [*middleware, LoopToolGate(loop.permissions, events, key)]
    if step.tool_choice is not None:
        between.append(LoopToolChoice(step.tool_choice))
    # With no model-call hook between them, the steers join on the repair hook itself (the same hooks see them).
    outer = any(_wraps_model(m) for m in between)
    stack = [tool_calls, *((steering,) if outer else ()), *between]
    stack.append(LoopStepRepair(None if outer else steering, tool_calls))
    # checkpointer=None: as a subgraph it keeps its state under the loop graph's checkpointer.
    return create_agent(
        llm,
        list(tools),
        system_prompt=step.prompt,
        middleware=stack,
        response_format=step.output_model,
        state_schema=AgentState,
        name=key,
    )


def _wraps_model(middleware: Any) -> bool:
    """Whether ``middleware`` has a model-call hook of its own (it would see the request's messages)."""
    cls = type(middleware)
    return any(
        getattr(cls, name, None) is not getattr(AgentMiddleware, name, None)
        for name in ("wrap_model_call", "awrap_model_call", "before_model", "abefore_model")
    )


def build_graph(
    loop: Loop,
    *,
    llm: BaseChatModel | None,
    tools: Mapping[str, BaseTool],
    middleware: Sequence[Any],
    events: Events,
    checkpointer: Checkpointer,
    store: LoopRunStore,
    step_middleware: Sequence[Any] = (),
) -> Any:
    """Compile ``loop`` to a `StateGraph` with ``checkpointer``.

    ``middleware`` (the user's) runs in agent steps and around tool steps' calls; ``step_middleware`` (ours,
    e.g. context trust) runs first, in agent steps only.
    """
    run = _Run(loop, events, store)
    builder: StateGraph[LoopState, Any, LoopState, LoopState] = StateGraph(LoopState)
    for key, step in loop.steps.items():
        node: _Node
        if isinstance(step, AgentStep):
            assert llm is not None  # the runner checks it
            stack = [*step_middleware, *middleware]
            graph = agent_graph(loop, key, step, llm, [tools[t] for t in step.tools], stack, events, store)
            node = _AgentNode(run, key, graph, step)
        else:
            node = _ToolNode(run, key, tools[step.tool], step, middleware)
        # For the drawing; a node may also go to the last agent step with follow-ups (a `goto` LangGraph allows).
        destinations = (*dict.fromkeys(t if t != END_KEY else END for t in _targets(step.next)), END)
        builder.add_node(key, _StepRunnable(node, key), destinations=tuple(dict.fromkeys(destinations)))
    if loop.hooks.get("loop:start") or loop.hooks.get("step:start"):
        builder.add_node(HOOKS_START, _StepRunnable(_StartNode(run), HOOKS_START), destinations=(loop.start, END))
        builder.add_edge(START, HOOKS_START)
    else:
        builder.add_edge(START, loop.start)
    return builder.compile(checkpointer=checkpointer, name=loop.name)


def _targets(next: str | tuple[When | Otherwise, ...]) -> list[str]:
    return [next] if isinstance(next, str) else [item.target for item in next]
