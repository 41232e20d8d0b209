"""The store's tables, rows and JSON, and the `Db` protocol its dialects implement (SQLite, Postgres)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

from ai_utils._json import fast_json
from ai_utils.exceptions import UserError

__all__ = [
    "ADDED_COLUMNS",
    "MAX_CURSOR",
    "MAX_INSTRUCTIONS_BYTES",
    "MAX_STEERS",
    "MAX_STEER_BYTES",
    "SCHEMA",
    "JOINED_TURN_COLUMNS",
    "TURN_COLUMNS",
    "Cursor",
    "Db",
    "SaverDb",
    "SessionConfig",
    "TurnRow",
    "another_cursor",
    "commit_early",
    "check_cursor",
    "check_id",
    "dumps",
    "loads",
    "session_config",
    "shown",
    "turn_row",
]

SaverT = TypeVar("SaverT")

MAX_STEERS = 64
MAX_STEER_BYTES = 64 * 1024
# Matched with `fullmatch`: `$` would also accept a trailing newline ("abc\n").
_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
MAX_CURSOR = 2**63 - 1
MAX_INSTRUCTIONS_BYTES = 64 * 1024

dumps = fast_json(lambda value: json.dumps(value, ensure_ascii=False, default=str), default=str)
try:
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson comes with langsmith
    _fast_loads = None  # type: ignore[assignment]


loads: Any = json.loads if _fast_loads is None else _fast_loads
"""Parse a stored JSON value (orjson when installed)."""


SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ai_utils_sessions (
        session_id TEXT PRIMARY KEY, agent TEXT NOT NULL, created DOUBLE PRECISION NOT NULL,
        lease_owner TEXT, lease_token BIGINT NOT NULL DEFAULT 0, lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
        last_cursor BIGINT NOT NULL DEFAULT 0, next_seq BIGINT NOT NULL DEFAULT 0,
        cancel_seq BIGINT NOT NULL DEFAULT 0, model TEXT, instructions TEXT, fingerprint TEXT)""",
    """CREATE TABLE IF NOT EXISTS ai_utils_inputs (
        session_id TEXT NOT NULL, message_id TEXT NOT NULL, kind TEXT NOT NULL, turn_id TEXT,
        seq BIGINT NOT NULL, text TEXT, taken INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (session_id, message_id))""",
    """CREATE TABLE IF NOT EXISTS ai_utils_turns (
        turn_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, seq BIGINT NOT NULL, message_id TEXT NOT NULL,
        status TEXT NOT NULL, payload TEXT NOT NULL, start_len BIGINT, stop_reason TEXT, result TEXT,
        first_cursor BIGINT, rollback INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS ai_utils_turns_open ON ai_utils_turns (session_id, status, seq)",
    # Makes lease_token a key column in Postgres: a takeover conflicts with a checkpoint write's FOR KEY SHARE.
    "CREATE UNIQUE INDEX IF NOT EXISTS ai_utils_sessions_lease ON ai_utils_sessions (session_id, lease_token)",
    """CREATE TABLE IF NOT EXISTS ai_utils_log (
        session_id TEXT NOT NULL, cursor BIGINT NOT NULL, turn_id TEXT NOT NULL, line TEXT NOT NULL,
        PRIMARY KEY (session_id, cursor))""",
    """CREATE TABLE IF NOT EXISTS ai_utils_calls (
        session_id TEXT NOT NULL, execution_id TEXT NOT NULL, PRIMARY KEY (session_id, execution_id))""",
)

# Columns added after the first release: a store made by an older version gets them at setup.
ADDED_COLUMNS: dict[str, dict[str, str]] = {
    "ai_utils_sessions": {"model": "TEXT", "instructions": "TEXT", "fingerprint": "TEXT"},
    "ai_utils_turns": {"rollback": "INTEGER NOT NULL DEFAULT 0"},
}


class Cursor(Protocol):
    """The part of a DB-API cursor the store uses (``?`` placeholders; `Db` converts them)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    @property
    def rowcount(self) -> int: ...
    @property
    def description(self) -> Any: ...


