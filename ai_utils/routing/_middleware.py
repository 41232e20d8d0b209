"""`ModeMiddleware`: ``Agent(modes=router)`` / ``DeepAgent(modes=router)`` as one `create_agent` middleware.

The mode of a turn is decided once, from the user's message that starts it, and stored with the turn: the
run path hands every new input to `ModeMiddleware.start` (the wrapper sets it as its start hook), which
routes the input's last human message and puts the decision, with the id of the message it was decided
from, in the graph input (state key ``ai_utils_mode``, written in the input step, so the checkpoint holds it
before any model call). Nothing later re-routes: a continue after a crash, the resume note, a steer, an
approval or a plain ``invoke(None)`` add no input and keep the stored mode; the turn's tool rounds are the
model's tool-calling answers after that message, however many human messages joined since.

Per model call it reads the stored decision and narrows the request: only the mode's tools, the mode
instruction appended to the system prompt, and no tools at all once the turn has used
``max_tool_iterations`` tool rounds. A call in the model's answer to a tool outside the mode (or past the
limit) is answered in the same step with an error result, so the tool node never runs it and the model gets
told, not obeyed. The graph is built once; nothing here rebuilds it. A graph run without the start hook (a
thread from an older version) is routed on its last human message that is not a steer.

Everything happens on one model-call hook, with no tool-call hook: `create_agent` wraps each middleware hook
in langsmith's ``traceable`` and composes the handlers, about 40 µs per hook call with tracing off
(``bench_routing.py``), more than the routing itself on a zero-latency turn. So in `Agent` (without durable
sessions) the router is not a hook of its own: it is a `CallStep` (`before` / `after`) on the hook the repair
step already has (`ai_utils._run.repair.ModelCallRepair`). In `DeepAgent`, and with sessions, it is this
middleware's own ``wrap_model_call``. The refusals reuse `create_agent`'s own path for injected tool results
(an AI message whose calls are all answered goes back to the model, as a HITL reject does).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, NamedTuple, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.types import Command

from ai_utils.exceptions import UserError
from ai_utils.routing._context import build_mode_tool_instruction, build_system_content
from ai_utils.routing.modes import KeywordModeRouter, ModeDecision, ModeRouter
from ai_utils.streaming._adapter import STEER_KEY, mode_part

_CACHE_SIZE = 256
_PLAIN_REQUEST = frozenset(f.name for f in dataclasses.fields(ModelRequest))
"""The attributes of a `ModelRequest` as LangChain builds it."""

__all__ = ["MODE_KEY", "ModeMiddleware", "ModeState"]

MODE_KEY = "ai_utils_mode"
"""State key of the turn's stored mode: the `ModeDecision` fields plus ``anchor``, the id of the routed message."""


class ModeState(AgentState[Any]):
    """The graph state key the mode middleware adds (the base state's ``messages`` win when schemas merge)."""

    ai_utils_mode: NotRequired[dict[str, Any] | None]


def _after(messages: Sequence[Any], anchor: str | None) -> tuple[int, int]:
    """The turn's model calls and tool rounds: the AI messages after the routed message.

    All of them when that message is not in the window any more, which can only make the limit stricter.
    """
    calls = rounds = 0
    for message in reversed(messages):
        if anchor is not None and message.id == anchor:
            break
        if isinstance(message, AIMessage):
            calls += 1
            if message.tool_calls:
                rounds += 1
    return calls, rounds


def _legacy_turn(messages: Sequence[Any]) -> tuple[str, str | None]:
    """A thread without a stored mode: its last human message that is not a steer (text, id)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and STEER_KEY not in message.response_metadata:
            return message.text, message.id
    return "", None


_PLAIN = (str, int, type(None))
_DECISION_FIELDS = tuple(f.name for f in dataclasses.fields(ModeDecision))


def _stored_form(decision: ModeDecision) -> dict[str, Any]:
    """``dataclasses.asdict(decision)``; for the usual values (str, int, None, lists of str) without its deep copy."""
    if type(decision) is not ModeDecision:
        return dataclasses.asdict(decision)
    stored: dict[str, Any] = {}
    for name in _DECISION_FIELDS:
        value = getattr(decision, name)
        if type(value) in _PLAIN:
            stored[name] = value
        elif type(value) is list and all(type(item) is str for item in value):
            stored[name] = list(value)
        else:
            return dataclasses.asdict(decision)
    return stored


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


class _Narrowed(NamedTuple):
    """One model call's view of its turn: the decision, the tools offered and the narrowed system message."""

    decision: ModeDecision
    exhausted: bool
    allowed: frozenset[str]
    tools: list[Any]
    names: list[str]
    system: SystemMessage
    # Held so the ids in the cache key cannot be reused by other objects while the entry lives.
    keep: tuple[Any, ...]


