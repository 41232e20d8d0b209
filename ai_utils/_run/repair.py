"""THE thread-repair step: no model call ever sees an unanswered tool call.

A thread can hold an AI message whose tool calls have no result: the process died inside a tool, a run
was cancelled, or a new message arrived while an approval waited (LangGraph then starts a fresh run and
drops the paused one). OpenAI-style providers refuse such a history (HTTP 400), so before every model call
`ThreadRepair` answers each unanswered call with an error `ToolMessage`, placed right after its AI message:

- ``"Not run: superseded by a new message ..."`` when a user message follows the call;
- ``"Not run: interrupted ..."`` otherwise (the call may have partly run).

Every wrapper uses this one step, attached where it costs least:

- `Agent` attaches it to the model call itself (`ModelCallRepair`, a ``wrap_model_call`` hook, innermost but
  for the run guards): the model gets the repaired history, and the repair is stored in the same step as
  the model's answer. A ``before_model`` hook is a graph node of its own, about 185 µs per model call on a
  zero-latency turn (+20%, ``benchmarks/bench_agent.py``); a model-call hook costs LangChain about 40 µs.
  It sits innermost so that a command an outer hook returns with the answer (the mode router's refusals)
  lands after the rewritten history, not under it.
- `DeepAgent` puts `ThreadRepair` (``before_model``) in the slot of deepagents' own
  `PatchToolCallsMiddleware` (deepagents merges middleware by name, so ours replaces theirs in the main
  agent, the general-purpose subagent and declared subagents), since deepagents' own model-call hooks may
  return commands of their own.
- With durable sessions `Agent` keeps this hook: the session's outer model-call hook
  (``ai_utils.sessions._middleware.SessionHooks``) appends the steers that join to the request, so every hook
  between sees them, and this one stores them (as the model got them) before the answer, in the same rewrite.
  `DeepAgent` uses `SessionMiddleware`, a `ThreadRepair` subclass whose ``before_model`` also lets steers join.

We do not reuse deepagents' class: it runs only once per run (``before_agent``), cannot tell a superseded
call from an interrupted one, and deepagents is an optional extra that `Agent` must not need.

Repaired results carry ``response_metadata[REPAIR_KEY]`` (``"superseded"`` / ``"interrupted"``) so the
chunk adapter reports them (a tool ``end`` chunk with ``status: "error"``), and each repair is logged.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import operator
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Literal, Protocol

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Command

from ai_utils._run.hooks import awaited
from ai_utils._run.tracing import acall_model, call_model
from ai_utils.streaming._adapter import REPAIR_KEY, STEER_KEY

__all__ = [
    "REPAIR_KEY",
    "REPAIR_NAME",
    "STORED_STEERS",
    "CallStep",
    "ModelCallRepair",
    "ThreadRepair",
    "akeeping_steers",
    "keeping_steers",
    "repair_messages",
    "unanswered_calls",
]

logger = logging.getLogger("ai_utils.agents")

REPAIR_NAME = "PatchToolCallsMiddleware"
"""The middleware's name: deepagents' slot name, so `create_deep_agent` uses ours in place of its own."""

Reason = Literal["superseded", "interrupted"]

_TEXT: dict[Reason, str] = {
    "superseded": (
        "Not run: superseded by a new message. The user wrote again instead of answering this call "
        "(e.g. an approval); ask again if it is still needed."
    ),
    "interrupted": (
        "Not run: interrupted. The run stopped before this call finished, so it may have partly run; "
        "check before trying it again."
    ),
}


def _calls(message: AIMessage) -> list[dict[str, Any]]:
    return [*message.tool_calls, *message.invalid_tool_calls]  # type: ignore[list-item]


# Message class -> _AI (an `AIMessage`), _TOOL (a `ToolMessage`) or 0: runs before every model call over the whole
# history, so the per-message work is C loops over this table (no `isinstance` call, which for a message that is
# not exactly of the class runs pydantic's ABC check in Python).
_AI, _TOOL = 1, 2
_KINDS: dict[type, int] = {}
_tool_calls = operator.attrgetter("tool_calls")
_invalid_tool_calls = operator.attrgetter("invalid_tool_calls")
_tool_call_id = operator.attrgetter("tool_call_id")


def _kinds(messages: Sequence[AnyMessage]) -> list[int]:
    kinds = list(map(_KINDS.get, map(type, messages)))
    if None in kinds:
        for cls in set(map(type, messages)) - _KINDS.keys():
            _KINDS[cls] = _AI if issubclass(cls, AIMessage) else _TOOL if issubclass(cls, ToolMessage) else 0
        kinds = list(map(_KINDS.__getitem__, map(type, messages)))
    return kinds  # type: ignore[return-value]  # no None left


def unanswered_calls(messages: Sequence[AnyMessage]) -> list[tuple[int, dict[str, Any]]]:
    """``(index of the AI message, tool call)`` for every tool call without a `ToolMessage` answer."""
    kinds = _kinds(messages)
    is_ai = list(map(_AI.__eq__, kinds))
    ai_index = list(itertools.compress(range(len(kinds)), is_ai))
    ai = list(itertools.compress(messages, is_ai))
    calling = set(itertools.compress(ai_index, map(bool, map(_tool_calls, ai))))
    calling.update(itertools.compress(ai_index, map(bool, map(_invalid_tool_calls, ai))))
    if not calling:
        return []
    answered = set(map(_tool_call_id, itertools.compress(messages, map(_TOOL.__eq__, kinds))))
    return [
        (i, call)
        for i in sorted(calling)
        for call in _calls(messages[i])  # type: ignore[arg-type]  # an AIMessage (its kind says so)
        if call.get("id") and call["id"] not in answered
    ]


def _answer(call: dict[str, Any], reason: Reason) -> ToolMessage:
    name = call.get("name") or "unknown"
    return ToolMessage(
        _TEXT[reason],
        tool_call_id=call["id"],
        name=name,
        status="error",
        response_metadata={REPAIR_KEY: reason},
    )


def repair_messages(messages: Sequence[AnyMessage], *, reason: Reason | None = None) -> list[BaseMessage] | None:
    """The ``messages`` update that answers every unanswered tool call, or ``None`` when there is none.

    Answers go right after their AI message (providers require the results to follow the call). When the
    last such AI message ends the thread, the answers are appended; otherwise the history is rewritten once
    (``REMOVE_ALL_MESSAGES`` + the repaired list), which works with both `add_messages` and the delta channel.

    Args:
        messages: the thread's messages.
        reason: force the reason; by default ``"superseded"`` when a user message follows the call.
    """
    missing = unanswered_calls(messages)
    if not missing:
        return None
    by_index: dict[int, list[dict[str, Any]]] = {}
    for index, call in missing:
        by_index.setdefault(index, []).append(call)

    def why(index: int) -> Reason:
        if reason is not None:
            return reason
        later = messages[index + 1 :]
        return "superseded" if any(isinstance(m, HumanMessage) for m in later) else "interrupted"

    answers = {i: [_answer(c, why(i)) for c in calls] for i, calls in by_index.items()}
    for calls in answers.values():
        for answer in calls:
            logger.warning(
                "Tool call %s (id %s) had no result; answered with: %s",
                answer.name,
                answer.tool_call_id,
                answer.text.split(".")[0],
            )
    last = max(answers)
    if all(isinstance(m, ToolMessage) for m in messages[last + 1 :]) and len(answers) == 1:
        return list(answers[last])
    rebuilt: list[BaseMessage] = [RemoveMessage(id=REMOVE_ALL_MESSAGES)]
    for i, message in enumerate(messages):
        rebuilt.append(message)
        rebuilt.extend(answers.get(i, ()))
    return rebuilt


class ThreadRepair(AgentMiddleware[AgentState[Any], Any, Any]):
    """Before each model call, answer the thread's unanswered tool calls (see the module docstring)."""

    @property
    def name(self) -> str:
        """The name of deepagents' slot (`REPAIR_NAME`), so one repair step serves `Agent` and `DeepAgent`."""
        return REPAIR_NAME

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Answer unanswered tool calls; ``None`` (no write) when the thread is sound."""
        update = repair_messages(state["messages"])
        return None if update is None else {"messages": update}

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async twin of `before_model`."""
        return self.before_model(state, runtime)


