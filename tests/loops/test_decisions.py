"""Several approvals pending at once (one model reply asked for two gated calls): the house's multi-item rule.

One ``decision`` never answers several items (it would approve a call nobody looked at); ``decisions=`` answers
each — a list in item order, or a mapping keyed by item id or ``gate_id`` — exactly like `Agent`.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool

from ai_utils import LoopResult, LoopRunner, UserError, agent_step, approve_all, define_loop, permission
from ai_utils.client import is_interrupt
from ai_utils.testing import FunctionChatModel


class Refunds:
    """An agent step whose model asks for two gated refunds in one reply; counts every refund."""

    def __init__(self) -> None:
        self.paid: list[str] = []

        @tool
        def refund(order_id: str) -> str:
            """Refund an order."""
            self.paid.append(order_id)
            return f"refunded {order_id}"

        def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
            results = [m.text for m in messages if isinstance(m, ToolMessage)]
            if results:
                return "done: " + "; ".join(sorted(results))
            calls = [{"name": "refund", "args": {"order_id": o}, "id": f"call-{o}"} for o in ("A", "B")]
            return {"tool_calls": calls}

        loop = define_loop(
            "refunds",
            start="pay",
            steps={"pay": agent_step(prompt="Refund what was asked.", tools=["refund"], next="end")},
            permissions=[
                permission("money", resource="tool", action="call", effect="approval", match={"tool": "refund"})
            ],
        )
        self.runner = LoopRunner(loop, llm=FunctionChatModel(reply), tools=[refund])

    def start(self, thread_id: str) -> dict[str, Any]:
        paused = self.runner.invoke({"request": {}}, thread_id=thread_id)
        assert is_interrupt(paused)
        return paused  # type: ignore[return-value]


def test_one_decision_for_two_pending_approvals_is_refused_and_nothing_runs() -> None:
    refunds = Refunds()
    paused = refunds.start("t")
    items = paused["items"]
    assert sorted(i["args"]["order_id"] for i in items) == ["A", "B"]
    assert len({i["gate_id"] for i in items}) == 2  # every item names its own gate
    # The attack: one "approve" that would approve both refunds, one of them unseen.
    for decision in ("approve", {"type": "approve"}, "reject"):
        with pytest.raises(UserError, match=r"2 items are pending.*decisions=.*approve_all"):
            refunds.runner.invoke(thread_id="t", decision=decision)
    assert refunds.paid == [] and refunds.runner.state("t") == "awaiting_approval"
    assert [r.state for r in refunds.runner.runs()] == ["awaiting_approval"]


def test_approve_all_answers_every_item_and_each_call_runs_once() -> None:
    refunds = Refunds()
    paused = refunds.start("t")
    out = refunds.runner.invoke(thread_id="t", decisions=approve_all(paused))  # type: ignore[arg-type]
    assert isinstance(out, LoopResult) and out.context["pay"]["text"] == "done: refunded A; refunded B"
    assert sorted(refunds.paid) == ["A", "B"] and refunds.runner.state("t") == "completed"
    with pytest.raises(UserError, match="waits for no decision"):
        refunds.runner.invoke(thread_id="t", decisions=approve_all(paused))  # type: ignore[arg-type]
    assert sorted(refunds.paid) == ["A", "B"]


def test_decisions_keyed_by_gate_id_approve_one_call_and_reject_the_other() -> None:
    refunds = Refunds()
    paused = refunds.start("t")
    gates = {i["args"]["order_id"]: i["gate_id"] for i in paused["items"]}
    out = refunds.runner.invoke(
        thread_id="t", decisions={gates["A"]: "approve", gates["B"]: {"type": "reject", "message": "duplicate"}}
    )
    assert isinstance(out, LoopResult) and refunds.paid == ["A"]
    assert "duplicate" in out.context["pay"]["text"]


async def test_decisions_in_item_order_work_in_async_runs_too() -> None:
    refunds = Refunds()
    paused = await refunds.runner.ainvoke({"request": {}}, thread_id="a")
    assert is_interrupt(paused)
    order = [i["args"]["order_id"] for i in paused["items"]]  # type: ignore[index]
    chunks = [
        c
        async for c in refunds.runner.astream(
            thread_id="a", decisions=["reject" if o == "A" else "approve" for o in order]
        )
    ]
    assert not any(is_interrupt(c) for c in chunks)
    assert refunds.paid == ["B"] and await refunds.runner.astate("a") == "completed"


def test_bad_decisions_are_refused_before_anything_runs() -> None:
    refunds = Refunds()
    paused = refunds.start("t")
    gates = [i["gate_id"] for i in paused["items"]]
    with pytest.raises(UserError, match="has no answer for pending item"):
        refunds.runner.invoke(thread_id="t", decisions={gates[0]: "approve"})  # the other gate unanswered
    with pytest.raises(UserError, match="1 answer"):
        refunds.runner.invoke(thread_id="t", decisions=["approve"])
    with pytest.raises(UserError, match=r"A loop approval takes.*'maybe'"):
        refunds.runner.invoke(thread_id="t", decisions=["approve", "maybe"])
    with pytest.raises(UserError, match="not pending"):
        refunds.runner.invoke(thread_id="t", decisions={**dict.fromkeys(gates, "approve"), "old-gate": "approve"})
    with pytest.raises(UserError, match="exactly one of"):
        refunds.runner.invoke(thread_id="t", decision="approve", decisions=["approve", "approve"])
    with pytest.raises(UserError, match="not both"):
        refunds.runner.invoke({"request": {}}, thread_id="t", decisions=approve_all(paused))  # type: ignore[arg-type]
    assert refunds.paid == [] and refunds.runner.state("t") == "awaiting_approval"


def test_a_gate_id_narrows_the_decision_to_that_gate_and_the_other_still_waits() -> None:
    refunds = Refunds()
    paused = refunds.start("t")
    gates = {i["args"]["order_id"]: i["gate_id"] for i in paused["items"]}
    rest = refunds.runner.invoke(thread_id="t", decision="approve", gate_id=gates["A"])
    # B is asked again (its step re-ran up to the gate), under a new gate id that this call returned.
    assert is_interrupt(rest) and rest["args"] == {"order_id": "B"}  # type: ignore[index]
    assert refunds.paid == ["A"] and refunds.runner.state("t") == "awaiting_approval"
    with pytest.raises(UserError, match="not waiting"):
        refunds.runner.invoke(thread_id="t", decision="approve", gate_id=gates["A"])  # A's answer, sent twice
    out = refunds.runner.invoke(thread_id="t", decision="reject", gate_id=rest["gate_id"])  # type: ignore[index]
    assert isinstance(out, LoopResult) and refunds.paid == ["A"]