class ModeMiddleware(AgentMiddleware[ModeState, Any, Any]):
    """Per-turn mode routing for a `create_agent` graph (see the module docstring).

    Args:
        router: a `KeywordModeRouter` or any object with ``resolve(message, history=()) -> ModeDecision``.
    """

    state_schema = ModeState

    def __init__(self, router: ModeRouter) -> None:
        super().__init__()
        if not callable(getattr(router, "resolve", None)):
            raise UserError(
                f"`modes` must be a mode router such as KeywordModeRouter(...), got {router!r}; "
                "it needs a `resolve(message, history=())` method returning a ModeDecision."
            )
        self.router = router
        # Our own router's shared decision (the middleware never changes it) saves `resolve`'s defensive copy.
        self._route = router._route if isinstance(router, KeywordModeRouter) else router.resolve
        self._views: dict[tuple[Any, ...], _Narrowed] = {}
        self._stored: dict[tuple[Any, ...], ModeDecision] = {}

    @property
    def name(self) -> str:
        """Middleware name (unique in the stack)."""
        return "ai_utils.ModeRouting"

    def _decide(self, message: str) -> ModeDecision:
        decision = self._route(message)
        if not isinstance(decision, ModeDecision):
            raise UserError(f"The mode router returned {decision!r}; `resolve` must return a ModeDecision.")
        return decision

    # --- deciding once: the run path's start hook ---------------------------------------------------------

    def start(self, graph_input: dict[str, Any]) -> dict[str, Any]:
        """The graph input of a new turn with its mode decided (from its last human message) and stored in it."""
        messages = graph_input.get("messages") or []
        if type(messages) is not list:
            messages = list(messages)
        text, anchor = "", None
        for message in reversed(messages):
            if isinstance(message, HumanMessage):
                if not message.id:
                    # The anchor the turn's rounds are counted from needs an id now. LangGraph's `add_messages`
                    # gives this very message one in place as it stores it; we only do it first, the same way.
                    message.id = str(uuid.uuid4())
                text, anchor = message.text, message.id
                break
        decision = self._decide(text)
        return {**graph_input, "messages": messages, MODE_KEY: {**_stored_form(decision), "anchor": anchor}}

    def _decision_of(self, stored: Mapping[str, Any]) -> ModeDecision:
        key = (
            stored.get("mode"),
            tuple(stored.get("allowed_tools") or ()),
            tuple(stored.get("active_skills") or ()),
            stored.get("max_tool_iterations"),
            stored.get("retrieval_budget"),
            stored.get("matched_rule"),
        )
        decision = self._stored.get(key)
        if decision is None:
            fields = {f.name: stored[f.name] for f in dataclasses.fields(ModeDecision) if f.name in stored}
            decision = ModeDecision(**fields)
            if len(self._stored) >= _CACHE_SIZE:
                self._stored.clear()
            self._stored[key] = decision
        return decision

    def _turn(self, request: ModelRequest) -> tuple[ModeDecision, int, int]:
        """The turn's stored decision, its model calls and its tool rounds so far."""
        state = request.state
        stored = state.get(MODE_KEY) if type(state) is dict or isinstance(state, Mapping) else None
        if type(stored) is dict or isinstance(stored, Mapping):
            decision, anchor = self._decision_of(stored), stored.get("anchor")
        else:
            text, anchor = _legacy_turn(request.messages)
            decision = self._decide(text)
        calls, rounds = _after(request.messages, anchor)
        return decision, calls, rounds

    def _view(self, request: ModelRequest) -> tuple[_Narrowed, int]:
        decision, calls, rounds = self._turn(request)
        exhausted = rounds >= decision.max_tool_iterations
        system = request.system_message
        # The same turn (and every turn routed to the same mode) narrows the same tools and prompt: build the
        # tool list and the system message once per (mode, tools, prompt), not once per model call.
        key = (decision.mode, *decision.allowed_tools, exhausted, id(system), *map(id, request.tools))
        view = self._views.get(key)
        if view is None or (view.decision is not decision and view.decision != decision):
            allowed = frozenset(() if exhausted else decision.allowed_tools)
            tools = [t for t in request.tools if _tool_name(t) in allowed]
            names = [name for t in tools if (name := _tool_name(t)) is not None]
            instruction = build_mode_tool_instruction(mode=decision.mode, tool_names=names)
            view = _Narrowed(decision, exhausted, allowed, tools, names, _with_instruction(system, instruction),
                             (system, *request.tools))  # fmt: skip
            if len(self._views) >= _CACHE_SIZE:
                self._views.clear()
            self._views[key] = view
        return view, calls

    def _narrow(self, request: ModelRequest) -> tuple[ModelRequest, _Narrowed]:
        view, calls = self._view(request)
        if calls == 0:
            # The turn's first model call: announce the mode before the model streams anything.
            request.runtime.stream_writer(mode_part(view.decision.mode, list(view.names)))
        tool_choice = None if not view.tools else request.tool_choice
        if type(request) is not ModelRequest or vars(request).keys() != _PLAIN_REQUEST:
            return request.override(tools=list(view.tools), system_message=view.system, tool_choice=tool_choice), view
        # `override` is `dataclasses.replace`, which re-runs `__init__` over every field: for the plain request
        # (its fields only, nothing set on it since) a copy of its fields with the three replaced is the same.
        narrowed = object.__new__(ModelRequest)
        fields = narrowed.__dict__
        fields.update(vars(request))
        fields["tools"] = list(view.tools)
        fields["system_message"] = view.system
        fields["tool_choice"] = tool_choice
        return narrowed, view

    # --- as a `CallStep` on Agent's one model-call hook (`ai_utils._run.repair.ModelCallRepair`) ---------

    def before(self, request: ModelRequest) -> tuple[ModelRequest, _Narrowed]:
        """The narrowed request (mode tools, mode instruction) and the view `after` checks calls against."""
        return self._narrow(request)

    def after(self, response: ModelResponse, token: _Narrowed) -> list[BaseMessage]:
        """An error result for each call outside the mode, to store right after the answer."""
        return list(_refusals(response, token))

    # --- as its own middleware (DeepAgent, and Agent with durable sessions) ------------------------------

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | ExtendedModelResponse[Any]:
        """Offer only the mode's tools, add the mode instruction, refuse calls outside the mode."""
        narrowed, view = self._narrow(request)
        return _refused(handler(narrowed), view)

    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Coroutine[Any, Any, ModelResponse | ExtendedModelResponse[Any]]:
        """Async twin of `wrap_model_call` (a plain method: see `ai_utils._run.hooks`)."""
        narrowed, view = self._narrow(request)
        return _arefused(handler(narrowed), view)


