"""The SQL run store on Postgres (`postgres_loop_runs`): processes on any number of machines share it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from ai_utils._optional import missing_extra
from ai_utils.exceptions import LoopError, UserError
from ai_utils.loops._store_sql import Cursor, SqlLoopRuns

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as _import_error:
    raise missing_extra("psycopg", extra="postgres", feature="postgres_loop_runs()") from _import_error

__all__ = ["PostgresLoopRuns"]

# Serialises the first CREATE TABLE IF NOT EXISTS of processes starting together (Postgres races on it).
_SETUP_KEY = 0x61695F6C6F6F70  # "ai_loop"
_DDL = (
    f"SELECT pg_advisory_xact_lock({_SETUP_KEY})",
    "CREATE TABLE IF NOT EXISTS ai_utils_loop_runs (run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, "
    "loop TEXT NOT NULL, state TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION "
    "NOT NULL, step_keys TEXT NOT NULL DEFAULT '[]', gate_ids TEXT NOT NULL DEFAULT '[]', gates_answered INTEGER "
    "NOT NULL DEFAULT 0, error TEXT, sealed INTEGER NOT NULL DEFAULT 0, decision TEXT)",
    "CREATE INDEX IF NOT EXISTS ai_utils_loop_runs_by_loop ON ai_utils_loop_runs (loop, state, created_at)",
    "CREATE INDEX IF NOT EXISTS ai_utils_loop_runs_by_thread ON ai_utils_loop_runs (thread_id, created_at)",
    "CREATE TABLE IF NOT EXISTS ai_utils_loop_messages (seq BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, "
    "kind TEXT NOT NULL, text TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX IF NOT EXISTS ai_utils_loop_messages_by_run ON ai_utils_loop_messages (run_id, seq)",
)


class _PgCursor:
    """A psycopg cursor taking the store's ``?`` placeholders."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._cur.execute(sql.replace("?", "%s"), tuple(params))

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return list(self._cur.fetchall())


def _where(params: dict[str, Any]) -> str:
    """The server without the password, for errors and repr."""
    host = params.get("host") or "localhost"
    return f"{params.get('user') or '?'}@{host}:{params.get('port') or '5432'}/{params.get('dbname') or '?'}"


class PostgresLoopRuns(SqlLoopRuns):
    """Runs in Postgres (see `postgres_loop_runs`)."""

    kind = "postgres"
    for_update = " FOR UPDATE"

    def __init__(self, conn: str | psycopg.Connection[Any] | ConnectionPool[Any], *, timeout: float = 10.0) -> None:
        self._timeout = timeout
        self._ready = False
        self._setup_lock = threading.Lock()
        self._conn_lock = threading.Lock()
        self._owned: ConnectionPool[Any] | None = None
        self._pool: ConnectionPool[Any] | None = None
        self._conn: psycopg.Connection[Any] | None = None
        if isinstance(conn, str):
            try:
                self._label = _where(conninfo_to_dict(conn))
            except psycopg.ProgrammingError:
                raise UserError(
                    "postgres_loop_runs(conn) could not parse the connection string (not shown: it may hold a "
                    "password). Pass e.g. 'postgresql://user:password@localhost:5432/app'."
                ) from None
            self._conninfo: str | None = conn
        elif isinstance(conn, ConnectionPool):
            self._pool, self._conninfo, self._label = conn, None, "a connection pool"
        elif isinstance(conn, psycopg.Connection):
            self._conn, self._conninfo, self._label = conn, None, "a connection"
        else:
            raise UserError(
                f"postgres_loop_runs(conn) needs a libpq connection string, a psycopg Connection or a ConnectionPool, "
                f"got {type(conn).__name__}."
            )

    def _unreachable(self, error: BaseException) -> LoopError:
        return LoopError(
            f"The loop run store postgres_loop_runs({self._label}) is unreachable ({type(error).__name__}). "
            "Check that the server runs and the connection string is right."
        )

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        if self._conn is not None:
            with self._conn_lock:
                yield self._conn
            return
        if self._pool is None:
            with self._setup_lock:
                if self._pool is None:
                    pool: ConnectionPool[Any] = ConnectionPool(
                        self._conninfo or "",
                        min_size=1,
                        max_size=4,
                        kwargs={"autocommit": True, "prepare_threshold": None},
                        open=False,
                        timeout=self._timeout,
                    )
                    try:
                        pool.open(wait=True, timeout=self._timeout)
                    except PoolTimeout as error:
                        pool.close()
                        raise self._unreachable(error) from None
                    self._pool = self._owned = pool
        with self._pool.connection(timeout=self._timeout) as conn:
            yield conn

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Cursor]:
        try:
            with self._connection() as conn:
                if not self._ready:
                    with conn.transaction(), conn.cursor() as cur:
                        for statement in _DDL:
                            cur.execute(statement)
                    self._ready = True
                transaction = conn.transaction() if write else contextlib.nullcontext()
                with transaction, conn.cursor() as cur:
                    yield _PgCursor(cur)
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as error:
            raise self._unreachable(error) from None

    def _write(self) -> contextlib.AbstractContextManager[Cursor]:
        return self._transaction(write=True)

    def _read(self) -> contextlib.AbstractContextManager[Cursor]:
        return self._transaction(write=False)

    def close(self) -> None:
        """Close the pool this store opened (a connection or pool you passed stays yours)."""
        if self._owned is not None:
            self._owned.close()
            self._owned = self._pool = None

    def __repr__(self) -> str:
        return f"postgres_loop_runs({self._label})"