def commit_early(cur: Cursor) -> None:
    """Queue write transaction ``cur``'s COMMIT before reading its last results.

    On Postgres they come back with the commit (one round trip); where results are there at once (SQLite) nothing
    happens and the block commits at its end. Only for a block that writes nothing after it and raises nothing that
    would need a rollback.
    """
    commit = getattr(cur, "commit_early", None)
    if commit is not None:
        commit()


def another_cursor(cur: Cursor) -> Cursor:
    """A second cursor in ``cur``'s transaction (its own results: two queries can be sent before reading either)."""
    another = getattr(cur, "another", None)
    if another is not None:
        return cast("Cursor", another())
    return cast("Cursor", cur.connection.cursor())  # type: ignore[attr-defined]  # a DB-API cursor (SQLite)


class Db(Protocol):
    """A connection (or pool) with the dialect's transaction and row-lock forms."""

    for_update: str
    """``" FOR UPDATE"`` where rows can be locked (Postgres); ``""`` where a write transaction locks all (SQLite)."""
    notify: str
    """Appended to an ``UPDATE ai_utils_sessions``: wakes followers in other processes when the transaction
    commits (Postgres ``NOTIFY``, in the same statement: no extra round trip); ``""`` where they poll (SQLite)."""
    notify_control: str
    """As `notify`, for a cancel or a prompt that interrupts: wakes the worker running the session's turn."""
    notify_ends: str
    """As `notify`, for the lines that end a turn: also wakes those waiting for the turn's result."""
    notify_steer: str
    """As `notify`, for a stored steer: the session's running turn looks for steers at its next model call."""
    fence_check: str
    """A statement on ``(session_id, lease_token)`` that locks the session row and fails (one of `fence_errors`)
    unless the token is the session's lease, so a write can check its lease without reading anything back; ``""``
    where the dialect reads the token instead (SQLite: no round trips to save)."""
    fence_errors: tuple[type[BaseException], ...]
    """What a failed `fence_check` raises."""
    claim_reads_holder: bool
    """Whether a claim that does not take the lease reads its holder in the same statement (Postgres: a
    data-modifying ``WITH``); else a second read follows a failed claim."""
    writes_with: bool
    """Whether one statement may carry other writes in a data-modifying ``WITH`` (Postgres): a turn's log lines and
    its status change ride on the statement that moves the session's cursor; else each is a statement of its own."""

    def write(self) -> contextlib.AbstractContextManager[Cursor]:
        """One write transaction: committed on success, rolled back on error."""
        ...

    def batch(self) -> contextlib.AbstractContextManager[Cursor]:
        """A write transaction whose block reads results only with ``fetchone``/``fetchall`` (never ``rowcount``).

        Postgres sends no ``BEGIN``/``COMMIT`` (the pipeline's implicit transaction, committed at its Sync); a block
        that raises closes the connection (the server rolls back).
        """
        ...

    def read(self) -> contextlib.AbstractContextManager[Cursor]:
        """A cursor for reads."""
        ...

    def setup(self, statements: Sequence[str]) -> None:
        """Create the tables (safe when several processes start at once)."""
        ...

    def keeper(self) -> contextlib.AbstractContextManager[Cursor]:
        """A write transaction for lease renewals, on a connection no other work can keep busy."""
        ...


