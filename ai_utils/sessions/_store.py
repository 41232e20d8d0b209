"""The session store: sessions, their turns, the stream log and the tool-call journal (inputs: `_inputs.py`).

One SQL implementation for SQLite (``sqlite_sessions`` / ``memory_sessions``) and Postgres
(``postgres_sessions``); a `Db` hides the connection and the few dialect differences. Every write a
running turn makes is *fenced*: it runs in one transaction that first checks this process still holds
the session's lease token (`SessionFencedError` otherwise, and the transaction is rolled back), so a
replaced worker's writes never become visible. The checkpointer of the same store fences its checkpoint
writes the same way (see `_sqlite.py`, `_postgres.py`), reading the token from `leases` (`_leases.py`).
"""

from __future__ import annotations

import dataclasses
import math
import reprlib
from collections.abc import Callable, Sequence
from typing import Any

from ai_utils.exceptions import UserError
from ai_utils.sessions._holder import this_holder
from ai_utils.sessions._inputs import OPEN, Inputs
from ai_utils.sessions._leases import Held, returning
from ai_utils.sessions._schema import (
    JOINED_TURN_COLUMNS,
    SCHEMA,
    TURN_COLUMNS,
    Cursor,
    Db,
    TurnRow,
    another_cursor,
    commit_early,
    dumps,
    session_config,
    turn_row,
)

# Rows per INSERT statement of log lines (4 parameters each: well under SQLite's parameter limit).
_BATCH = 200

__all__ = ["SessionStore", "lease_seconds_of"]


def lease_seconds_of(value: object) -> float:
    """``lease_seconds`` as a float; `UserError` unless it is a positive, finite number (checked before connecting)."""
    lease = math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            lease = float(value)
        except OverflowError:  # an int past float range
            lease = math.inf
    if not (math.isfinite(lease) and lease > 0):
        # repr() of an int past Python's digit limit raises: such a value is named by its size.
        if isinstance(value, int) and value.bit_length() > 256:
            shown = f"an int of {value.bit_length()} bits"
        else:
            shown = reprlib.repr(value)
        raise UserError(f"lease_seconds must be a positive, finite number of seconds, got {shown}; e.g. 30.0.")
    return lease


