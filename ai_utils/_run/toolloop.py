"""THE tool-loop middleware every wrapper gets (SPEC §19): tool errors, writers alone, loop limits, traces.

One `create_agent` middleware, first (outermost) among ours in every stack (`Agent`, `DeepAgent`, a durable
session's turns and loops' agent steps), so the behaviour is written once. First, because a call's place in
its reply's order must be taken before any other middleware can answer the call without running it (a
blocked call, a call a durable turn will not run twice): a call that never reached the gate would hold up
the calls after it. So the middleware inside it see a tool's exception as before; the model, the stream and
the thread see the failed result.

- **A tool that raises reaches the model** (``tool_errors="model"``, the default): an ``Exception`` becomes a
  failed ``ToolMessage`` (`ai_utils._run.toolcalls.error_result`) and the run goes on. ``SystemExit`` /
  ``KeyboardInterrupt`` end the run as `ToolAbortedError` (they must never stop a server); LangGraph's
  interrupts and commands (``GraphBubbleUp``), a resume value an interrupt refused, a `UserError` (a tool
  using ai_utils wrongly, e.g. a bad `ToolResult`), an `MCPConnectionError`, and an error that did not come
  from the tool itself (a middleware's: `raised_by_tool`) pass through. ``tool_errors="raise"`` ends the
  run with the tool's exception.
- **Writers alone**: each call waits at its reply's `Gate` (``parallel_tools=False``: every call is a writer).
- **ToolResult**: the call runs a copy of its tool that hands the `ToolResult` over (`results_tool`).
- **Loop limits** on the model call: after ``max_iterations`` model calls that asked for tools (counted on the
  stored turn, so a resumed or continued turn carries on), the next call gets ``tool_choice="none"`` (a tool
  call in its answer is dropped: the model was told to answer); ``decide_followup_tool_choice(iteration,
  messages)`` picks ``tool_choice`` for each later call; ``allowed_tools`` of the run narrows the tools.
- **The run record** (`ai_utils._run.record`): usage, model, actions, and the trace events ``model.*`` and
  ``tool.*``.

`ToolCalls` has the tool-call hooks and does its model-call part as a `CallStep` (`before` / `after`): `Agent`
without sessions runs it on the repair step's model-call hook, which it has anyway (each hook costs LangChain
about 40 µs per call). `ToolLoop` adds a model-call hook of its own for the other stacks.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp, is_invalid_resume
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ai_utils._run.guards import ToolAbortedError, exit_is_an_error
from ai_utils._run.hooks import awaited
from ai_utils._run.record import RunRecord, current_record, emit_trace
from ai_utils._run.toolcalls import (
    Gate,
    Gates,
    WritesDefault,
    error_result,
    from_result,
    raised_by_tool,
    results_tool,
    tool_errors_box,
)
from ai_utils._run.tracing import acall_model, acall_tool, call_model, call_tool
from ai_utils.exceptions import UserError
from ai_utils.streaming._adapter import STEER_KEY
from ai_utils.tools._mcp_config import MCPConnectionError

__all__ = ["FollowupToolChoice", "ToolCalls", "ToolErrors", "ToolLoop", "ToolLoopOptions", "takes_images"]

ToolErrors = Literal["model", "raise"]
FollowupToolChoice = Callable[[int, list[BaseMessage]], Any]
"""``decide_followup_tool_choice(iteration, messages) -> "auto" | "required" | "none" | <tool name>``."""

_CHOICES = ("auto", "required", "none")
# Never the model's business: LangGraph's interrupts and commands, a tool's process exit, and mistakes in how the
# run is set up (ai_utils used wrongly; an MCP tool run outside the run that holds its server's session).
_PASS_THROUGH = (GraphBubbleUp, ToolAbortedError, UserError, MCPConnectionError)
_Handler = Callable[[ToolCallRequest], ToolMessage | Command[Any]]
_AHandler = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]


@dataclass(frozen=True, slots=True)
class ToolLoopOptions:
    """The tool-loop options of one wrapper (checked by `ToolLoopOptions.checked`)."""

    tool_errors: ToolErrors = "model"
    parallel_tools: bool = True
    max_iterations: int | None = None
    decide_followup_tool_choice: FollowupToolChoice | None = None
    writes_default: WritesDefault | None = None
    # False only for the benchmark's anchor: the same middleware without the ordering bookkeeping.
    ordered: bool = True

    @classmethod
    def checked(
        cls,
        *,
        owner: str,
        tool_errors: Any = "model",
        parallel_tools: Any = True,
        max_iterations: Any = None,
        decide_followup_tool_choice: Any = None,
        writes_default: WritesDefault | None = None,
    ) -> ToolLoopOptions:
        """The options, each checked; `UserError` naming a bad value and the fix."""
        if tool_errors not in ("model", "raise"):
            raise UserError(
                f"{owner}(tool_errors={tool_errors!r}) is not a choice; use 'model' (a tool's error goes to the "
                "model) or 'raise' (it ends the run)."
            )
        if not isinstance(parallel_tools, bool):
            raise UserError(f"{owner}(parallel_tools=...) must be True or False, got {parallel_tools!r}.")
        if max_iterations is not None and (
            isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1
        ):
            raise UserError(
                f"{owner}(max_iterations={max_iterations!r}): max_iterations must be a positive int "
                "(model calls that may ask for tools before the model must answer), or None for no limit; "
                "e.g. max_iterations=5."
            )
        if decide_followup_tool_choice is not None and not callable(decide_followup_tool_choice):
            raise UserError(
                f"{owner}(decide_followup_tool_choice=...) must be a function (iteration, messages) -> tool_choice, "
                f"got {decide_followup_tool_choice!r}."
            )
        return cls(tool_errors, parallel_tools, max_iterations, decide_followup_tool_choice, writes_default)


def takes_images(llm: Any) -> bool:
    """Whether ``llm`` takes images in tool results (its profile says so, or says nothing)."""
    profile = getattr(llm, "profile", None)
    if not isinstance(profile, dict):
        return True
    return profile.get("image_tool_message") is not False and profile.get("image_inputs") is not False


def _run_config() -> Any:
    try:
        return get_config()
    except RuntimeError:  # not inside a runnable (a hook called by hand)
        return None


def _tool_name(tool: Any) -> str | None:
    if isinstance(tool, dict):
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        return name if isinstance(name, str) else None
    name = getattr(tool, "name", None)
    return name if isinstance(name, str) else None


def tool_rounds(messages: Sequence[Any]) -> int:
    """Model calls of the current turn that asked for tools: AI messages with tool calls since the user's message.

    Steers (user messages that joined a running durable turn) do not start a turn: the count carries on.
    """
    rounds = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and STEER_KEY not in message.response_metadata:
            break
        if isinstance(message, AIMessage) and message.tool_calls:
            rounds += 1
    return rounds


def _answer_only(message: AIMessage) -> AIMessage:
    """``message`` without tool calls (a reply to ``tool_choice="none"`` that called tools anyway)."""
    return AIMessage(
        content=message.text,
        id=message.id,
        name=message.name,
        usage_metadata=message.usage_metadata,
        response_metadata=message.response_metadata,
    )


class ToolCalls(AgentMiddleware[AgentState[Any], Any, Any]):
    """The tool-call hooks of the tool loop, and its model-call part as a `CallStep` (see the module docstring).

    Args:
        options: the wrapper's tool-loop options.
        llm: the wrapper's chat model (does it take images in tool results?).
    """

    def __init__(self, options: ToolLoopOptions = ToolLoopOptions(), llm: Any = None) -> None:
        super().__init__()
        self.options = options
        self._with_images = takes_images(llm)
        self._gates = Gates()
        # tool id -> (tool, the copy that hands ToolResults over); the tool is held so its id stays unique.
        self._copies: dict[int, tuple[BaseTool, BaseTool]] = {}

    @property
    def name(self) -> str:
        """Middleware name (unique in the stack)."""
        return "ai_utils.ToolLoop"

    # --- tool calls ----------------------------------------------------------------------------------------

    def _prepared(self, request: ToolCallRequest, record: RunRecord | None) -> ToolCallRequest | ToolMessage:
        call = request.tool_call
        allowed = record.allowed_tools if record is not None else None
        if allowed is not None and call["name"] not in allowed:
            return ToolMessage(
                f"Not run: `{call['name']}` is not among the tools allowed for this run ({sorted(allowed)!r}).",
                tool_call_id=call["id"],
                name=call["name"],
                status="error",
            )
        tool = request.tool
        if tool is None:
            return request
        entry = self._copies.get(id(tool))
        if entry is None:
            entry = (tool, results_tool(tool, with_images=self._with_images))
            if len(self._copies) >= 1024:
                self._copies.clear()
            self._copies[id(tool)] = entry
        return request if entry[1] is tool else request.override(tool=entry[1])

    def _failed(self, request: ToolCallRequest, error: Exception, box: list[BaseException]) -> ToolMessage:
        if (
            self.options.tool_errors == "raise"
            or isinstance(error, _PASS_THROUGH)
            or is_invalid_resume(error)
            or not raised_by_tool(error, box)
        ):
            raise error
        return error_result(request, error)

    def _gate(self, request: ToolCallRequest, record: RunRecord | None, *, is_async: bool) -> Gate | None:
        if not self.options.ordered:
            return None
        return self._gates.get(
            request,
            record,
            alone=not self.options.parallel_tools,
            default=self.options.writes_default,
            is_async=is_async,
        )

    def wrap_tool_call(self, request: ToolCallRequest, handler: _Handler) -> ToolMessage | Command[Any]:
        """Run the call in its reply's order; an error becomes the model's failed result; a ToolResult is read."""
        record = current_record(request.runtime.config)
        gate = self._gate(request, record, is_async=False)
        index = gate.enter(request.tool_call["id"] or "") if gate is not None else None
        try:
            prepared = self._prepared(request, record)
            if isinstance(prepared, ToolMessage):
                return prepared
            started = _started(record, request)
            result: ToolMessage | Command[Any]
            with tool_errors_box() as box:
                try:
                    with exit_is_an_error(request):
                        result = call_tool(handler, prepared)
                except Exception as error:
                    result = self._failed(request, error, box)
            return _finished(record, request, started, result)
        finally:
            if gate is not None:
                gate.leave(index)
                self._gates.release(record, gate)

    def awrap_tool_call(self, request: ToolCallRequest, handler: _AHandler) -> Coroutine[Any, Any, Any]:
        """Async twin of `wrap_tool_call` (a plain method: see `ai_utils._run.hooks`)."""
        return self._atool_call(request, handler)

    async def _atool_call(self, request: ToolCallRequest, handler: _AHandler) -> ToolMessage | Command[Any]:
        record = current_record(request.runtime.config)
        gate = self._gate(request, record, is_async=True)
        index = await gate.aenter(request.tool_call["id"] or "") if gate is not None else None
        try:
            prepared = self._prepared(request, record)
            if isinstance(prepared, ToolMessage):
                return prepared
            started = _started(record, request)
            result: ToolMessage | Command[Any]
            with tool_errors_box() as box:
                try:
                    with exit_is_an_error(request):
                        result = await acall_tool(handler, prepared)
                except Exception as error:
                    result = self._failed(request, error, box)
            return _finished(record, request, started, result)
        finally:
            if gate is not None:
                gate.leave(index)
                self._gates.release(record, gate)

    # --- the model call, as a `CallStep` -------------------------------------------------------------------

    def before(self, request: ModelRequest) -> tuple[ModelRequest, Any]:
        """The request with the run's tools and this call's ``tool_choice``; what `after` needs."""
        record = current_record(_run_config())
        options = self.options
        overrides: dict[str, Any] = {}
        tools = request.tools
        if record is not None and record.allowed_tools is not None:
            tools = [t for t in tools if _tool_name(t) in record.allowed_tools]
            overrides["tools"] = tools
        forced = False
        if options.max_iterations is not None or options.decide_followup_tool_choice is not None:
            state = request.state
            stored = state.get("messages", request.messages) if isinstance(state, dict) else request.messages
            rounds = tool_rounds(stored)
            if options.max_iterations is not None and rounds >= options.max_iterations:
                forced = True
                if tools:
                    overrides["tool_choice"] = "none"
            elif options.decide_followup_tool_choice is not None and rounds > 0 and tools:
                choice = options.decide_followup_tool_choice(rounds, list(request.messages))
                if choice is not None:
                    overrides["tool_choice"] = _checked_choice(choice, tools)
        if overrides:
            request = request.override(**overrides)
        if record is not None and record.sink is not None:
            emit_trace(
                record,
                "model.requested",
                {
                    "iteration": record.model_calls + 1,
                    "tools": [_tool_name(t) for t in request.tools],
                    "tool_choice": request.tool_choice if isinstance(request.tool_choice, str) else None,
                },
            )
        return request, (record, forced)

    def after(self, response: Any, token: Any) -> list[BaseMessage]:
        """Record the answer; a forced answer's tool calls are dropped. Nothing to store after it."""
        record, forced = token
        inner = response.model_response if isinstance(response, ExtendedModelResponse) else response
        messages = inner.result if isinstance(inner, ModelResponse) else [inner] if isinstance(inner, AIMessage) else []
        for i, message in enumerate(messages):
            if not isinstance(message, AIMessage):
                continue
            if forced and message.tool_calls:
                message = messages[i] = _answer_only(message)
            if record is not None:
                record.responded(message)
                if record.sink is not None:
                    emit_trace(
                        record,
                        "model.responded",
                        {
                            "iteration": record.model_calls,
                            "tool_calls": [c["name"] for c in message.tool_calls],
                            "usage": message.usage_metadata,
                            "model": record.model,
                        },
                    )
            break
        return []


