"""The `create_agent` hooks of an agent with ``sessions=``: steering, the resume note, safe tool re-runs.

`Agent` gets `SessionHooks`: a model-call hook and a tool-call hook, no graph node of their own (a
``before_model`` node would cost a LangGraph superstep and a checkpoint write per model call); its repair step
(`ai_utils._run.repair.ModelCallRepair`) stores the steers that joined with the model's answer. `DeepAgent` puts
`SessionMiddleware` (the same hooks plus a `ThreadRepair` ``before_model`` node that also steers) in deepagents'
repair slot. Outside a durable turn (no `TurnContext` in the run's config) they do nothing more, so
``agent.invoke`` on the same agent still works. Inside one:

- before each model call (a safe boundary: never between a tool call and its result) the turn stops if its
  ``yield_at`` has passed (`TurnYielded`; the next prompt or ``resume()`` continues it from there), else the
  session's queued steers join the turn as user messages (shown as ``user_message`` chunks before the answer).
  A steer is marked taken when it joins and reaches the thread with the model's answer; after a crash in
  between, the first model call of the continued turn adds the steers the turn took and the thread lacks;
- each model call runs on the session's model and with its instructions added to the system prompt (when the
  session has them), and the first one after a crash also gets `RESUME_NOTE` there — in the system prompt,
  never as a message, so the thread's last message stays what it was (a model that answers a tool result
  sees the tool result last) and nothing routes on the note;
- each tool call gets its ``execution_id`` (stable across re-runs) in ``config["configurable"]``; a call of a
  non-idempotent tool is journaled before it starts, and a journaled call found again after a crash is not
  run: its result is an error saying it may have partly run.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from ai_utils._run.hooks import awaited, ready
from ai_utils._run.repair import REPAIR_NAME, ThreadRepair, akeeping_steers, keeping_steers, repair_messages
from ai_utils.streaming._adapter import STEER_KEY
from ai_utils.tools.durable import EXECUTION_ID, declared_idempotent

__all__ = [
    "CONTEXT_KEY",
    "DEEP_BUILTINS",
    "RESUME_NOTE",
    "STEERS_PART",
    "SessionMiddleware",
    "SessionHooks",
    "TurnContext",
    "TurnYielded",
]

CONTEXT_KEY = "__ai_utils_turn"
"""``config["configurable"]`` key of the running durable turn's `TurnContext`."""

STEERS_PART = "ai_utils_steers_joined"
"""Key of the custom stream part that announces steers joining the turn (the turn's log shows them at once)."""

_NAMESPACE = uuid.UUID("6b1f3a52-8c4e-4d0b-9a57-2f1e0c9d7a10")

RESUME_NOTE = (
    "[system note] This turn was interrupted: the process running it stopped, and a new process continues it "
    "from the last stored step. Tool calls that may have partly run are marked with an error result; check "
    "what already happened before repeating anything."
)
PARTLY_RUN = (
    "Not run again: this call (execution_id {eid}) was running when the process running the turn stopped, so "
    "it may have partly run. Check its effect before calling it again."
)

# deepagents' built-in tools: which are safe to run twice (reads, and writes that set the same content again).
DEEP_BUILTINS: Mapping[str, bool] = {
    "write_todos": True,
    "ls": True,
    "read_file": True,
    "glob": True,
    "grep": True,
    "write_file": True,
    "edit_file": False,
    "delete": False,
    "execute": False,
    "task": False,
}


class TurnYielded(Exception):
    """The turn reached its ``yield_at``: it stops before this model call (the graph stays resumable)."""


@dataclass
class TurnContext:
    """What the middleware needs from the running durable turn (passed in the run's config).

    Attributes:
        resuming: the turn continues after its worker died: the first model call gets `RESUME_NOTE`.
        yield_at: stop before the next model call after this unix time.
        model: the session's chat model (``None``: the agent's).
        instructions: the session's instructions, added to the system prompt.
        quiet: the session's steer version (`SessionStore.steer_version`) at which it had no waiting steer; while the
            version stays so, a model call need not look for steers (``None``: it looks).
    """

    store: Any
    session_id: str
    token: int
    turn_id: str
    resuming: bool
    noted: bool = False
    rejoined: bool = False
    yield_at: float | None = None
    model: Any = None
    instructions: str | None = None
    quiet: Any = None


def _context() -> TurnContext | None:
    try:
        value = (get_config().get("configurable") or {}).get(CONTEXT_KEY)
    except RuntimeError:  # not inside a runnable
        return None
    return value if isinstance(value, TurnContext) else None


