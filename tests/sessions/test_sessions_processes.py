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


# --- SPEC §14b: fast takeover, double texting, images, modes and context after a crash, yield -------------


def _running(proc: subprocess.Popen[str], hold: Path) -> None:
    """Wait until the worker's tool runs (it wrote ``<hold>.running``)."""
    deadline = time.monotonic() + 90
    while not Path(str(hold) + ".running").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the worker never reached its tool"
        time.sleep(0.02)


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.communicate(timeout=60)  # reaped: its pid is gone


def test_a_sigkilled_worker_on_this_host_is_taken_over_at_once(backend: str, tmp_path: Path) -> None:
    session = uuid.uuid4().hex
    hold = tmp_path / "hold"
    worker = _start(backend, session, action="prompt", text="act on order 1", hold_file=str(hold), lease=30.0)
    _running(worker, hold)
    _kill(worker)  # mid-tool; its lease has ~30 s left
    hold.write_text("go")
    code, out = _run(backend, session, action="recover", hold_file=str(hold), lease=30.0)
    assert code == 0 and out is not None and out["recovered"] == 1
    assert out["recover_seconds"] < 3.0  # not the 30 s lease: the holder is a dead process on this host
    assert out["history"][-1] == ["ai", f"done (success): acted on act on order 1 by {out['pid']}"]
    assert "turn_resume" in _kinds(_log(backend, session))


def test_a_steer_that_joined_just_before_a_crash_reaches_the_continued_turn(backend: str, tmp_path: Path) -> None:
    session = uuid.uuid4().hex
    hold, hang = tmp_path / "hold", tmp_path / "hang"
    steer = "Also: in Celsius please."
    options = {"hold_file": str(hold), "lease": 30.0}
    worker = _start(
        backend, session, action="prompt", text="act on order 1", hang_on=steer, hang_file=str(hang), **options
    )
    _running(worker, hold)
    code, out = _run(backend, session, action="steer", text=steer, message_id="s-1")
    assert code == 0 and out is not None and out["steered"] == "s-1"
    hold.write_text("go")
    deadline = time.monotonic() + 90
    while not hang.exists():  # the steer joined (stored as taken) and the model call that got it runs
        assert time.monotonic() < deadline and worker.poll() is None, "the steer never reached a model call"
        time.sleep(0.02)
    _kill(worker)  # before the model's answer (and the steer with it) reached a checkpoint

    code, out = _run(backend, session, action="recover", **options)
    assert code == 0 and out is not None and out["recovered"] == 1
    assert out["history"][-2:] == [["human", steer], ["ai", f"echo: {steer}"]]  # not lost, once
    assert [m[1] for m in out["history"]].count(steer) == 1
    lines = _log(backend, session)
    steers = [line["chunk"] for line in lines if _kinds([line]) == ["user_message"]]
    assert steers == [{"kind": "user_message", "text": steer, "id": "s-1"}]  # shown once, across both workers


def test_a_stalled_worker_on_another_host_is_taken_over_only_after_its_lease(backend: str, tmp_path: Path) -> None:
    session = uuid.uuid4().hex
    hold = tmp_path / "hold"
    lease = 60.0  # long enough that the next worker starts well within it, even on a loaded machine
    other = _start(backend, session, action="prompt", text="act slowly", hold_file=str(hold), lease=lease, host="m2")
    try:
        _running(other, hold)
        os.kill(other.pid, signal.SIGSTOP)  # alive-looking, on "another machine": no lease renewal from now on
        stopped = time.time()
        hold.write_text("go")
        code, out = _run(backend, session, action="recover", early=True, wait=True, hold_file=str(hold), lease=lease)
        assert code == 0 and out is not None
        assert out["early"] == 0  # its lease still runs: recover() leaves it alone
        assert out["recovered"] == 1  # recover(wait=True) waited for the lease, then continued the turn
        os.kill(other.pid, signal.SIGCONT)
        _finish(other)  # it wakes up fenced: nothing it writes is visible
    finally:
        if other.poll() is None:
            os.kill(other.pid, signal.SIGCONT)
            _kill(other)
    # Taken over no earlier than its lease allowed (its last renewal was at most lease / 3 before the stop).
    assert out["recovered_at"] - stopped >= lease * 2 / 3 - 0.5
    lines = _log(backend, session)
    assert "turn_resume" in _kinds(lines)
    text = json.dumps(lines)
    assert f"by {out['pid']}" in text and f"by {other.pid}" not in text


