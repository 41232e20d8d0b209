from __future__ import annotations

from ai_utils.gateway import (
    DEFAULT_POLICY,
    Actor,
    PolicyContext,
    PolicyDecision,
    Route,
    feature_registered,
    require_actor,
    run_policy_chain,
    tool_allowlist,
)

ROUTE = Route("support", "fake", "m")


def _ctx(feature: str = "support", *, tools: tuple[str, ...] = (), actor: Actor | None = None) -> PolicyContext:
    route = ROUTE if feature == "support" else None
    return PolicyContext(feature=feature, route=route, actor=actor, tools=tools, features=frozenset({"support"}))


def test_default_policy_requires_a_route_and_an_actor() -> None:
    assert [d.allowed for d in run_policy_chain(DEFAULT_POLICY, _ctx(actor=Actor(user_id="u")))] == [True, True]
    denied = run_policy_chain(DEFAULT_POLICY, _ctx())
    assert denied[-1] == PolicyDecision("require_actor", False, denied[-1].reason)
    assert "actor" in (denied[-1].reason or "")


def test_chain_stops_at_the_first_denial() -> None:
    decisions = run_policy_chain([feature_registered, require_actor], _ctx("billing"))
    assert [d.rule for d in decisions] == ["feature_registered"]
    assert "known: support" in (decisions[0].reason or "")


def test_abstaining_rules_are_left_out() -> None:
    assert run_policy_chain([lambda ctx: None, feature_registered], _ctx()) == [
        PolicyDecision("feature_registered", True)
    ]


def test_tool_allowlist_allows_listed_tools_and_calls_without_tools() -> None:
    rule = tool_allowlist({"support": ["search"]})
    assert rule(_ctx(tools=("search",))) == PolicyDecision("tool_allowlist", True)
    assert rule(_ctx()) == PolicyDecision("tool_allowlist", True)
    denied = rule(_ctx(tools=("search", "shell")))
    assert denied is not None and not denied.allowed and "['shell']" in (denied.reason or "")


def test_tool_allowlist_lets_unlisted_features_through_unless_enforce_all() -> None:
    assert tool_allowlist({})(_ctx("other", tools=("x",))) == PolicyDecision("tool_allowlist", True)
    denied = tool_allowlist({}, enforce_all=True)(_ctx("other", tools=("x",)))
    assert denied is not None and not denied.allowed
    assert tool_allowlist({}, enforce_all=True)(_ctx("other")) == PolicyDecision("tool_allowlist", True)


def test_decision_to_dict() -> None:
    assert PolicyDecision("r", False, "no").to_dict() == {"rule": "r", "allowed": False, "reason": "no"}
