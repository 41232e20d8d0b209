"""A hooked, gated loop run started in one process is listed, approved and recovered from others.

SQLite checkpoints and a SQLite run store shared by separate processes; tool calls are counted in a file the
processes write, so the counts prove what ran where.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PROC = Path(__file__).with_name("_loop_runs_proc.py")


class Processes:
    def __init__(self, tmp_path: Path) -> None:
        self.args = [str(tmp_path / "checkpoints.db"), str(tmp_path / "runs.db"), str(tmp_path / "calls.jsonl")]
        self.ledger = tmp_path / "calls.jsonl"

    def run(self, *command: str, die_in_refund: bool = False) -> Any:
        env = {**os.environ, "DIE_IN_REFUND": "1" if die_in_refund else "0"}
        done = subprocess.run(
            [sys.executable, str(PROC), *self.args, *command],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=PROC.parent,
            env=env,
        )
        if die_in_refund:
            assert done.returncode == 9, done.stderr
            return None
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    def refunds(self) -> list[dict[str, Any]]:
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines()]


def test_a_gated_run_is_listed_and_approved_from_another_process_and_an_old_gate_id_is_refused(
    tmp_path: Path,
) -> None:
    procs = Processes(tmp_path)
    paused = procs.run("start", "t-1")
    assert paused["kind"] == "interrupt" and paused["question"] == "Refunds require human approval."
    # The loop:start command hook ran (confined) and its saved output feeds the gated step's input.
    assert paused["args"] == {"order_id": "A-7", "reason": "ticket A-7"}
    assert procs.refunds() == []

    [listed] = procs.run("list")  # another process sees the waiting run, with its gate
    assert (listed["thread_id"], listed["state"], listed["gate_ids"]) == (
        "t-1",
        "awaiting_approval",
        [paused["gate_id"]],
    )

    done = procs.run("approve", "t-1", paused["gate_id"])  # and approves it there
    assert done["state"] == "completed"
    assert done["data"] == {"refund_id": "R-A-7", "reason": "ticket A-7"}
    assert done["context"]["audit"]["start"]["stdout"] == "ticket A-7"
    [refund] = procs.refunds()
    assert refund["value"] == "A-7 / ticket A-7"

    # The same approval again, from yet another process: refused; nothing runs twice.
    again = procs.run("approve", "t-1", paused["gate_id"])
    assert again["error"] == "UserError" and "waits for no decision" in again["message"]
    [listed] = procs.run("list")
    assert listed["state"] == "completed" and listed["step_keys"] == ["refund"]
    assert len(procs.refunds()) == 1


def test_a_process_killed_while_resuming_an_approved_gate_is_listed_as_resuming_and_continued(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    paused = procs.run("start", "t-2")
    procs.run("approve", "t-2", paused["gate_id"], die_in_refund=True)  # dies inside the approved call
    [listed] = procs.run("list")
    assert listed["state"] == "resuming"  # approved, not finished: nobody is asked again
    refused = procs.run("approve", "t-2", paused["gate_id"])
    assert refused["error"] == "UserError" and "no longer waiting" in refused["message"]
    done = procs.run("continue", "t-2")  # another process resumes with the kept approval
    assert done["state"] == "completed" and done["data"]["refund_id"] == "R-A-7"
    assert [r["value"] for r in procs.refunds()] == ["A-7 / ticket A-7", "A-7 / ticket A-7"]
    assert len({r["pid"] for r in procs.refunds()}) == 2
