"""The session store: sessions, inputs (prompts and steers), turns, the stream log, the tool-call journal.

One SQL implementation for SQLite (``sqlite_sessions`` / ``memory_sessions``) and Postgres
(``postgres_sessions``); a `Db` hides the connection and the few dialect differences. Every write a
running turn makes is *fenced*: it runs in one transaction that first checks this process still holds
the session's lease token (`SessionFencedError` otherwise, and the transaction is rolled back), so a
replaced worker's writes never become visible. The checkpointer of the same store fences its checkpoint
writes the same way (see `_sqlite.py`, `_postgres.py`), reading the token from `leases`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from ai_utils.exceptions import MessageIdInUseError, SessionFencedError, UserError
from ai_utils.sessions._schema import MAX_STEERS, SCHEMA, TURN_COLUMNS, Cursor, Db, TurnRow, dumps, turn_row

__all__ = ["SessionStore"]


class SessionStore:
    """Sessions and their turn log in one database, plus the LangGraph checkpointer that shares it.

    Build one with `sqlite_sessions`, `postgres_sessions` or `memory_sessions`; pass it to
    ``Agent(..., sessions=store)``. Every process (or store object) is one worker: it holds a session's
    lease while it runs that session's turns.

    Attributes:
        lease_seconds: how long a lease lasts without renewal.
        checkpointer: the LangGraph saver of the same database (fenced by the lease).
    """

    def __init__(self, db: Db, checkpointer: Any, *, lease_seconds: float, kind: str, poll_seconds: float) -> None:
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)) or lease_seconds <= 0:
            raise UserError(f"lease_seconds must be a positive number of seconds, got {lease_seconds!r}; e.g. 30.0.")
        self.db = db
        self.checkpointer = checkpointer
        self.lease_seconds = float(lease_seconds)
        self.kind = kind
        self.poll_seconds = poll_seconds
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Lease tokens this worker holds (or held until it was fenced): the checkpointer fences with them.
        self.leases: dict[str, int] = {}
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
        return self._engine

    # --- sessions and inputs ---------------------------------------------------------------------------

    def _session(self, cur: Cursor, session_id: str, agent: str, *, create: bool) -> tuple[Any, ...]:
        if create:
            # Insert first: two processes creating one session at once must not both find it missing.
            cur.execute(
                "INSERT INTO ai_utils_sessions (session_id, agent, created) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (session_id, agent, time.time()),
            )
        cur.execute(
            "SELECT agent, lease_token, last_cursor, next_seq FROM ai_utils_sessions WHERE session_id = ?"
            + self.db.for_update,
            (session_id,),
        )
        row = cur.fetchone()
        if row is None:
            raise UserError(f"There is no session {session_id!r} in this store; prompt it first to create it.")
        if row[0] != agent:
            raise UserError(
                f"Session {session_id!r} belongs to the agent named {row[0]!r}, not {agent!r}. Open it from an "
                f"agent with name={row[0]!r} (a session keeps the name of the agent that created it)."
            )
        return tuple(row)

    def owner_of(self, session_id: str) -> str | None:
        """The agent name a session belongs to, or ``None`` when it does not exist yet."""
        with self.db.read() as cur:
            cur.execute("SELECT agent FROM ai_utils_sessions WHERE session_id = ?", (session_id,))
            row = cur.fetchone()
        return None if row is None else str(row[0])

    def accept_prompt(
        self, session_id: str, agent: str, message_id: str | None, payload: dict[str, Any]
    ) -> tuple[str, str, bool, int]:
        """Store a prompt and its queued turn in one transaction: ``(turn_id, message_id, repeated, last_cursor)``."""
        body = dumps(payload)
        with self.db.write() as cur:
            _, _, last_cursor, next_seq = self._session(cur, session_id, agent, create=True)
            if message_id is not None:
                cur.execute(
                    "SELECT kind, turn_id FROM ai_utils_inputs WHERE session_id = ? AND message_id = ?",
                    (session_id, message_id),
                )
                seen = cur.fetchone()
                if seen is not None:
                    if seen[0] != "prompt" or seen[1] is None:
                        raise MessageIdInUseError(
                            f"message_id {message_id!r} already names a steer of session {session_id!r}; "
                            "one id names one input. Use a new message_id for this prompt.",
                            message_id=message_id,
                        )
                    return str(seen[1]), message_id, True, int(last_cursor)
            message_id = message_id or uuid.uuid4().hex
            turn_id = uuid.uuid4().hex
            seq = int(next_seq) + 1
            cur.execute("UPDATE ai_utils_sessions SET next_seq = ? WHERE session_id = ?", (seq, session_id))
            cur.execute(
                "INSERT INTO ai_utils_inputs (session_id, message_id, kind, turn_id, seq, taken) "
                "VALUES (?, ?, 'prompt', ?, ?, 1)",
                (session_id, message_id, turn_id, seq),
            )
            cur.execute(
                "INSERT INTO ai_utils_turns (turn_id, session_id, seq, message_id, status, payload) "
                "VALUES (?, ?, ?, ?, 'queued', ?)",
                (turn_id, session_id, seq, message_id, body),
            )
        return turn_id, message_id, False, int(last_cursor)

    def accept_steer(self, session_id: str, agent: str, message_id: str | None, text: str) -> tuple[str, str | None]:
        """Store a steer: queued for the running turn, or (no turn open) as the next turn.

        Returns:
            ``(message_id, turn_id)``; ``turn_id`` is set when the steer became a turn of its own.
        """
        with self.db.write() as cur:
            _, _, _, next_seq = self._session(cur, session_id, agent, create=True)
            if message_id is not None:
                cur.execute(
                    "SELECT kind, turn_id FROM ai_utils_inputs WHERE session_id = ? AND message_id = ?",
                    (session_id, message_id),
                )
                seen = cur.fetchone()
                if seen is not None:
                    if seen[0] != "steer":
                        raise MessageIdInUseError(
                            f"message_id {message_id!r} already names a prompt of session {session_id!r}; "
                            "one id names one input. Use a new message_id for this steer.",
                            message_id=message_id,
                        )
                    return message_id, seen[1]
            message_id = message_id or uuid.uuid4().hex
            cur.execute(
                "SELECT COUNT(*) FROM ai_utils_inputs WHERE session_id = ? AND kind = 'steer' AND taken = 0",
                (session_id,),
            )
            if int(cur.fetchone()[0]) >= MAX_STEERS:
                raise UserError(
                    f"Session {session_id!r} already has {MAX_STEERS} steers waiting; wait for the turn to take "
                    "them (or cancel it) before steering again."
                )
            cur.execute(
                "SELECT COUNT(*) FROM ai_utils_turns WHERE session_id = ? AND status IN ('queued', 'running')",
                (session_id,),
            )
            open_turns = int(cur.fetchone()[0])
            seq = int(next_seq) + 1
            cur.execute("UPDATE ai_utils_sessions SET next_seq = ? WHERE session_id = ?", (seq, session_id))
            turn_id = None
            if not open_turns:
                turn_id = uuid.uuid4().hex
                cur.execute(
                    "INSERT INTO ai_utils_turns (turn_id, session_id, seq, message_id, status, payload) "
                    "VALUES (?, ?, ?, ?, 'queued', ?)",
                    (turn_id, session_id, seq, message_id, dumps({"input": text})),
                )
            cur.execute(
                "INSERT INTO ai_utils_inputs (session_id, message_id, kind, turn_id, seq, text, taken) "
                "VALUES (?, ?, 'steer', ?, ?, ?, ?)",
                (session_id, message_id, turn_id, seq, text, 1 if turn_id else 0),
            )
        return message_id, turn_id

    # --- lease -------------------------------------------------------------------------------------------

    def claim(self, session_id: str) -> int | None:
        """Take the session's lease when it is free or expired: the new token, else ``None``."""
        now = time.time()
        with self.db.write() as cur:
            cur.execute(
                "UPDATE ai_utils_sessions SET lease_owner = ?, lease_token = lease_token + 1, lease_until = ? "
                "WHERE session_id = ? AND (lease_owner IS NULL OR lease_until < ?)",
                (self.owner, now + self.lease_seconds, session_id, now),
            )
            if cur.rowcount != 1:
                return None
            cur.execute("SELECT lease_token FROM ai_utils_sessions WHERE session_id = ?", (session_id,))
            token = int(cur.fetchone()[0])
        self.leases[session_id] = token
        return token

    def renew(self, session_id: str, token: int) -> bool:
        """Extend the lease; ``False`` when another worker took it over (this one is fenced)."""
        with self.db.write() as cur:
            cur.execute(
                "UPDATE ai_utils_sessions SET lease_until = ? WHERE session_id = ? AND lease_token = ?",
                (time.time() + self.lease_seconds, session_id, token),
            )
            return bool(cur.rowcount == 1)

    def release(self, session_id: str, token: int) -> None:
        """Give the lease back (a fenced worker's release changes nothing)."""
        with self.db.write() as cur:
            cur.execute(
                "UPDATE ai_utils_sessions SET lease_owner = NULL, lease_until = 0 "
                "WHERE session_id = ? AND lease_token = ?",
                (session_id, token),
            )
            released = cur.rowcount == 1
        if released and self.leases.get(session_id) == token:
            del self.leases[session_id]

    @contextlib.contextmanager
    def fenced(self, session_id: str, token: int) -> Iterator[tuple[Cursor, int]]:
        """A write transaction that holds only while ``token`` is the session's lease: ``(cursor, last_cursor)``."""
        with self.db.write() as cur:
            cur.execute(
                "SELECT lease_token, last_cursor FROM ai_utils_sessions WHERE session_id = ?" + self.db.for_update,
                (session_id,),
            )
            row = cur.fetchone()
            if row is None or int(row[0]) != token:
                raise SessionFencedError(
                    f"Session {session_id!r} was taken over by another worker (lease token {token} is stale); "
                    "this worker's writes are refused.",
                    session_id=session_id,
                )
            yield cur, int(row[1])

    # --- turns (fenced) ----------------------------------------------------------------------------------

    def next_turn(self, session_id: str) -> TurnRow | None:
        """The turn to run now: a running one (its worker died) first, else the oldest queued one."""
        with self.db.read() as cur:
            cur.execute(
                f"SELECT {TURN_COLUMNS} FROM ai_utils_turns WHERE session_id = ? AND status IN ('running', 'queued') "
                "ORDER BY CASE status WHEN 'running' THEN 0 ELSE 1 END, seq LIMIT 1",
                (session_id,),
            )
            row = cur.fetchone()
        return None if row is None else turn_row(row)

    def turn(self, turn_id: str) -> TurnRow | None:
        """One turn by id."""
        with self.db.read() as cur:
            cur.execute(f"SELECT {TURN_COLUMNS} FROM ai_utils_turns WHERE turn_id = ?", (turn_id,))
            row = cur.fetchone()
        return None if row is None else turn_row(row)

    def _append(self, cur: Cursor, session_id: str, last: int, turn_id: str, lines: Sequence[str]) -> int:
        rows = [(session_id, last + i + 1, turn_id, line) for i, line in enumerate(lines)]
        for row in rows:
            cur.execute("INSERT INTO ai_utils_log (session_id, cursor, turn_id, line) VALUES (?, ?, ?, ?)", row)
        new_last = last + len(rows)
        cur.execute("UPDATE ai_utils_sessions SET last_cursor = ? WHERE session_id = ?", (new_last, session_id))
        return new_last

    def start_turn(self, session_id: str, token: int, turn_id: str, line: str, seq: int) -> bool:
        """Mark the turn running and log its ``turn_start`` / ``turn_resume`` line; ``True`` if it was cancelled."""
        with self.fenced(session_id, token) as (cur, last):
            cursor = self._append(cur, session_id, last, turn_id, [line])
            cur.execute(
                "UPDATE ai_utils_turns SET status = 'running', first_cursor = COALESCE(first_cursor, ?) "
                "WHERE turn_id = ?",
                (cursor, turn_id),
            )
            cur.execute("SELECT cancel_seq FROM ai_utils_sessions WHERE session_id = ?", (session_id,))
            return seq <= int(cur.fetchone()[0])

    def append(self, session_id: str, token: int, turn_id: str, lines: Sequence[str]) -> int:
        """Log chunks of a running turn; returns the last cursor."""
        with self.fenced(session_id, token) as (cur, last):
            return self._append(cur, session_id, last, turn_id, lines)

    def end_turn(
        self, session_id: str, token: int, turn_id: str, stop_reason: str, result: dict[str, Any], lines: Sequence[str]
    ) -> int:
        """Log the turn's last lines (``turn_end`` last) and record how it ended, in one transaction."""
        with self.fenced(session_id, token) as (cur, last):
            cursor = self._append(cur, session_id, last, turn_id, lines)
            cur.execute(
                "UPDATE ai_utils_turns SET status = 'ended', stop_reason = ?, result = ?, "
                "first_cursor = COALESCE(first_cursor, ?) WHERE turn_id = ?",
                (stop_reason, dumps(result), last + 1, turn_id),
            )
        return cursor

    def take_steers(self, session_id: str, token: int, turn_id: str) -> list[tuple[str, str]]:
        """The queued steers, in order, now joined to ``turn_id``: ``[(message_id, text)]``."""
        with self.db.read() as cur:
            cur.execute(
                "SELECT 1 FROM ai_utils_inputs WHERE session_id = ? AND kind = 'steer' AND taken = 0 LIMIT 1",
                (session_id,),
            )
            if cur.fetchone() is None:
                return []
        with self.fenced(session_id, token) as (cur, _):
            cur.execute(
                "SELECT message_id, text FROM ai_utils_inputs WHERE session_id = ? AND kind = 'steer' AND taken = 0 "
                "ORDER BY seq",
                (session_id,),
            )
            steers = [(str(r[0]), str(r[1])) for r in cur.fetchall()]
            cur.execute(
                "UPDATE ai_utils_inputs SET taken = 1, turn_id = ? WHERE session_id = ? AND kind = 'steer' "
                "AND taken = 0",
                (turn_id, session_id),
            )
        return steers

    def steers_to_turn(self, session_id: str, token: int) -> bool:
        """Steers that no turn took become the next turn (one user message each); ``True`` if one was made."""
        with self.db.read() as cur:
            cur.execute(
                "SELECT 1 FROM ai_utils_inputs WHERE session_id = ? AND kind = 'steer' AND taken = 0 LIMIT 1",
                (session_id,),
            )
            if cur.fetchone() is None:
                return False
        with self.fenced(session_id, token) as (cur, _):
            cur.execute(
                "SELECT message_id, text, seq FROM ai_utils_inputs WHERE session_id = ? AND kind = 'steer' "
                "AND taken = 0 ORDER BY seq",
                (session_id,),
            )
            steers = cur.fetchall()
            if not steers:
                return False
            turn_id = uuid.uuid4().hex
            cur.execute(
                "INSERT INTO ai_utils_turns (turn_id, session_id, seq, message_id, status, payload) "
                "VALUES (?, ?, ?, ?, 'queued', ?)",
                (turn_id, session_id, int(steers[0][2]), str(steers[0][0]), dumps({"input": [s[1] for s in steers]})),
            )
            cur.execute(
                "UPDATE ai_utils_inputs SET taken = 1, turn_id = ? WHERE session_id = ? AND kind = 'steer' "
                "AND taken = 0",
                (turn_id, session_id),
            )
        return True

    def journal(self, session_id: str, token: int, execution_id: str) -> bool:
        """Record that a call starts; ``False`` when it was recorded before (it may have partly run)."""
        with self.fenced(session_id, token) as (cur, _):
            cur.execute(
                "INSERT INTO ai_utils_calls (session_id, execution_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (session_id, execution_id),
            )
            return bool(cur.rowcount == 1)

    # --- cancel ------------------------------------------------------------------------------------------

    def request_cancel(self, session_id: str) -> int:
        """Cancel every turn accepted so far; returns the highest cancelled sequence number."""
        with self.db.write() as cur:
            cur.execute("UPDATE ai_utils_sessions SET cancel_seq = next_seq WHERE session_id = ?", (session_id,))
            cur.execute("SELECT cancel_seq FROM ai_utils_sessions WHERE session_id = ?", (session_id,))
            row = cur.fetchone()
        return 0 if row is None else int(row[0])

    def cancel_seq(self, session_id: str) -> int:
        """Turns with a sequence number up to this one are cancelled."""
        with self.db.read() as cur:
            cur.execute("SELECT cancel_seq FROM ai_utils_sessions WHERE session_id = ?", (session_id,))
            row = cur.fetchone()
        return 0 if row is None else int(row[0])

    # --- reads -------------------------------------------------------------------------------------------

    def read(self, session_id: str, after: int, limit: int = 1000) -> list[tuple[int, str, str]]:
        """Log lines after ``after``: ``[(cursor, turn_id, line)]``."""
        with self.db.read() as cur:
            cur.execute(
                "SELECT cursor, turn_id, line FROM ai_utils_log WHERE session_id = ? AND cursor > ? "
                "ORDER BY cursor LIMIT ?",
                (session_id, after, limit),
            )
            return [(int(r[0]), str(r[1]), str(r[2])) for r in cur.fetchall()]

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
                "SELECT 1 FROM ai_utils_turns WHERE session_id = ? AND status IN ('queued', 'running') LIMIT 1",
                (session_id,),
            )
            if cur.fetchone() is not None:
                return True
            cur.execute(
                "SELECT 1 FROM ai_utils_inputs WHERE session_id = ? AND kind = 'steer' AND taken = 0 LIMIT 1",
                (session_id,),
            )
            return cur.fetchone() is not None

    def lease_free(self, session_id: str) -> bool:
        """Whether nobody holds the session's lease (or it expired)."""
        with self.db.read() as cur:
            cur.execute("SELECT lease_owner, lease_until FROM ai_utils_sessions WHERE session_id = ?", (session_id,))
            row = cur.fetchone()
        return row is None or row[0] is None or float(row[1]) < time.time()

    def orphans(self, agent: str) -> list[str]:
        """Sessions of ``agent`` with open turns and no live lease (their worker stopped)."""
        with self.db.read() as cur:
            cur.execute(
                "SELECT DISTINCT s.session_id FROM ai_utils_sessions s JOIN ai_utils_turns t "
                "ON t.session_id = s.session_id WHERE s.agent = ? AND t.status IN ('queued', 'running') "
                "AND (s.lease_owner IS NULL OR s.lease_until < ?)",
                (agent, time.time()),
            )
            return [str(r[0]) for r in cur.fetchall()]
