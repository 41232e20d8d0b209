"""A `Loop` compiled to a LangGraph `StateGraph`: one node per step, routed with ``Command(goto=...)``.

State: ``context`` (the loop's context bag, checkpointed after every step), ``status``
(``running``/``completed``/``failed``), ``error`` (a failed run's error, rebuilt by the runner) and
``taken`` (completed step keys, in order). An agent step's node runs that step's `create_agent` graph
as a subgraph under the same checkpointer, so a paused model tool call resumes inside it, and neither
the loop's completed steps nor the step's own completed model and tool calls run again.

Events: a node sends ``loop.step.completed``, ``loop.transition`` and the next step's
``loop.step.started`` when it finishes, so a step that is resumed after an approval is not reported
as started twice (the runner sends the first step's ``started``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Checkpointer, Command, GraphOutput
from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict

from ai_utils._run.repair import ThreadRepair
from ai_utils._run.state import AgentState
from ai_utils._run.toolloop import ToolLoop, ToolLoopOptions
from ai_utils._structured import InvalidReply, parse_json_reply
from ai_utils.exceptions import LoopError, LoopPermissionDeniedError
from ai_utils.loops._context import jsonable, resolve, write_path
from ai_utils.loops._events import Events
from ai_utils.loops._loop import Loop
from ai_utils.loops._permissions import LoopToolChoice, LoopToolGate, ask_approval, check
from ai_utils.loops._steps import END as END_KEY
from ai_utils.loops._steps import AgentStep, Otherwise, RequireTool, ToolStep, When

__all__ = ["LoopState", "build_graph", "error_state"]

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


class LoopState(TypedDict, total=False):
    """The loop graph's state."""

    context: dict[str, Any]
    status: str
    error: dict[str, Any] | None
    taken: list[str]


def error_state(error: LoopError) -> dict[str, Any]:
    """A loop error as checkpointable data (the runner raises it again from this)."""
    data: dict[str, Any] = {"type": type(error).__name__, "message": str(error), "step_key": error.step_key}
    if error.path is not None:
        data["path"] = error.path
    if isinstance(error, LoopPermissionDeniedError):
        data["rule_id"] = error.rule_id
        data["tool"] = error.tool
    return data


class _Node:
    """What every step node shares: routing, writing the result, events, failing the run."""

    def __init__(self, loop: Loop, key: str, events: Events) -> None:
        self.loop = loop
        self.key = key
        self.events = events
        self.next = loop.steps[key].next
        self.writes = loop.writes(key)

    def run(self, state: LoopState, config: RunnableConfig) -> Command[Any]:
        raise NotImplementedError

    async def arun(self, state: LoopState, config: RunnableConfig) -> Command[Any]:
        raise NotImplementedError

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

    def advance(self, state: LoopState, value: Any) -> Command[Any]:
        """Save the step's result, pick the next step and report both."""
        context = write_path(state.get("context") or {}, self.writes, value)
        target = self._route(context)
        done = target == END_KEY
        self.events.emit("loop.step.completed", step_key=self.key)
        self.events.emit("loop.transition", from_step_key=self.key, to_step_key=target)
        if not done:
            self.events.emit("loop.step.started", step_key=target)
        update: dict[str, Any] = {
            "context": context,
            "taken": [*(state.get("taken") or ()), self.key],
            "status": "completed" if done else "running",
        }
        return Command(goto=END if done else target, update=update)

    def fail(self, error: LoopError) -> Command[Any]:
        """End the run as failed; the checkpoint keeps why."""
        return Command(goto=END, update={"status": "failed", "error": error_state(error)})


class _AgentNode(_Node):
    def __init__(self, loop: Loop, key: str, events: Events, graph: Any, step: AgentStep) -> None:
        super().__init__(loop, key, events)
        self.graph = graph
        self.step = step

    def _input(self, state: LoopState) -> dict[str, Any]:
        context = json.dumps(state.get("context") or {}, ensure_ascii=False, sort_keys=True, default=str)
        return {"messages": [HumanMessage(f"Loop context (JSON):\n{context}")]}

    def _value(self, output: GraphOutput[Any]) -> Any:
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
        if self.step.output is None:
            return {"text": text}
        structured = values.get("structured_response")
        return jsonable(structured if structured is not None else self._parse(text))

    def _parse(self, text: str) -> Any:
        """A structured answer the model gave as JSON text instead of through the schema tool."""
        output = self.step.output
        try:
            if isinstance(output, type):
                return parse_json_reply(text, output)
            value = json.loads(_FENCE.sub(r"\1", text.strip()))
            if isinstance(value, dict):
                return value
        except (InvalidReply, ValueError):
            pass
        name = output.__name__ if isinstance(output, type) else (output or {}).get("title", "output")
        raise LoopError(
            f"Step {self.key!r} needs a structured answer ({name}), but the model gave none that validates. "
            "Use a model with tool calling or structured output.",
            step_key=self.key,
        )

    def run(self, state: LoopState, config: RunnableConfig) -> Command[Any]:
        try:
            return self.advance(state, self._value(self.graph.invoke(self._input(state), config, version="v2")))
        except LoopError as error:
            return self.fail(error)

    async def arun(self, state: LoopState, config: RunnableConfig) -> Command[Any]:
        try:
            output = await self.graph.ainvoke(self._input(state), config, version="v2")
            return self.advance(state, self._value(output))
        except LoopError as error:
            return self.fail(error)


