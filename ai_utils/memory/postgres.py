"""Postgres checkpoints for several processes or machines (extra ``postgres``)."""

from __future__ import annotations

import select
import threading
import time
import weakref
from typing import Any

import anyio.to_thread
from langgraph.checkpoint.base import BaseCheckpointSaver

from ai_utils._optional import missing_extra
from ai_utils.exceptions import UserError
from ai_utils.memory._closeable import Closeable
from ai_utils.memory._methods import offloaded
from ai_utils.memory._runlock import RunLocks, check_lock_timeout, thread_key
from ai_utils.memory._threaded import ThreadedAsyncSaver

try:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as _import_error:
    raise missing_extra(
        "langgraph-checkpoint-postgres", extra="postgres", feature="postgres_saver()"
    ) from _import_error

__all__ = ["PostgresCheckpointSaver", "postgres_saver"]

# Serialises concurrent setup() (schema migrations) across processes sharing one database.
_SETUP_LOCK_KEY = 0x61695F6D656D  # "ai_mem"
# The first key of every thread's run lock (the two-int4 advisory key space, apart from single bigint keys).
_RUN_LOCK_CLASS = 0x61695F72  # "ai_r"
_CONNECT_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


def _where(params: dict[str, Any]) -> str:
    """Name the server without the password, for error messages and repr."""
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    return f"{params.get('user') or '?'}@{host}:{port}/{params.get('dbname') or '?'}"


def _check_conn_string(conn_string: Any) -> dict[str, Any]:
    if not isinstance(conn_string, str) or not conn_string.strip():
        raise UserError(
            f"postgres_saver(conn_string) needs a libpq connection string, got {type(conn_string).__name__}. "
            "Pass e.g. 'postgresql://user:password@localhost:5432/app'."
        )
    try:
        return conninfo_to_dict(conn_string)
    except psycopg.ProgrammingError:
        raise UserError(
            "postgres_saver(conn_string) could not parse the connection string (not shown: it may hold a "
            "password). Pass e.g. 'postgresql://user:password@localhost:5432/app'."
        ) from None


