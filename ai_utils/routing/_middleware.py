"""`ModeMiddleware`: ``Agent(modes=router)`` / ``DeepAgent(modes=router)`` as one `create_agent` middleware.

Per model call it routes the turn's user message (the last human message) and narrows the request: only the
mode's tools, the mode instruction appended to the system prompt, and no tools at all once the turn has used
``max_tool_iterations`` tool rounds. Per tool call it refuses a tool outside the mode (or past the limit) with
an error result, so a model that calls a tool it was not offered gets told, not obeyed. The graph is built
once; nothing here rebuilds it. Routing is stateless (the same message always gives the same mode), so a
resumed run, a crash-continued turn and a replayed checkpoint all see the mode the turn started with.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ai_utils.exceptions import UserError
from ai_utils.routing._context import build_mode_tool_instruction, build_system_content
from ai_utils.routing.modes import ModeDecision, ModeRouter
from ai_utils.streaming._adapter import mode_part

_T = TypeVar("_T")

__all__ = ["ModeMiddleware"]


def _turn(messages: Sequence[Any]) -> tuple[str, int, int]:
    """The turn's user message text, its model calls so far and its tool rounds so far."""
    calls = rounds = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text, calls, rounds
        if isinstance(message, AIMessage):
            calls += 1
            if message.tool_calls:
                rounds += 1
    return "", calls, rounds


def _tool_name(tool: Any) -> str | None:
    if isinstance(tool, dict):
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        return name if isinstance(name, str) else None
    name = getattr(tool, "name", None)
    return name if isinstance(name, str) else None


def _with_instruction(system: SystemMessage | None, instruction: str) -> SystemMessage:
    if system is None:
        return SystemMessage(instruction)
    content = system.content
    if isinstance(content, str):
        return SystemMessage(build_system_content([content, instruction]))
    return SystemMessage([*content, {"type": "text", "text": instruction}])


class ModeMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Per-turn mode routing for a `create_agent` graph (see the module docstring).

    Args:
        router: a `KeywordModeRouter` or any object with ``resolve(message, history=()) -> ModeDecision``.
    """

    def __init__(self, router: ModeRouter) -> None:
        super().__init__()
        if not callable(getattr(router, "resolve", None)):
            raise UserError(
                f"`modes` must be a mode router such as KeywordModeRouter(...), got {router!r}; "
                "it needs a `resolve(message, history=())` method returning a ModeDecision."
            )
        self.router = router

    @property
    def name(self) -> str:
        """Middleware name (unique in the stack)."""
        return "ai_utils.ModeRouting"

    def _decide(self, message: str) -> ModeDecision:
        decision = self.router.resolve(message)
        if not isinstance(decision, ModeDecision):
            raise UserError(f"The mode router returned {decision!r}; `resolve` must return a ModeDecision.")
        return decision

    def _narrow(self, request: ModelRequest) -> ModelRequest:
        message, calls, rounds = _turn(request.messages)
        decision = self._decide(message)
        allowed = set(decision.allowed_tools) if rounds < decision.max_tool_iterations else set()
        tools = [t for t in request.tools if _tool_name(t) in allowed]
        names = [name for t in tools if (name := _tool_name(t)) is not None]
        if calls == 0:
            # The turn's first model call: announce the mode before the model streams anything.
            request.runtime.stream_writer(mode_part(decision.mode, names))
        instruction = build_mode_tool_instruction(mode=decision.mode, tool_names=names)
        overrides: dict[str, Any] = {
            "tools": tools,
            "system_message": _with_instruction(request.system_message, instruction),
        }
        if not tools and request.tool_choice is not None:
            overrides["tool_choice"] = None
        return request.override(**overrides)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        """Offer only the mode's tools and add the mode instruction to the system prompt."""
        return handler(self._narrow(request))

    # Plain methods that hand back the handler's awaitable: LangChain wraps every wrap_* hook in langsmith's
    # `traceable`, whose wrapper for an `async def` hops to a thread twice per call even with tracing off (about
    # +25% on a zero-latency turn, bench_routing.py); the sync wrapper does not hop.
    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Coroutine[Any, Any, ModelResponse]:
        """Async twin of `wrap_model_call`."""
        return _awaited(handler(self._narrow(request)))

    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        state = request.state
        messages = state.get("messages", []) if isinstance(state, dict) else getattr(state, "messages", [])
        message, _, rounds = _turn(messages)
        decision = self._decide(message)
        call = request.tool_call
        name = call["name"]
        if name in decision.allowed_tools and rounds <= decision.max_tool_iterations:
            return None
        if name in decision.allowed_tools:
            reason = f"this turn used its {decision.max_tool_iterations} tool rounds in mode `{decision.mode}`"
        else:
            reason = f"it is not allowed in mode `{decision.mode}`"
        allowed = ", ".join(decision.allowed_tools) or "(none)"
        text = f"Tool `{name}` was refused: {reason}. ALLOWED_TOOLS_NOW: {allowed}. Answer without it."
        return ToolMessage(text, tool_call_id=call["id"], name=name, status="error")

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        """Refuse a tool outside the turn's mode, or past its tool-round limit, with an error result."""
        refusal = self._refusal(request)
        return refusal if refusal is not None else handler(request)

    def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> Coroutine[Any, Any, ToolMessage | Command[Any]]:
        """Async twin of `wrap_tool_call`."""
        refusal = self._refusal(request)
        return _ready(refusal) if refusal is not None else _awaited(handler(request))


async def _ready(message: ToolMessage) -> ToolMessage:
    return message


async def _awaited(awaitable: Awaitable[_T]) -> _T:
    return await awaitable
