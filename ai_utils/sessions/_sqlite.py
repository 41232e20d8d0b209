"""``sqlite_sessions`` / ``memory_sessions``: sessions, turn log, steering and checkpoints in one SQLite file.

The store's tables live in the checkpointer's own database and connection (`SqliteCheckpointSaver`, one
connection and one lock), so a checkpoint write can be fenced in the same transaction: ``BEGIN
IMMEDIATE`` (SQLite's write lock, which a takeover in another process must wait for), check the lease
token, write, commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

from ai_utils.exceptions import UserError
from ai_utils.memory.sqlite import SqliteCheckpointSaver
from ai_utils.sessions._fence import FENCE, FencedWrites, check_fence
from ai_utils.sessions._schema import Cursor, SaverDb
from ai_utils.sessions._store import SessionStore, lease_seconds_of

__all__ = ["memory_sessions", "sqlite_sessions"]


@contextlib.contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Cursor]:
    """A write transaction that takes SQLite's write lock at once: committed on success, else rolled back."""
    cur = conn.cursor()
    try:
        cur.execute("BEGIN IMMEDIATE")
        yield cur
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        cur.close()


class _FencedSqliteSaver(FencedWrites, SqliteCheckpointSaver):
    """`SqliteCheckpointSaver` whose writes for a leased session check the lease in the same transaction."""

    # On the store's own worker loop the sync methods run inline: SQLite answers in microseconds, and a thread
    # hop per checkpoint would cost more than the write (other loops still go through worker threads).
    engine_loops: Any = ()

    def _runs_inline(self) -> bool:
        try:
            return asyncio.get_running_loop() in self.engine_loops
        except RuntimeError:
            return False

    @contextlib.contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """SqliteSaver's cursor; inside a fenced write it opens the transaction with the lease check."""
        fence = FENCE.get()
        if fence is None or not transaction:
            with super().cursor(transaction) as cur:
                yield cur
            return
        with self.lock:
            self.setup()
            with _immediate(self.conn) as cur:
                cur.execute("SELECT lease_token FROM ai_utils_sessions WHERE session_id = ?", (fence[0],))
                row = cur.fetchone()
                check_fence(fence, None if row is None else row[0])
                yield cur


class _SqliteDb(SaverDb[_FencedSqliteSaver]):
    """The store's `Db` on the saver's connection and lock."""

    @contextlib.contextmanager
    def write(self) -> Iterator[Cursor]:
        with self.saver.lock, _immediate(self.saver.conn) as cur:
            yield cur

    @contextlib.contextmanager
    def read(self) -> Iterator[Cursor]:
        with self.saver.lock:
            cur = self.saver.conn.cursor()
            try:
                yield cur
            finally:
                cur.close()


class SqliteSessions(SessionStore):
    """Durable sessions in one SQLite file (see `sqlite_sessions`)."""

    def close(self) -> None:
        """Stop this worker's background runner and close the database."""
        if self._engine is not None:
            self._engine.close()
        self.checkpointer.close()


def _open(path: str | os.PathLike[str], lease_seconds: float, kind: str) -> SqliteSessions:
    lease_seconds_of(lease_seconds)  # before the file is opened
    saver = _FencedSqliteSaver(path)
    store = SqliteSessions(_SqliteDb(saver), saver, lease_seconds=lease_seconds, kind=kind, poll_seconds=0.05)
    saver.leases = store.leases
    saver.engine_loops = store.engine.loops
    return store


def sqlite_sessions(path: str | os.PathLike[str], *, lease_seconds: float = 30.0) -> SqliteSessions:
    """Durable sessions in one SQLite file: sessions, the turn log, steering AND the LangGraph checkpoints.

    Any number of processes on this machine may share the file; each is a worker that runs the sessions it
    gets work for, one turn at a time per session (a lease of ``lease_seconds``, renewed while it runs).

    Example:
        ```python
        store = sqlite_sessions("data/sessions.sqlite")
        agent = Agent(llm=llm, tools=[durable_tool(lookup, idempotent=True)], sessions=store, name="support")
        turn = agent.session().prompt("Hi!")
        print(turn.result().output)
        ```

    Args:
        path: the database file (parent folders are created).
        lease_seconds: how long a worker's claim on a session lasts without renewal; after a crash another
            worker continues the session's turn this long after the last renewal.

    Raises:
        UserError: for a bad path or ``lease_seconds``, or a file that is not a SQLite database.
    """
    if str(path) == ":memory:":
        raise UserError("sqlite_sessions(':memory:') keeps nothing; use memory_sessions() for that.")
    return _open(path, lease_seconds, "sqlite")


def memory_sessions(*, lease_seconds: float = 30.0) -> SqliteSessions:
    """Sessions in this process's memory (tests, demos): the same semantics, nothing outlives the process.

    Args:
        lease_seconds: as for `sqlite_sessions`.
    """
    return _open(":memory:", lease_seconds, "memory")
