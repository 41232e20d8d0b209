"""Tool-loop hooks (seed: agent-core-toolloop) as one `create_agent` middleware.

``before_tool_call(name, args)`` may return changed args, ``False`` to block, or ``None`` to keep the args;
``after_tool_call(name, result)`` observes each tool result; ``should_break_early(iteration)`` ends the run
before the next model call; ``on_provider_error(error, iteration)`` observes a failed model call (the error
still propagates). Every hook may be sync or async. ``max_iterations`` and ``decide_followup_tool_choice`` live
in the run path's tool loop (`ai_utils._run.toolloop`), which every wrapper has.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse, hook_config
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from ai_utils.exceptions import UserError

__all__ = ["ToolLoopHooks"]

BeforeToolCall = Callable[[str, dict[str, Any]], Any]
AfterToolCall = Callable[[str, Any], Any]
ShouldBreakEarly = Callable[[int], Any]
OnProviderError = Callable[[BaseException, int], Any]

_BLOCKED = "Tool call `{name}` was blocked by the before_tool_call hook."


def iteration_of(messages: list[Any]) -> int:
    """Model calls made so far in the current run: AI messages after the last human message."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage):
            count += 1
    return count


def _sync(value: Any, hook: str) -> Any:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise UserError(
            f"The {hook} hook returned an awaitable in a sync run; use `ainvoke`/`astream` with async hooks."
        )
    return value


async def _async(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _blocked_or_args(call: Mapping[str, Any], decision: Any) -> dict[str, Any] | None:
    """None when the call is blocked, else the args to run with."""
    if decision is False:
        return None
    if decision is None or decision is True:
        return dict(call["args"])
    if isinstance(decision, Mapping):
        return dict(decision)
    raise UserError(
        f"before_tool_call returned {decision!r} for `{call['name']}`; return the (changed) args dict, "
        "None to keep them, or False to block the call."
    )


def _blocked_message(request: ToolCallRequest) -> ToolMessage:
    name = request.tool_call["name"]
    return ToolMessage(_BLOCKED.format(name=name), tool_call_id=request.tool_call["id"], name=name, status="error")


class ToolLoopHooks(AgentMiddleware[AgentState[Any], Any, Any]):
    """The seed's tool-loop lifecycle hooks, applied to a `create_agent` graph."""

    def __init__(
        self,
        *,
        before_tool_call: BeforeToolCall | None = None,
        after_tool_call: AfterToolCall | None = None,
        should_break_early: ShouldBreakEarly | None = None,
        on_provider_error: OnProviderError | None = None,
    ) -> None:
        super().__init__()
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.should_break_early = should_break_early
        self.on_provider_error = on_provider_error

    @property
    def name(self) -> str:
        """Middleware name (unique in the stack)."""
        return "ai_utils.ToolLoopHooks"

    # --- stopping ----------------------------------------------------------------------------------------

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """End the run when `should_break_early` says so."""
        iteration = iteration_of(state["messages"])
        wants = False
        if self.should_break_early is not None and iteration > 0:
            wants = _sync(self.should_break_early(iteration), "should_break_early")
        return {"jump_to": "end"} if wants else None

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async twin of `before_model`."""
        iteration = iteration_of(state["messages"])
        wants = False
        if self.should_break_early is not None and iteration > 0:
            wants = await _async(self.should_break_early(iteration))
        return {"jump_to": "end"} if wants else None

    # --- model calls -------------------------------------------------------------------------------------

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        """Report provider errors to `on_provider_error`."""
        try:
            return handler(request)
        except Exception as error:
            if self.on_provider_error is not None:
                _sync(self.on_provider_error(error, iteration_of(request.messages) + 1), "on_provider_error")
            raise

    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Coroutine[Any, Any, ModelResponse]:
        """Async twin of `wrap_model_call` (a plain method: see `ai_utils._run.hooks`)."""
        return self._amodel_call(request, handler)

    async def _amodel_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        try:
            return await handler(request)
        except Exception as error:
            if self.on_provider_error is not None:
                await _async(self.on_provider_error(error, iteration_of(request.messages) + 1))
            raise

    # --- tool calls --------------------------------------------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        """Let `before_tool_call` change or block the call; report the result to `after_tool_call`."""
        call = request.tool_call
        if self.before_tool_call is not None:
            args = _blocked_or_args(
                call, _sync(self.before_tool_call(call["name"], dict(call["args"])), "before_tool_call")
            )
            if args is None:
                return _blocked_message(request)
            request = request.override(tool_call={**call, "args": args})
        result = handler(request)
        if self.after_tool_call is not None:
            _sync(self.after_tool_call(call["name"], _result_value(result)), "after_tool_call")
        return result

    def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> Coroutine[Any, Any, ToolMessage | Command[Any]]:
        """Async twin of `wrap_tool_call` (a plain method: see `ai_utils._run.hooks`)."""
        return self._atool_call(request, handler)

    async def _atool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        if self.before_tool_call is not None:
            args = _blocked_or_args(call, await _async(self.before_tool_call(call["name"], dict(call["args"]))))
            if args is None:
                return _blocked_message(request)
            request = request.override(tool_call={**call, "args": args})
        result = await handler(request)
        if self.after_tool_call is not None:
            await _async(self.after_tool_call(call["name"], _result_value(result)))
        return result


def _result_value(result: ToolMessage | Command[Any]) -> Any:
    return result.content if isinstance(result, ToolMessage) else result