class SessionStore(Inputs):
    """Sessions and their turn log in one database, plus the LangGraph checkpointer that shares it.

    Build one with `sqlite_sessions`, `postgres_sessions` or `memory_sessions`; pass it to
    ``Agent(..., sessions=store)``. Every process (or store object) is one worker: it holds a session's
    lease while it runs that session's turns.

    Attributes:
        lease_seconds: how long a lease lasts without renewal.
        checkpointer: the LangGraph saver of the same database (fenced by the lease).
    """

    def __init__(
        self,
        db: Db,
        checkpointer: Any,
        *,
        lease_seconds: float,
        kind: str,
        poll_seconds: float,
        control_seconds: float = 0.2,
    ) -> None:
        lease = lease_seconds_of(lease_seconds)
        self.db = db
        self.checkpointer = checkpointer
        self.lease_seconds = lease
        self.kind = kind
        # How often readers in another process look for new lines, and a running worker for a cancel sent
        # from another process (with NOTIFY both are woken at once and these are only the fallback).
        self.poll_seconds = poll_seconds
        self.control_seconds = control_seconds
        # host|pid|process start|nonce: a worker on this host can tell when this one died (_holder.py).
        self.owner = str(this_holder())
        self.leases = {}
        self.tails = {}
        self._engine: Any = None
        db.setup(SCHEMA)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, lease_seconds={self.lease_seconds})"

    @property
    def engine(self) -> Any:
        """This worker's background runner (started on first use)."""
        if self._engine is None:
            from ai_utils.sessions._engine import Engine

            self._engine = Engine(self)
            self._started(self._engine)
        return self._engine

    def _started(self, engine: Any) -> None:
        """Hook for a dialect that wakes ``engine.signal`` on other processes' writes (Postgres LISTEN)."""

    def steer_version(self, session_id: str) -> Any:
        """A value that changes whenever a steer of the session is stored, by any process; ``None`` where none does.

        Only a dialect that hears every process's writes has one (Postgres, while its listener is connected); on
        SQLite a turn reads the steers before each model call (a local read).
        """
        return None

    # --- turns (fenced) ----------------------------------------------------------------------------------

    def next_turn(self, session_id: str) -> TurnRow | None:
        """The turn to run now, with its session's configuration.

        A running one (its worker died) first, else the oldest queued one (a yielded turn being continued comes
        before the prompts after it).
        """
        with self.db.read() as cur:
            return self._next_turn(cur, session_id)()[0]

    @staticmethod
    def _next_turn(cur: Cursor, session_id: str) -> Callable[[], tuple[TurnRow | None]]:
        """Queue `next_turn`'s read on ``cur``; its reader."""
        cur.execute(
            f"SELECT {JOINED_TURN_COLUMNS}, EXISTS (SELECT 1 FROM ai_utils_inputs i WHERE i.session_id = t.session_id "
            "AND i.kind = 'steer' AND i.taken = 0), s.model, s.instructions, s.fingerprint FROM ai_utils_turns t "
            "JOIN ai_utils_sessions s ON s.session_id = t.session_id "
            f"WHERE t.session_id = ? AND t.status IN {OPEN} "
            "ORDER BY CASE t.status WHEN 'running' THEN 0 ELSE 1 END, t.seq LIMIT 1",
            (session_id,),
        )

        def read() -> tuple[TurnRow | None]:
            row = cur.fetchone()
            if row is None:
                return (None,)
            return (dataclasses.replace(turn_row(row, session_config(*row[-3:])), steers=bool(row[-4])),)

        return read

    def claim_turn(self, session_id: str) -> tuple[int, str | None, tuple[TurnRow | None] | None] | Held:
        """`try_claim`, and with a lease taken at once the turn to run now, as ``(turn,)``.

        The turn (`next_turn`) is read in the claim's transaction (Postgres: its round trip); ``None`` in its place
        after a dead holder's takeover (call `next_turn`).
        """
        return self._try_claim(session_id, lambda cur: self._next_turn(cur, session_id))

    def turn(self, turn_id: str) -> TurnRow | None:
        """One turn by id (without its session's configuration)."""
        with self.db.read() as cur:
            cur.execute(f"SELECT {TURN_COLUMNS} FROM ai_utils_turns WHERE turn_id = ?", (turn_id,))
            row = cur.fetchone()
        return None if row is None else turn_row(row)

    def _append(
        self,
        cur: Cursor,
        session_id: str,
        last: int,
        turn_id: str,
        lines: Sequence[str],
        notify: str = "lines",
        *,
        also: tuple[str, ...] = (),
        writes: Sequence[tuple[str, Sequence[Any]]] = (),
    ) -> int:
        """Store ``lines`` after cursor ``last``; the new last cursor. ``also``: session columns its UPDATE returns.

        ``writes``: other ``(sql, params)`` writes of the transaction, run before the cursor moves. Where the dialect
        allows (`Db.writes_with`) they and the last rows of lines ride on the cursor's ``UPDATE`` as a data-modifying
        ``WITH``: one statement instead of three for a turn's start or end, two for its lines. They touch other rows
        than that UPDATE, so running them in one statement (one snapshot) changes nothing a later statement reads.
        """
        inserts: list[tuple[str, Sequence[Any]]] = []
        for start in range(0, len(lines), _BATCH):
            batch = lines[start : start + _BATCH]
            values: list[Any] = []
            for i, line in enumerate(batch):
                values += (session_id, last + start + i + 1, turn_id, line)
            sql = "INSERT INTO ai_utils_log (session_id, cursor, turn_id, line) VALUES " + ", ".join(
                ["(?, ?, ?, ?)"] * len(batch)
            )
            inserts.append((sql, values))
        new_last = last + len(lines)
        update = "UPDATE ai_utils_sessions SET last_cursor = ? WHERE session_id = ?" + returning(
            self.db, *also, notify=notify
        )
        params: list[Any] = [new_last, session_id]
        if self.db.writes_with:
            # The given writes and the last batch of lines only: the statement's parameters stay bounded (_BATCH rows).
            alone, merged = inserts[:-1], [*writes, *inserts[-1:]]
            if merged:
                update = "WITH " + ", ".join(f"w{i} AS ({sql})" for i, (sql, _) in enumerate(merged)) + " " + update
                params = [x for _, args in merged for x in args] + params
        else:
            alone = [*writes, *inserts]
        for sql, args in alone:
            cur.execute(sql, args)
        cur.execute(update, params)
        return new_last

    def start_turn(
        self,
        session_id: str,
        token: int,
        turn: TurnRow,
        line: str,
        fingerprint: dict[str, Any] | None,
    ) -> bool:
        """Mark the turn running and log its ``turn_start`` / ``turn_resume`` line; ``True`` if it was cancelled.

        ``fingerprint`` (the agent's tool set and model, when they differ from what the session last ran with)
        is stored with it.
        """
        with self.fenced(session_id, token) as (cur, last):
            # The row stays locked from here: a cancel sent meanwhile waits for this commit and is seen next time.
            running = (
                "UPDATE ai_utils_turns SET status = 'running', first_cursor = COALESCE(first_cursor, ?) "
                "WHERE turn_id = ?",
                (last + 1, turn.turn_id),
            )
            if fingerprint is not None:
                cur.execute(
                    "UPDATE ai_utils_sessions SET fingerprint = ? WHERE session_id = ?",
                    (dumps(fingerprint), session_id),
                )
            cursor = self._append(cur, session_id, last, turn.turn_id, [line], also=("cancel_seq",), writes=(running,))
            commit_early(cur)  # read with the commit: one round trip after a claim (its cursor is known)
            cancel_seq = int(cur.fetchone()[0])
        self.tail(session_id, token, cursor)
        return turn.seq <= cancel_seq

    def append(self, session_id: str, token: int, turn_id: str, lines: Sequence[str]) -> int:
        """Log chunks of a running turn; returns the last cursor."""
        with self.fenced(session_id, token) as (cur, last):
            last = self._append(cur, session_id, last, turn_id, lines)
        self.tail(session_id, token, last)
        return last

    def end_turn(
        self,
        session_id: str,
        token: int,
        turn_id: str,
        stop_reason: str,
        result: dict[str, Any],
        lines: Sequence[str],
        *,
        status: str = "ended",
        then: list[tuple[TurnRow | None]] | None = None,
    ) -> bool:
        """Log the turn's last lines (``turn_end`` / ``turn_yield`` last) and record how it ended, in one transaction.

        ``status`` is ``"yielded"`` for a turn that stopped at its ``yield_at`` (the next prompt continues it).
        When the session has no other work (no open turn, no waiting steer) the lease is given back in the same
        transaction (a turn then costs no further round trip). With ``then`` (a list), a lease kept gets the turn to
        run next appended to it, as `next_turn` reads it, from the same transaction (Postgres: the same round trip).

        Returns:
            Whether the lease was given back.
        """
        given = forgot = False
        try:
            with self.fenced(session_id, token) as (cur, last):
                ended = (
                    "UPDATE ai_utils_turns SET status = ?, stop_reason = ?, result = ?, "
                    "first_cursor = COALESCE(first_cursor, ?) WHERE turn_id = ?",
                    (status, stop_reason, dumps(result), last + 1, turn_id),
                )
                # `notify="ends"` wakes result() elsewhere. The status change is committed with the lines, and the
                # statements below (a new snapshot each) see it.
                end = self._append(cur, session_id, last, turn_id, lines, notify="ends", writes=(ended,))
                # Forgotten before the commit, in case it is given back: the keeper never finds a lease given back
                # still listed as this worker's (it would report it taken over). Listed again below if it was not.
                forgot = self.forget(session_id, token)
                # Given back only when nothing else waits (no open turn, no steer): one statement.
                cur.execute(
                    "UPDATE ai_utils_sessions SET lease_owner = NULL, lease_until = 0 WHERE session_id = ? "
                    f"AND NOT EXISTS (SELECT 1 FROM ai_utils_turns WHERE session_id = ? AND status IN {OPEN}) "
                    "AND NOT EXISTS (SELECT 1 FROM ai_utils_inputs WHERE session_id = ? AND kind = 'steer' "
                    "AND taken = 0)" + returning(self.db, "1", notify="control"),
                    (session_id, session_id, session_id),
                )
                read = None if then is None else self._next_turn(another_cursor(cur), session_id)
                commit_early(cur)  # read with the commit: one round trip
                given = cur.fetchone() is not None
                if read is not None and then is not None and not given:
                    then.append(read())
        except BaseException:
            if forgot:  # not committed: still this worker's lease
                self.leases[session_id] = token
            raise
        if not given:
            if forgot:
                self.leases[session_id] = token
            self.tail(session_id, token, end)
        return given

    def journal(self, session_id: str, token: int, execution_id: str) -> bool:
        """Record that a call starts; ``False`` when it was recorded before (it may have partly run)."""
        with self.fenced(session_id, token) as (cur, _):
            cur.execute(
                "INSERT INTO ai_utils_calls (session_id, execution_id) VALUES (?, ?) ON CONFLICT DO NOTHING "
                "RETURNING 1",
                (session_id, execution_id),
            )
            commit_early(cur)  # read with the commit: one round trip
            return cur.fetchone() is not None

    # --- reads -------------------------------------------------------------------------------------------

    def read(self, session_id: str, after: int, limit: int = 1000) -> list[tuple[int, str, str]]:
        """Log lines after ``after``: ``[(cursor, turn_id, line)]``."""
        with self.db.read() as cur:
            cur.execute(
                "SELECT cursor, turn_id, line FROM ai_utils_log WHERE session_id = ? AND cursor > ? "
                "ORDER BY cursor LIMIT ?",
                (session_id, after, limit),
            )
            return cur.fetchall()  # (int, str, str) rows from both dialects' drivers

    def read_lines(self, session_id: str, after: int, limit: int = 1000) -> list[tuple[int, str]]:
        """Log lines after ``after`` without their turn: ``[(cursor, line)]`` (what a session's stream replays)."""
        with self.db.read() as cur:
            cur.execute(
                "SELECT cursor, line FROM ai_utils_log WHERE session_id = ? AND cursor > ? ORDER BY cursor LIMIT ?",
                (session_id, after, limit),
            )
            return cur.fetchall()

    def last_cursor(self, session_id: str) -> int:
        """The session's last stored cursor (0 for a new session)."""
        with self.db.read() as cur:
            cur.execute("SELECT last_cursor FROM ai_utils_sessions WHERE session_id = ?", (session_id,))
            row = cur.fetchone()
        return 0 if row is None else int(row[0])

    def busy(self, session_id: str) -> bool:
        """Whether the session has a running or queued turn (or steers waiting for one)."""
        with self.db.read() as cur:
            cur.execute(
                f"SELECT EXISTS (SELECT 1 FROM ai_utils_turns WHERE session_id = ? AND status IN {OPEN}) "
                "OR EXISTS (SELECT 1 FROM ai_utils_inputs WHERE session_id = ? AND kind = 'steer' AND taken = 0)",
                (session_id, session_id),
            )
            return bool(cur.fetchone()[0])
