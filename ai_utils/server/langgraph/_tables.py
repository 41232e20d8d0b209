"""Threads and runs of the LangGraph API, in the session store's own database (any process reads them).

A thread is a durable session; its row here holds what the session does not: the actor that owns it (every
read is filtered by it, another actor's thread is a 404), the assistant it runs (set by its first run: a
session belongs to one agent), and its metadata. A run is a turn of the session; its row holds the
assistant, metadata and stream options it was created with, while its status is the turn's own.

The tables are created on first use beside the store's tables, like the session owners of
``session_routes``. The few reads of the store's own tables the API needs and the store has no method for
(a thread's turns; cancelling runs up to one of them) are here too, over its ``db``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ai_utils.sessions._schema import loads

__all__ = ["RunRow", "Tables", "ThreadRow", "TurnInfo"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ai_utils_lg_threads (
        thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL, assistant TEXT, metadata TEXT NOT NULL,
        created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS ai_utils_lg_threads_owner ON ai_utils_lg_threads (owner, updated)",
    """CREATE TABLE IF NOT EXISTS ai_utils_lg_runs (
        run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, assistant TEXT NOT NULL, metadata TEXT NOT NULL,
        options TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS ai_utils_lg_runs_thread ON ai_utils_lg_runs (thread_id, created)",
)
_THREAD = "thread_id, owner, assistant, metadata, created, updated"
_RUN = "run_id, thread_id, assistant, metadata, options, created"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class ThreadRow:
    """One thread: its owner key, its assistant (``None`` before its first run) and metadata."""

    thread_id: str
    owner: str
    assistant: str | None
    metadata: dict[str, Any]
    created: float
    updated: float


@dataclass(frozen=True, slots=True)
class RunRow:
    """What a run was created with (its status is its turn's)."""

    run_id: str
    thread_id: str
    assistant: str
    metadata: dict[str, Any]
    options: dict[str, Any]
    created: float


@dataclass(frozen=True, slots=True)
class TurnInfo:
    """One turn of a session, as the API lists them."""

    turn_id: str
    message_id: str
    seq: int
    status: str
    stop_reason: str | None
    first_cursor: int | None


def _thread(row: Any) -> ThreadRow:
    return ThreadRow(str(row[0]), str(row[1]), row[2], loads(row[3]), float(row[4]), float(row[5]))


def _run(row: Any) -> RunRow:
    return RunRow(str(row[0]), str(row[1]), str(row[2]), loads(row[3]), loads(row[4]), float(row[5]))


