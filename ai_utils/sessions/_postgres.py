"""``postgres_sessions``: durable sessions that any number of processes on any number of machines share.

Checkpoints use `langgraph-checkpoint-postgres` (our `PostgresCheckpointSaver`, one pool); the store's
tables live in the same database and pool. A checkpoint write for a leased session runs in one
transaction that first takes ``SELECT ... FOR SHARE`` on the session row and checks the lease token, so
a takeover (an ``UPDATE`` of that row) waits for it and a stale worker's write is rolled back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from ai_utils.memory.postgres import PostgresCheckpointSaver
from ai_utils.sessions._fence import FENCE, FencedWrites, check_fence
from ai_utils.sessions._schema import Cursor, SaverDb
from ai_utils.sessions._store import SessionStore

__all__ = ["PostgresSessions", "postgres_sessions"]

_SETUP_KEY = 0x61695F73657373  # "ai_sess"


class _FencedPostgresSaver(FencedWrites, PostgresCheckpointSaver):
    """`PostgresCheckpointSaver` whose writes for a leased session check the lease in the same transaction."""

    @contextlib.contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
        fence = FENCE.get()
        if fence is None:
            with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        from psycopg.rows import dict_row

        with self.pool.connection() as conn, conn.transaction(), conn.cursor(binary=True, row_factory=dict_row) as cur:
            cur.execute("SELECT lease_token FROM ai_utils_sessions WHERE session_id = %s FOR SHARE", (fence[0],))
            row = cur.fetchone()
            check_fence(fence, None if row is None else row["lease_token"])
            yield cur


class _PgCursor:
    """A psycopg cursor taking ``?`` placeholders (the store's SQL is shared with SQLite)."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._cur.execute(sql.replace("?", "%s"), tuple(params))

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return list(self._cur.fetchall())

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)


class _PgDb(SaverDb[_FencedPostgresSaver]):
    """The store's `Db` on the saver's connection pool."""

    for_update = " FOR UPDATE"

    @contextlib.contextmanager
    def write(self) -> Iterator[Cursor]:
        from psycopg.rows import tuple_row

        with self.saver.pool.connection() as conn, conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            yield _PgCursor(cur)

    @contextlib.contextmanager
    def read(self) -> Iterator[Cursor]:
        from psycopg.rows import tuple_row

        with self.saver.pool.connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
            yield _PgCursor(cur)

    def lock_setup(self, cur: Cursor) -> None:
        """Concurrent ``CREATE TABLE IF NOT EXISTS`` race in Postgres: one setup at a time, per database."""
        cur.execute("SELECT pg_advisory_xact_lock(?)", (_SETUP_KEY,))


class PostgresSessions(SessionStore):
    """Durable sessions in Postgres (see `postgres_sessions`)."""

    def close(self) -> None:
        """Stop this worker's background runner and close the pool."""
        if self._engine is not None:
            self._engine.close()
        self.checkpointer.close()


def postgres_sessions(
    conn_string: str, *, lease_seconds: float = 30.0, min_size: int = 1, max_size: int = 4
) -> PostgresSessions:
    """Durable sessions in Postgres: processes on any number of machines share them (scale-out).

    Args:
        conn_string: a libpq URI or ``key=value`` string (never shown in errors).
        lease_seconds: how long a worker's claim on a session lasts without renewal.
        min_size: connections the pool keeps open.
        max_size: the most connections the pool opens.

    Raises:
        UserError: a bad connection string or pool size, or the server cannot be reached.
    """
    saver = _FencedPostgresSaver(conn_string, min_size=min_size, max_size=max_size)
    store = PostgresSessions(_PgDb(saver), saver, lease_seconds=lease_seconds, kind="postgres", poll_seconds=0.05)
    saver.leases = store.leases
    return store
