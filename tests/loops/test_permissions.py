"""Permissions gate every tool call of a loop: the model's inside agent steps and tool steps alike."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from ai_utils import (
    FakeChatModel,
    LoopPermissionDeniedError,
    LoopResult,
    LoopRunner,
    agent_step,
    ctx,
    define_loop,
    permission,
    tool_step,
)
from ai_utils.client import is_interrupt


def rule(id: str, effect: str, **match: Any) -> Any:
    return permission(id, resource="tool", action="call", effect=effect, match=match, message=f"{id} says so")  # type: ignore[arg-type]


class Tools:
    def __init__(self) -> None:
        self.ran: list[str] = []

        @tool
        def lookup(order_id: str) -> str:
            """Look an order up."""
            self.ran.append("lookup")
            return f"order {order_id}: paid"

        @tool
        def delete_order(order_id: str) -> str:
            """Delete an order."""
            self.ran.append("delete_order")
            return f"deleted {order_id}"

        @tool
        def refund_order(order_id: str) -> str:
            """Refund an order."""
            self.ran.append("refund_order")
            return f"refunded {order_id}"

        self.all = [lookup, delete_order, refund_order]


def tool_loop(*rules: Any, tool_name: str = "delete_order") -> Any:
    return define_loop(
        "one-tool",
        start="act",
        steps={"act": tool_step(tool_name, input={"order_id": ctx("request.order_id")}, next="end")},
        permissions=list(rules),
        result={"data": ctx("act")},
    )


def decide(*rules: Any, tool_name: str = "delete_order") -> tuple[str, str | None]:
    """Run one tool step and report ("ran" | "denied" | "approval", deciding rule id)."""
    tools = Tools()
    runner = LoopRunner(tool_loop(*rules, tool_name=tool_name), tools=tools.all)
    try:
        out = runner.invoke({"request": {"order_id": "7"}}, thread_id="t")
    except LoopPermissionDeniedError as error:
        assert tools.ran == []
        return "denied", error.rule_id
    if is_interrupt(out):
        assert tools.ran == []
        return "approval", None
    assert tools.ran == [tool_name]
    return "ran", None


def test_no_matching_rule_means_deny() -> None:
    assert decide() == ("denied", None)
    assert decide(rule("lookups", "allow", tool="lookup")) == ("denied", None)


def test_the_first_matching_rule_wins() -> None:
    assert decide(rule("a", "allow", tool="delete_order"), rule("b", "approval", tool="delete_order"))[0] == "ran"
    assert decide(rule("b", "approval", tool="delete_order"), rule("a", "allow", tool="delete_order"))[0] == "approval"


def test_deny_beats_allow_at_equal_specificity() -> None:
    assert decide(rule("a", "allow", tool="delete_order"), rule("d", "deny", tool="delete_order")) == ("denied", "d")
    assert decide(rule("a", "allow", tool="delete_*"), rule("d", "deny", tool="*_order")) == ("denied", "d")


def test_a_more_specific_rule_beats_a_general_one_in_either_order() -> None:
    assert decide(rule("all", "allow", tool="*"), rule("no-delete", "deny", tool="delete_order")) == (
        "denied",
        "no-delete",
    )
    assert decide(rule("none", "deny"), rule("ok", "allow", tool="delete_order"))[0] == "ran"
    assert decide(rule("none", "deny", tool="*"), rule("glob", "allow", tool="delete_*"))[0] == "ran"
    assert decide(rule("glob", "allow", tool="delete_*"), rule("here", "deny", tool="delete_*", step="act")) == (
        "denied",
        "here",
    )


def test_a_denied_tool_step_fails_the_run_and_says_why() -> None:
    tools = Tools()
    runner = LoopRunner(tool_loop(rule("d", "deny", tool="delete_order")), tools=tools.all)
    with pytest.raises(LoopPermissionDeniedError, match="d says so") as caught:
        runner.invoke({"request": {"order_id": "7"}}, thread_id="t")
    assert (caught.value.step_key, caught.value.tool, caught.value.rule_id) == ("act", "delete_order", "d")
    assert runner.state("t") == "failed" and tools.ran == []


def agent_loop(*rules: Any) -> Any:
    return define_loop(
        "agent-tools",
        start="helper",
        steps={"helper": agent_step(prompt="Help.", tools=["lookup", "delete_order", "refund_order"], next="end")},
        permissions=list(rules),
        result={"presentation": {"text": ctx("helper.text")}},
    )


def test_a_denied_model_call_gets_an_error_tool_message_and_the_tool_never_runs() -> None:
    tools, events = Tools(), []
    llm = FakeChatModel(
        [
            {
                "tool_calls": [
                    {"name": "lookup", "args": {"order_id": "7"}},
                    {"name": "delete_order", "args": {"order_id": "7"}},
                ]
            },
            "I looked it up but may not delete it.",
        ]
    )
    runner = LoopRunner(
        agent_loop(rule("read", "allow", tool="lookup"), rule("no", "deny", tool="delete_*")),
        llm=llm,
        tools=tools.all,
        on_event=events.append,
    )
    out = runner.invoke({"request": {}}, thread_id="t")
    assert isinstance(out, LoopResult) and out.presentation == {"text": "I looked it up but may not delete it."}
    assert tools.ran == ["lookup"]
    results = {m.name: m for m in llm.calls[1] if isinstance(m, ToolMessage)}
    assert results["delete_order"].status == "error" and "no says so" in results["delete_order"].text
    assert results["lookup"].status == "success"
    decided = {(e["tool"], e["effect"], e["rule_id"]) for e in events if e["type"] == "permission.result"}
    assert decided == {("lookup", "allow", "read"), ("delete_order", "deny", "no")}


def test_an_approval_inside_an_agent_step_pauses_and_resumes_without_rerunning_finished_calls() -> None:
    tools = Tools()
    llm = FakeChatModel(
        [
            {
                "tool_calls": [
                    {"name": "lookup", "args": {"order_id": "7"}},
                    {"name": "refund_order", "args": {"order_id": "7"}},
                ]
            },
            "Refunded order 7.",
            {"tool_calls": [{"name": "refund_order", "args": {"order_id": "8"}}]},
            "I could not refund order 8.",
        ]
    )
    runner = LoopRunner(
        agent_loop(rule("read", "allow", tool="lookup"), rule("ask", "approval", tool="refund_order")),
        llm=llm,
        tools=tools.all,
    )
    paused = runner.invoke({"request": {}}, thread_id="a")
    assert is_interrupt(paused) and paused["question"] == "ask says so" and paused["tool_name"] == "refund_order"
    assert tools.ran == ["lookup"] and len(llm.calls) == 1
    out = runner.invoke(thread_id="a", decision="approve")
    assert isinstance(out, LoopResult) and out.presentation == {"text": "Refunded order 7."}
    assert tools.ran == ["lookup", "refund_order"] and len(llm.calls) == 2

    assert is_interrupt(runner.invoke({"request": {}}, thread_id="b"))
    out = runner.invoke(thread_id="b", decision={"type": "reject", "message": "not this one"})
    assert isinstance(out, LoopResult) and out.presentation == {"text": "I could not refund order 8."}
    assert tools.ran == ["lookup", "refund_order"]  # the rejected call never ran
    rejected = next(m for m in llm.calls[3] if isinstance(m, ToolMessage))
    assert rejected.status == "error" and "not this one" in rejected.text


def test_a_decision_other_than_approve_or_reject_is_refused_before_resuming() -> None:
    runner = LoopRunner(tool_loop(rule("ask", "approval", tool="delete_order")), tools=Tools().all)
    assert is_interrupt(runner.invoke({"request": {"order_id": "7"}}, thread_id="t"))
    from ai_utils import UserError

    with pytest.raises(UserError, match="approve"):
        runner.invoke(thread_id="t", decision={"type": "edit", "args": {"order_id": "8"}})
    with pytest.raises(UserError, match="waits for an approval"):
        runner.invoke({"request": {"order_id": "9"}}, thread_id="t")
    assert runner.state("t") == "awaiting_approval"
