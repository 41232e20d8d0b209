"""A decision names its gate: an answer sent twice never approves the next gate; one gate is answered once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from ai_utils import (
    LoopError,
    LoopResult,
    LoopRunner,
    UserError,
    ctx,
    define_loop,
    permission,
    sqlite_loop_runs,
    sqlite_saver,
    tool_step,
)
from ai_utils.client import is_interrupt


class Payments:
    """Two gated payments in a row; counts every call."""

    def __init__(self, *, fail_first_refund: bool = False) -> None:
        self.calls: list[str] = []
        self.fail_first_refund = fail_first_refund

        @tool
        def refund(order_id: str) -> str:
            """Refund an order."""
            self.calls.append(f"refund {order_id}")
            if self.fail_first_refund and self.calls.count(f"refund {order_id}") == 1:
                raise ConnectionError("payment provider down")
            return f"refunded {order_id}"

        @tool
        def payout(order_id: str) -> str:
            """Pay the seller."""
            self.calls.append(f"payout {order_id}")
            return f"paid {order_id}"

        self.tools = [refund, payout]

    def loop(self) -> Any:
        return define_loop(
            "payments",
            start="refund",
            steps={
                "refund": tool_step("refund", input={"order_id": ctx("request.order_id")}, next="payout"),
                "payout": tool_step("payout", input={"order_id": ctx("request.order_id")}, next="end"),
            },
            permissions=[
                permission("money", resource="tool", action="call", effect="approval", match={"tool": "*"}),
            ],
            result={"data": ctx("payout")},
        )


def test_an_approve_sent_twice_with_the_old_gate_id_is_refused() -> None:
    pay = Payments()
    events: list[dict[str, Any]] = []
    runner = LoopRunner(pay.loop(), tools=pay.tools, on_event=events.append)
    first = runner.invoke({"request": {"order_id": "O-1"}}, thread_id="t")
    assert is_interrupt(first) and first["tool_name"] == "refund"  # type: ignore[index]
    gate = first["gate_id"]  # type: ignore[index]
    assert [e["gate_id"] for e in events if e["type"] == "approval.required"] == [gate]
    second = runner.invoke(thread_id="t", decision="approve", gate_id=gate)
    assert is_interrupt(second) and second["tool_name"] == "payout" and second["gate_id"] != gate  # type: ignore[index]
    # The attack: the same approval again (a double click, a retried request) would approve the payout.
    with pytest.raises(UserError, match=rf"Gate '{gate}' is not waiting.*{second['gate_id']}"):  # type: ignore[index]
        runner.invoke(thread_id="t", decision="approve", gate_id=gate)
    assert pay.calls == ["refund O-1"] and runner.state("t") == "awaiting_approval"
    out = runner.invoke(thread_id="t", decision="approve", gate_id=second["gate_id"])  # type: ignore[index]
    assert isinstance(out, LoopResult) and out.data == "paid O-1"
    assert pay.calls == ["refund O-1", "payout O-1"]


def test_a_bare_approve_sent_twice_does_not_approve_the_next_gate() -> None:
    pay = Payments()
    runner = LoopRunner(pay.loop(), tools=pay.tools)
    runner.invoke({"request": {"order_id": "O-2"}}, thread_id="t")
    second = runner.invoke(thread_id="t", decision="approve")  # the run's first gate: a bare answer is fine
    assert is_interrupt(second) and pay.calls == ["refund O-2"]
    # The same bare "approve" again: the run already answered a gate, so it must name this one.
    with pytest.raises(UserError, match=rf"already answered a gate.*{second['gate_id']}.*gate_id"):  # type: ignore[index]
        runner.invoke(thread_id="t", decision="approve")
    assert pay.calls == ["refund O-2"] and runner.state("t") == "awaiting_approval"
    out = runner.invoke(thread_id="t", decision="approve", gate_id=second["gate_id"])  # type: ignore[index]
    assert isinstance(out, LoopResult) and pay.calls == ["refund O-2", "payout O-2"]


def test_gate_ids_are_checked() -> None:
    pay = Payments()
    runner = LoopRunner(pay.loop(), tools=pay.tools)
    with pytest.raises(UserError, match="pass `decision=` with it"):
        runner.invoke({"request": {"order_id": "x"}}, thread_id="t", gate_id="g")
    first = runner.invoke({"request": {"order_id": "O-3"}}, thread_id="t")
    with pytest.raises(UserError, match="'nope' is not waiting"):
        runner.invoke(thread_id="t", decision="approve", gate_id="nope")
    with pytest.raises(UserError, match="takes"):
        runner.invoke(thread_id="t", decision={"type": "edit", "args": {}}, gate_id=first["gate_id"])  # type: ignore[index]
    assert pay.calls == []
    with pytest.raises(UserError, match="waits for no decision"):
        runner.invoke(thread_id="fresh", decision="approve", gate_id="g")


def test_two_processes_answering_one_gate_at_once_run_the_call_once(tmp_path: Path) -> None:
    pay = Payments()
    with sqlite_saver(tmp_path / "cp.db") as saver, sqlite_loop_runs(tmp_path / "runs.db") as store:
        runners = [LoopRunner(pay.loop(), tools=pay.tools, checkpointer=saver, run_store=store) for _ in range(2)]
        gate = runners[0].invoke({"request": {"order_id": "O-4"}}, thread_id="t")["gate_id"]  # type: ignore[index]
        start = threading.Barrier(2)
        outcomes: list[str] = []

        def answer(runner: LoopRunner) -> None:
            start.wait()
            try:
                runner.invoke(thread_id="t", decision="approve", gate_id=gate)
                outcomes.append("ran")
            except UserError:
                outcomes.append("refused")

        threads = [threading.Thread(target=answer, args=(r,)) for r in runners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert sorted(outcomes) == ["ran", "refused"]
        assert pay.calls == ["refund O-4"]


def test_a_decision_whose_run_broke_before_passing_the_gate_is_kept_and_resumed() -> None:
    pay = Payments(fail_first_refund=True)
    runner = LoopRunner(pay.loop(), tools=pay.tools)
    gate = runner.invoke({"request": {"order_id": "O-5"}}, thread_id="t")["gate_id"]  # type: ignore[index]
    with pytest.raises(LoopError, match="raised ConnectionError"):
        runner.invoke(thread_id="t", decision="approve", gate_id=gate)
    # The checkpoint still shows the gate, but the approval was accepted: the run is resuming, not waiting.
    assert runner.state("t") == "resuming" and [r.state for r in runner.runs()] == ["resuming"]
    with pytest.raises(UserError, match="no longer waiting"):
        runner.invoke(thread_id="t", decision="approve", gate_id=gate)  # never asked (or approved) twice
    second = runner.invoke(thread_id="t")  # continue: the kept approval is used
    assert is_interrupt(second) and second["tool_name"] == "payout"  # type: ignore[index]
    assert pay.calls == ["refund O-5", "refund O-5"]