def _busy_case(backend: str, tmp_path: Path, on_busy: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    session = uuid.uuid4().hex
    hold = tmp_path / "hold"
    busy = {
        "idempotent": False,
        "lease": 10.0,
    }  # no crash here: a long lease keeps a loaded machine from looking like one
    first = _start(backend, session, action="prompt", text="act slowly", hold_file=str(hold), **busy)
    _running(first, hold)
    second = _start(backend, session, action="prompt", text="new question", on_busy=on_busy, message_id="n-1", **busy)
    try:
        if on_busy in ("reject", "interrupt", "rollback"):
            # Answered while the first worker's tool still hangs (released earlier, a slow-starting second
            # process could find the session idle).
            result = _finish(second)
        else:
            hold.write_text("go")
            result = _finish(second)
    finally:
        hold.write_text("go")
    first_result = _finish(first)
    result["first"] = first_result["result"]
    code, reader = _run(backend, session, action="stream", cursor=0)  # a third process reads log and thread
    assert code == 0 and reader is not None
    result["thread"] = reader["history"]
    return result, list(reader["lines"])


def test_on_busy_reject_from_another_process_stores_nothing(backend: str, tmp_path: Path) -> None:
    result, lines = _busy_case(backend, tmp_path, "reject")
    assert result["busy"] == "SESSION_BUSY"
    assert "new question" not in json.dumps(lines) and "n-1" not in json.dumps(lines)
    assert [t for k, t in result["thread"] if k == "human"] == ["act slowly"]
    assert result["first"]["stop_reason"] == "end_turn"


def test_on_busy_interrupt_from_another_process_answers_the_open_call(backend: str, tmp_path: Path) -> None:
    result, lines = _busy_case(backend, tmp_path, "interrupt")
    assert result["result"]["stop_reason"] == "end_turn"
    assert result["first"]["stop_reason"] == "cancelled"
    kinds = [kind for kind, _ in result["thread"]]
    assert kinds == ["human", "ai", "tool", "human", "ai"]  # the new turn saw a repaired thread
    assert result["thread"][2][1].startswith("Not finished: the turn was cancelled")
    assert result["thread"][-1] == ["ai", "echo: new question"]
    tool_ends = [line["chunk"] for line in lines if _kinds([line]) == ["tool"] and line["chunk"]["phase"] == "end"]
    assert tool_ends and tool_ends[0]["status"] == "error"


def test_on_busy_rollback_from_another_process_removes_the_turn(backend: str, tmp_path: Path) -> None:
    result, lines = _busy_case(backend, tmp_path, "rollback")
    assert result["first"]["stop_reason"] == "cancelled"
    assert result["thread"] == [["human", "new question"], ["ai", "echo: new question"]]
    kinds = _kinds(lines)
    end = kinds.index("turn_end")
    assert kinds[end + 1] == "turn_rollback" and "tool" in kinds[:end]  # its lines stay, then turn_rollback
    assert [line["cursor"] for line in lines] == list(range(1, len(lines) + 1))


def test_on_busy_enqueue_from_another_process_keeps_order(backend: str, tmp_path: Path) -> None:
    result, _ = _busy_case(backend, tmp_path, "enqueue")
    assert result["first"]["stop_reason"] == "end_turn" and result["result"]["stop_reason"] == "end_turn"
    assert [t for k, t in result["thread"] if k == "human"] == ["act slowly", "new question"]


def test_an_image_prompt_replayed_by_another_process_sends_the_same_image(
    backend: str, tmp_path: Path, aimock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    from _media import png

    monkeypatch.setenv("LOCAL_LLM_BASE_URL", aimock.openai_base_url)  # the workers inherit it
    aimock.add({"match": {"userMessage": "Describe"}, "response": {"content": "A red square."}})
    session = uuid.uuid4().hex
    image = base64.b64encode(png(3, 3)).decode()
    proc = _start(backend, session, action="exit_after_prompt", text="Describe it", image=image, model="local:vision")
    proc.communicate(timeout=120)  # gone right after prompt() returned
    code, out = _run(backend, session, action="recover")  # opens the session without model=: it is stored
    assert code == 0 and out is not None
    bodies = [b for b in aimock.request_bodies() if "messages" in b]
    assert bodies and {b["model"] for b in bodies} == {"vision"}
    parts = [b["messages"][-1]["content"] for b in bodies]
    expected = [
        {"type": "text", "text": "Describe it"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}},
    ]
    assert all(p == expected for p in parts)  # every process sent the same image content
    assert _log(backend, session)[-1]["chunk"]["stop_reason"] == "end_turn"
    stored = _stored_payloads(backend, session)
    assert stored[0]["input"][1] == {"type": "image", "data": image, "mime_type": "image/png"}


def _stored_payloads(backend: str, session: str) -> list[dict[str, Any]]:
    sql = "SELECT payload FROM ai_utils_turns WHERE session_id = {} ORDER BY seq"
    if backend.startswith("sqlite:"):
        import sqlite3

        with sqlite3.connect(backend.removeprefix("sqlite:")) as conn:
            rows = conn.execute(sql.format("?"), (session,)).fetchall()
    else:
        import psycopg

        with psycopg.connect(backend) as conn:
            rows = conn.execute(sql.format("%s"), (session,)).fetchall()
    return [json.loads(row[0]) for row in rows]


def test_a_crash_never_changes_the_turns_mode(backend: str, tmp_path: Path) -> None:
    session = uuid.uuid4().hex
    runs = tmp_path / "runs.txt"
    crashing = {"modes": True, "crash_marker": str(tmp_path / "crashed"), "runs_file": str(runs)}
    code, _ = _run(backend, session, action="prompt", text="support: act on my order", **crashing)
    assert code == 3  # killed inside `act`, in mode `support` (which may not delete accounts)
    code, out = _run(backend, session, action="recover", **crashing)
    assert code == 0 and out is not None and out["recovered"] == 1
    assert "DELETED" not in runs.read_text()  # the model asked for it after the crash: refused
    refused = [text for kind, text in out["history"] if kind == "tool" and "delete_account" in text]
    assert refused and "mode `support`" in refused[0]
    assert any("[system note] This turn was interrupted" in text for _, text in out["calls"][0])


def test_a_recovered_turn_gets_no_context_unless_its_caller_supplies_one(backend: str, tmp_path: Path) -> None:
    for continuer in ("recover", "bob", "carol"):
        session = uuid.uuid4().hex
        runs = tmp_path / f"runs-{continuer}.txt"
        crashing = {"crash_marker": str(tmp_path / f"crashed-{continuer}"), "runs_file": str(runs)}
        code, _ = _run(backend, session, action="prompt", text="who am I?", context="alice", **crashing)
        assert code == 3
        if continuer == "recover":
            code, out = _run(backend, session, action="recover", **crashing)
        elif continuer == "bob":  # a session object with its own context continues the turn (by reading its stream)
            code, out = _run(backend, session, action="stream", context="bob", **crashing)
        else:  # ... or by sending the next prompt: the crashed turn runs first, with that object's context
            code, out = _run(backend, session, action="prompt", text="who now?", context="carol", **crashing)
        assert code == 0 and out is not None
        expected = {"recover": ["nobody"], "bob": ["bob"], "carol": ["carol", "carol"]}[continuer]
        assert runs.read_text().splitlines() == ["WHO alice", *(f"WHO {who}" for who in expected)]


def test_a_yielded_turn_is_resumed_by_another_process_without_a_note(backend: str, tmp_path: Path) -> None:
    session = uuid.uuid4().hex
    code, out = _run(backend, session, action="prompt", text="act on it", yield_in=0.3, model_delay=0.5)
    assert code == 0 and out is not None and out["result"]["stop_reason"] == "yielded"
    code, resumed = _run(backend, session, action="resume")
    assert code == 0 and resumed is not None and resumed["result"]["stop_reason"] == "end_turn"
    assert not any("[system note]" in text for call in resumed["calls"] for _, text in call)
    assert resumed["history"][-1][1].startswith("done (success): acted on act on it")
    kinds = [k for k in _kinds(_log(backend, session)) if k.startswith("turn_")]
    assert kinds == ["turn_start", "turn_yield", "turn_resume", "turn_end"]
