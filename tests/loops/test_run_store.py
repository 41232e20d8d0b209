"""The run store: every run recorded with its state, listed by runner.runs(); states of the gate lifecycle."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from langchain_core.tools import tool
from loops._loop_support import Ledger, support_loop, support_model, support_tools

from ai_utils import (
    LoopError,
    LoopResult,
    LoopRun,
    LoopRunner,
    LoopRunStore,
    UserError,
    ctx,
    define_loop,
    memory_loop_runs,
    permission,
    postgres_loop_runs,
    sqlite_loop_runs,
    tool_step,
)
from ai_utils.client import is_interrupt

REFUND = {"request": {"order_id": "S-1", "text": "refund please"}}


def test_every_run_is_recorded_and_listed_with_its_state(run_store: LoopRunStore) -> None:
    ledger = Ledger()
    runner = LoopRunner(support_loop(), llm=support_model(ledger), tools=support_tools(ledger), run_store=run_store)
    before = datetime.now(UTC)
    paused = runner.invoke(REFUND, thread_id="t-1")
    assert is_interrupt(paused)
    runner.invoke({"request": {"order_id": "S-2", "text": "password?"}}, thread_id="t-2")

    [waiting] = runner.runs(state="awaiting_approval")
    assert (waiting.thread_id, waiting.loop, waiting.step_keys) == ("t-1", "support-flow", ("triage",))
    assert waiting.gate_ids == (paused["gate_id"],)  # type: ignore[index]
    assert before <= waiting.created_at <= waiting.updated_at <= datetime.now(UTC)
    [answered] = runner.runs(state="completed")
    assert answered.step_keys == ("triage", "answer") and answered.thread_id == "t-2"

    out = runner.invoke(thread_id="t-1", decision="approve", gate_id=paused["gate_id"])  # type: ignore[index]
    assert isinstance(out, LoopResult)
    [done] = runner.runs(thread_id="t-1")
    assert (done.run_id, done.state, done.step_keys, done.gate_ids) == (
        out.run_id,
        "completed",
        ("triage", "refund"),
        (),
    )
    assert done.gates_answered == 1 and done.created_at == waiting.created_at
    assert [r.thread_id for r in runner.runs()] == ["t-2", "t-1"] or [r.thread_id for r in runner.runs()] == [
        "t-1",
        "t-2",
    ]
    assert len(runner.runs(limit=1)) == 1
    # A second runner of another loop on the same store lists only its own runs.
    other = define_loop(
        "other",
        start="s",
        steps={"s": tool_step("read", input={"path": "x"}, next="end")},
        permissions=[permission("r", resource="tool", action="call", effect="allow", match={"tool": "read"})],
    )
    assert LoopRunner(other, tools=support_tools(ledger), run_store=run_store).runs() == []


class RecordingStore(LoopRunStore):
    """A run store of our own (the documented extension point) that remembers every state it was set to."""

    def __init__(self) -> None:
        self.inner = memory_loop_runs()
        self.states: list[str] = []

    def put(self, run: LoopRun) -> None:
        self.states.append(run.state)
        self.inner.put(run)

    def update(self, run_id: str, *, state, step_keys=None, gate_ids=(), error=None) -> None:  # type: ignore[no-untyped-def]
        self.states.append(state)
        self.inner.update(run_id, state=state, step_keys=step_keys, gate_ids=gate_ids, error=error)

    def claim(self, run_id: str, gate_ids: Sequence[str], *, approve: bool, decision: str) -> LoopRun | None:
        claimed = self.inner.claim(run_id, gate_ids, approve=approve, decision=decision)
        if claimed is not None:
            self.states.append(claimed.state)
        return claimed

    def decision_of(self, run_id: str) -> str | None:
        return self.inner.decision_of(run_id)

    def get(self, run_id: str) -> LoopRun | None:
        return self.inner.get(run_id)

    def runs(self, **filters):  # type: ignore[no-untyped-def]
        return self.inner.runs(**filters)

    def enqueue(self, run_id, kind, text):  # type: ignore[no-untyped-def]
        return self.inner.enqueue(run_id, kind, text)

    def messages(self, run_id: str, *, after: int) -> list[tuple[int, str]]:
        return self.inner.messages(run_id, after=after)

    def complete(self, run_id, *, steer_after, follow_after, step_keys):  # type: ignore[no-untyped-def]
        pending = self.inner.complete(run_id, steer_after=steer_after, follow_after=follow_after, step_keys=step_keys)
        if not pending:
            self.states.append("completed")
        return pending


def test_a_gate_goes_through_approval_approved_and_resuming_and_the_resumed_run_reads_resuming() -> None:
    store = RecordingStore()
    ledger = Ledger()
    seen: list[str] = []

    @tool
    def issue_refund(order_id: str, reason: str) -> str:
        """Refund an order."""
        seen.append(runner.state("g"))  # what another caller sees while the approved call runs
        return f"refunded {order_id}"

    tools = [*support_tools(ledger)[:2], issue_refund]
    runner = LoopRunner(support_loop(), llm=support_model(ledger), tools=tools, run_store=store)
    paused = runner.invoke(REFUND, thread_id="g")
    runner.invoke(thread_id="g", decision="approve", gate_id=paused["gate_id"])  # type: ignore[index]
    assert store.states == ["running", "awaiting_approval", "approval_approved", "resuming", "completed"]
    assert seen == ["resuming"]
    assert runner.state("g") == "completed"


def test_a_rejected_gate_resumes_without_approval_approved() -> None:
    store = RecordingStore()
    ledger = Ledger()
    runner = LoopRunner(support_loop(), llm=support_model(ledger), tools=support_tools(ledger), run_store=store)
    paused = runner.invoke(REFUND, thread_id="r")
    with pytest.raises(LoopError):
        runner.invoke(thread_id="r", decision="reject", gate_id=paused["gate_id"])  # type: ignore[index]
    assert store.states == ["running", "awaiting_approval", "resuming", "failed"]
    assert runner.runs()[0].error == "LoopPermissionDeniedError"


def test_a_failed_result_projection_leaves_the_run_failed(run_store: LoopRunStore) -> None:
    ledger = Ledger()
    read = support_tools(ledger)[0]
    loop = define_loop(
        "projection",
        start="get",
        steps={"get": tool_step("read", input={"path": "x"}, next="end")},
        permissions=[permission("r", resource="tool", action="call", effect="allow", match={"tool": "read"})],
        result={"data": ctx("get.missing.field")},
    )
    runner = LoopRunner(loop, tools=[read], run_store=run_store)
    with pytest.raises(LoopError, match="'get.missing.field'"):
        runner.invoke({"request": {}}, thread_id="p")
    assert runner.state("p") == "failed"  # the checkpoint says so, not "completed"
    with pytest.raises(LoopError, match="'get.missing.field'"):
        runner.result("p")
    [run] = runner.runs()
    assert (run.state, run.error, run.step_keys) == ("failed", "LoopError", ("get",))
    # An unsafe URL is a projection failure too.
    unsafe = define_loop(
        "unsafe",
        start="get",
        steps={"get": tool_step("read", input={"path": "x"}, next="end")},
        permissions=[permission("r", resource="tool", action="call", effect="allow", match={"tool": "read"})],
        result={"presentation": {"actions": [{"id": "a", "type": "open_url", "label": "Go", "url": ctx("get")}]}},
    )
    runner = LoopRunner(unsafe, tools=[read], run_store=run_store)
    with pytest.raises(LoopError, match="only https"):
        runner.invoke({"request": {}}, thread_id="u")
    assert runner.state("u") == "failed"


def test_an_unreachable_sqlite_run_store_fails_invoke_before_any_step(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    ledger = Ledger()
    runner = LoopRunner(
        support_loop(),
        llm=support_model(ledger),
        tools=support_tools(ledger),
        run_store=sqlite_loop_runs(blocker / "runs.db"),
    )
    with pytest.raises(LoopError, match=r"run store sqlite_loop_runs\(.*\) is unreachable"):
        runner.invoke(REFUND, thread_id="x")
    assert ledger.rows == []  # no model call, no tool call
    with pytest.raises(UserError, match="no run"):
        runner.state("x")  # and nothing was checkpointed


def test_an_unreachable_postgres_run_store_fails_invoke_before_any_step(postgres_uri: str) -> None:
    from _services import free_port

    ledger = Ledger()
    dead = f"postgresql://postgres:hunter2@127.0.0.1:{free_port()}/postgres?connect_timeout=1"
    store = postgres_loop_runs(dead, timeout=2)
    runner = LoopRunner(support_loop(), llm=support_model(ledger), tools=support_tools(ledger), run_store=store)
    with pytest.raises(LoopError, match="unreachable") as caught:
        runner.invoke(REFUND, thread_id="x")
    assert "hunter2" not in str(caught.value)
    assert ledger.rows == []


def test_run_store_arguments_are_checked() -> None:
    with pytest.raises(UserError, match="sqlite_loop_runs"):
        sqlite_loop_runs(":memory:")
    with pytest.raises(UserError, match="could not parse") as caught:
        postgres_loop_runs("host=db password=secret port")
    assert "secret" not in str(caught.value)
    with pytest.raises(UserError, match="run_store"):
        LoopRunner(support_loop(), llm=support_model(Ledger()), tools=support_tools(Ledger()), run_store="x")  # type: ignore[arg-type]
    runner = LoopRunner(support_loop(), llm=support_model(Ledger()), tools=support_tools(Ledger()))
    with pytest.raises(UserError, match="state="):
        runner.runs(state="done")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="limit="):
        runner.runs(limit=0)


async def test_the_async_twins_record_and_list_runs(tmp_path: Path) -> None:
    ledger = Ledger()
    with sqlite_loop_runs(tmp_path / "runs.db") as store:
        runner = LoopRunner(support_loop(), llm=support_model(ledger), tools=support_tools(ledger), run_store=store)
        paused = await runner.ainvoke(REFUND, thread_id="a")
        assert [r.state for r in await runner.aruns()] == ["awaiting_approval"]
        await runner.ainvoke(thread_id="a", decision="approve", gate_id=paused["gate_id"])  # type: ignore[index]
        assert [r.state for r in await runner.aruns()] == ["completed"]