def _check_size(value: Any, argument: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UserError(f"postgres_saver({argument}=...) must be an int >= {minimum}, got {value!r}.")


class _AdvisoryRunLocks(RunLocks):
    """Run locks as session-level advisory locks (``pg_try_advisory_lock(class, hash(thread))``), polled.

    They live on one dedicated connection of the saver, outside its pool: a pooled connection would hand the
    lock to whichever run takes it next. The server drops them when the connection dies (a crashed process
    leaves none behind). Polling rather than ``pg_advisory_lock``: a session blocked inside that statement
    holds a snapshot (see `PostgresCheckpointSaver._setup_schema`), and the wait must be bounded.
    """

    def __init__(self, conn_string: str, where: str, timeout: float) -> None:
        self.key = f"postgres:{where}"
        self.timeout = timeout
        self._conn_string = conn_string
        self._conn: psycopg.Connection[DictRow] | None = None
        self._mutex = threading.Lock()

    def _ask(self, query: Any, thread_id: str) -> bool:
        params = (_RUN_LOCK_CLASS, thread_key(thread_id, signed=True))
        with self._mutex:
            for attempt in (1, 2):
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = psycopg.Connection.connect(self._conn_string, **_CONNECT_KWARGS)
                    row = self._conn.execute(query, params).fetchone()
                    return bool(row and row["ok"])
                except psycopg.OperationalError:
                    # The connection broke (a restarted server): its locks are gone with it; reconnect once.
                    self._drop()
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    def try_lock(self, thread_id: str) -> bool:
        return self._ask("SELECT pg_try_advisory_lock(%s, %s) AS ok", thread_id)

    def unlock(self, thread_id: str) -> None:
        self._ask("SELECT pg_advisory_unlock(%s, %s) AS ok", thread_id)

    async def _atry_lock(self, thread_id: str) -> bool:
        return await anyio.to_thread.run_sync(self.try_lock, thread_id)

    async def aunlock(self, thread_id: str) -> None:
        await anyio.to_thread.run_sync(self.unlock, thread_id)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        with self._mutex:
            self._drop()


class _FreshCheck:
    """A pool ``check`` that skips the liveness round trip for a connection handed out within ``seconds``.

    The pool takes back only connections that are still healthy (a broken one is discarded when it comes back), so
    one in use a moment ago is as likely alive as one that just passed the check. One the server closed meanwhile
    (a restart, ``pg_terminate_backend``, an idle timeout) is still caught: its socket has input (no round trip to
    see that), so it gets the full check and the pool hands out another. A server gone without closing the socket
    is only found by the next statement, which fails.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._given: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def __call__(self, conn: Any) -> None:
        now = time.monotonic()
        given = self._given.get(conn)
        # An idle connection gets nothing from the server: anything on its socket (a FATAL notice, the end of the
        # stream) means it may be closed, and the full check (a round trip) finds out.
        if given is None or now - given > self.seconds or _has_input(conn.pgconn.socket):
            ConnectionPool.check_connection(conn)
        self._given[conn] = now


def _has_input(fd: int) -> bool:
    """Whether the socket has something to read (or was closed), without waiting."""
    poll = getattr(select, "poll", None)
    if poll is None:  # Windows
        return bool(select.select([fd], [], [], 0)[0])
    poller = poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class PostgresCheckpointSaver(Closeable, ThreadedAsyncSaver, PostgresSaver):
    """LangGraph's ``PostgresSaver`` on a connection pool, usable from sync and async runs.

    The sync methods are ``PostgresSaver``'s, over a ``psycopg_pool.ConnectionPool`` that replaces
    broken connections (a restarted server is picked up again). The async methods run those same
    methods in a worker thread instead of using ``AsyncPostgresSaver``, whose pool is tied to the
    event loop that opened it, so one saver object serves ``invoke`` and ``ainvoke`` in any loop.
    ``prune`` / ``aprune`` are available too.

    The schema is created or migrated once, in the constructor, under a Postgres advisory lock so
    several processes may start at the same time. Build it with `postgres_saver`; release the pool
    with ``close()`` or use it as a context manager.

    Runs of `Agent`/`DeepAgent` on one thread are serialised across processes and machines (``run_locks``:
    advisory locks on one extra connection): a run waits up to ``run_lock_timeout`` seconds for another
    process's run on the same thread, then fails with `ThreadBusyError` before it starts.
    """

    run_locks: RunLocks | None
    """The cross-process run lock of each thread."""

    fresh_seconds: float = 0.0
    """A pooled connection given back this recently is handed out again without the pool's liveness check (a round
    trip per checkout); ``0``: always checked."""

    def __init__(
        self,
        conn_string: str,
        *,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 10.0,
        run_lock_timeout: float = 60.0,
    ) -> None:
        """Connect to ``conn_string`` and set up the schema; see `postgres_saver`."""
        params = _check_conn_string(conn_string)
        _check_size(min_size, "min_size", 0)
        _check_size(max_size, "max_size", max(min_size, 1))
        lock_timeout = check_lock_timeout(run_lock_timeout, owner="postgres_saver")
        self._where = _where(params)
        self._setup_schema(conn_string, timeout)
        pool: ConnectionPool[psycopg.Connection[DictRow]] = ConnectionPool(
            conn_string,
            min_size=min_size,
            max_size=max_size,
            kwargs=_CONNECT_KWARGS,
            check=ConnectionPool.check_connection if self.fresh_seconds <= 0 else _FreshCheck(self.fresh_seconds),
            open=False,
            timeout=timeout,
        )
        try:
            pool.open(wait=True, timeout=timeout)
        except PoolTimeout:
            pool.close()
            raise self._unreachable(None) from None
        super().__init__(pool)
        self.pool = pool
        self.run_locks = _AdvisoryRunLocks(conn_string, self._where, lock_timeout)

    def _unreachable(self, error: Exception | None) -> UserError:
        reason = f" ({type(error).__name__})" if error is not None else ""
        return UserError(
            f"postgres_saver could not connect to {self._where}{reason}. "
            "Check that the server runs and the connection string (user, password, database) is right."
        )

    def _setup_schema(self, conn_string: str, timeout: float) -> None:
        try:
            conn = psycopg.Connection.connect(conn_string, connect_timeout=max(int(timeout), 1), **_CONNECT_KWARGS)
        except psycopg.OperationalError as error:
            raise self._unreachable(error) from None
        with conn:
            # Poll instead of pg_advisory_lock(): a session blocked inside that statement holds a snapshot,
            # and the migrations' CREATE INDEX CONCURRENTLY waits for it -> deadlock.
            deadline = time.monotonic() + timeout
            while not self._try_lock(conn):
                if time.monotonic() > deadline:
                    raise UserError(
                        f"postgres_saver waited too long for another process to finish setting up {self._where}. "
                        "Retry, or check for a stuck process holding the setup lock."
                    )
                time.sleep(0.05)
            try:
                PostgresSaver(conn).setup()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK_KEY,))

    @staticmethod
    def _try_lock(conn: psycopg.Connection[DictRow]) -> bool:
        row = conn.execute("SELECT pg_try_advisory_lock(%s) AS ok", (_SETUP_LOCK_KEY,)).fetchone()
        return bool(row and row["ok"])

    aprune = offloaded(BaseCheckpointSaver.prune)

    def close(self) -> None:
        """Close the connection pool (and the run-lock connection). The saver cannot be used afterwards."""
        if self.run_locks is not None:
            self.run_locks.close()
        self.pool.close()

    def __repr__(self) -> str:
        return f"PostgresCheckpointSaver({self._where})"


def postgres_saver(
    conn_string: str, *, min_size: int = 1, max_size: int = 4, run_lock_timeout: float = 60.0
) -> PostgresCheckpointSaver:
    """Connect a Postgres checkpoint saver and create its tables if needed.

    The returned saver works for sync (``invoke``/``stream``) and async (``ainvoke``/``astream``) runs
    alike; see `PostgresCheckpointSaver` for how. Errors never show the password.

    Durability: run graphs with ``durability="sync"`` when a crash must not lose a step: each step's
    checkpoint is committed before the next one starts, so after a ``kill -9`` a new process resumes
    with ``graph.invoke(None, config)`` at the interrupted step. LangGraph's default ``"async"`` may
    lose (and re-run) the last step.

    Example:
        ```python
        from ai_utils.memory import postgres_saver

        with postgres_saver("postgresql://app:secret@db:5432/app") as saver:
            agent = create_agent(model=llm, tools=tools, checkpointer=saver)
            await agent.ainvoke({"messages": [("user", "Hi")]}, config, durability="sync")
        ```

    Any number of processes (``uvicorn --workers 2``, several machines) may run agents on one database: runs
    on the same thread are serialised across them (advisory locks), so no turn is lost.

    Args:
        conn_string: a libpq URI or ``key=value`` string.
        min_size: connections the pool keeps open.
        max_size: the most connections the pool opens.
        run_lock_timeout: how long an `Agent`/`DeepAgent` run waits for another process's run on the same
            thread before it fails with `ThreadBusyError` (nothing ran). For conversations that several
            processes serve at once, durable sessions (`postgres_sessions`) queue turns instead.

    Returns:
        The connected saver.

    Raises:
        UserError: the connection string is not a string or cannot be parsed, a pool size or
            ``run_lock_timeout`` is wrong, or the server cannot be reached.
    """
    return PostgresCheckpointSaver(conn_string, min_size=min_size, max_size=max_size, run_lock_timeout=run_lock_timeout)
