"""A run paused at an approval is resumed by another process from the same sqlite checkpointer.

Model and tool calls are counted in a file written by the processes themselves, so the counts prove
what ran where: nothing that completed before the gate runs again after the restart.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from loops._loop_support import Ledger, support_loop, support_model, support_tools

from ai_utils import LoopRunner, sqlite_saver
from ai_utils.client import is_interrupt

PROC = Path(__file__).with_name("_loop_resume_proc.py")


def call(db: Path, ledger: Path, thread: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(PROC), str(db), str(ledger), thread, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROC.parent,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_approval_given_in_a_new_process_runs_the_refund_once_and_nothing_before_it(tmp_path: Path) -> None:
    db, path = tmp_path / "loops.sqlite", tmp_path / "calls.jsonl"
    ledger = Ledger(path)
    first = call(db, path, "t-1", "start", "Please refund my order")
    assert first["state"] == "awaiting_approval"
    assert first["interrupt"]["question"] == "Refunds require human approval."
    # Process 1 ran triage: two model calls (read, then classify) and the read tool; no refund.
    assert (ledger.count("model"), ledger.count("tool", "read"), ledger.count("tool", "issue_refund")) == (2, 1, 0)

    second = call(db, path, "t-1", "decide", "approve")
    assert second["state"] == "completed"
    assert second["data"] == {"refund_id": "R-A-7", "order_id": "A-7", "status": "issued"}
    # Process 2 only ran the gated call: no model call, no second read.
    assert (ledger.count("model"), ledger.count("tool", "read"), ledger.count("tool", "issue_refund")) == (2, 1, 1)


def test_a_rejection_given_in_a_new_process_fails_the_run_without_refunding(tmp_path: Path) -> None:
    db, path = tmp_path / "loops.sqlite", tmp_path / "calls.jsonl"
    ledger = Ledger(path)
    with sqlite_saver(db) as saver:  # this process pauses the run ...
        runner = LoopRunner(support_loop(), llm=support_model(ledger), tools=support_tools(ledger), checkpointer=saver)
        assert is_interrupt(runner.invoke({"request": {"order_id": "A-8", "text": "refund"}}, thread_id="t-2"))
    second = call(db, path, "t-2", "decide", "reject")  # ... another one rejects it
    assert second["error"] == "LoopPermissionDeniedError" and second["state"] == "failed"
    assert ledger.count("tool", "issue_refund") == 0 and ledger.count("model") == 2


AGENT_PROC = PROC.with_name("_loop_agent_proc.py")


def test_an_approved_model_tool_call_resumes_inside_the_agent_step_in_a_new_process(tmp_path: Path) -> None:
    db, path = tmp_path / "loops.sqlite", tmp_path / "calls.jsonl"
    ledger = Ledger(path)

    def run(command: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, str(AGENT_PROC), str(db), str(path), command],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=AGENT_PROC.parent,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = run("start")
    assert first["state"] == "awaiting_approval" and first["out"]["tool_name"] == "refund_order"
    assert [(r["kind"], r["name"]) for r in ledger.rows] == [("model", "helper"), ("tool", "lookup")]
    second = run("approve")
    assert second == {"out": {"text": "Refunded order 1."}, "state": "completed"}
    # The parallel lookup and the first model call did not run again; the gated call ran once.
    assert [(r["kind"], r["name"]) for r in ledger.rows] == [
        ("model", "helper"),
        ("tool", "lookup"),
        ("tool", "refund_order"),
        ("model", "helper"),
    ]


CRASH_PROC = PROC.with_name("_loop_crash_proc.py")


def test_a_run_killed_mid_step_continues_in_a_new_process_without_redoing_finished_steps(tmp_path: Path) -> None:
    db, path = tmp_path / "loops.sqlite", tmp_path / "calls.jsonl"
    ledger = Ledger(path)
    args = [sys.executable, str(CRASH_PROC), str(db), str(path)]
    died = subprocess.run([*args, "start"], capture_output=True, text=True, timeout=120, cwd=CRASH_PROC.parent)
    assert died.returncode == 1
    assert [r["name"] for r in ledger.rows] == ["fetch", "charge"]
    done = subprocess.run([*args, "continue"], capture_output=True, text=True, timeout=120, cwd=CRASH_PROC.parent)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "before": "running",
        "data": "charged 12.00 for C-1",
        "after": "completed",
    }
    assert [r["name"] for r in ledger.rows] == ["fetch", "charge", "charge"]  # fetch did not run again