def _refusal(call: Any, view: _Narrowed) -> ToolMessage:
    decision, name = view.decision, call["name"]
    if view.exhausted and name in decision.allowed_tools:
        reason = f"this turn used its {decision.max_tool_iterations} tool rounds in mode `{decision.mode}`"
    else:
        reason = f"it is not allowed in mode `{decision.mode}`"
    allowed = ", ".join(decision.allowed_tools) or "(none)"
    text = f"Tool `{name}` was refused: {reason}. ALLOWED_TOOLS_NOW: {allowed}. Answer without it."
    return ToolMessage(text, tool_call_id=call["id"], name=name, status="error")


def _refusals(response: ModelResponse, view: _Narrowed) -> list[ToolMessage]:
    """An error result for each call in the answer outside the mode.

    A structured-output call is answered by `create_agent` inside the response itself and is left alone; a name
    the mode allows but no tool has goes on to the tool node, which says so.
    """
    messages = response.result
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [
        _refusal(call, view)
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] not in view.allowed and call["id"] not in answered
    ]


def _refused(response: ModelResponse, view: _Narrowed) -> ModelResponse | ExtendedModelResponse[Any]:
    """The response, plus the refusals (if any) stored right after it."""
    refusals = _refusals(response, view)
    if not refusals:
        return response
    return ExtendedModelResponse(model_response=response, command=Command(update={"messages": refusals}))


async def _arefused(pending: Awaitable[ModelResponse], view: _Narrowed) -> ModelResponse | ExtendedModelResponse[Any]:
    return _refused(await pending, view)
