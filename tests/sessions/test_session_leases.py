"""Who may take a session over, and how other processes hear of new lines (SPEC §14b).

A lease names its holder (host, pid, process start): a dead holder on this host is taken over at once, a
holder on another host only after its lease expired. On Postgres a follower is woken by ``LISTEN/NOTIFY``
(shown here with its polling turned down to once a minute). The kill/stop versions with real worker
processes are in ``test_sessions_processes.py``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from ai_utils import Agent, postgres_sessions, sqlite_sessions
from ai_utils.client import is_turn_event
from ai_utils.sessions._holder import HOST_ENV, Holder, host_id, this_holder
from ai_utils.sessions._leases import Held
from ai_utils.testing import FakeChatModel, FunctionChatModel


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _orphan(path: Path, holder: str, *, until: float) -> tuple[str, str]:
    """A session whose queued turn is held (running) by ``holder`` until ``until``, as a worker that stopped."""
    store = sqlite_sessions(path)
    try:
        turn = (
            Agent(llm=FakeChatModel(["x"]), sessions=store)
            .session("s-1")
            ._store.accept_prompt("s-1", "default", None, {"input": "hello"})
        )
        with store.db.write() as cur:
            cur.execute(
                "UPDATE ai_utils_sessions SET lease_owner = ?, lease_token = 7, lease_until = ? WHERE session_id = ?",
                (holder, until, "s-1"),
            )
            cur.execute("UPDATE ai_utils_turns SET status = 'running' WHERE turn_id = ?", (turn.turn_id,))
    finally:
        store.close()  # type: ignore[attr-defined]
    return "s-1", turn.turn_id


def test_a_dead_holder_on_this_host_is_taken_over_at_once_one_elsewhere_after_its_lease(tmp_path: Path) -> None:
    me = this_holder()
    dead = str(Holder(me.host, _dead_pid(), "1", "gone"))
    reused = str(Holder(me.host, me.pid, "1", "old"))  # our pid, but another (earlier) process's start time
    elsewhere = str(Holder("another-machine", me.pid, me.start, "live"))
    far = time.time() + 3600
    for name, holder, continued in (("dead", dead, 1), ("reused", reused, 1), ("elsewhere", elsewhere, 0)):
        path = tmp_path / f"{name}.sqlite"
        session_id, turn_id = _orphan(path, holder, until=far)
        store = sqlite_sessions(path)
        try:
            agent = Agent(llm=FakeChatModel(["continued"]), sessions=store)
            began = time.monotonic()
            assert agent.recover() == continued, name
            if continued:
                turn = agent.session(session_id).prompt("hello", message_id=store.turn(turn_id).message_id)  # type: ignore[union-attr]
                assert turn.result(timeout=30).output == "continued"
                assert time.monotonic() - began < 20  # not the hour-long lease
            else:
                assert store.busy(session_id) and not store.lease_free(session_id)
        finally:
            store.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_claim_not_taken_names_the_holder_and_whether_there_is_work(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """On Postgres the claim reads the holder in its own statement; both dialects answer alike."""
    uri = request.getfixturevalue("postgres_uri") if kind == "postgres" else ""
    store = postgres_sessions(uri) if kind == "postgres" else sqlite_sessions(tmp_path / "claims.sqlite")
    me = this_holder()
    live = str(Holder("another-machine", me.pid, me.start, "live"))
    dead = str(Holder(me.host, _dead_pid(), "1", "gone"))
    far = time.time() + 3600
    prefix = f"{kind}-{time.time_ns()}"
    try:
        assert store.try_claim(f"{prefix}-missing") == Held(None, 0.0, False)
        for name, holder, queued in (("live", live, True), ("idle", live, False), ("dead", dead, True)):
            session_id = f"{prefix}-{name}"
            turn = store.accept_prompt(session_id, "default", None, {"input": "hello"})
            with store.db.write() as cur:
                cur.execute(
                    "UPDATE ai_utils_sessions SET lease_owner = ?, lease_token = 7, lease_until = ? "
                    "WHERE session_id = ?",
                    (holder, far, session_id),
                )
                if not queued:
                    cur.execute("UPDATE ai_utils_turns SET status = 'ended' WHERE turn_id = ?", (turn.turn_id,))
            got = store.try_claim(session_id)
            if name == "dead":  # a dead holder of this host: taken over at once, naming it
                assert got == (8, dead)
                assert store.leases[session_id] == 8
            else:
                assert got == Held(Holder.parse(holder), far, queued), name
                assert session_id not in store.leases
    finally:
        store.close()  # type: ignore[attr-defined]


def test_recover_wait_takes_over_an_expired_lease_of_another_host(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    until = time.time() + 1.0
    _orphan(path, str(Holder("another-machine", 1, "1", "live")), until=until)
    store = sqlite_sessions(path)
    try:
        agent = Agent(llm=FakeChatModel(["taken over"]), sessions=store)
        assert agent.recover() == 0
        assert agent.recover(wait=True) == 1 and time.time() >= until
    finally:
        store.close()  # type: ignore[attr-defined]


async def test_arecover_wait_waits_on_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    _orphan(path, str(Holder("another-machine", 1, "1", "live")), until=time.time() + 0.5)
    store = sqlite_sessions(path)
    try:
        agent = Agent(llm=FakeChatModel(["taken over"]), sessions=store)
        assert await agent.arecover(wait=True) == 1
        deadline = time.monotonic() + 30
        while store.busy("s-1"):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
    finally:
        store.close()  # type: ignore[attr-defined]


def test_a_holder_killed_right_after_a_look_is_seen_dead_by_the_next_takeover_check() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        holder = Holder.parse(str(Holder(host_id(), child.pid, "", "live")))
        assert holder is not None
        assert not holder.dead_here(seen_within=0.25)  # a waiter's look: remembered for a quarter second
    finally:
        child.kill()
        child.wait()
    # recover() and a claim look again at once; a waiter trusts its recent look only that long.
    assert holder.dead_here()
    time.sleep(0.3)
    assert holder.dead_here(seen_within=0.25)


def test_the_host_identity_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOST_ENV, "rack-7|node-2")
    assert host_id() == "rack-7/node-2" and this_holder().host == "rack-7/node-2"
    parsed = Holder.parse(str(this_holder()))
    assert parsed is not None and parsed.host == "rack-7/node-2"
    assert Holder.parse("old-host:1234:abcd") is None  # an older version's row: waits for its lease


def test_postgres_followers_are_woken_by_notify(postgres_uri: str) -> None:
    writer_store = postgres_sessions(postgres_uri)
    reader_store = postgres_sessions(postgres_uri)
    reader_store.poll_seconds = 60.0  # polling cannot explain a follower that keeps up
    started = threading.Event()

    async def words(messages: list[BaseMessage], tools: list[Any]) -> str:
        started.set()
        await asyncio.sleep(1.0)
        return "one two three"

    try:
        writer = Agent(llm=FunctionChatModel(words), sessions=writer_store, name="notify")
        reader = Agent(llm=FakeChatModel(["never runs here"]), sessions=reader_store, name="notify")
        s = writer.session()
        turn = s.prompt("talk")
        assert started.wait(30)  # the writer runs the turn and holds its lease
        began = time.monotonic()
        lines = list(reader.session(s.id).stream(0))
        assert time.monotonic() - began < 30
        chunks = [line["chunk"] for line in lines]
        assert [c["kind"] for c in chunks if is_turn_event(c)] == ["turn_start", "turn_end"]
        assert "".join(c for c in chunks if isinstance(c, str)) == "one two three"
        assert turn.result(timeout=30).stop_reason == "end_turn"
    finally:
        reader_store.close()  # type: ignore[attr-defined]
        writer_store.close()  # type: ignore[attr-defined]


def test_a_worker_keeps_its_lease_through_a_long_turn_and_hears_a_cancel_from_another(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite"
    started = threading.Event()

    async def slow(messages: list[BaseMessage], tools: list[Any]) -> str:
        started.set()
        await asyncio.sleep(2.5)
        return "done"

    # Two workers on one file (two store objects: as two processes would be), a lease far shorter than the turn.
    first, second = sqlite_sessions(path, lease_seconds=0.6), sqlite_sessions(path, lease_seconds=0.6)
    try:
        runner = Agent(llm=FunctionChatModel(slow), sessions=first, name="k")
        other = Agent(llm=FakeChatModel(["never"]), sessions=second, name="k")
        turn = runner.session("long").prompt("work")
        assert started.wait(30)
        time.sleep(1.5)  # past the lease: only renewals keep it
        assert other.recover() == 0 and not second.lease_free("long")
        assert turn.result(timeout=30).stop_reason == "end_turn"

        started.clear()
        again = runner.session("long").prompt("work more")
        assert started.wait(30)
        other.session("long").cancel()  # from the other worker: the running one hears it and stops
        assert again.result(timeout=30).stop_reason == "cancelled"
    finally:
        second.close()  # type: ignore[attr-defined]
        first.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_closing_the_store_lets_running_turns_record_their_ends(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # close() waits for running turns: the wait must cover each turn's end record and lease release, not only
    # its model calls, or the next worker finds a finished thread with no end and reports the turn "unknown".
    gate = threading.Event()
    calls = 0

    async def held(messages: list[BaseMessage], tools: list[Any]) -> Any:
        nonlocal calls
        calls += 1
        while not gate.is_set():
            await asyncio.sleep(0.005)
        return "finished"

    uri = request.getfixturevalue("postgres_uri") if kind == "postgres" else ""
    store = postgres_sessions(uri) if kind == "postgres" else sqlite_sessions(tmp_path / "closing.sqlite")
    agent = Agent(llm=FunctionChatModel(held), sessions=store, name=f"closing-{kind}")
    turns = [agent.session(f"closing-{kind}-{i}").prompt("hi") for i in range(20)]
    deadline = time.monotonic() + 60
    while calls < len(turns) and time.monotonic() < deadline:  # every turn is inside its model call
        time.sleep(0.01)
    closer = threading.Thread(target=store.close)  # type: ignore[attr-defined]
    closer.start()
    gate.set()  # every model call returns at once: the ends are written while close() waits
    closer.join(60)
    assert not closer.is_alive()
    reopened = postgres_sessions(uri) if kind == "postgres" else sqlite_sessions(tmp_path / "closing.sqlite")
    try:
        again = Agent(llm=FakeChatModel(["never called"]), sessions=reopened, name=f"closing-{kind}")
        assert again.recover() == 0  # nothing left open for a next worker
        results = [again.session(t.session_id).prompt("hi", message_id=t.message_id).result(timeout=30) for t in turns]
        assert [(r.stop_reason, r.output) for r in results] == [("end_turn", "finished")] * len(turns)
    finally:
        reopened.close()  # type: ignore[attr-defined]
