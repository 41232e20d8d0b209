"""``PostgresCheckpointSaver.fresh_seconds``: the pool's liveness check (a round trip) on every hand-out by default,
or, for a connection used within ``fresh_seconds``, only a look at what its socket already holds. A connection
the server closed is replaced either way: the saver's next call works, none fails."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from langgraph.checkpoint.base import empty_checkpoint

from ai_utils.memory.postgres import PostgresCheckpointSaver, postgres_saver


class _FreshSaver(PostgresCheckpointSaver):
    fresh_seconds = 60.0


class _BrieflyFreshSaver(PostgresCheckpointSaver):
    fresh_seconds = 0.2


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _put(saver: PostgresCheckpointSaver, thread: str) -> Any:
    return saver.put(_config(thread), empty_checkpoint(), {"source": "input", "step": -1}, {})


def _backend(saver: PostgresCheckpointSaver) -> int:
    with saver.pool.connection() as conn:  # the pool's one connection (max_size=1)
        return int(conn.info.backend_pid)


def _terminate(pid: int, uri: str) -> None:
    """End the server process of a connection and wait until it is gone (its socket closed)."""
    with psycopg.connect(uri, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        deadline = time.monotonic() + 10
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is not None:
            assert time.monotonic() < deadline
            time.sleep(0.01)


def _survives_a_dropped_connection(saver: PostgresCheckpointSaver, uri: str, *, idle: float = 0.0) -> None:
    _put(saver, "t")
    before = _backend(saver)
    _terminate(before, uri)
    time.sleep(idle)
    _put(saver, "t")  # handed a new connection, not the dead one
    assert _backend(saver) != before
    assert saver.get_tuple(_config("t")) is not None


def test_by_default_every_hand_out_is_checked(postgres_db: str) -> None:
    saver = postgres_saver(postgres_db, min_size=1, max_size=1)
    try:
        assert saver.fresh_seconds == 0
        _survives_a_dropped_connection(saver, postgres_db)
    finally:
        saver.close()


def test_a_connection_used_a_moment_ago_that_the_server_closed_is_still_replaced(postgres_db: str) -> None:
    saver = _FreshSaver(postgres_db, min_size=1, max_size=1)
    try:
        _survives_a_dropped_connection(saver, postgres_db)
    finally:
        saver.close()


def test_a_connection_idle_longer_than_fresh_seconds_gets_the_full_check(postgres_db: str) -> None:
    saver = _BrieflyFreshSaver(postgres_db, min_size=1, max_size=1)
    try:
        _survives_a_dropped_connection(saver, postgres_db, idle=0.4)
    finally:
        saver.close()
