"""Audit rows and the sinks that store them.

A sink is any object with ``write(entry)``; it may add ``async awrite(entry)``. Sinks here: `NoopAuditSink`,
`MemoryAuditSink` (tests), `JsonlAuditSink`, `SqliteAuditSink` (embedded, durable) and, in
`ai_utils.gateway.supabase_audit`, `SupabaseAuditSink`.

With ``audit_mode="required"`` the gateway first writes a ``"pending"`` row for each call (before the provider is
called, so no token reaches anyone unless the sink works), then the final row with the same ``request_id``. The
sinks here complete the pending row in place (the JSONL sink appends the final line after it); a finished row is
never overwritten. A custom sink sees both writes.
"""

from __future__ import annotations

import json
import operator
import os
import re
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from ai_utils._json import fast_json

__all__ = [
    "AuditEntry",
    "AuditSink",
    "AuditStatus",
    "JsonlAuditSink",
    "MemoryAuditSink",
    "NoopAuditSink",
    "SqliteAuditSink",
]

AuditStatus = Literal["succeeded", "failed", "blocked", "pending"]
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def sql_table_name(table: object, *, what: str, default: str) -> str:
    """``table`` if it is a plain ASCII identifier (SQL is built with it, always quoted), else `UserError`.

    Args:
        table: the name to check.
        what: which table, for the message (``"Audit"``).
        default: the name to suggest.

    Returns:
        ``table``.
    """
    if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
        from ai_utils.exceptions import UserError

        raise UserError(
            f"{what} table name {table!r} is not a plain identifier (ASCII letters, digits, '_', at most 63). "
            f"Use e.g. {default!r}."
        )
    return table


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One model call, as stored by an audit sink.

    Args:
        request_id: the gateway request id (the LangChain run id of the model call).
        feature: the routed feature.
        provider: the route's provider.
        model: the route's model.
        status: ``"succeeded"``, ``"failed"`` or ``"blocked"`` (denied by policy; the provider was not called);
            ``"pending"`` only on the row required audit mode writes before the call (then completed).
        actor: the actor without secret-looking attributes, or ``None``.
        tenant_id: the actor's tenant.
        latency_ms: time from the call start to its end (0 for blocked calls).
        usage: token counts (``input_tokens``, ``output_tokens``, ``total_tokens``) when reported.
        tools_requested: names of the tools offered to the model.
        tools_used: names of the tools the model called.
        policy_decisions: every policy decision as ``{"rule", "allowed", "reason"}``.
        request_hash: `hash_canonical` of feature, model, messages and tools.
        request_summary: the messages, cut by `truncate_for_audit`.
        response_summary: the reply text (reasoning left out), cut by `truncate_for_audit`.
        error_type: `classify_llm_error` type for failed and blocked calls.
        error_message: the error text.
        parent_run_id: the enclosing LangChain run (e.g. the agent), if any.
        metadata: the call's metadata.
        created_at: when the row was made (the gateway clock).
    """

    request_id: str
    feature: str
    provider: str
    model: str
    status: AuditStatus
    created_at: datetime
    actor: dict[str, Any] | None = None
    tenant_id: str | None = None
    latency_ms: float = 0.0
    usage: dict[str, Any] | None = None
    tools_requested: list[str] = field(default_factory=list)
    tools_used: list[str] = field(default_factory=list)
    policy_decisions: list[dict[str, Any]] = field(default_factory=list)
    request_hash: str | None = None
    request_summary: str | None = None
    response_summary: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    parent_run_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the row as a JSON-ready dict (``created_at`` as ISO 8601).

        Returns:
            Every field by name.
        """
        row = {f.name: getattr(self, f.name) for f in fields(self)}
        row["created_at"] = self.created_at.isoformat()
        return row


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(AuditEntry))
_JSON_FIELDS = frozenset({"actor", "usage", "tools_requested", "tools_used", "policy_decisions", "metadata"})
# ``json.dumps(value, default=str, ensure_ascii=False)`` (dates as ``str``), six fields per row on the call's path.
_to_json = fast_json(json.JSONEncoder(default=str, ensure_ascii=False).encode, default=str, dates_via_default=True)


@runtime_checkable
class AuditSink(Protocol):
    """Where audit rows go. Raise on failure: the gateway reports it (and fails the call in required mode)."""

    def write(self, entry: AuditEntry) -> None:
        """Store one row.

        Args:
            entry: the row.
        """


class NoopAuditSink:
    """Drop every row (the default; use it when rows are persisted elsewhere)."""

    def write(self, entry: AuditEntry) -> None:
        """Discard the row.

        Args:
            entry: the row.
        """

    async def awrite(self, entry: AuditEntry) -> None:
        """Discard the row.

        Args:
            entry: the row.
        """


