"""Redact before the first write: the user's input is scanned before the run stores it anywhere.

LangGraph writes a run's input to the checkpointer before any middleware runs, and a durable session stores a
prompt or steer before its turn starts; both would hold a secret the user typed. So the run path
(`ai_utils._run.calls.graph_input`) and the session layer hand the input to `InputRedaction.redact_input` first. The
decisions taken there ride on the redacted messages (``response_metadata``, secret-free) to the middleware, which
reports them with the first model call of the turn like any other input decision (and so into its gateway audit
row). A prompt stored as text (sessions) keeps its decisions in a small per-process memo keyed by the redacted text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ai_utils.guard._rules import GuardrailDecision, Phase
from ai_utils.guard._scan import TextPolicies
from ai_utils.guard._settings import Settings, run_settings
from ai_utils.guard._tool_calls import META_KEY

__all__ = ["InputRedaction", "phase_of"]

_MEMO_MAX = 1_024


def phase_of(message: BaseMessage) -> Phase:
    """The phase a message is scanned in: the user's messages are input, tool results tool output, others context."""
    if isinstance(message, HumanMessage):
        return "input"
    if isinstance(message, ToolMessage):
        return "tool_output"
    return "context"


class InputRedaction:
    """The input half of `Guardrails` (a mixin): `redact_input` and the memo it leaves for the middleware."""

    _policies: TextPolicies
    _base: Settings
    _tight: Settings
    _memo: dict[str, list[GuardrailDecision]]

    def redact_input(self, value: Any, config: Mapping[str, Any] | None = None) -> Any:
        """``value`` (a user's input) with secrets and ``input`` content rules applied, before anything stores it.

        Args:
            value: a str, a message, a list of messages, or ``{"messages": [...]}``; ``None`` only checks ``config``.
            config: the run's config: a per-run ``{"configurable": {"guardrails": ...}}`` is checked here, so a
                run that asks to loosen the pack fails before anything is written.

        Returns:
            The same shape, redacted (the same object when nothing changed; always unchanged in ``mode="audit"``).

        Raises:
            UserError: the run's config asks for a looser or unknown pack.
        """
        settings = run_settings(self._base, self._tight, config or {})
        if value is None or not settings.enforce:
            return value
        if isinstance(value, str):
            new, found = self._policies.scan(value, "input")
            if found:
                self._keep(new, found)
            return new if found else value
        if isinstance(value, BaseMessage):
            return self._message(value)
        if isinstance(value, list):
            out = [self._message(m) if isinstance(m, BaseMessage) else m for m in value]
            return out if any(a is not b for a, b in zip(out, value, strict=True)) else value
        if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
            messages = self.redact_input(value["messages"])
            return value if messages is value["messages"] else {**value, "messages": messages}
        return value

    def _keep(self, text: str, found: list[GuardrailDecision]) -> None:
        memo = self._memo
        memo[text] = found
        if len(memo) > _MEMO_MAX:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del memo[next(iter(memo))]

    def remembered(self, message: BaseMessage) -> list[GuardrailDecision]:
        """Decisions taken on ``message`` before it was stored (its metadata, or the memo of a stored prompt)."""
        carried = message.response_metadata.get(META_KEY)
        if carried:
            return list(carried)
        if isinstance(message, HumanMessage) and self._memo and isinstance(message.content, str):
            return self._memo.pop(message.content, [])
        return []

    def _message(self, message: BaseMessage) -> BaseMessage:
        phase = phase_of(message)
        content, found = self._policies.content(message.content, phase)
        kwargs, more = self._policies.extras(message.additional_kwargs, phase)
        found = [*found, *more]
        if not found:
            if isinstance(message, HumanMessage) and isinstance(message.content, str):
                found = self._memo.pop(message.content, [])
                if found:
                    metadata = {**message.response_metadata, META_KEY: [dict(d) for d in found]}
                    return message.model_copy(update={"response_metadata": metadata})
            return message
        update: dict[str, Any] = {"content": content}
        if kwargs is not None:
            update["additional_kwargs"] = kwargs
        update["response_metadata"] = {**message.response_metadata, META_KEY: [dict(d) for d in found]}
        return message.model_copy(update=update)
