"""The permission check, one for every tool call of a loop: the model's (as middleware) and tool steps'.

Specificity of a rule for a call: the ``tool`` value that matched counts 4 when it is an exact name, 2 for a
glob pattern, 0 for ``"*"`` or no ``tool`` key; a matching ``step`` adds 1 when exact. The most specific
matching rules decide: a ``deny`` among them wins, else the first declared. No matching rule → deny.
Approval pauses the run with ``interrupt()`` (answered with ``decision="approve"|"reject"``).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import ToolMessage
from langgraph.errors import GraphInterrupt
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt

from ai_utils._run.hooks import awaited, ready
from ai_utils.loops._events import Events
from ai_utils.loops._rules import Effect, Permission
from ai_utils.loops._steps import RequireTool

__all__ = ["APPROVAL_KIND", "LoopToolChoice", "LoopToolGate", "Verdict", "ask_approval", "check", "is_approved"]

APPROVAL_KIND = "loop_approval"
_GLOB = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of the permission check for one call."""

    effect: Effect
    rule: Permission | None

    @property
    def rule_id(self) -> str | None:
        """The deciding rule's id (``None``: no rule matched)."""
        return None if self.rule is None else self.rule.id

    def reason(self, tool: str) -> str:
        """Why a call was denied, for the model or the error."""
        if self.rule is None:
            return f"No permission rule allows calling `{tool}` (default deny)."
        return self.rule.message or f"Calling `{tool}` is denied by permission rule {self.rule.id!r}."


def _score(values: Sequence[str] | None, name: str, exact: int, glob: int) -> int | None:
    """The specificity of the best value matching ``name``; ``None`` when none matches."""
    if values is None:
        return 0
    best: int | None = None
    for value in values:
        if value == "*":
            score = 0
        elif _GLOB.isdisjoint(value):
            if value != name:
                continue
            score = exact
        elif fnmatchcase(name, value):
            score = glob
        else:
            continue
        best = score if best is None else max(best, score)
    return best


def check(rules: Sequence[Permission], tool: str, step_key: str) -> Verdict:
    """Decide one tool call (see the module docstring for the order)."""
    best: int | None = None
    chosen: Permission | None = None
    for rule in rules:
        tool_score = _score(rule.match.get("tool"), tool, 4, 2)
        step_score = _score(rule.match.get("step"), step_key, 1, 0)
        if tool_score is None or step_score is None:
            continue
        score = tool_score + step_score
        if best is None or score > best:
            best, chosen = score, rule
        elif score == best and rule.effect == "deny" and chosen is not None and chosen.effect != "deny":
            chosen = rule
    return Verdict("deny", None) if chosen is None else Verdict(chosen.effect, chosen)


def is_approved(answer: object) -> tuple[bool, str | None]:
    """``(approved, reject reason)`` from the resume value of an approval interrupt."""
    kind = answer.get("type") if isinstance(answer, Mapping) else answer
    message = answer.get("message") if isinstance(answer, Mapping) else None
    return kind == "approve", None if message is None else str(message)