class MemoryAuditSink:
    """Keep rows in memory, in write order, for tests (``.entries``).

    Rows are kept as written: `AuditEntry` objects from the gateway, or mappings a test writes itself
    (``sink.write({"request_id": ..., "status": ...})``).
    """

    def __init__(self) -> None:
        self.entries: list[Any] = []
        self._pending: dict[Any, int] = {}

    def write(self, entry: AuditEntry | Mapping[str, Any]) -> None:
        """Append the row to ``entries`` (the final row of a pending one takes its place).

        Args:
            entry: the row: an `AuditEntry`, or a mapping with the same keys (``request_id`` and ``status``
                decide whether it completes a pending row; without them it is simply appended).
        """
        request_id: Any
        status: Any
        if type(entry) is AuditEntry or not isinstance(entry, Mapping):  # the exact type first: no ABC check
            request_id, status = entry.request_id, entry.status
        else:
            request_id, status = entry.get("request_id"), entry.get("status")
        index = self._pending.pop(request_id, None) if request_id is not None else None
        if index is not None:
            self.entries[index] = entry
            if status == "pending":
                self._pending[request_id] = index
            return
        if status == "pending" and request_id is not None:
            self._pending[request_id] = len(self.entries)
        self.entries.append(entry)

    async def awrite(self, entry: AuditEntry | Mapping[str, Any]) -> None:
        """Async `write`.

        Args:
            entry: the row.
        """
        self.write(entry)


class JsonlAuditSink:
    """Append rows as JSON lines to a file (created with its parent directories).

    In required audit mode a call has two lines: its ``pending`` row, later its final row (same ``request_id``).

    Args:
        path: the file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, entry: AuditEntry) -> None:
        """Append the row as one line.

        Args:
            entry: the row.
        """
        line = json.dumps(entry.to_dict(), ensure_ascii=False, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)

    def read(self) -> list[dict[str, Any]]:
        """Read every stored row.

        Returns:
            The rows as dicts, oldest first.
        """
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]


def _sql_values(entry: AuditEntry) -> list[Any]:
    values = list(_field_values(entry))
    for index in _JSON_INDEXES:
        values[index] = _to_json(values[index])
    values[_CREATED_AT] = entry.created_at.isoformat()
    return values


_field_values = operator.attrgetter(*FIELD_NAMES)  # every field, in order, in one C call
_JSON_INDEXES = tuple(i for i, name in enumerate(FIELD_NAMES) if name in _JSON_FIELDS)
_CREATED_AT = FIELD_NAMES.index("created_at")


class SqliteAuditSink:
    """Store rows in a SQLite table (WAL mode): the embedded durable sink.

    JSON-valued fields (``actor``, ``usage``, ``tools_*``, ``policy_decisions``, ``metadata``) are stored as JSON
    text. One connection is shared by all threads behind a lock.

    Args:
        path: the database file (created if missing) or ``":memory:"``.
        table: the table name (a plain identifier).
    """

    def __init__(self, path: str | os.PathLike[str], *, table: str = "llm_audit_log") -> None:
        self.table = sql_table_name(table, what="Audit", default="llm_audit_log")
        self.path = str(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        columns = ", ".join(
            f"{name} TEXT PRIMARY KEY"
            if name == "request_id"
            else f"{name} {'REAL' if name == 'latency_ms' else 'TEXT'}"
            for name in FIELD_NAMES
        )
        self._conn.execute(f'CREATE TABLE IF NOT EXISTS "{table}" ({columns})')
        names, marks = ", ".join(FIELD_NAMES), ", ".join("?" * len(FIELD_NAMES))
        self._insert = f'INSERT INTO "{table}" ({names}) VALUES ({marks})'
        assignments = ", ".join(f"{name} = ?" for name in FIELD_NAMES)
        self._pending: set[str] = set()  # request ids whose pending row this sink wrote
        self._complete = f"UPDATE \"{table}\" SET {assignments} WHERE request_id = ? AND status = 'pending'"
        # One cursor for every write (under the lock): ``Connection.execute`` would make a new one per row.
        self._cursor = self._conn.cursor()

    def write(self, entry: AuditEntry) -> None:
        """Insert the row, or complete the pending row of the same ``request_id``.

        Args:
            entry: the row.
        """
        values = _sql_values(entry)
        with self._lock:
            if entry.status == "pending":
                self._pending.add(entry.request_id)
            elif entry.request_id in self._pending:
                self._cursor.execute(self._complete, [*values, entry.request_id])
                self._pending.discard(entry.request_id)
                return
            self._cursor.execute(self._insert, values)

    def read(self, *, request_id: str | None = None) -> list[dict[str, Any]]:
        """Read stored rows, JSON fields decoded.

        Args:
            request_id: only this request's row.

        Returns:
            The rows as dicts, in insertion order.
        """
        query = f'SELECT {", ".join(FIELD_NAMES)} FROM "{self.table}"'
        params: tuple[str, ...] = ()
        if request_id is not None:
            query += " WHERE request_id = ?"
            params = (request_id,)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY rowid", params).fetchall()
        return [
            {
                n: json.loads(v) if n in _JSON_FIELDS and v is not None else v
                for n, v in zip(FIELD_NAMES, row, strict=True)
            }
            for row in rows
        ]

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()
