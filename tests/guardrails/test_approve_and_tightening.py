"""``approve=`` in code, per-run tightening (never loosening), ``stricter_than=``, and ``max_final_output_chars``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.tools import tool

from ai_utils import Agent, MemorySaver, UserError, guardrails
from ai_utils.client import is_interrupt
from ai_utils.testing import FakeChatModel

STRICT = {"configurable": {"guardrails": "strict"}}


class Accounts:
    def __init__(self) -> None:
        self.deleted: list[int] = []

        @tool
        def delete_account(account_id: int) -> str:
            """Delete an account."""
            self.deleted.append(account_id)
            return f"account {account_id} deleted"

        self.tool = delete_account


def _calls(*ids: int) -> list[Any]:
    return [*({"tool_calls": [{"name": "delete_account", "args": {"account_id": i}}]} for i in ids), "finished"]


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_approve_answers_destructive_calls_in_code(run: str) -> None:
    asked: list[dict[str, Any]] = []

    def approve(call: dict[str, Any]) -> bool:
        asked.append(call)
        return call["args"]["account_id"] < 100  # test accounts only

    async def aapprove(call: dict[str, Any]) -> bool:
        return approve(call)

    accounts = Accounts()
    decisions: list[dict[str, Any]] = []
    agent = Agent(
        llm=FakeChatModel(_calls(7, 4242)),
        tools=[accounts.tool],
        middleware=guardrails(approve=approve if run == "sync" else aapprove, on_decision=decisions.append),
    )

    answer = agent.invoke("clean up") if run == "sync" else await agent.ainvoke("clean up")

    # No HITL interrupt (and no checkpointer needed): 7 approved and run, 4242 denied and never run.
    assert answer == "finished"
    assert accounts.deleted == [7]
    assert [c["args"] for c in asked] == [{"account_id": 7}, {"account_id": 4242}]
    assert [(d["action"], d.get("tool")) for d in decisions] == [
        ("require_approval", "delete_account"),
        ("approved", "delete_account"),
        ("require_approval", "delete_account"),
        ("rejected", "delete_account"),
    ]


def test_approve_that_raises_or_answers_anything_but_true_denies() -> None:
    for approve in (lambda call: 1 / 0, lambda call: "yes", lambda call: None):
        accounts = Accounts()
        model = FakeChatModel(_calls(1))
        Agent(llm=model, tools=[accounts.tool], middleware=guardrails(approve=approve)).invoke("go")
        assert accounts.deleted == []
        assert "approval for `delete_account` was denied" in model.calls[-1][-1].text


def test_approve_does_not_unblock_destructive_tools_under_strict() -> None:
    accounts = Accounts()
    Agent(
        llm=FakeChatModel(_calls(1)), tools=[accounts.tool], middleware=guardrails("strict", approve=lambda c: True)
    ).invoke("go")
    assert accounts.deleted == []


@pytest.mark.parametrize("asked", ["strict", {"policy_pack": "strict"}, {"policyPack": "strict"}])
def test_a_run_may_tighten_the_pack_for_itself(asked: Any) -> None:
    accounts = Accounts()
    decisions: list[dict[str, Any]] = []
    agent = Agent(
        llm=FakeChatModel([*_calls(1)[:1], "blocked", *_calls(2)[:1], "done"]),
        tools=[accounts.tool],
        checkpointer=MemorySaver(),
        middleware=guardrails("standard", on_decision=decisions.append),
    )

    # This request asks for strict: the destructive call is blocked outright, not asked.
    config: Any = {"configurable": {"guardrails": asked}}
    assert agent.invoke("delete account 1", thread_id="a", config=config) == "blocked"
    assert accounts.deleted == [] and decisions[-1]["action"] == "block"
    # The agent itself is unchanged: the next run without the option asks for approval as standard does.
    paused = agent.invoke("delete account 2", thread_id="b")
    assert is_interrupt(paused)


@pytest.mark.parametrize(
    ("pack", "asked"),
    [("strict", "standard"), ("strict", "custom"), ("standard", "lenient"), ("standard", {"max_tool_output_chars": 9})],
)
def test_a_run_can_never_loosen_the_pack(pack: str, asked: Any) -> None:
    accounts = Accounts()
    model = FakeChatModel(_calls(1))
    agent = Agent(llm=model, tools=[accounts.tool], checkpointer=MemorySaver(), middleware=guardrails(pack))  # type: ignore[arg-type]

    config: Any = {"configurable": {"guardrails": asked}}
    with pytest.raises(UserError, match=re.escape(repr(asked))):
        agent.invoke("delete account 1", thread_id="t", config=config)
    with pytest.raises(UserError, match=re.escape(repr(asked))):
        list(agent.stream("delete account 1", thread_id="t", config=config))
    # Refused before anything ran or was stored.
    assert model.calls == [] and accounts.deleted == []
    assert agent.graph.get_state({"configurable": {"thread_id": "t"}}).values == {}


async def test_tightening_keeps_custom_rules_and_buffers_the_stream() -> None:
    rule = {"id": "codename", "phases": ["output"], "action": "redact", "contains_any": ["Project Falcon"]}
    agent = Agent(
        llm=FakeChatModel(["Project Falcon ships on Monday"]),
        middleware=guardrails("custom", content_rules=[rule]),
    )
    chunks = [c async for c in agent.astream("status?", config=STRICT) if isinstance(c, str)]
    assert chunks == ["[REDACTED:codename] ships on Monday"]  # one buffered chunk, the rule still applied


def test_stricter_than_keeps_the_baseline_and_refuses_to_loosen_it() -> None:
    seen: list[str] = []
    project = guardrails(
        "custom",
        content_rules=[{"id": "codename", "phases": ["output"], "action": "redact", "contains_any": ["Falcon"]}],
        policies=[lambda phase, payload: seen.append(phase)],
        max_final_output_chars=40,
    )

    request = guardrails("strict", stricter_than=project)
    answer = Agent(llm=FakeChatModel(["Falcon " * 20]), middleware=request).invoke("status?")

    assert request.policy_pack == "strict" and request.streaming == "buffer"
    assert answer == ("[REDACTED:codename] " * 20)[:40]  # the baseline's rule and bound, kept
    assert seen == ["input", "output"]  # the baseline's host policy cannot be bypassed
    with pytest.raises(UserError, match="looser"):
        guardrails("standard", stricter_than=guardrails("strict"))
    with pytest.raises(UserError, match="audit"):
        guardrails("strict", mode="audit", stricter_than=guardrails("standard"))
    with pytest.raises(UserError, match="looser"):
        guardrails("standard", stricter_than="strict")
    with pytest.raises(UserError, match="stricter_than must be"):
        guardrails("strict", stricter_than=42)  # type: ignore[arg-type]


def test_max_final_output_chars_cuts_the_answer_everywhere_it_goes() -> None:
    decisions: list[dict[str, Any]] = []
    agent = Agent(
        llm=FakeChatModel(["x" * 500, "y" * 500]),
        checkpointer=MemorySaver(),
        middleware=guardrails("strict", max_final_output_chars=100, on_decision=decisions.append),
    )
    assert agent.invoke("long please", thread_id="t") == "x" * 100
    assert [c for c in agent.stream("again", thread_id="t") if isinstance(c, str)] == ["y" * 100]
    stored = agent.graph.get_state({"configurable": {"thread_id": "t"}}).values["messages"]
    assert [len(m.text) for m in stored if m.type == "ai"] == [100, 100]
    assert decisions == [{"policy_id": "output.limit", "phase": "output", "action": "truncate", "risk": "low"}] * 2
    for bad in (0, -1, 1.5, True):
        with pytest.raises(UserError, match="max_final_output_chars"):
            guardrails(max_final_output_chars=bad)  # type: ignore[arg-type]
