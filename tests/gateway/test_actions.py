from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from ai_utils.exceptions import UserError
from ai_utils.gateway.actions import (
    ActionPolicyContext,
    ActionPolicyResult,
    ActionProposal,
    ActionRegistry,
    ContextBlock,
    default_action_policy,
    define_action,
    parse_assistant_directives,
    render_context_blocks,
)


class RefundParams(BaseModel):
    ticket_id: str
    amount: float


def _registry(**kwargs: Any) -> ActionRegistry:
    return ActionRegistry(
        [
            define_action(id="ticket.summarize", description="Summarize.", risk="safe", availability="authenticated"),
            define_action(id="ticket.draft_reply", description="Draft.", risk="confirm", aliases=["draft"]),
            define_action(
                id="ticket.issue_refund",
                description="Refund.",
                risk="restricted",
                availability="admin",
                schema=RefundParams,
            ),
            define_action(id="report.export", description="Export.", risk="safe", availability="pro"),
        ],
        **kwargs,
    )


@pytest.mark.parametrize(
    ("action_id", "actor", "status"),
    [
        ("ticket.summarize", None, "blocked"),
        ("ticket.summarize", {"user_id": "u"}, "allowed"),
        ("ticket.draft_reply", None, "requires_confirmation"),
        ("draft", None, "requires_confirmation"),
        ("report.export", {"user_id": "u", "plan": "free"}, "blocked"),
        ("report.export", {"user_id": "u", "plan": "pro"}, "allowed"),
        ("report.export", {"user_id": "u", "roles": ["admin"]}, "allowed"),
        ("ticket.issue_refund", {"user_id": "u"}, "blocked"),
        ("ticket.issue_refund", {"user_id": "u", "roles": ["admin"]}, "blocked"),
        ("ticket.unknown", {"user_id": "u"}, "blocked"),
    ],
)
def test_default_policy_statuses(action_id: str, actor: dict[str, Any] | None, status: str) -> None:
    params = {"ticket_id": "T1", "amount": 5} if action_id == "ticket.issue_refund" else {}
    assert _registry().validate({"id": action_id, "params": params}, actor).status == status


def test_blocked_results_explain_why_and_aliases_resolve_to_the_canonical_id() -> None:
    registry = _registry()
    assert "admins only" in (
        registry.validate(
            ActionProposal("ticket.issue_refund", {"ticket_id": "T", "amount": 1}), {"user_id": "u"}
        ).reason
        or ""
    )
    assert "restricted" in (
        registry.validate(
            ActionProposal("ticket.issue_refund", {"ticket_id": "T", "amount": 1}), {"roles": ["admin"]}
        ).reason
        or ""
    )
    assert registry.validate({"id": "nope"}).reason == "Unknown action 'nope'."
    assert registry.validate({"id": "draft"}).id == "ticket.draft_reply"


def test_schema_parses_params_and_invalid_params_are_blocked() -> None:
    def open_refunds(context: ActionPolicyContext) -> ActionPolicyResult:
        if context.action.id == "ticket.issue_refund" and context.actor and "admin" in context.actor.roles:
            return ActionPolicyResult("allowed")
        return default_action_policy(context)

    registry = _registry(policy=open_refunds)
    ok = registry.validate(
        {"id": "ticket.issue_refund", "params": {"ticket_id": "T1", "amount": "12.5"}}, {"roles": ["admin"]}
    )
    assert (ok.status, ok.params) == ("allowed", {"ticket_id": "T1", "amount": 12.5})
    bad = registry.validate({"id": "ticket.issue_refund", "params": {"ticket_id": "T1"}}, {"roles": ["admin"]})
    assert bad.status == "blocked" and "amount" in (bad.reason or "")