class CallStep(Protocol):
    """Per-model-call work that rides on `ModelCallRepair`'s hook instead of a hook of its own (the mode router).

    Each ``create_agent`` hook costs about 40 µs per call in LangChain alone, so the steps `Agent` always needs
    on a model call share one.
    """

    def before(self, request: ModelRequest) -> tuple[ModelRequest, Any]:
        """The request the model gets, and what `after` needs to know."""
        ...

    def after(self, response: ModelResponse, token: Any) -> list[BaseMessage]:
        """Messages to store right after the model's answer (e.g. refusals of calls it may not make)."""
        ...


class ModelCallRepair(AgentMiddleware[AgentState[Any], Any, Any]):
    """The repair step as a model-call hook (`Agent`): repair what the model sees, store it with its answer.

    Args:
        steps: the `CallStep` objects to run in the same hook, inside the repair, in this order (the mode
            router, then the tool loop's model-call part); ``None`` entries are skipped.
    """

    def __init__(self, *steps: CallStep | None) -> None:
        super().__init__()
        self.steps = tuple(step for step in steps if step is not None)
        # The steps' state keys (the mode router's stored mode) join the graph's state through this middleware.
        schemas = [s for step in self.steps if (s := getattr(step, "state_schema", None)) not in (None, AgentState)]
        if schemas:
            self.state_schema = schemas[0]

    @property
    def name(self) -> str:
        """Middleware name (unique in the stack)."""
        return "ai_utils.ThreadRepair"

    def _prepare(self, request: ModelRequest) -> tuple[ModelRequest, list[AnyMessage] | None, list[Any]]:
        history = _repaired(request.messages)
        if history is not None:
            request = request.override(messages=history)
        elif joined := _joined_steers(request):
            # A durable session's steers joined this call (appended by its outer hook, as the hooks between saw
            # them): stored before the answer, after the thread's own messages (an outer hook may trim the view).
            history = [*request.state.get("messages", ()), *joined]
        stored = STORED_STEERS.get()
        if history is not None and stored is not None:
            stored.extend(str(m.id) for m in _joined_steers(request))
        tokens: list[Any] = []
        for step in self.steps:
            request, token = step.before(request)
            tokens.append(token)
        return request, history, tokens

    def _stored(
        self, response: ModelResponse, history: list[AnyMessage] | None, tokens: list[Any]
    ) -> ModelResponse | ExtendedModelResponse[Any]:
        after = [m for step, token in zip(self.steps, tokens, strict=True) for m in step.after(response, token)]
        if history is None:
            if not after:
                return response
            messages: list[BaseMessage] = after
        else:
            # One rewrite of the thread: the repaired history, the model's answer (already appended by the model
            # node's own update, which the rewrite replaces), then what the steps store after it.
            messages = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *history, *response.result, *after]
        return ExtendedModelResponse(model_response=response, command=Command(update={"messages": messages}))

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | ExtendedModelResponse[Any]:
        """Call the model on the repaired history; the rewrite is stored in the model's step."""
        prepared, history, tokens = self._prepare(request)
        return self._stored(call_model(handler, prepared), history, tokens)

    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Coroutine[Any, Any, ModelResponse | ExtendedModelResponse[Any]]:
        """Async twin of `wrap_model_call` (a plain method: see `ai_utils._run.hooks`)."""
        prepared, history, tokens = self._prepare(request)
        if history is None and not self.steps:
            return awaited(acall_model(handler, prepared))
        return self._astored(acall_model(handler, prepared), history, tokens)

    async def _astored(
        self, pending: Awaitable[ModelResponse], history: list[AnyMessage] | None, tokens: list[Any]
    ) -> ModelResponse | ExtendedModelResponse[Any]:
        return self._stored(await pending, history, tokens)


