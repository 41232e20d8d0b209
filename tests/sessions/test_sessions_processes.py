"""Durable sessions across real processes, on SQLite and on a real Postgres server.

Each test starts worker processes (`_worker.py`) that share one store: a process killed inside a tool or
right after ``prompt()`` returns, the next process continuing the turn, two processes prompting one session,
a stalled worker that gets fenced, and a third process replaying the stream log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

WORKER = Path(__file__).parent / "_worker.py"
LEASE = 1.0


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'sessions.sqlite'}"
    else:
        yield request.getfixturevalue("postgres_uri")


def _args(backend: str, session: str, **more: Any) -> str:
    return json.dumps({"backend": backend, "session": session, "lease": LEASE, **more})


def _run(backend: str, session: str, **more: Any) -> tuple[int, dict[str, Any] | None]:
    done = subprocess.run(
        [sys.executable, str(WORKER), _args(backend, session, **more)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return done.returncode, None
    return 0, json.loads(lines[-1])


def _start(backend: str, session: str, **more: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), _args(backend, session, **more)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def _log(backend: str, session: str, cursor: int = 0) -> list[dict[str, Any]]:
    code, out = _run(backend, session, action="stream", cursor=cursor)
    assert code == 0 and out is not None
    return list(out["lines"])


def _kinds(lines: list[dict[str, Any]]) -> list[str]:
    return [line["chunk"] if isinstance(line["chunk"], str) else line["chunk"]["kind"] for line in lines]


def test_a_crash_inside_an_idempotent_tool_reruns_it_with_the_same_execution_id(backend: str, tmp_path: Path) -> None:
    _crash_and_rerun(backend, tmp_path, kind="agent")


def test_a_deep_agent_session_continues_after_a_crash_inside_a_tool(tmp_path: Path) -> None:
    _crash_and_rerun(f"sqlite:{tmp_path / 'deep.sqlite'}", tmp_path, kind="deep")


def _crash_and_rerun(backend: str, tmp_path: Path, *, kind: str) -> None:
    session = uuid.uuid4().hex
    runs = tmp_path / "runs.txt"
    tool = {"idempotent": True, "crash_marker": str(tmp_path / "crashed"), "runs_file": str(runs), "kind": kind}
    code, _ = _run(backend, session, action="prompt", text="act on order 7", **tool)
    assert code == 3  # killed inside the tool

    time.sleep(LEASE + 0.2)  # the dead worker's lease runs out
    code, out = _run(backend, session, action="recover", **tool)
    assert code == 0 and out is not None and out["recovered"] == 1
    (first_pid, first_id), (second_pid, second_id) = (line.split() for line in runs.read_text().splitlines())
    assert first_id == second_id and first_pid != second_pid  # ran again, same execution_id
    assert out["history"][-1] == ["ai", f"done (success): acted on act on order 7 by {second_pid}"]
    assert all(out["sound"])  # the model never saw an unanswered call
    assert any("[system note] This turn was interrupted" in text for _, text in out["calls"][0])

    lines = _log(backend, session)
    assert [line["cursor"] for line in lines] == list(range(1, len(lines) + 1))
    kinds = _kinds(lines)
    assert kinds[0] == "turn_start" and "turn_resume" in kinds and kinds[-1] == "turn_end"
    assert lines[-1]["chunk"]["stop_reason"] == "end_turn"


def test_a_crash_inside_a_non_idempotent_tool_never_runs_it_again(backend: str, tmp_path: Path) -> None:
    session = uuid.uuid4().hex
    runs = tmp_path / "runs.txt"
    tool = {"idempotent": False, "crash_marker": str(tmp_path / "crashed"), "runs_file": str(runs)}
    code, _ = _run(backend, session, action="prompt", text="act: refund order 7", **tool)
    assert code == 3

    time.sleep(LEASE + 0.2)
    # The next prompt to the session continues the interrupted turn first, then runs its own.
    code, out = _run(backend, session, action="prompt", text="and now?", **tool)
    assert code == 0 and out is not None
    assert len(runs.read_text().splitlines()) == 1  # the refund did not run twice
    texts = [text for _, text in out["history"]]
    assert any(t.startswith("done (error): Not run again") and "may have partly run" in t for t in texts)
    assert out["history"][-1] == ["ai", "echo: and now?"]
    assert all(out["sound"])

    ends = [line["chunk"] for line in _log(backend, session) if _kinds([line]) == ["tool"]]
    assert ends[-1]["phase"] == "end" and ends[-1]["status"] == "error"


def test_a_kill_right_after_prompt_returns_loses_nothing(backend: str, tmp_path: Path) -> None:
    session = uuid.uuid4().hex
    proc = _start(backend, session, action="exit_after_prompt", text="hello there")
    out, _ = proc.communicate(timeout=120)
    turn_id = json.loads(out.splitlines()[0])["turn_id"]

    time.sleep(LEASE + 0.2)
    code, done = _run(backend, session, action="recover")
    assert code == 0 and done is not None and done["recovered"] == 1
    assert done["history"] == [["human", "hello there"], ["ai", "echo: hello there"]]
    end = _log(backend, session)[-1]["chunk"]
    assert end == {**end, "kind": "turn_end", "turn_id": turn_id, "stop_reason": "end_turn"}


def test_two_processes_prompting_one_session_are_serialised(backend: str) -> None:
    session = uuid.uuid4().hex
    procs = [
        _start(
            backend,
            session,
            action="prompts",
            texts=[f"{name}{i}" for i in range(4)],
            prefix=name,
            model_delay=0.02,
            lease=10.0,  # no crash here: a long lease keeps a busy machine from looking like one
        )
        for name in ("a", "b")
    ]
    results = [_finish(p) for p in procs]
    assert all(r["results"] == ["end_turn"] * 4 for r in results)

    lines = _log(backend, session)  # a third process replays the log
    assert [line["cursor"] for line in lines] == list(range(1, len(lines) + 1))
    open_turn = None
    ended = 0
    for line in lines:
        chunk = line["chunk"]
        if isinstance(chunk, dict) and chunk["kind"] == "turn_start":
            assert open_turn is None  # no turn starts while another runs
            open_turn = chunk["turn_id"]
        elif isinstance(chunk, dict) and chunk["kind"] == "turn_end":
            assert chunk["turn_id"] == open_turn
            open_turn, ended = None, ended + 1
        else:
            assert open_turn is not None
    assert ended == 8
    history = results[-1]["history"] if len(results[-1]["history"]) == 16 else results[0]["history"]
    assert [kind for kind, _ in history] == ["human", "ai"] * 8
    assert sorted(text for kind, text in history if kind == "human") == sorted(
        [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)]
    )
    # Replay from any cursor gives exactly the rest of the log.
    assert _log(backend, session, cursor=5) == lines[5:]


def test_a_stalled_worker_is_fenced_and_nothing_it_writes_is_visible(backend: str, tmp_path: Path) -> None:
    session = uuid.uuid4().hex
    hold = tmp_path / "hold"
    stalled = _start(backend, session, action="prompt", text="act slowly", hold_file=str(hold), idempotent=True)
    deadline = time.monotonic() + 60
    while not Path(str(hold) + ".running").exists():
        assert time.monotonic() < deadline and stalled.poll() is None
        time.sleep(0.02)
    os.kill(stalled.pid, signal.SIGSTOP)  # the worker stalls inside its tool: no lease renewal
    try:
        time.sleep(LEASE + 0.3)
        hold.write_text("go")
        code, out = _run(backend, session, action="recover", hold_file=str(hold), idempotent=True)
        assert code == 0 and out is not None and out["recovered"] == 1
        taker = out["pid"]
    finally:
        os.kill(stalled.pid, signal.SIGCONT)
    result = _finish(stalled)  # it wakes up, its tool returns, and its writes are refused
    assert result["result"]["stop_reason"] == "end_turn"  # the turn the new worker finished

    lines = _log(backend, session)
    text = json.dumps(lines)
    assert f"by {taker}" in text and f"by {stalled.pid}" not in text
    assert sum(1 for k in _kinds(lines) if k == "turn_end") == 1
    history = json.dumps(result["history"])
    assert f"by {taker}" in history and f"by {stalled.pid}" not in history