class Tables:
    """The thread and run rows of one session store.

    Args:
        store: the `SessionStore` (its ``db`` is the connection or pool the rows live in).
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self.db = store.db
        self._ready = False

    def setup(self) -> None:
        """Create the tables (once per process; safe when several start at once)."""
        if not self._ready:
            self.db.setup(_SCHEMA)
            self._ready = True

    # --- threads -----------------------------------------------------------------------------------------

    def create_thread(self, thread_id: str, owner: str, metadata: Mapping[str, Any]) -> tuple[ThreadRow | None, bool]:
        """Create a thread for ``owner``: ``(row, created)``; ``(None, False)`` when the id is someone else's.

        An id that names a session made outside this API (in code, or by ``session_routes``) is nobody's
        here: it cannot be taken over.
        """
        self.setup()
        now = time.time()
        with self.db.write() as cur:
            cur.execute("SELECT 1 FROM ai_utils_sessions WHERE session_id = ?", (thread_id,))
            session_exists = cur.fetchone() is not None
            cur.execute(f"SELECT {_THREAD} FROM ai_utils_lg_threads WHERE thread_id = ?", (thread_id,))
            found = cur.fetchone()
            if found is not None:
                row = _thread(found)
                return (row, False) if row.owner == owner else (None, False)
            if session_exists:
                return None, False
            cur.execute(
                f"INSERT INTO ai_utils_lg_threads ({_THREAD}) VALUES (?, ?, NULL, ?, ?, ?) ON CONFLICT DO NOTHING",
                (thread_id, owner, _dumps(dict(metadata)), now, now),
            )
            inserted = cur.rowcount == 1
            cur.execute(f"SELECT {_THREAD} FROM ai_utils_lg_threads WHERE thread_id = ?", (thread_id,))
            row = _thread(cur.fetchone())
        if row.owner != owner:
            return None, False  # another actor created it in the same moment
        return row, inserted

    def thread(self, thread_id: str, owner: str) -> ThreadRow | None:
        """The thread, if ``owner`` owns it (unknown and another actor's look the same: ``None``)."""
        self.setup()
        with self.db.read() as cur:
            cur.execute(f"SELECT {_THREAD} FROM ai_utils_lg_threads WHERE thread_id = ?", (thread_id,))
            found = cur.fetchone()
        row = None if found is None else _thread(found)
        return row if row is not None and row.owner == owner else None

    def bind(self, thread_id: str, assistant: str) -> ThreadRow | None:
        """Give the thread its first run's assistant (stamped into its metadata); ``None`` if it has another."""
        with self.db.write() as cur:
            cur.execute(
                f"SELECT {_THREAD} FROM ai_utils_lg_threads WHERE thread_id = ?" + self.db.for_update, (thread_id,)
            )
            row = _thread(cur.fetchone())
            if row.assistant not in (None, assistant):
                return None
            if row.assistant is None:
                cur.execute("SELECT 1 FROM ai_utils_sessions WHERE session_id = ?", (thread_id,))
                if cur.fetchone() is not None:
                    return None  # a session of the same id was made elsewhere meanwhile: never run into it
            metadata = {**row.metadata, "graph_id": assistant, "assistant_id": assistant}
            now = time.time()
            cur.execute(
                "UPDATE ai_utils_lg_threads SET assistant = ?, metadata = ?, updated = ? WHERE thread_id = ?",
                (assistant, _dumps(metadata), now, thread_id),
            )
        return ThreadRow(row.thread_id, row.owner, assistant, metadata, row.created, now)

    def update_metadata(self, thread_id: str, metadata: Mapping[str, Any]) -> None:
        """Merge ``metadata`` into the thread's."""
        with self.db.write() as cur:
            cur.execute(
                "SELECT metadata FROM ai_utils_lg_threads WHERE thread_id = ?" + self.db.for_update, (thread_id,)
            )
            merged = {**loads(cur.fetchone()[0]), **metadata}
            cur.execute(
                "UPDATE ai_utils_lg_threads SET metadata = ?, updated = ? WHERE thread_id = ?",
                (_dumps(merged), time.time(), thread_id),
            )

    def threads(self, owner: str, limit: int, offset: int) -> list[ThreadRow]:
        """The owner's threads, most recently updated first."""
        self.setup()
        with self.db.read() as cur:
            cur.execute(
                f"SELECT {_THREAD} FROM ai_utils_lg_threads WHERE owner = ? ORDER BY updated DESC, thread_id "
                "LIMIT ? OFFSET ?",
                (owner, limit, offset),
            )
            return [_thread(r) for r in cur.fetchall()]

    # --- runs --------------------------------------------------------------------------------------------

    def add_run(self, run: RunRow) -> None:
        """Record a run (a repeated prompt is the same run: the first record stays)."""
        with self.db.write() as cur:
            cur.execute(
                f"INSERT INTO ai_utils_lg_runs ({_RUN}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (run.run_id, run.thread_id, run.assistant, _dumps(run.metadata), _dumps(run.options), run.created),
            )
            cur.execute("UPDATE ai_utils_lg_threads SET updated = ? WHERE thread_id = ?", (time.time(), run.thread_id))

    def run(self, run_id: str) -> RunRow | None:
        """A run's record."""
        self.setup()
        with self.db.read() as cur:
            cur.execute(f"SELECT {_RUN} FROM ai_utils_lg_runs WHERE run_id = ?", (run_id,))
            found = cur.fetchone()
        return None if found is None else _run(found)

    def runs(self, thread_id: str) -> dict[str, RunRow]:
        """The records of a thread's runs, by run id."""
        self.setup()
        with self.db.read() as cur:
            cur.execute(f"SELECT {_RUN} FROM ai_utils_lg_runs WHERE thread_id = ?", (thread_id,))
            return {row.run_id: row for row in map(_run, cur.fetchall())}

    # --- the session store's own tables ------------------------------------------------------------------

    def turns(self, session_id: str) -> list[TurnInfo]:
        """The session's turns, oldest first."""
        with self.db.read() as cur:
            cur.execute(
                "SELECT turn_id, message_id, seq, status, stop_reason, first_cursor FROM ai_utils_turns "
                "WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
            return [
                TurnInfo(str(r[0]), str(r[1]), int(r[2]), str(r[3]), r[4], None if r[5] is None else int(r[5]))
                for r in cur.fetchall()
            ]

    def cancel_through(self, session_id: str, seq: int) -> None:
        """Cancel the session's turns up to sequence number ``seq`` (the store's ``cancel`` cancels them all).

        A running turn hears it from its worker's lease renewal, in any process; a queued one ends
        ``cancelled`` when its turn comes.
        """
        with self.db.write() as cur:
            cur.execute(
                "UPDATE ai_utils_sessions SET cancel_seq = ? WHERE session_id = ? AND cancel_seq < ?",
                (seq, session_id, seq),
            )