class _ToolNode(_Node):
    def __init__(self, loop: Loop, key: str, events: Events, tool: BaseTool, step: ToolStep) -> None:
        super().__init__(loop, key, events)
        self.tool = tool
        self.step = step

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

    def _args(self, state: LoopState) -> dict[str, Any]:
        """The resolved, schema-checked input, once the call is permitted (an approval pauses here)."""
        args: dict[str, Any] = resolve(self.step.input, state.get("context") or {}, step_key=self.key)
        self._validate(args)
        name = self.step.tool
        verdict = check(self.loop.permissions, name, self.key)
        if verdict.effect == "approval":
            approved, reason = ask_approval(self.events, verdict, name, args, self.key)
            if approved:
                return args
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
        return args

    def run(self, state: LoopState, config: RunnableConfig) -> Command[Any]:
        try:
            args = self._args(state)
            return self.advance(state, jsonable(self.tool.invoke(args, config)))
        except LoopError as error:
            return self.fail(error)

    async def arun(self, state: LoopState, config: RunnableConfig) -> Command[Any]:
        try:
            args = self._args(state)
            return self.advance(state, jsonable(await self.tool.ainvoke(args, config)))
        except LoopError as error:
            return self.fail(error)


class _StepRunnable(Runnable[LoopState, Command[Any]]):
    """A step node with a sync and an async body.

    `RunnableLambda(func, afunc=...)` would do, but it opens a child callback run around every step; LangGraph
    already traces the node, and a loop step should cost what a hand-written node costs.
    """

    def __init__(self, node: _Node, name: str) -> None:
        self.node = node
        self.name = name

    def invoke(self, input: LoopState, config: RunnableConfig | None = None, **kwargs: Any) -> Command[Any]:
        return self.node.run(input, ensure_config(config))

    async def ainvoke(self, input: LoopState, config: RunnableConfig | None = None, **kwargs: Any) -> Command[Any]:
        return await self.node.arun(input, ensure_config(config))


def agent_graph(
    loop: Loop,
    key: str,
    step: AgentStep,
    llm: BaseChatModel,
    tools: Sequence[BaseTool],
    middleware: Sequence[Any],
    events: Events,
) -> Any:
    """The `create_agent` graph of one agent step (the same construction as `Agent`'s: tool loop, repair step)."""
    stack = [ToolLoop(ToolLoopOptions(), llm), ThreadRepair(), *middleware, LoopToolGate(loop.permissions, events, key)]
    if step.tool_choice is not None:
        stack.append(LoopToolChoice(step.tool_choice))
    # checkpointer=None: as a subgraph it keeps its state under the loop graph's checkpointer.
    return create_agent(
        llm,
        list(tools),
        system_prompt=step.prompt,
        middleware=stack,
        response_format=step.output,
        state_schema=AgentState,
        name=key,
    )


def build_graph(
    loop: Loop,
    *,
    llm: BaseChatModel | None,
    tools: Mapping[str, BaseTool],
    middleware: Sequence[Any],
    events: Events,
    checkpointer: Checkpointer,
) -> Any:
    """Compile ``loop`` to a `StateGraph` with ``checkpointer``."""
    builder: StateGraph[LoopState, Any, LoopState, LoopState] = StateGraph(LoopState)
    for key, step in loop.steps.items():
        node: _Node
        if isinstance(step, AgentStep):
            assert llm is not None  # the runner checks it
            graph = agent_graph(loop, key, step, llm, [tools[t] for t in step.tools], middleware, events)
            node = _AgentNode(loop, key, events, graph, step)
        else:
            node = _ToolNode(loop, key, events, tools[step.tool], step)
        destinations = (*dict.fromkeys(t if t != END_KEY else END for t in _targets(step.next)), END)
        builder.add_node(key, _StepRunnable(node, key), destinations=destinations)
    builder.add_edge(START, loop.start)
    return builder.compile(checkpointer=checkpointer, name=loop.name)


def _targets(next: str | tuple[When | Otherwise, ...]) -> list[str]:
    return [next] if isinstance(next, str) else [item.target for item in next]
