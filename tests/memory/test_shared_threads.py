"""Two processes running turns on one thread of a shared ``sqlite_saver``/``postgres_saver`` lose nothing.

The later run waits for the earlier one (the savers' cross-process run locks); a run that waits past the saver's
``run_lock_timeout`` fails with `ThreadBusyError` before it runs, naming durable sessions.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from ai_utils import Agent, ThreadBusyError, UserError
from ai_utils.memory import postgres_saver, sqlite_saver
from ai_utils.testing import FakeChatModel, FunctionChatModel

PROC = Path(__file__).with_name("_shared_thread_proc.py")
TURNS = 10


def spawn(**args: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(PROC), json.dumps(args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    parsed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return parsed


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def two_writers(backend: str, tmp_path: Path) -> list[dict[str, Any]]:
    """Two processes, ``TURNS`` turns each on thread ``shared``, started together once both are ready."""
    start = tmp_path / "start"
    procs = {
        worker: spawn(
            backend=backend,
            thread="shared",
            worker=worker,
            turns=TURNS,
            start_file=str(start),
            ready_file=str(tmp_path / f"ready-{worker}"),
        )  # fmt: skip
        for worker in ("a", "b")
    }
    for worker, proc in procs.items():
        wait_for(tmp_path / f"ready-{worker}", proc)
    start.write_text("go")
    results = [result(proc) for proc in procs.values()]
    first, second = ([tuple(t) for t in r["turns"]] for r in results)
    assert first[0][0] < second[-1][1] and second[0][0] < first[-1][1]  # the two processes ran at the same time
    return results


def disjoint(results: list[dict[str, Any]]) -> bool:
    """Whether no two model calls (each inside its run) of the processes ran at the same time."""
    turns = sorted(tuple(t) for r in results for t in r["model_calls"])
    return all(end <= next_start for (_, end), (next_start, _) in zip(turns, turns[1:], strict=False))


def conversation(saver: Any) -> list[tuple[str, str]]:
    agent = Agent(llm=FakeChatModel(["unused"]), checkpointer=saver)
    messages = agent.get_state("shared").values.get("messages", [])
    return [(type(m).__name__, m.text) for m in messages]


def assert_every_turn_kept(turns: list[tuple[str, str]]) -> None:
    sent = sorted(f"{w}-{n}" for w in ("a", "b") for n in range(TURNS))
    assert sorted(text for kind, text in turns if kind == "HumanMessage") == sent  # 20 of 20
    assert len(turns) == 4 * TURNS
    for (kind, text), (answer_kind, answer) in zip(turns[::2], turns[1::2], strict=True):
        assert (kind, answer_kind, answer) == ("HumanMessage", "AIMessage", f"ack {text}")  # each turn whole


def test_the_attack_two_processes_on_a_plain_langgraph_sqlite_saver_lose_messages(tmp_path: Path) -> None:
    db = tmp_path / "raw.sqlite"
    results = two_writers(f"rawsqlite:{db}", tmp_path)

    assert all(r["errors"] == [] for r in results)  # no error anywhere ...
    with sqlite_saver(db) as saver:
        humans = [text for kind, text in conversation(saver) if kind == "HumanMessage"]
    assert not disjoint(results)  # turns of the two processes overlapped ...
    assert len(humans) < 2 * TURNS  # ... and user messages vanished


def test_two_processes_on_one_sqlite_saver_thread_keep_all_twenty_messages(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    results = two_writers(f"sqlite:{db}", tmp_path)

    assert [r["errors"] for r in results] == [[], []]
    assert [len(r["answers"]) for r in results] == [TURNS, TURNS]
    with sqlite_saver(db) as saver:
        assert_every_turn_kept(conversation(saver))
    assert disjoint(results)  # each run waited for the other process's run


def test_two_processes_on_one_postgres_saver_thread_keep_all_twenty_messages(postgres_db: str, tmp_path: Path) -> None:
    results = two_writers(postgres_db, tmp_path)

    assert [r["errors"] for r in results] == [[], []]
    with postgres_saver(postgres_db) as saver:
        assert_every_turn_kept(conversation(saver))
    assert disjoint(results)


@pytest.fixture
def busy_thread(tmp_path: Path) -> Iterator[Callable[[str], Callable[[], list[tuple[str, str]]]]]:
    """Start a process whose turn on thread ``shared`` holds it until released; returns its finish function."""
    procs: list[subprocess.Popen[str]] = []
    release = tmp_path / "release"

    def start(backend: str) -> Callable[[], list[tuple[str, str]]]:
        started = tmp_path / "started"
        proc = spawn(
            backend=backend, thread="shared", worker="holder", turns=1, started_file=str(started),
            release_file=str(release),
        )  # fmt: skip
        procs.append(proc)
        wait_for(started, proc)  # its run holds the thread now

        def finish() -> list[tuple[str, str]]:
            release.write_text("go")
            assert result(proc)["errors"] == []
            return []

        return finish

    yield start
    release.write_text("go")
    for proc in procs:
        proc.communicate(timeout=120)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_run_waiting_past_the_bound_fails_before_it_runs_naming_durable_sessions(
    backend: str, busy_thread: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        target = str(tmp_path / "busy.sqlite")
        finish = busy_thread(f"sqlite:{target}")
        saver = sqlite_saver(target, run_lock_timeout=0.5)
    else:
        target = request.getfixturevalue("postgres_db")
        finish = busy_thread(target)
        saver = postgres_saver(target, run_lock_timeout=0.5)
    calls: list[str] = []
    agent = Agent(llm=FunctionChatModel(lambda m, t: calls.append(m[-1].text) or "ok"), checkpointer=saver)

    began = time.monotonic()
    with pytest.raises(ThreadBusyError, match=r"Thread 'shared' is busy.*run_lock_timeout.*durable sessions") as caught:
        await agent.ainvoke("too early (async)", thread_id="shared")
    assert 0.5 <= time.monotonic() - began < 30
    assert (caught.value.thread_id, caught.value.waited >= 0.5) == ("shared", True)
    assert isinstance(caught.value, UserError)
    with pytest.raises(ThreadBusyError):
        await asyncio.to_thread(agent.invoke, "too early (sync)", thread_id="shared")
    with pytest.raises(ThreadBusyError):
        await asyncio.to_thread(lambda: list(agent.stream("too early (stream)", thread_id="shared")))
    assert calls == []  # nothing ran

    finish()
    assert await agent.ainvoke("in time", thread_id="shared") == "ok"  # the thread is free again
    texts = [text for _, text in conversation(saver)]
    assert texts == ["holder-0", "ack holder-0", "in time", "ok"]  # the refused calls left nothing behind
    saver.close()


def test_two_savers_on_one_file_in_one_process_share_the_threads_lock(tmp_path: Path) -> None:
    db = tmp_path / "one.sqlite"
    inside = threading.Event()
    overlaps: list[bool] = []

    def slow(messages: list[Any], tools: list[Any]) -> str:
        overlaps.append(inside.is_set())
        inside.set()
        time.sleep(0.05)
        inside.clear()
        return "ok"

    with sqlite_saver(db) as first, sqlite_saver(db) as second:
        agents = [Agent(llm=FunctionChatModel(slow), checkpointer=saver) for saver in (first, second)]
        threads = [
            threading.Thread(target=lambda a=a: [a.invoke(f"m{n}", thread_id="t") for n in range(5)]) for a in agents
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        kept = agents[0].get_state("t").values["messages"]

    assert overlaps == [False] * 10
    assert len([m for m in kept if isinstance(m, HumanMessage)]) == 10
    assert all(isinstance(m, HumanMessage | AIMessage) for m in kept)


def test_a_bad_run_lock_timeout_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="run_lock_timeout"):
        sqlite_saver(tmp_path / "x.sqlite", run_lock_timeout=-1)
    with pytest.raises(UserError, match="run_lock_timeout"):
        sqlite_saver(tmp_path / "x.sqlite", run_lock_timeout="10")  # type: ignore[arg-type]
