"""The policy chain: rules that allow or deny a model call before the provider sees it.

A rule is any callable ``(PolicyContext) -> PolicyDecision | None``; ``None`` abstains. The chain stops at the
first denial.

```python
from ai_utils.gateway import DEFAULT_POLICY, PolicyDecision, tool_allowlist

def business_hours(ctx):
    if ctx.metadata.get("after_hours"):
        return PolicyDecision(rule="business_hours", allowed=False, reason="Support is closed.")
    return None

policy = [*DEFAULT_POLICY, tool_allowlist({"support": {"search"}}), business_hours]
```
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from ai_utils.gateway.actor import Actor
    from ai_utils.gateway.route import Route

__all__ = [
    "DEFAULT_POLICY",
    "PolicyContext",
    "PolicyDecision",
    "PolicyRule",
    "feature_registered",
    "require_actor",
    "run_policy_chain",
    "tool_allowlist",
]


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """One rule's verdict.

    Args:
        rule: the rule name, e.g. ``"require_actor"``.
        allowed: whether the rule lets the call through.
        reason: why, for denials (shown to operators, stored in the audit row).
    """

    rule: str
    allowed: bool
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the decision as a JSON-ready dict.

        Returns:
            ``{"rule", "allowed", "reason"}``.
        """
        return {"rule": self.rule, "allowed": self.allowed, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a rule may look at.

    Args:
        feature: the requested feature.
        route: its route, or ``None`` for an unknown feature.
        actor: the (merged) actor, or ``None``.
        tools: names of the tools offered to the model in this call.
        metadata: the call's metadata.
        features: every routed feature.
    """

    feature: str
    route: Route | None
    actor: Actor | None
    tools: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    features: frozenset[str] = frozenset()


PolicyRule: TypeAlias = Callable[[PolicyContext], "PolicyDecision | None"]

# The default chain's allowing decisions, built once: every allowed call makes them (they are frozen).
_ROUTED = PolicyDecision("feature_registered", True)
_HAS_ACTOR = PolicyDecision("require_actor", True)


def feature_registered(context: PolicyContext) -> PolicyDecision:
    """Deny a feature that has no route. Keep it in every custom chain.

    Args:
        context: the call.

    Returns:
        The decision.
    """
    if context.route is None:
        known = ", ".join(sorted(context.features)) or "none"
        return PolicyDecision(
            "feature_registered", False, f"Feature {context.feature!r} has no route (known: {known}). Add a Route."
        )
    return _ROUTED


def require_actor(context: PolicyContext) -> PolicyDecision:
    """Deny calls without an actor (drop this rule for explicitly anonymous features).

    Args:
        context: the call.

    Returns:
        The decision.
    """
    if context.actor is None:
        return PolicyDecision(
            "require_actor", False, f"Feature {context.feature!r} needs an actor. Pass actor=Actor(user_id=...)."
        )
    return _HAS_ACTOR


def tool_allowlist(allowed: Mapping[str, Iterable[str]], *, enforce_all: bool = False) -> PolicyRule:
    """Build a rule that allows only listed tools per feature.

    Calls that offer no tools always pass.

    Args:
        allowed: feature → allowed tool names.
        enforce_all: deny tool-using calls of features missing from ``allowed`` (otherwise they pass).

    Returns:
        The rule, named ``"tool_allowlist"`` in decisions.
    """
    table = {feature: frozenset(names) for feature, names in allowed.items()}

    def rule(context: PolicyContext) -> PolicyDecision:
        if not context.tools:
            return PolicyDecision("tool_allowlist", True)
        permitted = table.get(context.feature)
        if permitted is None:
            if enforce_all:
                return PolicyDecision(
                    "tool_allowlist",
                    False,
                    f"Feature {context.feature!r} has no tool allowlist, so no tools are allowed. Add it to the list.",
                )
            return PolicyDecision("tool_allowlist", True)
        denied = [name for name in context.tools if name not in permitted]
        if denied:
            return PolicyDecision(
                "tool_allowlist",
                False,
                f"Tools {denied!r} are not allowed for feature {context.feature!r}. "
                f"Allowed: {sorted(permitted)!r}; remove the tools or extend the allowlist.",
            )
        return PolicyDecision("tool_allowlist", True)

    rule.__name__ = "tool_allowlist"
    return rule


DEFAULT_POLICY: tuple[PolicyRule, ...] = (feature_registered, require_actor)
"""A route must exist for the feature and an actor must be present."""


def run_policy_chain(rules: Sequence[PolicyRule], context: PolicyContext) -> list[PolicyDecision]:
    """Run rules in order and collect their decisions, stopping at the first denial.

    Args:
        rules: the policy chain.
        context: the call.

    Returns:
        The decisions (abstentions left out); the call is allowed when none has ``allowed=False``.
    """
    decisions: list[PolicyDecision] = []
    for rule in rules:
        decision = rule(context)
        if decision is None:
            continue
        decisions.append(decision)
        if not decision.allowed:
            break
    return decisions
