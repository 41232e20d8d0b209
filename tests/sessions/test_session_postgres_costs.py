"""Regressions of the cheaper Postgres sessions (pipeline writes, turn-end notifications, lease waits).

- A lease a turn's end gave back is never reported as taken over (no warning, no ``lease.lost``).
- A store opening on a database whose tables exist runs no DDL: it neither waits for nor blocks running turns
  (``CREATE INDEX IF NOT EXISTS`` locks its table even when the index exists).
- The store's pool hands out a connection used a moment ago without a liveness round trip, yet one the server
  closed meanwhile is still replaced: a prompt right after is accepted and runs.
- ``result()`` waiting on a turn another process runs is woken by the turn's end (``NOTIFY``), not by polling.
- A checkpoint write checks the lease in its own SQL (one round trip): a stale holder's write is still refused, with
  nothing stored, and its connection goes back to the pool fit for the next write.
- A prompt refused with ``on_busy="reject"`` (its transaction rolled back mid-pipeline) leaves its connection fit: the
  statements psycopg prepares on it afterwards stay prepared.
- A model call looks for steers only when one was stored since the session was last seen without one (the steer's
  NOTIFY says so): a steer sent from this worker or from another still joins the running turn's next model call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _session_work import blocking_tool, worker_model
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from ai_utils import Agent, SessionFencedError, durable_tool, postgres_sessions
from ai_utils.testing import FakeChatModel, FunctionChatModel

WORKER = Path(__file__).parent / "_worker.py"


async def _quick(messages: list[BaseMessage], tools: list[Any]) -> str:
    await asyncio.sleep(0.01)
    return "done"


def test_turns_ending_normally_never_report_their_lease_taken_over(
    postgres_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A short lease: the keeper renews every ~70 ms, so its renewals keep meeting leases a turn's end just gave back.
    stores = [postgres_sessions(postgres_uri, lease_seconds=0.2) for _ in range(2)]
    events: list[dict[str, Any]] = []
    caplog.set_level(logging.INFO, logger="ai_utils.sessions")
    try:
        agents = [
            Agent(llm=FunctionChatModel(_quick), sessions=store, name="giveback", on_event=events.append)
            for store in stores
        ]
        # Both workers run turns of the same sessions, one after another (each turn's end gives its lease back).
        for round_ in range(12):
            turns = [agents[(i + round_) % 2].session(f"giveback-{i}").prompt(f"round {round_}") for i in range(8)]
            results = [turn.result(timeout=60) for turn in turns]
            assert [r.stop_reason for r in results] == ["end_turn"] * len(turns)
        time.sleep(0.3)  # a few more keeper rounds after the last turn's end
    finally:
        for store in stores:
            store.close()  # type: ignore[attr-defined]
    lost = [e for e in events if e["type"] == "lease.lost"]
    assert lost == [], "a lease a turn's end gave back was reported lost"
    assert not [r for r in caplog.records if "taken over" in r.getMessage()]
    assert sum(e["type"] == "turn.ended" for e in events) == 12 * 8


def test_a_store_opening_on_a_busy_database_neither_waits_for_nor_blocks_running_turns(postgres_uri: str) -> None:
    first = postgres_sessions(postgres_uri)  # the tables exist from here on
    gate = threading.Event()

    async def held(messages: list[BaseMessage], tools: list[Any]) -> str:
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return "done"

    # A worker's write transaction left open on every table of the store (what a running turn's writes hold for a
    # moment): row-exclusive locks, which CREATE INDEX IF NOT EXISTS waits for even when the index exists.
    busy = psycopg.connect(postgres_uri)
    opened: list[Any] = []
    try:
        agent = Agent(llm=FunctionChatModel(held), sessions=first, name="busy-setup")
        turns = [agent.session(f"busy-setup-{i}").prompt("hi") for i in range(4)]
        for table in ("ai_utils_sessions", "ai_utils_inputs", "ai_utils_turns", "ai_utils_log", "ai_utils_calls"):
            busy.execute(f"UPDATE {table} SET session_id = session_id WHERE false")  # fixed names
        opener = threading.Thread(target=lambda: opened.append(postgres_sessions(postgres_uri)), daemon=True)
        began = time.monotonic()
        opener.start()
        opener.join(15)
        assert opened, "a store opening on a database whose tables exist waited for a running transaction"
        assert time.monotonic() - began < 15
        busy.rollback()
        # Opening more stores while the turns run (and finish) blocks none of them.
        more = threading.Thread(target=lambda: opened.extend(postgres_sessions(postgres_uri) for _ in range(3)))
        more.start()
        gate.set()
        results = [turn.result(timeout=30) for turn in turns]
        more.join(30)
        assert not more.is_alive() and len(opened) == 4
        assert [r.stop_reason for r in results] == ["end_turn"] * len(turns)
        other = Agent(llm=FunctionChatModel(held), sessions=opened[-1], name="busy-setup")
        assert other.session("busy-setup-0").prompt("again").result(timeout=30).output == "done"
    finally:
        gate.set()
        busy.rollback()
        busy.close()
        for store in [*opened, first]:
            store.close()  # type: ignore[attr-defined]


def test_a_prompt_right_after_the_server_closed_a_pooled_connection_works(postgres_uri: str) -> None:
    store = postgres_sessions(postgres_uri, min_size=1, max_size=1)
    try:
        agent = Agent(llm=FakeChatModel(["one", "two"]), sessions=store, name="dropped")
        s = agent.session()
        assert s.prompt("first").result(timeout=30).output == "one"
        with store.db.saver.pool.connection() as conn:  # type: ignore[attr-defined]  # the pool's one connection
            pid = conn.info.backend_pid
        with psycopg.connect(postgres_uri, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is not None:
                time.sleep(0.01)
        assert s.prompt("second").result(timeout=30).output == "two"  # used a moment ago, yet replaced
    finally:
        store.close()  # type: ignore[attr-defined]


def test_result_in_one_process_is_woken_by_the_end_of_a_turn_another_process_runs(
    postgres_uri: str, tmp_path: Path
) -> None:
    session, hold = uuid.uuid4().hex, tmp_path / "hold"
    args = {"backend": postgres_uri, "session": session, "action": "prompt", "text": "act once"}
    args.update(message_id="m-1", hold_file=str(hold))
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    store = postgres_sessions(postgres_uri)
    store.poll_seconds = 60.0  # polling cannot explain a waiter that returns at once
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{hold}.running").exists():  # the worker runs the turn, inside its tool
            assert time.monotonic() < deadline and worker.poll() is None
            time.sleep(0.02)
        agent = Agent(llm=FakeChatModel(["never runs here"]), sessions=store, name="worker")
        turn = agent.session(session).prompt("act once", message_id="m-1")  # the same turn: waits for its end
        assert turn.repeated
        hold.write_text("go")
        began = time.monotonic()
        result = turn.result(timeout=60)
        assert time.monotonic() - began < 10
        assert result.stop_reason == "end_turn" and result.output.startswith("done")
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.communicate()
        store.close()  # type: ignore[attr-defined]


def test_a_stale_lease_holders_checkpoint_writes_are_refused_and_nothing_is_stored(postgres_uri: str) -> None:
    store = postgres_sessions(postgres_uri, min_size=1, max_size=1)  # one connection: a refused write must free it
    session = uuid.uuid4().hex
    try:
        store.accept_prompt(session, "stale", None, {"input": "x"})
        claimed = store.claim(session)
        assert claimed is not None
        token = claimed[0]
        saver = store.checkpointer
        config: Any = {"configurable": {"thread_id": session, "checkpoint_ns": ""}}
        first = empty_checkpoint()
        stored = saver.put(config, first, {}, {})  # the lease holds: stored
        with psycopg.connect(postgres_uri, autocommit=True) as admin:  # another worker takes the session over
            admin.execute(
                "UPDATE ai_utils_sessions SET lease_token = lease_token + 1 WHERE session_id = %s", (session,)
            )
        second = empty_checkpoint()
        with pytest.raises(SessionFencedError):
            saver.put(config, second, {}, {})
        with pytest.raises(SessionFencedError):
            saver.put_writes(stored, [("messages", "stale")], "task-1")
        assert [c.checkpoint["id"] for c in saver.list({"configurable": {"thread_id": session}})] == [first["id"]]
        assert saver.get_tuple(stored).pending_writes == []  # type: ignore[union-attr]
        store.leases[session] = token + 1  # the new holder's writes go through, on the same pooled connection
        saver.put(config, second, {}, {})
        assert saver.get_tuple(config).checkpoint["id"] == second["id"]  # type: ignore[union-attr]
    finally:
        store.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("sender", ["this worker", "another worker"])
def test_a_steer_joins_the_running_turns_next_model_call_on_postgres(postgres_uri: str, sender: str) -> None:
    stores = [postgres_sessions(postgres_uri) for _ in range(2)]
    started, release = threading.Event(), threading.Event()

    def slow_lookup(city: str) -> str:
        """Weather for a city (slow)."""
        started.set()
        release.wait(20)
        return f"{city}: rain"

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        if isinstance(messages[-1], HumanMessage) and messages[-1].text.startswith("Weather"):
            return {"tool_calls": [{"name": "slow_lookup", "args": {"city": "Bergen"}}]}
        return f"seen: {[m.text for m in messages if isinstance(m, HumanMessage)]}"

    try:
        tool = durable_tool(slow_lookup, idempotent=True)
        agents = [Agent(llm=FunctionChatModel(reply), tools=[tool], sessions=st, name="steered") for st in stores]
        session = uuid.uuid4().hex
        turn = agents[0].session(session).prompt("Hi")  # runs on the first worker
        assert turn.result(timeout=30).output == "seen: ['Hi']"  # no steer stored: none looked for
        turn = agents[0].session(session).prompt("Weather in Bergen?")
        assert started.wait(30)
        steering = agents[0 if sender == "this worker" else 1].session(session)
        steering.steer("Also: in Celsius please.", message_id="s1")
        time.sleep(0.2)  # another worker's steer reaches this one by NOTIFY
        release.set()
        result = turn.result(timeout=30)
        assert result.output == "seen: ['Hi', 'Weather in Bergen?', 'Also: in Celsius please.']"
        assert not stores[0].busy(session)  # joined this turn, no turn of its own
    finally:
        release.set()
        for store in stores:
            store.close()  # type: ignore[attr-defined]


def test_a_rejected_prompt_leaves_its_connection_fit_for_prepared_statements(postgres_uri: str) -> None:
    from ai_utils import SessionBusyError

    started, release = threading.Event(), threading.Event()

    # One connection: the rejected prompt's is the one every later statement (and psycopg's prepares) runs on.
    store = postgres_sessions(postgres_uri, lease_seconds=5, min_size=1, max_size=1)
    try:
        agent = Agent(llm=worker_model([]), tools=[blocking_tool(started, release)], sessions=store)
        session = agent.session()
        running = session.prompt("work hard")
        assert started.wait(30)
        for _ in range(3):
            with pytest.raises(SessionBusyError):
                session.prompt("are you there?", on_busy="reject")
        release.set()
        assert running.result(timeout=30).stop_reason == "end_turn"
        for n in range(8):  # past psycopg's prepare threshold (5): the same statements run prepared
            assert session.prompt(f"ping {n}").result(timeout=30).output == f"answer to 'ping {n}'"
    finally:
        release.set()
        store.close()  # type: ignore[attr-defined]