STORED_STEERS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("ai_utils_stored_steers", default=None)
"""Set by a steering model-call hook around the call: the ids of the joined steers the repair hook stored."""


def keeping_steers(
    request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse], joined: list[HumanMessage]
) -> Any:
    """Call the model with steers ``joined`` to ``request``; steers the repair hook did not store are kept after it.

    The steering hooks of durable sessions and loops share this: a hook inside that answers without calling the
    model (a guardrail's block) would otherwise drop an accepted steer.
    """
    stored: list[str] = []
    reset = STORED_STEERS.set(stored)
    try:
        response = handler(request)
    finally:
        STORED_STEERS.reset(reset)
    return _kept(response, joined, stored)


async def akeeping_steers(
    request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]], joined: list[HumanMessage]
) -> Any:
    """Async twin of `keeping_steers`."""
    stored: list[str] = []
    reset = STORED_STEERS.set(stored)
    try:
        response = await handler(request)
    finally:
        STORED_STEERS.reset(reset)
    return _kept(response, joined, stored)


def _kept(response: Any, joined: list[HumanMessage], stored: list[str]) -> Any:
    """The call's result, with the joined steers the repair hook did not store added after the answer."""
    missing = [m for m in joined if m.id not in stored]
    if not missing:
        return response
    return ExtendedModelResponse(model_response=response, command=Command(update={"messages": missing}))


def _joined_steers(request: ModelRequest) -> list[AnyMessage]:
    """The steers at the end of the request that the thread does not hold yet (a durable session's, this call's)."""
    messages = request.messages
    stored = request.state.get("messages") or ()
    last = stored[-1].id if stored else None
    start = len(messages)
    while start > 0:
        message = messages[start - 1]
        if not isinstance(message, HumanMessage) or STEER_KEY not in message.response_metadata or message.id == last:
            break
        start -= 1
    return list(messages[start:])


def _repaired(messages: Sequence[AnyMessage]) -> list[AnyMessage] | None:
    """The whole history with every unanswered call answered, or ``None`` when it is sound."""
    update = repair_messages(messages)
    if update is None:
        return None
    if isinstance(update[0], RemoveMessage):
        return list(update[1:])  # type: ignore[arg-type]
    return [*messages, *update]  # type: ignore[list-item]