def ask_approval(events: Events, verdict: Verdict, tool: str, args: Any, step_key: str) -> tuple[bool, str | None]:
    """Pause for a human decision on one call; returns ``(approved, reject reason)`` once resumed.

    The ``approval.required`` event is sent when the run pauses, not again when the resumed step re-enters.
    """
    rule = verdict.rule
    question = (rule.message if rule is not None else None) or f"Approve calling `{tool}`?"
    payload = {
        "type": APPROVAL_KIND,
        # A fresh id per gate: a decision names the gate it answers (`LoopRunner.invoke(gate_id=...)`), so an
        # answer meant for this gate can never approve the next one. On resume the node rebuilds this payload,
        # but `interrupt` then returns the answer and the new id is never used.
        "gate_id": uuid.uuid4().hex,
        "question": question,
        "decisions": ["approve", "reject"],
        "tool_name": tool,
        "args": dict(args) if isinstance(args, Mapping) else {"input": args},
        "rule_id": verdict.rule_id,
        "step_key": step_key,
    }
    try:
        answer = interrupt(payload)
    except GraphInterrupt:
        # Re-raised unchanged: this is the pause itself; only here do we know it is the first time.
        events.emit("permission.result", rule_id=verdict.rule_id, effect="approval", tool=tool, step_key=step_key)
        events.emit(
            "approval.required",
            rule_id=verdict.rule_id,
            tool=tool,
            message=question,
            step_key=step_key,
            gate_id=payload["gate_id"],
        )
        raise
    approved, reason = is_approved(answer)
    effect: Effect = "allow" if approved else "deny"
    events.emit(
        "permission.result", rule_id=verdict.rule_id, effect=effect, tool=tool, step_key=step_key, decided_by="human"
    )
    return approved, reason


def _denied(request: ToolCallRequest, text: str) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(text, tool_call_id=call["id"], name=call["name"], status="error")


class LoopToolGate(AgentMiddleware[AgentState[Any], Any, Any]):
    """An agent step's permission check on each model tool call.

    A denied call gets an error ``ToolMessage`` (the tool does not run); an approval rule pauses the run.
    """

    def __init__(self, rules: Sequence[Permission], events: Events, step_key: str) -> None:
        super().__init__()
        self.rules = tuple(rules)
        self.events = events
        self.step_key = step_key

    @property
    def name(self) -> str:
        """Middleware name (unique per step graph)."""
        return "ai_utils.LoopToolGate"

    def _gate(self, request: ToolCallRequest) -> ToolMessage | None:
        """``None`` to run the call, else the error result that replaces it."""
        tool = request.tool_call["name"]
        verdict = check(self.rules, tool, self.step_key)
        if verdict.effect == "approval":
            approved, reason = ask_approval(self.events, verdict, tool, request.tool_call["args"], self.step_key)
            if approved:
                return None
            why = f" Reason: {reason}" if reason else ""
            return _denied(request, f"The call to `{tool}` was rejected by the approver.{why} Do not retry it.")
        self.events.emit(
            "permission.result", rule_id=verdict.rule_id, effect=verdict.effect, tool=tool, step_key=self.step_key
        )
        if verdict.effect == "allow":
            return None
        return _denied(request, f"Permission denied: {verdict.reason(tool)} Do not retry it.")

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        """Check the call, then run it (or return why not)."""
        refused = self._gate(request)
        return handler(request) if refused is None else refused

    def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> Coroutine[Any, Any, ToolMessage | Command[Any]]:
        """Async twin of `wrap_tool_call` (a plain method: see `ai_utils._run.hooks`)."""
        refused = self._gate(request)
        return awaited(handler(request)) if refused is None else ready(refused)


class LoopToolChoice(AgentMiddleware[AgentState[Any], Any, Any]):
    """An agent step's ``tool_choice``; `require_tool` applies until the tool has been called."""

    def __init__(self, tool_choice: RequireTool | str) -> None:
        super().__init__()
        self.tool_choice = tool_choice

    @property
    def name(self) -> str:
        """Middleware name (unique per step graph)."""
        return "ai_utils.LoopToolChoice"

    def _choice(self, request: ModelRequest) -> ModelRequest:
        choice = self.tool_choice
        if not request.tools:
            return request
        if isinstance(choice, RequireTool):
            called = any(isinstance(m, ToolMessage) and m.name == choice.name for m in request.messages)
            return request if called else request.override(tool_choice=choice.name)
        return request.override(tool_choice=choice)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        """Send the step's ``tool_choice`` (a required tool: until it has been called)."""
        return handler(self._choice(request))

    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Coroutine[Any, Any, ModelResponse]:
        """Async twin of `wrap_model_call` (a plain method: see `ai_utils._run.hooks`)."""
        return awaited(handler(self._choice(request)))
