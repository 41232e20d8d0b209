"""An Agent thread on a real SQLite file survives the process: turn 2 runs in a new process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROC = Path(__file__).with_name("_memory_proc.py")


def turn(db: Path, message: str) -> str:
    done = subprocess.run([sys.executable, str(PROC), str(db), message], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_new_process_answers_from_the_thread_stored_by_the_last_one(tmp_path: Path) -> None:
    db = tmp_path / "agent.sqlite"
    assert turn(db, "Ich heisse Max.") == "Freut mich!"
    assert turn(db, "Wie heisse ich?") == "Du heisst Max."