def _checked_choice(choice: Any, tools: Sequence[Any]) -> Any:
    names = [n for t in tools if (n := _tool_name(t)) is not None]
    if choice in _CHOICES or (isinstance(choice, str) and choice in names):
        return choice
    raise UserError(
        f"decide_followup_tool_choice returned {choice!r}, which is neither 'auto', 'required', 'none' nor a tool "
        f"of this call ({names!r}); return one of those."
    )


def _started(record: RunRecord | None, request: ToolCallRequest) -> float:
    if record is None or record.sink is None:
        return 0.0
    call = request.tool_call
    emit_trace(record, "tool.started", {"tool_name": call["name"], "id": call["id"]})
    return time.perf_counter()


def _finished(
    record: RunRecord | None, request: ToolCallRequest, started: float, result: ToolMessage | Command[Any]
) -> ToolMessage | Command[Any]:
    """The call's result with its `ToolResult` read; the ``tool.finished`` event."""
    if isinstance(result, ToolMessage):
        result = from_result(result, record)
    if record is None or record.sink is None:
        return result
    call = request.tool_call
    status = result.status if isinstance(result, ToolMessage) else "success"
    duration = round((time.perf_counter() - started) * 1000, 3)
    emit_trace(
        record,
        "tool.finished",
        {"tool_name": call["name"], "id": call["id"], "status": status, "duration_ms": duration},
    )
    return result


class ToolLoop(ToolCalls):
    """`ToolCalls` with a model-call hook of its own (stacks without `Agent`'s repair hook to ride on)."""

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Narrow the tools and set ``tool_choice``; record the answer."""
        prepared, token = self.before(request)
        response = call_model(handler, prepared)
        self.after(response, token)
        return response

    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Coroutine[Any, Any, Any]:
        """Async twin of `wrap_model_call` (a plain method: see `ai_utils._run.hooks`)."""
        prepared, token = self.before(request)
        if token[0] is None and not token[1]:
            return awaited(acall_model(handler, prepared))
        return self._amodel_call(acall_model(handler, prepared), token)

    async def _amodel_call(self, pending: Awaitable[Any], token: Any) -> Any:
        response = await pending
        self.after(response, token)
        return response
