"""The SQL run stores: one implementation of `LoopRunStore` over SQLite (here) and Postgres (`_store_postgres`).

Two tables, created on first use: ``ai_utils_loop_runs`` (one row per run) and ``ai_utils_loop_messages`` (steers
and follow-ups). Every read-check-write (claim, enqueue, complete) runs in one write transaction that locks the run
row first (SQLite: ``BEGIN IMMEDIATE``; Postgres: ``SELECT ... FOR UPDATE``), so processes sharing a store agree.

Stores connect lazily: the first call opens the connection and creates the tables, so an unreachable store
fails the first `LoopRunner.invoke` that needs it, before any step runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from ai_utils.exceptions import LoopError, UserError
from ai_utils.loops._store import COLUMNS, TERMINAL, LoopRun, LoopRunStore, RunState, SteerKind, _utc, from_row

__all__ = ["SqlLoopRuns", "SqliteLoopRuns", "postgres_loop_runs", "sqlite_loop_runs"]

_MAX_LIST = 10_000


class Cursor(Protocol):
    """What the SQL core needs of a DB-API cursor (``?`` placeholders)."""

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


_PUT = (
    f"INSERT INTO ai_utils_loop_runs ({COLUMNS}, sealed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, "
    "step_keys = excluded.step_keys, gate_ids = excluded.gate_ids, error = excluded.error"
)
_UPDATE = (
    "UPDATE ai_utils_loop_runs SET state = ?, updated_at = ?, step_keys = COALESCE(?, step_keys), "
    "gate_ids = ?, error = ?, sealed = CASE WHEN ? = 1 THEN 1 ELSE sealed END, "
    "decision = CASE WHEN ? = 1 THEN decision ELSE NULL END WHERE run_id = ?"
)


_COMPLETE = (
    "UPDATE ai_utils_loop_runs SET state = 'completed', sealed = 1, updated_at = ?, step_keys = ?, gate_ids = '[]', "
    "error = NULL, decision = NULL WHERE run_id = ?"
)


def _json_list(items: Sequence[str]) -> str:
    return json.dumps(list(items)) if items else "[]"


def _put_params(run: LoopRun) -> tuple[Any, ...]:
    return (
        run.run_id,
        run.thread_id,
        run.loop,
        run.state,
        run.created_at.timestamp(),
        run.updated_at.timestamp(),
        _json_list(run.step_keys),
        _json_list(run.gate_ids),
        run.gates_answered,
        run.error,
        1 if run.state in TERMINAL else 0,
    )


def _update_params(
    run_id: str, state: RunState, step_keys: Sequence[str] | None, gate_ids: Sequence[str], error: str | None
) -> tuple[Any, ...]:
    keys = None if step_keys is None else _json_list(step_keys)
    resuming = int(state in ("approval_approved", "resuming"))
    return (state, time.time(), keys, _json_list(gate_ids), error, int(state in TERMINAL), resuming, run_id)


class SqlLoopRuns(LoopRunStore):
    """The store's SQL, written once; a subclass gives the connection, the transactions and the DDL."""

    ddl: tuple[str, ...] = ()
    for_update = ""

    def _write(self) -> contextlib.AbstractContextManager[Cursor]:
        raise NotImplementedError

    def _read(self) -> contextlib.AbstractContextManager[Cursor]:
        raise NotImplementedError

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of one read statement."""
        with self._read() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def _execute_one(self, sql: str, params: Sequence[Any]) -> int:
        """One write statement in its own transaction; its row count."""
        with self._write() as cur:
            return int(cur.execute(sql, params).rowcount)

    def put(self, run: LoopRun) -> None:
        """Insert or replace ``run``."""
        self._execute_one(_PUT, _put_params(run))

    def update(
        self,
        run_id: str,
        *,
        state: RunState,
        step_keys: Sequence[str] | None = None,
        gate_ids: Sequence[str] = (),
        error: str | None = None,
    ) -> None:
        """Set a recorded run's state (a finished run is sealed)."""
        self._execute_one(_UPDATE, _update_params(run_id, state, step_keys, gate_ids, error))

    def _locked(self, cur: Cursor, run_id: str) -> tuple[LoopRun, bool] | None:
        cur.execute(f"SELECT {COLUMNS}, sealed FROM ai_utils_loop_runs WHERE run_id = ?{self.for_update}", (run_id,))
        row = cur.fetchone()
        return None if row is None else (from_row(row), bool(row[10]))

    def claim(self, run_id: str, gate_ids: Sequence[str], *, approve: bool, decision: str) -> LoopRun | None:
        """Atomically take the waiting gates ``gate_ids``."""
        with self._write() as cur:
            found = self._locked(cur, run_id)
            if found is None:
                return None
            run = found[0]
            if run.state != "awaiting_approval" or not set(gate_ids) <= set(run.gate_ids):
                return None
            left = [g for g in run.gate_ids if g not in gate_ids]
            state: RunState = "approval_approved" if approve else "resuming"
            now = time.time()
            cur.execute(
                "UPDATE ai_utils_loop_runs SET state = ?, gate_ids = ?, gates_answered = gates_answered + 1, "
                "updated_at = ?, decision = ? WHERE run_id = ?",
                (state, json.dumps(left), now, decision, run_id),
            )
        return replace(
            run, state=state, gate_ids=tuple(left), gates_answered=run.gates_answered + 1, updated_at=_utc(now)
        )

    def decision_of(self, run_id: str) -> str | None:
        """The claimed decision, if any."""
        rows = self._rows("SELECT decision FROM ai_utils_loop_runs WHERE run_id = ?", (run_id,))
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def get(self, run_id: str) -> LoopRun | None:
        """The run, or ``None``."""
        rows = self._rows(f"SELECT {COLUMNS} FROM ai_utils_loop_runs WHERE run_id = ?", (run_id,))
        return from_row(rows[0]) if rows else None

    def runs(
        self,
        *,
        loop: str | None = None,
        state: RunState | None = None,
        thread_id: str | None = None,
        limit: int = 100,
    ) -> list[LoopRun]:
        """Runs, newest first."""
        where, params = [], []
        for column, value in (("loop", loop), ("state", state), ("thread_id", thread_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._rows(
            f"SELECT {COLUMNS} FROM ai_utils_loop_runs{clause} ORDER BY created_at DESC, run_id LIMIT ?",
            (*params, min(limit, _MAX_LIST)),
        )
        return [from_row(row) for row in rows]

    def enqueue(self, run_id: str, kind: SteerKind, text: str) -> int | None:
        """Queue a message for a run that is not sealed."""
        with self._write() as cur:
            found = self._locked(cur, run_id)
            if found is None or found[1] or found[0].state in TERMINAL:
                return None
            cur.execute(
                "INSERT INTO ai_utils_loop_messages (run_id, kind, text, created_at) VALUES (?, ?, ?, ?) RETURNING seq",
                (run_id, kind, text, time.time()),
            )
            return int(cur.fetchone()[0])

    def messages(self, run_id: str, *, after: int) -> list[tuple[int, str]]:
        """Queued steers above ``after``."""
        rows = self._rows(
            "SELECT seq, text FROM ai_utils_loop_messages WHERE run_id = ? AND kind = 'steer' AND seq > ? ORDER BY seq",
            (run_id, after),
        )
        return [(int(seq), str(text)) for seq, text in rows]

    def complete(
        self, run_id: str, *, steer_after: int, follow_after: int, step_keys: Sequence[str]
    ) -> list[tuple[int, SteerKind, str]]:
        """Take what is still queued, or seal and complete."""
        with self._write() as cur:
            self._locked(cur, run_id)
            pending = self._pending(cur, run_id, steer_after, follow_after)
            if not pending:
                cur.execute(_COMPLETE, (time.time(), json.dumps(list(step_keys)), run_id))
            return pending

    @staticmethod
    def _pending(cur: Cursor, run_id: str, steer_after: int, follow_after: int) -> list[tuple[int, SteerKind, str]]:
        cur.execute(
            "SELECT seq, kind, text FROM ai_utils_loop_messages WHERE run_id = ? AND "
            "((kind = 'steer' AND seq > ?) OR (kind = 'follow_up' AND seq > ?)) ORDER BY seq",
            (run_id, steer_after, follow_after),
        )
        return [(int(seq), kind, str(text)) for seq, kind, text in cur.fetchall()]


_SQLITE_DDL = (
    "CREATE TABLE IF NOT EXISTS ai_utils_loop_runs (run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, "
    "loop TEXT NOT NULL, state TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL, "
    "step_keys TEXT NOT NULL DEFAULT '[]', gate_ids TEXT NOT NULL DEFAULT '[]', gates_answered INTEGER NOT NULL "
    "DEFAULT 0, error TEXT, sealed INTEGER NOT NULL DEFAULT 0, decision TEXT)",
    "CREATE INDEX IF NOT EXISTS ai_utils_loop_runs_by_loop ON ai_utils_loop_runs (loop, state, created_at)",
    "CREATE INDEX IF NOT EXISTS ai_utils_loop_runs_by_thread ON ai_utils_loop_runs (thread_id, created_at)",
    "CREATE TABLE IF NOT EXISTS ai_utils_loop_messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, "
    "kind TEXT NOT NULL, text TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS ai_utils_loop_messages_by_run ON ai_utils_loop_messages (run_id, seq)",
)


class SqliteLoopRuns(SqlLoopRuns):
    """Runs in a SQLite file (see `sqlite_loop_runs`)."""

    kind = "sqlite"
    ddl = _SQLITE_DDL
    # SQLite answers these in microseconds (WAL readers never wait; a writer may wait briefly for another
    # process's write lock): run inline, as the session store's calls do on its worker loop. A claim may wait
    # behind BEGIN IMMEDIATE and a listing may be long: those go to a worker thread.
    _inline = frozenset({"put", "update", "get", "complete"})

    def __init__(self, path: str, *, timeout: float = 30.0) -> None:
        self.path = path
        self._timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        try:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: we open every write transaction ourselves (BEGIN IMMEDIATE).
            conn = sqlite3.connect(self.path, check_same_thread=False, timeout=self._timeout, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("BEGIN IMMEDIATE")
                for statement in self.ddl:
                    conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                conn.close()
                raise
        except (sqlite3.Error, OSError) as error:
            raise self._unreachable(error) from error
        self._conn = conn
        return conn

    def _unreachable(self, error: BaseException) -> LoopError:
        return LoopError(
            f"The loop run store sqlite_loop_runs({self.path!r}) is unreachable ({type(error).__name__}: {error}). "
            "Check the path and its permissions."
        )

    @contextlib.contextmanager
    def _write(self) -> Iterator[Cursor]:
        with self._lock:
            conn = self._connection()
            try:
                cur = conn.cursor()
                cur.execute("BEGIN IMMEDIATE")
                try:
                    yield cur
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                finally:
                    cur.close()
            except sqlite3.Error as error:
                raise self._unreachable(error) from error

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of one read statement (no cursor of our own: a read is a few microseconds)."""
        with self._lock:
            conn = self._connection()
            try:
                return conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.Error as error:
                raise self._unreachable(error) from error

    def _execute_one(self, sql: str, params: Sequence[Any]) -> int:
        """One write statement in autocommit (SQLite makes a single statement atomic); its row count."""
        with self._lock:
            conn = self._connection()
            try:
                return conn.execute(sql, tuple(params)).rowcount
            except sqlite3.Error as error:
                raise self._unreachable(error) from error

    def complete(
        self, run_id: str, *, steer_after: int, follow_after: int, step_keys: Sequence[str]
    ) -> list[tuple[int, SteerKind, str]]:
        """Seal and complete in one statement unless messages are queued (SQLite runs it under its write lock)."""
        done = self._execute_one(
            _COMPLETE + " AND NOT EXISTS (SELECT 1 FROM ai_utils_loop_messages WHERE run_id = ? AND "
            "((kind = 'steer' AND seq > ?) OR (kind = 'follow_up' AND seq > ?)))",
            (time.time(), json.dumps(list(step_keys)), run_id, run_id, steer_after, follow_after),
        )
        if done:
            return []
        return super().complete(run_id, steer_after=steer_after, follow_after=follow_after, step_keys=step_keys)

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __repr__(self) -> str:
        return f"sqlite_loop_runs({self.path!r})"


def sqlite_loop_runs(path: str | os.PathLike[str]) -> LoopRunStore:
    """A run store in a SQLite file that every process on this machine may share.

    Example:
        ```python
        runner = LoopRunner(loop, llm=llm, tools=tools, checkpointer=sqlite_saver("loops.db"),
                            run_store=sqlite_loop_runs("loop-runs.db"))
        runner.runs(state="awaiting_approval")   # from any process
        ```

    The file is opened (and its tables created) on first use, so a path that cannot be opened fails the first
    `LoopRunner.invoke` before any step runs.

    Args:
        path: the database file (parent folders are created); it may be the checkpointer's file.

    Raises:
        UserError: ``path`` is not a file path.
    """
    if isinstance(path, bool) or not isinstance(path, str | os.PathLike):
        raise UserError(f"sqlite_loop_runs(path) needs a file path, got {path!r}. Pass e.g. 'loop-runs.db'.")
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip() or text == ":memory:":
        raise UserError(
            f"sqlite_loop_runs(path) needs a file path, got {text!r}; for a store in memory use memory_loop_runs()."
        )
    return SqliteLoopRuns(text)


def postgres_loop_runs(conn: Any, *, timeout: float = 10.0) -> LoopRunStore:
    """A run store in Postgres that processes on any number of machines share (extra ``postgres``).

    Its tables are created on first use; an unreachable server fails the first `LoopRunner.invoke` that needs the
    store, before any step runs.

    Args:
        conn: a libpq connection string (never shown in errors; a pool of up to 4 connections is opened on first
            use), or your own psycopg ``Connection`` (autocommit; used under a lock) or ``ConnectionPool``.
        timeout: seconds to wait for a connection before the store counts as unreachable.

    Raises:
        UserError: ``conn`` is not one of those, the string cannot be parsed, or a bad ``timeout``.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
        raise UserError(f"postgres_loop_runs(timeout=...) must be seconds in (0, 600], got {timeout!r}.")
    from ai_utils.loops._store_postgres import PostgresLoopRuns

    return PostgresLoopRuns(conn, timeout=float(timeout))
