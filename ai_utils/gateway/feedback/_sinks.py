"""Where feedback goes: the `FeedbackSink` protocol, `NoopFeedbackSink`, `MemoryFeedbackSink`, `SqliteFeedbackSink`."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from dataclasses import replace
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from ai_utils.gateway.audit import sql_table_name
from ai_utils.gateway.feedback._validation import FeedbackEntry

__all__ = ["FeedbackSink", "MemoryFeedbackSink", "NoopFeedbackSink", "SqliteFeedbackSink", "stamped"]


@runtime_checkable
class FeedbackSink(Protocol):
    """Where feedback goes: ``write(entry)``, optionally ``async awrite(entry)``."""

    def write(self, entry: FeedbackEntry) -> None:
        """Store one entry.

        Args:
            entry: the entry.
        """


def stamped(entry: FeedbackEntry) -> FeedbackEntry:
    """The entry, with the server time as ``created_at`` when it has none."""
    return entry if entry.created_at else replace(entry, created_at=datetime.now(UTC).isoformat())


class NoopFeedbackSink:
    """Validate and discard (persistence happens elsewhere)."""

    def write(self, entry: FeedbackEntry) -> None:
        """Discard the entry.

        Args:
            entry: the entry.
        """


class MemoryFeedbackSink:
    """Keep entries in ``.entries`` (tests)."""

    def __init__(self) -> None:
        self.entries: list[FeedbackEntry] = []

    def write(self, entry: FeedbackEntry) -> None:
        """Append the entry, stamped with the server time if it has none.

        Args:
            entry: the entry.
        """
        self.entries.append(stamped(entry))


class SqliteFeedbackSink:
    """Store feedback in SQLite (WAL); use the audit database file to join rows on ``request_id``.

    Args:
        path: the database file or ``":memory:"``.
        table: the table name.
    """

    def __init__(self, path: str | os.PathLike[str], *, table: str = "llm_feedback") -> None:
        table = sql_table_name(table, what="Feedback", default="llm_feedback")
        self.table = table
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            f'CREATE TABLE IF NOT EXISTS "{table}" (id INTEGER PRIMARY KEY, request_id TEXT NOT NULL,'
            " user_id TEXT NOT NULL, score INTEGER NOT NULL, tenant_id TEXT, comment TEXT, tags TEXT,"
            " metadata TEXT, created_at TEXT NOT NULL)"
        )
        self._conn.execute(f'CREATE INDEX IF NOT EXISTS "{table}_request_idx" ON "{table}" (request_id)')

    def write(self, entry: FeedbackEntry) -> None:
        """Insert the entry.

        Args:
            entry: the entry.
        """
        entry = stamped(entry)
        values = (
            entry.request_id,
            entry.user_id,
            entry.score,
            entry.tenant_id,
            entry.comment,
            json.dumps(entry.tags),
            json.dumps(entry.metadata, default=str),
            entry.created_at,
        )
        with self._lock:
            self._conn.execute(
                f'INSERT INTO "{self.table}" (request_id, user_id, score, tenant_id, comment, tags, metadata,'
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            )

    def read(self, *, request_id: str | None = None) -> list[FeedbackEntry]:
        """Read stored entries.

        Args:
            request_id: only feedback about this request.

        Returns:
            The entries, oldest first.
        """
        query = f'SELECT request_id, user_id, score, tenant_id, comment, tags, metadata, created_at FROM "{self.table}"'
        params: tuple[str, ...] = ()
        if request_id is not None:
            query, params = query + " WHERE request_id = ?", (request_id,)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY id", params).fetchall()
        return [
            FeedbackEntry(
                request_id=r[0],
                user_id=r[1],
                score=r[2],
                tenant_id=r[3],
                comment=r[4],
                tags=json.loads(r[5]),
                metadata=json.loads(r[6]),
                created_at=r[7],
            )
            for r in rows
        ]
