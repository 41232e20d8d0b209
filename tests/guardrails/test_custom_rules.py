"""The ``custom`` pack's literal content rules, and the `UserError`s for bad guardrail settings."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from ai_utils import Agent, MemorySaver, UserError, guardrails
from ai_utils.testing import FakeChatModel

PRIVATE = {
    "id": "support.private-content",
    "phases": ["input", "context", "output"],
    "action": "redact",
    "risk": "high",
    "contains_any": ["private marker", "Project Falcon"],
    "replacement": "[PRIVATE]",
}


def test_redact_rule_applies_to_input_tool_results_and_output_case_insensitively() -> None:
    @tool
    def search(query: str) -> str:
        """Search the wiki."""
        return "Roadmap: project falcon ships in May."

    decisions: list[dict[str, Any]] = []
    model = FakeChatModel(
        [{"tool_calls": [{"name": "search", "args": {"query": "roadmap"}}]}, "PROJECT FALCON ships soon. sk-notakey"]
    )
    agent = Agent(
        llm=model,
        tools=[search],
        middleware=guardrails("custom", content_rules=[PRIVATE], on_decision=decisions.append),
    )

    answer = agent.invoke("What about the Private Marker roadmap?")

    assert answer == "[PRIVATE] ships soon. sk-notakey"
    assert model.calls[0][-1].content == "What about the [PRIVATE] roadmap?"
    tool_result = next(m for m in model.calls[1] if isinstance(m, ToolMessage))
    assert tool_result.text == "Roadmap: [PRIVATE] ships in May."
    assert [(d["policy_id"], d["phase"], d["risk"]) for d in decisions] == [
        ("support.private-content", "input", "high"),
        ("support.private-content", "tool_output", "high"),
        ("support.private-content", "output", "high"),
    ]


def test_custom_keeps_the_standard_baseline() -> None:
    model = FakeChatModel(["ok"])
    agent = Agent(llm=model, middleware=guardrails("custom", content_rules=[PRIVATE]))
    agent.invoke("my key is AKIAIOSFODNN7EXAMPLE")
    assert model.calls[0][-1].content == "my key is [REDACTED:aws_access_key]"


def test_block_rule_on_input_ends_the_turn_without_calling_the_model() -> None:
    rule = {"id": "no.exports", "phases": ["input"], "action": "block", "contains_any": ["export all customers"]}
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel(["never used", "Hello!"])
    agent = Agent(
        llm=model,
        checkpointer=MemorySaver(),
        middleware=guardrails("custom", content_rules=[rule], on_decision=decisions.append),
    )

    assert agent.invoke("Please EXPORT ALL CUSTOMERS to csv", thread_id="b") == "[BLOCKED:no.exports]"
    assert model.calls == []
    assert decisions == [{"policy_id": "no.exports", "phase": "input", "action": "block", "risk": "medium"}]
    # The conversation goes on; the blocked text is not kept in the thread.
    assert agent.invoke("hi", thread_id="b") == "never used"
    assert "export all customers" not in str(model.calls[0]).lower()


def test_block_rule_on_tool_input_keeps_the_tool_from_running() -> None:
    sent: list[str] = []

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        sent.append(to)
        return "sent"

    rule = {"id": "no.salaries", "phases": ["tool_input"], "action": "block", "contains_any": ["salary"]}
    model = FakeChatModel(
        [
            {"tool_calls": [{"name": "send_email", "args": {"to": "a@example.com", "body": "Your SALARY is 10k"}}]},
            {"tool_calls": [{"name": "send_email", "args": {"to": "b@example.com", "body": "Hello"}}]},
            "done",
        ]
    )
    Agent(llm=model, tools=[send_email], middleware=guardrails("custom", content_rules=[rule])).invoke("mail them")
    assert sent == ["b@example.com"]


def test_redact_rule_on_tool_input_changes_the_arguments_the_tool_gets() -> None:
    got: list[str] = []

    @tool
    def post_note(text: str) -> str:
        """Post a note."""
        got.append(text)
        return "posted"

    rule = {"id": "codename", "phases": ["tool_input"], "action": "redact", "contains_any": ["Falcon"]}
    model = FakeChatModel([{"tool_calls": [{"name": "post_note", "args": {"text": "Falcon is late"}}]}, "ok"])
    Agent(llm=model, tools=[post_note], middleware=guardrails("custom", content_rules=[rule])).invoke("post")
    assert got == ["[REDACTED:codename] is late"]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"policy_pack": "lenient"}, "'standard', 'strict' or 'custom'"),
        ({"policy_pack": "custom"}, "at least one rule"),
        ({"policy_pack": "standard", "content_rules": [PRIVATE]}, "policy_pack='custom'"),
        ({"streaming": "live"}, "'audit' or 'buffer'"),
        ({"max_tool_output_chars": 0}, "positive int"),
        ({"max_tool_output_chars": "10k"}, "positive int"),
        ({"on_decision": "print"}, "on_decision"),
        ({"policy_pack": "custom", "content_rules": [{**PRIVATE, "pattern": "sk-.*"}]}, "regular expressions"),
        ({"policy_pack": "custom", "content_rules": [{**PRIVATE, "containsAny": ["x"]}]}, "unknown keys"),
        ({"policy_pack": "custom", "content_rules": [{**PRIVATE, "phases": ["preflight"]}]}, "unknown phase"),
        ({"policy_pack": "custom", "content_rules": [{**PRIVATE, "phases": "input"}]}, "'phases'"),
        ({"policy_pack": "custom", "content_rules": [{**PRIVATE, "action": "warn"}]}, "'action'"),
        ({"policy_pack": "custom", "content_rules": [{**PRIVATE, "contains_any": []}]}, "'contains_any'"),
        ({"policy_pack": "custom", "content_rules": [{**PRIVATE, "contains_any": "marker"}]}, "'contains_any'"),
        ({"policy_pack": "custom", "content_rules": [{**PRIVATE, "contains_any": [" "]}]}, "non-blank"),
        ({"policy_pack": "custom", "content_rules": [{**PRIVATE, "risk": "severe"}]}, "'risk'"),
        ({"policy_pack": "custom", "content_rules": [{**PRIVATE, "id": ""}]}, "'id'"),
        ({"policy_pack": "custom", "content_rules": [PRIVATE, PRIVATE]}, "unique"),
        ({"policy_pack": "custom", "content_rules": PRIVATE}, "list of rule mappings"),
    ],
)
def test_bad_settings_raise_user_error_naming_the_fix(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UserError, match=None) as info:
        guardrails(**kwargs)
    assert fragment in str(info.value)


def test_guardrails_is_a_plain_middleware_list_item_and_also_usable_alone() -> None:
    import ai_utils.guard  # noqa: F401  (importing the package must not shadow the top-level function)
    from ai_utils import guardrails as exported

    assert list(exported("strict"))[0].name == "ai_utils.Guardrails"
    other = FakeChatModel(["ok"])
    assert Agent(llm=other, middleware=[guardrails("standard")]).invoke("hi") == "ok"


def test_an_async_on_decision_in_a_sync_run_is_a_user_error() -> None:
    async def record(event: dict[str, Any]) -> None:
        pass

    agent = Agent(llm=FakeChatModel(["ok"]), middleware=guardrails(on_decision=record))
    with pytest.raises(UserError, match="ainvoke/astream"):
        agent.invoke("key AKIAIOSFODNN7EXAMPLE")