class SaverDb(Generic[SaverT]):
    """A `Db` on a checkpoint saver's own connection or pool, so store and checkpoints share transactions.

    A dialect sets ``for_update`` and implements ``write`` / ``read``; `setup` runs the statements in one
    write transaction, after `lock_setup` (where the write transaction alone does not keep concurrent
    setups apart).
    """

    for_update: str = ""
    notify: str = ""
    notify_control: str = ""
    notify_ends: str = ""
    notify_steer: str = ""
    fence_check: str = ""
    fence_errors: tuple[type[BaseException], ...] = ()
    claim_reads_holder: bool = False
    writes_with: bool = False

    def __init__(self, saver: SaverT) -> None:
        self.saver = saver

    def write(self) -> contextlib.AbstractContextManager[Cursor]:
        """One write transaction: committed on success, rolled back on error."""
        raise NotImplementedError

    def read(self) -> contextlib.AbstractContextManager[Cursor]:
        """A cursor for reads."""
        raise NotImplementedError

    def keeper(self) -> contextlib.AbstractContextManager[Cursor]:
        """A write transaction for lease renewals (by default an ordinary one)."""
        return self.write()

    def batch(self) -> contextlib.AbstractContextManager[Cursor]:
        """A write transaction for a block that never reads ``rowcount`` (by default an ordinary one)."""
        return self.write()

    def lock_setup(self, cur: Cursor) -> None:
        """Keep another process's `setup` out until this transaction ends (nothing to do by default)."""

    def setup(self, statements: Sequence[str]) -> None:
        """Create the tables (safe when several processes start at once), adding columns an older version lacked."""
        with self.write() as cur:
            self.lock_setup(cur)
            for statement in statements:
                cur.execute(statement)
            for table, columns in ADDED_COLUMNS.items():
                cur.execute(f"SELECT * FROM {table} LIMIT 0")
                have = {str(d[0]) for d in cur.description}
                for name, decl in columns.items():
                    if name not in have:
                        cur.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")


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
    rollback: bool = False
    config: SessionConfig | None = None
    steers: bool | None = None
    """Whether the session had a steer waiting when the turn was read (``None``: not read)."""


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """What a session keeps besides its turns: its model and instructions, and what its last turn ran with."""

    model: str | None = None
    instructions: str | None = None
    fingerprint: dict[str, Any] | None = None


TURN_COLUMNS = (
    "turn_id, session_id, seq, message_id, status, payload, start_len, stop_reason, result, first_cursor, rollback"
)
# The same columns qualified with ``t.`` (a turn joined with its session).
JOINED_TURN_COLUMNS = ", ".join(f"t.{c.strip()}" for c in TURN_COLUMNS.split(","))


def turn_row(row: Sequence[Any], config: SessionConfig | None = None) -> TurnRow:
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
        rollback=bool(row[10]),
        config=config,
    )


def session_config(model: Any, instructions: Any, fingerprint: Any) -> SessionConfig:
    """A `SessionConfig` from the three stored columns."""
    return SessionConfig(model, instructions, None if fingerprint is None else loads(fingerprint))


_SHOWN = 60


def shown(value: Any) -> str:
    """``repr(value)`` cut to a few dozen characters, for an error message about a value from outside.

    Bounded (a 1 MB id is not echoed back), and never raising: ``repr`` of an int past 4,300 digits raises
    `ValueError` (Python's int-to-str limit), so a huge int is described by its size instead.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    try:
        text = repr(value)
    except Exception:  # a caller's object whose __repr__ fails: the error is about the value, not its repr
        return f"a {type(value).__name__}"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def check_id(value: Any, what: str) -> str:
    """``value`` if it is a valid id (1-128 letters, digits, ``.``, ``_``, ``-``), else `UserError`."""
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise UserError(
            f"{what} {shown(value)} is not valid: use 1-128 letters, digits, '.', '_' or '-' (e.g. 'order-42'), "
            f"or leave it out to get a generated one."
        )
    return value


def check_cursor(value: Any, what: str) -> int:
    """``value`` if it is a cursor (an int from 0 to 2**63 - 1; past the end replays nothing), else `UserError`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_CURSOR:
        raise UserError(
            f"{what} needs a cursor: an int from 0 to 2**63 - 1 (the last cursor you read, 0 for the start), "
            f"got {shown(value)}. Pass the `cursor` of the last line you received."
        )
    return value
