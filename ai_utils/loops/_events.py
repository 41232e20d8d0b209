"""Loop events: to the caller's ``on_event`` and, when the run has gateway callbacks, to the gateway audit.

Event types: ``loop.step.started`` / ``loop.step.completed`` (``step_key``), ``loop.transition``
(``from_step_key``, ``to_step_key``), ``permission.result`` (``rule_id``, ``effect``, ``tool``),
``approval.required`` (``rule_id``, ``tool``, ``message``, ``gate_id``) and ``policy.result`` (a guardrail decision
inside the loop: ``policy_id``, ``phase``, ``action``, ``risk``, ``tool``). Every event also has ``type``, ``loop``
and ``thread_id``. Tool arguments and context values are never part of an event (they may hold secrets).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.callbacks import BaseCallbackHandler
from langgraph.config import get_config

__all__ = ["EventType", "Events", "LoopEvent", "OnEvent", "current_thread_id"]

logger = logging.getLogger("ai_utils.loops")

EventType = Literal[
    "loop.step.started",
    "loop.step.completed",
    "loop.transition",
    "permission.result",
    "approval.required",
    "policy.result",
]


class LoopEvent(dict[str, Any]):
    """One loop event: a JSON-ready dict (``event["type"]``) whose keys also read as attributes (``event.type``)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


OnEvent = Callable[[LoopEvent], Any]


def current_thread_id() -> str | None:
    """The thread of the graph run this code runs in, or ``None`` outside one."""
    try:
        config = get_config()
    except RuntimeError:  # outside a graph run
        return None
    thread = config.get("configurable", {}).get("thread_id")
    return None if thread is None else str(thread)


class Events:
    """Delivers the events of one loop (shared by every run of a `LoopRunner`)."""

    __slots__ = ("_gateways", "loop", "on_event")

    def __init__(self, loop: str, on_event: OnEvent | None, callbacks: Sequence[BaseCallbackHandler]) -> None:
        from ai_utils.gateway.callbacks import GatewayCallbackHandler

        self.loop = loop
        self.on_event = on_event
        self._gateways = [h for h in callbacks if isinstance(h, GatewayCallbackHandler)]

    @property
    def active(self) -> bool:
        """Whether anyone listens (nothing is built otherwise)."""
        return self.on_event is not None or bool(self._gateways)

    def emit(self, type_: EventType, *, thread_id: str | None = None, **fields: Any) -> None:
        """Send one event; a failing ``on_event`` is logged, never breaks the run."""
        if not self.active:
            return
        event = LoopEvent(type=type_, loop=self.loop, thread_id=thread_id or current_thread_id(), **fields)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a listener's bug must not fail a governed run half-way
                logger.exception("on_event failed for %s", type_)
        for handler in self._gateways:
            self._audit(handler, event)

    def _audit(self, handler: Any, event: LoopEvent) -> None:
        from ai_utils.gateway.audit import AuditEntry

        decisions: list[dict[str, Any]] = []
        status: Literal["succeeded", "blocked"] = "succeeded"
        if event["type"] == "permission.result":
            allowed = event.get("effect") == "allow"
            decisions.append({"rule": event.get("rule_id"), "allowed": allowed, "reason": event.get("effect")})
            if event.get("effect") == "deny":
                status = "blocked"
        elif event["type"] == "policy.result":
            decisions.append({k: event[k] for k in ("policy_id", "phase", "action", "risk", "tool") if k in event})
            if event.get("action") == "block":
                status = "blocked"
        actor = handler.actor.to_audit() if handler.actor is not None else None
        entry = AuditEntry(
            request_id=str(uuid.uuid4()),
            feature=handler.feature,
            provider="ai_utils.loops",
            model=self.loop,
            status=status,
            created_at=handler.recorder.now(),
            actor=actor,
            tenant_id=actor.get("tenant_id") if isinstance(actor, dict) else None,
            tools_requested=[event["tool"]] if event.get("tool") else [],
            policy_decisions=decisions,
            metadata={"event": event["type"], **{k: v for k, v in event.items() if k != "type"}},
        )
        # The gateway's own write path: it honours audit_mode="required" and on_audit_error.
        handler.recorder.write(entry)