def execution_id(turn: TurnContext, call: Mapping[str, Any], messages: Sequence[Any]) -> str:
    """The call's id: unique per call (turn, AI message, call id), the same when the call runs again."""
    owner = next(
        (
            m.id
            for m in reversed(messages)
            if isinstance(m, AIMessage) and any(c["id"] == call["id"] for c in m.tool_calls)
        ),
        None,
    )
    return uuid.uuid5(_NAMESPACE, f"{turn.session_id}/{turn.turn_id}/{owner}/{call['id']}").hex


def _system(system: SystemMessage | None, parts: Sequence[str]) -> SystemMessage:
    """The system message with ``parts`` added after it (each separated by a blank line)."""
    if system is None:
        return SystemMessage("\n\n".join(parts))
    if isinstance(system.content, str):
        return SystemMessage("\n\n".join(p for p in (system.content, *parts) if p))
    return SystemMessage([*system.content, *({"type": "text", "text": p} for p in parts)])


def _joining(request: ModelRequest) -> tuple[ModelRequest, list[HumanMessage]]:
    """The request with the turn's queued steers joined and announced (and the session's model-call overrides).

    Stops at ``yield_at`` (`TurnYielded`). Joined steers are appended to the request's messages: the hooks inside
    this one (the user's, e.g. guardrails) see them as new messages, and the repair step stores them with the
    model's answer, as the model got them (`ai_utils._run.repair.ModelCallRepair`). They are announced on the
    stream at once, so a reader sees them before the answer.
    """
    turn = _context()
    if turn is None:
        return request, []
    if turn.yield_at is not None and time.time() >= turn.yield_at:
        raise TurnYielded(turn.turn_id)
    joined = _joined(turn, request.messages)
    if joined:
        writer = request.runtime.stream_writer if request.runtime is not None else None
        if writer is not None:
            writer({STEERS_PART: [{"id": m.response_metadata[STEER_KEY], "text": m.text} for m in joined]})
        request = request.override(messages=[*request.messages, *joined])
    return _noted(turn, request), joined


def _joined(turn: TurnContext, messages: Sequence[Any]) -> list[HumanMessage]:
    """The steers that join the turn now (those it took earlier and the thread lacks, after a crash, first).

    Not looked for while no steer was stored since the session was last seen without one (its steer version is
    still `TurnContext.quiet`; Postgres: every process's stored steers bump it): a model call costs no read then.
    """
    again = turn.resuming and not turn.rejoined
    turn.rejoined = True
    version = turn.store.steer_version(turn.session_id)  # before the read: a steer stored after it bumps it
    if not again and version is not None and version == turn.quiet:
        return []
    steers = turn.store.take_steers(turn.session_id, turn.token, turn.turn_id, again=again)
    turn.quiet = version  # every waiting steer was taken just now
    if not steers:
        return []
    held = {m.id for m in messages}
    out = [_steer(turn, mid, text) for mid, text in steers]
    return [m for m in out if m.id not in held]


def _steer(turn: TurnContext, mid: str, text: str) -> HumanMessage:
    return HumanMessage(
        text, id=uuid.uuid5(_NAMESPACE, f"{turn.session_id}/steer/{mid}").hex, response_metadata={STEER_KEY: mid}
    )


def _noted(turn: TurnContext, request: ModelRequest) -> ModelRequest:
    """The request on the session's model and instructions, with the resume note on the first call after a crash."""
    extra = [turn.instructions] if turn.instructions else []
    if turn.resuming and not turn.noted:
        turn.noted = True
        extra.append(RESUME_NOTE)
    overrides: dict[str, Any] = {}
    if extra:
        overrides["system_message"] = _system(request.system_message, extra)
    if turn.model is not None:
        overrides["model"] = turn.model
    return request.override(**overrides) if overrides else request


