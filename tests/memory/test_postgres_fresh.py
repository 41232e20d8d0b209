"""``PostgresCheckpointSaver.fresh_seconds``: the pool's liveness check (a round trip) on every hand-out by default,
or, for a connection used within ``fresh_seconds``, only a look at what its socket already holds. A connection
the server closed is replaced either way: the saver's next call works, none fails."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
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


@pytest.mark.parametrize(
    ("make", "idle"),
    [
        pytest.param(postgres_saver, 0.0, id="by default every hand-out is checked"),
        pytest.param(_FreshSaver, 0.0, id="a connection used a moment ago that the server closed is still replaced"),
        pytest.param(_BrieflyFreshSaver, 0.4, id="a connection idle longer than fresh_seconds gets the full check"),
    ],
)
def test_a_connection_the_server_closed_is_replaced(
    postgres_db: str, make: Callable[..., PostgresCheckpointSaver], idle: float
) -> None:
    saver = make(postgres_db, min_size=1, max_size=1)
    try:
        assert saver.fresh_seconds == (0 if make is postgres_saver else make.fresh_seconds)  # type: ignore[attr-defined]
        _survives_a_dropped_connection(saver, postgres_db, idle=idle)
    finally:
        saver.close()
