"""`PolicyTap` and `POLICY_TAP`: how a policy engine outside the gateway reports on the model call it wraps."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

__all__ = ["POLICY_TAP", "PolicyTap"]


class PolicyTap(Protocol):
    """A policy engine outside the gateway (e.g. guardrails middleware) reporting on the model call it wraps.

    The engine sets `POLICY_TAP` around the call; the handler of that call puts the engine's decisions into the
    call's audit row (``policy_decisions``, after the gateway's own) and audits the answer as the engine shows it.
    Decisions never carry the content they acted on.
    """

    def before_call(self) -> list[dict[str, Any]]:
        """Decisions taken on the way to this call (input, context, tool results)."""
        ...

    def after_call(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        """The answer ``text`` as the engine lets the client see it, and the decisions taken on it."""
        ...


POLICY_TAP: ContextVar[PolicyTap | None] = ContextVar("ai_utils_policy_tap", default=None)
"""The `PolicyTap` of the model call running in this context, if a policy engine wraps it."""
