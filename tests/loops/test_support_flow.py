"""The seed's support flow end to end: triage -> answer, triage -> refund with approval -> approve / reject."""

from __future__ import annotations

import json
from typing import Any

import pytest
from loops._loop_support import Ledger, support_loop, support_model, support_tools

from ai_utils import LoopPermissionDeniedError, LoopResult, LoopRunner, MemorySaver
from ai_utils.client import is_interrupt


def runner(ledger: Ledger, events: list[dict[str, Any]] | None = None) -> LoopRunner:
    return LoopRunner(
        support_loop(),
        llm=support_model(ledger),
        tools=support_tools(ledger),
        checkpointer=MemorySaver(),
        on_event=None if events is None else events.append,
    )


def test_a_question_is_triaged_and_answered_with_the_required_search() -> None:
    ledger, events = Ledger(), []
    loop = runner(ledger, events)
    out = loop.invoke({"request": {"order_id": "A-1", "text": "How do I reset my password?"}}, thread_id="q1")
    assert isinstance(out, LoopResult)
    assert out.presentation == {"text": "Open Settings > Security to reset your password."}
    assert out.data is None  # the refund branch did not run
    assert out.context["triage"] == {"needs_refund": False, "category": "billing"}
    assert [r["name"] for r in ledger.rows if r["kind"] == "tool"] == ["read", "search_docs"]
    assert ledger.count("tool", "issue_refund") == 0
    assert loop.state("q1") == "completed"
    steps = [(e["type"], e.get("step_key")) for e in events if e["type"].startswith("loop.step")]
    assert steps == [
        ("loop.step.started", "triage"),
        ("loop.step.completed", "triage"),
        ("loop.step.started", "answer"),
        ("loop.step.completed", "answer"),
    ]
    transitions = [(e["from_step_key"], e["to_step_key"]) for e in events if e["type"] == "loop.transition"]
    assert transitions == [("triage", "answer"), ("answer", "end")]
    assert {e["thread_id"] for e in events} == {"q1"}
    assert events[0].type == "loop.step.started" and events[0].loop == "support-flow"  # attribute access too
    assert json.loads(json.dumps(events[0])) == events[0]


def test_a_refund_waits_for_approval_and_runs_once_when_approved() -> None:
    ledger, events = Ledger(), []
    loop = runner(ledger, events)
    paused = loop.invoke({"request": {"order_id": "A-2", "text": "I want a refund"}}, thread_id="r1")
    assert is_interrupt(paused)
    assert paused["question"] == "Refunds require human approval."
    assert paused["tool_name"] == "issue_refund"
    assert paused["args"] == {"order_id": "A-2", "reason": "customer"}
    assert paused["decisions"] == ["approve", "reject"]
    assert loop.state("r1") == "awaiting_approval"
    assert ledger.count("tool", "issue_refund") == 0
    before = (ledger.count("model"), ledger.count("tool", "read"))

    out = loop.invoke(thread_id="r1", decision="approve")
    assert isinstance(out, LoopResult)
    assert out.data == {"refund_id": "R-A-2", "order_id": "A-2", "status": "issued"}
    assert out.presentation == {"text": None}  # the answer branch did not run
    assert loop.state("r1") == "completed"
    assert ledger.count("tool", "issue_refund") == 1
    assert (ledger.count("model"), ledger.count("tool", "read")) == before  # triage did not run again
    gate = [(e["type"], e.get("effect")) for e in events if e["type"] in ("permission.result", "approval.required")]
    assert gate == [
        ("permission.result", "allow"),  # triage's read
        ("permission.result", "approval"),
        ("approval.required", None),
        ("permission.result", "allow"),  # the human's approval
    ]
    approval = next(e for e in events if e["type"] == "approval.required")
    assert approval["rule_id"] == "refund-approval" and approval["tool"] == "issue_refund"
    assert [e["step_key"] for e in events if e["type"] == "loop.step.started"] == ["triage", "refund"]