class SessionHooks(AgentMiddleware[AgentState[Any], Any, Any]):
    """`Agent`'s session hooks: a model-call and a tool-call hook, no graph node of their own.

    The model-call hook joins steers, stops at ``yield_at`` and runs the call on the session's model and
    instructions (with the resume note after a crash); the tool-call hook gives each call its ``execution_id`` and
    applies the idempotent rule.

    Args:
        idempotent: ``tool name -> idempotent`` for tools whose metadata does not say (MCP, built-ins).
    """

    def __init__(self, idempotent: Mapping[str, bool]) -> None:
        super().__init__()
        self._idempotent = dict(idempotent)

    @property
    def name(self) -> str:
        """Middleware name (unique in the stack)."""
        return "ai_utils.SessionHooks"

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        """Join the queued steers, stop at ``yield_at``; run the call on the session's model and instructions."""
        request, joined = _joining(request)
        return keeping_steers(request, handler, joined) if joined else handler(request)

    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Coroutine[Any, Any, Any]:
        """Async twin of `wrap_model_call` (a plain method: see `ai_utils._run.hooks`)."""
        request, joined = _joining(request)
        if not joined:
            return awaited(handler(request))
        return akeeping_steers(request, handler, joined)

    def is_idempotent(self, request: ToolCallRequest) -> bool:
        """The tool's declaration (metadata first, then the agent's table; undeclared counts as not)."""
        declared = declared_idempotent(request.tool) if request.tool is not None else None
        if declared is not None:
            return declared
        return self._idempotent.get(request.tool_call["name"], False)

    def _prepare(self, request: ToolCallRequest) -> ToolCallRequest | ToolMessage:
        turn = (request.runtime.config.get("configurable") or {}).get(CONTEXT_KEY)
        if not isinstance(turn, TurnContext):
            return request
        call = request.tool_call
        eid = execution_id(
            turn, call, (request.state or {}).get("messages", []) if isinstance(request.state, Mapping) else []
        )
        config = request.runtime.config
        # Per-call config (LangGraph copies it per call): tools read it as config / ToolRuntime.config.
        config["configurable"] = {**(config.get("configurable") or {}), EXECUTION_ID: eid}
        if not self.is_idempotent(request) and not turn.store.journal(turn.session_id, turn.token, eid):
            return ToolMessage(PARTLY_RUN.format(eid=eid), tool_call_id=call["id"], name=call["name"], status="error")
        return request

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        """Give the call its ``execution_id``; never re-run a non-idempotent call that may have partly run."""
        prepared = self._prepare(request)
        return prepared if isinstance(prepared, ToolMessage) else handler(prepared)

    def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> Coroutine[Any, Any, ToolMessage | Command[Any]]:
        """Async twin of `wrap_tool_call` (a plain method: see `ai_utils._run.hooks`)."""
        prepared = self._prepare(request)
        return ready(prepared) if isinstance(prepared, ToolMessage) else awaited(handler(prepared))


class SessionMiddleware(SessionHooks, ThreadRepair):
    """The thread-repair step plus steering, the resume note and the idempotent rule, as one middleware.

    `DeepAgent` puts it in deepagents' repair slot: repairing and steering happen in its ``before_model`` node
    (deepagents' own model-call hooks may return commands of their own). `Agent` uses `SessionHooks` (`parts`):
    no node, the steers join in its model-call hook and its repair step stores them.

    Args:
        idempotent: ``tool name -> idempotent`` for tools whose metadata does not say (MCP, built-ins).
    """

    @property
    def name(self) -> str:
        """The repair step's name (deepagents' slot, `ai_utils._run.repair.REPAIR_NAME`)."""
        return REPAIR_NAME

    def parts(self) -> SessionHooks:
        """`Agent`'s form: the same hooks without the ``before_model`` node (its repair step stores the steers)."""
        return SessionHooks(self._idempotent)

    # --- repair + steering -------------------------------------------------------------------------------

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Stop at ``yield_at``; answer unanswered tool calls, then let the session's queued steers join the turn."""
        turn = _context()
        if turn is not None and turn.yield_at is not None and time.time() >= turn.yield_at:
            raise TurnYielded(turn.turn_id)
        messages = state["messages"]
        repaired = repair_messages(messages)
        joined = _joined(turn, messages) if turn is not None else []
        if repaired is None and not joined:
            return None
        return {"messages": [*(repaired or []), *joined]}

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async twin of `before_model`."""
        return self.before_model(state, runtime)

    # --- the session's model and instructions, the resume note ------------------------------------------

    def _noted(self, request: ModelRequest) -> ModelRequest:
        turn = _context()
        return request if turn is None else _noted(turn, request)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        """Run the model call on the session's model and instructions; tell the first one after a crash."""
        return handler(self._noted(request))

    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Coroutine[Any, Any, ModelResponse]:
        """Async twin of `wrap_model_call` (a plain method: see `ai_utils._run.hooks`)."""
        return awaited(handler(self._noted(request)))