def test_callable_and_parse_schemas() -> None:
    class ParseSchema:
        def parse(self, params: dict[str, Any]) -> dict[str, Any]:
            if "q" not in params:
                raise ValueError("q is required")
            return {"q": str(params["q"]).strip()}

    registry = ActionRegistry(
        [
            define_action(id="search", description="", risk="safe", schema=ParseSchema()),
            define_action(id="count", description="", risk="safe", schema=lambda p: int(p["n"])),
        ]
    )
    assert registry.validate({"id": "search", "params": {"q": " x "}}).params == {"q": "x"}
    assert registry.validate({"id": "search", "params": {}}).status == "blocked"
    assert registry.validate({"id": "count", "params": {"n": "3"}}).params == {"value": 3}


def test_registry_is_mutable_and_rejects_duplicates() -> None:
    registry = _registry()
    assert [a.id for a in registry.list()][:2] == ["ticket.summarize", "ticket.draft_reply"]
    assert registry.has("draft") and registry.resolve("draft") is registry.resolve("ticket.draft_reply")
    with pytest.raises(UserError, match="'draft'"):
        registry.register(define_action(id="other", description="", risk="safe", aliases=["draft"]))
    assert registry.unregister("draft") is True
    assert not registry.has("ticket.draft_reply") and not registry.has("draft")
    assert registry.unregister("draft") is False
    assert registry.resolve("draft") is None


def test_define_action_checks_its_fields() -> None:
    with pytest.raises(UserError, match="risk"):
        define_action(id="a", description="", risk="yolo")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="availability"):
        define_action(id="a", description="", risk="safe", availability="vip")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="non-empty"):
        define_action(id="", description="", risk="safe")


def test_parse_assistant_directives_matches_the_seed_example() -> None:
    parsed = parse_assistant_directives(
        'Here is your summary.\n!> ticket.summarize {"id":"TKT-3042"}\n?> Draft a reply'
    )
    assert parsed.text == "Here is your summary."
    assert parsed.actions == [ActionProposal("ticket.summarize", {"id": "TKT-3042"})]
    assert parsed.follow_ups == ["Draft a reply"]
    assert parsed.parse_errors == []


def test_parse_assistant_directives_reports_soft_errors() -> None:
    parsed = parse_assistant_directives(
        "Line one\n  !> a.b\n!> bad {oops\n!> list [1]\n!>\n?>   \n!> c.d {}\nLine two", max_actions=1
    )
    assert parsed.text == "Line one\nLine two"
    assert parsed.actions == [ActionProposal("a.b", {})]
    assert len(parsed.parse_errors) == 4
    assert "Invalid JSON" in parsed.parse_errors[0] and "JSON object" in parsed.parse_errors[1]
    assert "Empty action" in parsed.parse_errors[2] and "more than 1" in parsed.parse_errors[3]
    assert parsed.follow_ups == []


def test_render_context_blocks_uses_the_seed_form() -> None:
    rendered = render_context_blocks(
        [{"name": "ticket", "content": {"id": 1}}, ContextBlock("policy", "Refunds require manager approval.")]
    )
    assert rendered == '<ticket>{\n  "id": 1\n}</ticket>\n<policy>Refunds require manager approval.</policy>'
    assert render_context_blocks([]) == ""


def test_validate_directives_gates_every_proposed_action() -> None:
    from ai_utils.gateway.actions import validate_directives

    reply = (
        'Done.\n!> ticket.summarize {"id": "T1"}\n!> ticket.issue_refund {}\n!> draft\n!> x.y\n?> Reply to the customer'
    )
    result = validate_directives(reply, _registry(), actor={"user_id": "u1"})
    assert result.message == "Done."
    assert [(a.id, a.status) for a in result.actions] == [
        ("ticket.summarize", "allowed"),
        ("ticket.issue_refund", "blocked"),
        ("ticket.draft_reply", "requires_confirmation"),
    ]
    assert result.follow_ups == ["Reply to the customer"]
    assert result.parse_errors == ["Action 'x.y' dropped: more than 3 actions proposed"]
