"""Inputs: the prompts and steers a session receives (each stored before it is acknowledged) and cancel requests.

A prompt is stored with its queued turn in one transaction; a steer waits for the running turn to take it
(`Inputs.take_steers`) or becomes a turn of its own. A ``message_id`` names one input of a session: a
repeat returns the original, the same id for the other kind is refused (`MessageIdInUseError`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ai_utils.exceptions import MessageIdInUseError, UserError
from ai_utils.sessions._leases import Leases
from ai_utils.sessions._schema import MAX_STEERS, Cursor, dumps

__all__ = ["Inputs"]

# The steers of a session no turn has taken yet.
_WAITING = "FROM ai_utils_inputs WHERE session_id = ? AND kind = 'steer' AND taken = 0"


def _queue_turn(cur: Cursor, turn_id: str, session_id: str, seq: int, message_id: str, payload: str) -> None:
    cur.execute(
        "INSERT INTO ai_utils_turns (turn_id, session_id, seq, message_id, status, payload) "
        "VALUES (?, ?, ?, ?, 'queued', ?)",
        (turn_id, session_id, seq, message_id, payload),
    )


def _earlier_input(cur: Cursor, session_id: str, message_id: str | None, kind: str) -> Any:
    """The ``(kind, turn_id)`` row of the input ``message_id`` already names, or ``None``; refuses the other kind."""
    if message_id is None:
        return None
    cur.execute(
        "SELECT kind, turn_id FROM ai_utils_inputs WHERE session_id = ? AND message_id = ?", (session_id, message_id)
    )
    seen = cur.fetchone()
    if seen is not None and (seen[0] != kind or (kind == "prompt" and seen[1] is None)):
        other = "steer" if kind == "prompt" else "prompt"
        raise MessageIdInUseError(
            f"message_id {message_id!r} already names a {other} of session {session_id!r}; "
            f"one id names one input. Use a new message_id for this {kind}.",
            message_id=message_id,
        )
    return seen


class Inputs(Leases):
    """The input half of `SessionStore`."""

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
            seen = _earlier_input(cur, session_id, message_id, "prompt")
            if seen is not None and message_id is not None:
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
            _queue_turn(cur, turn_id, session_id, seq, message_id, body)
        return turn_id, message_id, False, int(last_cursor)

    def accept_steer(self, session_id: str, agent: str, message_id: str | None, text: str) -> tuple[str, str | None]:
        """Store a steer: queued for the running turn, or (no turn open) as the next turn.

        Returns:
            ``(message_id, turn_id)``; ``turn_id`` is set when the steer became a turn of its own.
        """
        with self.db.write() as cur:
            _, _, _, next_seq = self._session(cur, session_id, agent, create=True)
            seen = _earlier_input(cur, session_id, message_id, "steer")
            if seen is not None and message_id is not None:
                return message_id, seen[1]
            message_id = message_id or uuid.uuid4().hex
            cur.execute("SELECT COUNT(*) " + _WAITING, (session_id,))
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
                _queue_turn(cur, turn_id, session_id, seq, message_id, dumps({"input": text}))
            cur.execute(
                "INSERT INTO ai_utils_inputs (session_id, message_id, kind, turn_id, seq, text, taken) "
                "VALUES (?, ?, 'steer', ?, ?, ?, ?)",
                (session_id, message_id, turn_id, seq, text, 1 if turn_id else 0),
            )
        return message_id, turn_id

    def _steers_waiting(self, session_id: str) -> bool:
        with self.db.read() as cur:
            cur.execute("SELECT 1 " + _WAITING + " LIMIT 1", (session_id,))
            return cur.fetchone() is not None

    @staticmethod
    def _waiting_steers(cur: Cursor, session_id: str) -> list[tuple[str, str, int]]:
        """The steers no turn took yet, in order: ``[(message_id, text, seq)]``."""
        cur.execute("SELECT message_id, text, seq " + _WAITING + " ORDER BY seq", (session_id,))
        return [(str(r[0]), str(r[1]), int(r[2])) for r in cur.fetchall()]

    @staticmethod
    def _join_steers(cur: Cursor, session_id: str, turn_id: str) -> None:
        cur.execute(
            "UPDATE ai_utils_inputs SET taken = 1, turn_id = ? WHERE session_id = ? AND kind = 'steer' AND taken = 0",
            (turn_id, session_id),
        )

    def take_steers(self, session_id: str, token: int, turn_id: str) -> list[tuple[str, str]]:
        """The queued steers, in order, now joined to ``turn_id``: ``[(message_id, text)]``."""
        if not self._steers_waiting(session_id):
            return []
        with self.fenced(session_id, token) as (cur, _):
            steers = self._waiting_steers(cur, session_id)
            self._join_steers(cur, session_id, turn_id)
        return [(message_id, text) for message_id, text, _ in steers]

    def steers_to_turn(self, session_id: str, token: int) -> bool:
        """Steers that no turn took become the next turn (one user message each); ``True`` if one was made."""
        if not self._steers_waiting(session_id):
            return False
        with self.fenced(session_id, token) as (cur, _):
            steers = self._waiting_steers(cur, session_id)
            if not steers:
                return False
            turn_id = uuid.uuid4().hex
            message_id, _, seq = steers[0]
            _queue_turn(cur, turn_id, session_id, seq, message_id, dumps({"input": [s[1] for s in steers]}))
            self._join_steers(cur, session_id, turn_id)
        return True

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
