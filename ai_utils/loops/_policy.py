"""Guardrail decisions inside a loop: ``policy.result`` events, and the user's tool middleware on tool steps.

Agent steps: guardrails (``guardrails(...)``) report each model call's decisions through the gateway's
`POLICY_TAP` (set around the call; decisions of the tool calls before it ride on their results). `PolicyEvents`
is a callback handler that reads the same tap the gateway audit reads, so the loop's ``policy.result`` events
are exactly the decisions the audit row gets — without a gateway.

Tool steps call no model, so the user's middleware (``LoopRunner(middleware=...)``) wraps the step's one tool
call the way `create_agent` wraps a model's call (``wrap_tool_call``, outermost first, around the permission
check and the tool). A guardrail that blocks it (or whose approval is rejected) fails the run with
`LoopPolicyDeniedError`; the decisions come from the result's guardrail metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult

from ai_utils.gateway._calls import read_result
from ai_utils.gateway._tap import POLICY_TAP, PolicyTap
from ai_utils.guard._tool_calls import META_KEY
from ai_utils.loops._events import Events

__all__ = ["PolicyEvents", "decisions_of", "emit_decisions", "wraps_tools"]

_FIELDS = ("policy_id", "phase", "action", "risk", "tool")


def wraps_tools(middleware: object) -> bool:
    """Whether a `create_agent` middleware wraps tool calls (overrides ``wrap_tool_call``)."""
    from langchain.agents.middleware import AgentMiddleware

    hook = getattr(type(middleware), "wrap_tool_call", None)
    return hook is not None and hook is not AgentMiddleware.wrap_tool_call


def decisions_of(metadata: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The guardrail decisions a tool result carries."""
    found = metadata.get(META_KEY)
    return [d for d in found if isinstance(d, Mapping)] if isinstance(found, list) else []


def emit_decisions(events: Events, decisions: Sequence[Mapping[str, Any]], step_key: str | None) -> None:
    """One ``policy.result`` event per decision (its fields only: a decision never carries content)."""
    for decision in decisions:
        fields = {k: decision[k] for k in _FIELDS if k in decision}
        events.emit("policy.result", step_key=step_key, **fields)


def _step_of(metadata: Mapping[str, Any] | None) -> str | None:
    namespace = str((metadata or {}).get("langgraph_checkpoint_ns") or "")
    return namespace.split(":", 1)[0] or None


class PolicyEvents(BaseCallbackHandler):
    """Reads each model call's `POLICY_TAP` (as the gateway audit does) and sends ``policy.result`` events."""

    run_inline = True  # in the model call's context, where the tap is set
    ignore_chain = True
    ignore_agent = True
    ignore_retriever = True
    ignore_retry = True
    ignore_custom_event = True

    def __init__(self, events: Events) -> None:
        self.events = events
        self._calls: dict[UUID, tuple[PolicyTap, str | None]] = {}

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        """Report the decisions taken on the way to this call (input, tool calls and results before it)."""
        tap = POLICY_TAP.get()
        if tap is None:
            return
        step = _step_of(kwargs.get("metadata"))
        self._calls[run_id] = (tap, step)
        emit_decisions(self.events, tap.before_call(), step)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Report the decisions on the answer."""
        call = self._calls.pop(run_id, None)
        if call is None:
            return
        tap, step = call
        text, _, _ = read_result(response, str(run_id))
        emit_decisions(self.events, tap.after_call(text)[1], step)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget the call."""
        self._calls.pop(run_id, None)
