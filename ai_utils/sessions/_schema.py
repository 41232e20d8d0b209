"""The store's tables, rows and JSON, and the `Db` protocol its dialects implement (SQLite, Postgres)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ai_utils._json import fast_json
from ai_utils.exceptions import UserError

__all__ = [
    "MAX_STEERS",
    "MAX_STEER_BYTES",
    "SCHEMA",
    "TURN_COLUMNS",
    "Cursor",
    "Db",
    "SaverDb",
    "TurnRow",
    "check_id",
    "dumps",
    "loads",
    "turn_row",
]

SaverT = TypeVar("SaverT")

MAX_STEERS = 64
MAX_STEER_BYTES = 64 * 1024
_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")

dumps = fast_json(lambda value: json.dumps(value, ensure_ascii=False, default=str), default=str)
try:
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson comes with langsmith
    _fast_loads = None  # type: ignore[assignment]


def loads(text: str) -> Any:
    """Parse a stored JSON value (orjson when installed)."""
    return json.loads(text) if _fast_loads is None else _fast_loads(text)


SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ai_utils_sessions (
        session_id TEXT PRIMARY KEY, agent TEXT NOT NULL, created DOUBLE PRECISION NOT NULL,
        lease_owner TEXT, lease_token BIGINT NOT NULL DEFAULT 0, lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
        last_cursor BIGINT NOT NULL DEFAULT 0, next_seq BIGINT NOT NULL DEFAULT 0,
        cancel_seq BIGINT NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS ai_utils_inputs (
        session_id TEXT NOT NULL, message_id TEXT NOT NULL, kind TEXT NOT NULL, turn_id TEXT,
        seq BIGINT NOT NULL, text TEXT, taken INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (session_id, message_id))""",
    """CREATE TABLE IF NOT EXISTS ai_utils_turns (
        turn_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, seq BIGINT NOT NULL, message_id TEXT NOT NULL,
        status TEXT NOT NULL, payload TEXT NOT NULL, start_len BIGINT, stop_reason TEXT, result TEXT,
        first_cursor BIGINT)""",
    "CREATE INDEX IF NOT EXISTS ai_utils_turns_open ON ai_utils_turns (session_id, status, seq)",
    """CREATE TABLE IF NOT EXISTS ai_utils_log (
        session_id TEXT NOT NULL, cursor BIGINT NOT NULL, turn_id TEXT NOT NULL, line TEXT NOT NULL,
        PRIMARY KEY (session_id, cursor))""",
    """CREATE TABLE IF NOT EXISTS ai_utils_calls (
        session_id TEXT NOT NULL, execution_id TEXT NOT NULL, PRIMARY KEY (session_id, execution_id))""",
)


class Cursor(Protocol):
    """The part of a DB-API cursor the store uses (``?`` placeholders; `Db` converts them)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    @property
    def rowcount(self) -> int: ...


class Db(Protocol):
    """A connection (or pool) with the dialect's transaction and row-lock forms."""

    for_update: str
    """``" FOR UPDATE"`` where rows can be locked (Postgres); ``""`` where a write transaction locks all (SQLite)."""

    def write(self) -> contextlib.AbstractContextManager[Cursor]:
        """One write transaction: committed on success, rolled back on error."""
        ...

    def read(self) -> contextlib.AbstractContextManager[Cursor]:
        """A cursor for reads."""
        ...

    def setup(self, statements: Sequence[str]) -> None:
        """Create the tables (safe when several processes start at once)."""
        ...


class SaverDb(Generic[SaverT]):
    """A `Db` on a checkpoint saver's own connection or pool, so store and checkpoints share transactions.

    A dialect sets ``for_update`` and implements ``write`` / ``read``; `setup` runs the statements in one
    write transaction, after `lock_setup` (where the write transaction alone does not keep concurrent
    setups apart).
    """

    for_update: str = ""

    def __init__(self, saver: SaverT) -> None:
        self.saver = saver

    def write(self) -> contextlib.AbstractContextManager[Cursor]:
        """One write transaction: committed on success, rolled back on error."""
        raise NotImplementedError

    def read(self) -> contextlib.AbstractContextManager[Cursor]:
        """A cursor for reads."""
        raise NotImplementedError

    def lock_setup(self, cur: Cursor) -> None:
        """Keep another process's `setup` out until this transaction ends (nothing to do by default)."""

    def setup(self, statements: Sequence[str]) -> None:
        """Create the tables (safe when several processes start at once)."""
        with self.write() as cur:
            self.lock_setup(cur)
            for statement in statements:
                cur.execute(statement)


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One stored turn."""

    turn_id: str
    session_id: str
    seq: int
    message_id: str
    status: str
    payload: dict[str, Any]
    start_len: int | None
    stop_reason: str | None
    result: dict[str, Any] | None
    first_cursor: int | None


TURN_COLUMNS = "turn_id, session_id, seq, message_id, status, payload, start_len, stop_reason, result, first_cursor"


def turn_row(row: Sequence[Any]) -> TurnRow:
    """A `TurnRow` from a ``SELECT TURN_COLUMNS`` row."""
    return TurnRow(
        turn_id=row[0],
        session_id=row[1],
        seq=int(row[2]),
        message_id=row[3],
        status=row[4],
        payload=loads(row[5]),
        start_len=None if row[6] is None else int(row[6]),
        stop_reason=row[7],
        result=None if row[8] is None else loads(row[8]),
        first_cursor=None if row[9] is None else int(row[9]),
    )


def check_id(value: Any, what: str) -> str:
    """``value`` if it is a valid id (1-128 letters, digits, ``.``, ``_``, ``-``), else `UserError`."""
    if not isinstance(value, str) or not _ID.match(value):
        raise UserError(
            f"{what} {value!r} is not valid: use 1-128 letters, digits, '.', '_' or '-' (e.g. 'order-42'), "
            f"or leave it out to get a generated one."
        )
    return value
