"""Runs checkpointed in the older state shape (``status`` and ``taken`` channels of their own) still load and resume.

The old layout is written straight through the saver: a run paused at its approval gate by this version has its
checkpoint rewritten so ``status`` and ``taken`` sit in their own channels and ``run`` holds neither, as versions
before they moved into ``run`` stored it.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from loops._loop_support import Ledger, support_loop, support_model, support_tools

from ai_utils import LoopResult, LoopRunner
from ai_utils.client import is_interrupt

REQUEST = {"request": {"order_id": "A-9", "text": "I want a refund"}}


def runner(saver: InMemorySaver, ledger: Ledger) -> LoopRunner:
    return LoopRunner(support_loop(), llm=support_model(ledger), tools=support_tools(ledger), checkpointer=saver)


def to_old_shape(saver: InMemorySaver, thread_id: str) -> dict[str, Any]:
    """Rewrite the thread's latest checkpoint (same id, so its pending writes stay) in the old channel layout."""
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    stored = saver.get_tuple(config)  # type: ignore[arg-type]
    assert stored is not None
    checkpoint = stored.checkpoint
    values = checkpoint["channel_values"]
    run = dict(values["run"])
    old = {"status": run.pop("status"), "taken": run.pop("taken"), "run": run}
    values.update(old)
    versions = checkpoint["channel_versions"]
    top = max(versions.values())
    bumped = {name: saver.get_next_version(top, None) for name in old}
    versions.update(bumped)
    parent = stored.parent_config or config
    saver.put(parent, checkpoint, stored.metadata, bumped)  # type: ignore[arg-type]
    return old


def test_a_run_paused_in_the_old_shape_reads_and_resumes_with_its_taken_steps() -> None:
    saver, ledger = InMemorySaver(), Ledger()
    loop = runner(saver, ledger)
    paused = loop.invoke(REQUEST, thread_id="old1")
    assert is_interrupt(paused)
    old = to_old_shape(saver, "old1")
    assert old["status"] == "running" and old["taken"] == ["triage"] and "taken" not in old["run"]

    # A new process (a fresh runner on the same saver, with its own run store) reads the old shape.
    again = runner(saver, ledger)
    snapshot = again.graph.get_state({"configurable": {"thread_id": "old1"}})
    assert snapshot.values["taken"] == ["triage"] and "taken" not in snapshot.values["run"]
    assert again.state("old1") == "awaiting_approval"
    out = again.invoke(thread_id="old1", decision="approve", gate_id=paused["gate_id"])
    assert isinstance(out, LoopResult)
    assert out.data == {"refund_id": "R-A-9", "order_id": "A-9", "status": "issued"}
    assert ledger.count("tool", "issue_refund") == 1
    assert again.state("old1") == "completed"
    # The steps taken before the old checkpoint count: the run's record lists every step.
    assert [run.step_keys for run in again.runs(thread_id="old1")] == [("triage", "refund")]
    values = again.graph.get_state({"configurable": {"thread_id": "old1"}}).values
    assert values["run"]["taken"] == ["triage", "refund"] and values["run"]["status"] == "completed"
    assert again.result("old1") == out


def test_a_run_completed_in_the_old_shape_reads_as_completed() -> None:
    saver, ledger = InMemorySaver(), Ledger()
    loop = runner(saver, ledger)
    first = loop.invoke({"request": {"order_id": "A-1", "text": "How do I reset my password?"}}, thread_id="old2")
    assert isinstance(first, LoopResult)
    old = to_old_shape(saver, "old2")
    assert old["status"] == "completed" and old["taken"] == ["triage", "answer"]
    again = runner(saver, ledger)
    assert again.state("old2") == "completed"
    assert again.result("old2") == first
    # A new run on the same thread is in the new shape; the old channels it leaves alone do not leak into it.
    second = again.invoke({"request": {"order_id": "A-9", "text": "I want a refund"}}, thread_id="old2")
    assert is_interrupt(second)
    assert again.state("old2") == "awaiting_approval"
