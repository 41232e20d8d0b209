"""Gateway lifecycle events, delivered to ``Gateway(on_event=...)``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

__all__ = ["GatewayEvent", "GatewayEventType"]

GatewayEventType = Literal["llm.call.started", "llm.call.succeeded", "llm.call.failed", "llm.policy.blocked"]


@dataclass(frozen=True, slots=True)
class GatewayEvent:
    """One lifecycle event (the seed's ``LLMGatewayEvent`` in snake_case).

    Args:
        type: ``llm.call.started`` / ``llm.call.succeeded`` / ``llm.call.failed`` / ``llm.policy.blocked``.
        feature: the feature.
        provider: the route's provider.
        model: the route's model.
        request_id: the gateway request id (same as the audit row's).
        latency_ms: for finished calls.
        usage: token counts of a succeeded call.
        actor: the actor without secret-looking attributes.
        metadata: the call's metadata.
        policy_rule: the rule that denied a blocked call.
        decisions: the policy decisions as dicts.
        error_message: why a call failed or was blocked.
        error_type: `classify_llm_error` type.
        tools_requested: tools offered to the model.
        tools_used: tools the model called (succeeded calls).
    """

    type: GatewayEventType
    feature: str
    provider: str
    model: str
    request_id: str
    latency_ms: float | None = None
    usage: dict[str, Any] | None = None
    actor: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    policy_rule: str | None = None
    decisions: list[dict[str, Any]] = field(default_factory=list)
    error_message: str | None = None
    error_type: str | None = None
    tools_requested: list[str] = field(default_factory=list)
    tools_used: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-ready dict.

        Returns:
            Every field by name.
        """
        return {f.name: getattr(self, f.name) for f in fields(self)}
