"""An approval that waits across a restart: resumed in a new process, nothing runs twice, no secret re-surfaces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROC = Path(__file__).with_name("_approval_proc.py")
KEY = "sk-proj-4fGh7Jk2Lm9Np3Qr5St8Uv1Wx6Yz0Ab2Cd"


def _run(db: Path, ledger: Path, step: str) -> str:
    done = subprocess.run(
        [sys.executable, str(PROC), str(db), str(ledger), step], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_approval_resumes_in_a_new_process_without_rerunning_anything(tmp_path: Path) -> None:
    db, ledger = tmp_path / "threads.db", tmp_path / "ledger.txt"

    first = _run(db, ledger, "start")
    assert "'kind': 'interrupt'" in first and "delete_branch" in first
    second = _run(db, ledger, "approve")
    assert second.strip() == "Cleaned up."

    lines = ledger.read_text().splitlines()
    assert [line for line in lines if line.startswith("tool:")] == ["tool: list_branches", "tool: delete_branch old"]
    models = [line for line in lines if line.startswith("model:")]
    assert len(models) == 2 and all(KEY not in line for line in models)
    assert "[REDACTED:openai_api_key]" in models[1]  # the resumed process's model call reads the redacted thread
    decisions = [line for line in lines if line.startswith("decision:")]
    assert decisions == [
        "decision: secret.openai_api_key redact",
        "decision: tool.destructive require_approval",
        "decision: tool.destructive approved",  # the fresh process rescans the thread: nothing new to report
    ]