def test_a_rejected_refund_is_never_issued_and_fails_the_run_as_denied() -> None:
    ledger, events = Ledger(), []
    loop = runner(ledger, events)
    assert is_interrupt(loop.invoke({"request": {"order_id": "A-3", "text": "refund!"}}, thread_id="r2"))
    with pytest.raises(LoopPermissionDeniedError) as caught:
        loop.invoke(thread_id="r2", decision={"type": "reject", "message": "order is older than 30 days"})
    assert caught.value.step_key == "refund" and caught.value.rule_id == "refund-approval"
    assert caught.value.tool == "issue_refund"
    assert "older than 30 days" in str(caught.value)
    assert ledger.count("tool", "issue_refund") == 0
    assert loop.state("r2") == "failed"
    denial = [e for e in events if e["type"] == "permission.result"][-1]
    assert denial["effect"] == "deny" and denial["decided_by"] == "human"
    # The failure is stored: reading the run again reports the same error.
    with pytest.raises(LoopPermissionDeniedError):
        loop.result("r2")
    # The thread is not stuck: a new run starts fresh on it.
    assert is_interrupt(loop.invoke({"request": {"order_id": "A-4", "text": "refund"}}, thread_id="r2"))


def test_the_stream_shows_the_usual_interrupt_chunk_and_resumes_with_a_decision() -> None:
    ledger = Ledger()
    loop = runner(ledger)
    chunks = list(loop.stream({"request": {"order_id": "A-5", "text": "refund please"}}, thread_id="s1"))
    assert [c["kind"] for c in chunks] == ["custom", "interrupt"] and is_interrupt(chunks[-1])  # type: ignore[index]
    assert chunks[-1]["question"] == "Refunds require human approval."  # type: ignore[index]
    assert list(loop.stream(thread_id="s1", decision="approve")) == []
    out = loop.result("s1")
    assert isinstance(out, LoopResult) and out.data["refund_id"] == "R-A-5"
    assert ledger.count("tool", "issue_refund") == 1


def test_the_stream_of_an_answer_carries_the_agent_steps_text_and_tool_events() -> None:
    loop = runner(Ledger())
    chunks = list(
        loop.stream({"request": {"order_id": "A", "text": "password?"}}, thread_id="s2", show_tool_calls=True)
    )
    text = "".join(c for c in chunks if isinstance(c, str))
    assert text == "Open Settings > Security to reset your password."
    tools = [(c["phase"], c["tool_name"]) for c in chunks if isinstance(c, dict) and c.get("kind") == "tool"]
    assert ("start", "search_docs") in tools and ("end", "search_docs") in tools


async def test_ainvoke_and_astream_follow_the_same_flow() -> None:
    ledger = Ledger()
    loop = runner(ledger)
    paused = await loop.ainvoke({"request": {"order_id": "B-1", "text": "refund"}}, thread_id="a1")
    assert is_interrupt(paused)
    assert await loop.astate("a1") == "awaiting_approval"
    out = await loop.ainvoke(thread_id="a1", decision="approve")
    assert isinstance(out, LoopResult) and out.data["order_id"] == "B-1"
    chunks = [c async for c in loop.astream({"request": {"order_id": "B-2", "text": "password"}}, thread_id="a2")]
    assert "".join(c for c in chunks if isinstance(c, str)).startswith("Open Settings")
    assert ledger.count("tool", "issue_refund") == 1


def test_stream_checks_its_arguments_before_returning() -> None:
    from ai_utils import UserError

    loop = runner(Ledger())
    with pytest.raises(UserError, match="thread_id"):
        loop.stream({"request": {}}, thread_id="")
    with pytest.raises(UserError, match="not both"):
        loop.stream({"request": {}}, thread_id="x", decision="approve")
    with pytest.raises(UserError, match="thread_id"):
        loop.astream({"request": {}}, thread_id="")
