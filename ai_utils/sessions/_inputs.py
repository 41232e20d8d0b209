"""Inputs: the prompts and steers a session receives (each stored before it is acknowledged) and cancel requests.

A prompt is stored with its queued turn in one transaction; a steer waits for the running turn to take it
(`Inputs.take_steers`) or becomes a turn of its own. A ``message_id`` names one input of a session: a
repeat returns the original, the same id for the other kind is refused (`MessageIdInUseError`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, NamedTuple

from ai_utils.exceptions import MessageIdInUseError, SessionBusyError, UserError
from ai_utils.sessions._leases import Leases, claimable, returning
from ai_utils.sessions._schema import MAX_STEERS, Cursor, SessionConfig, another_cursor, dumps, loads

__all__ = ["OPEN", "Accepted", "Inputs"]

OPEN = "('queued', 'running', 'resume')"
"""Turn statuses that still have work: queued, running (or its worker died), a yielded turn being continued."""
_OPEN_OR_YIELDED = "('queued', 'running', 'resume', 'yielded')"


def _continue_yielded(cur: Cursor, session_id: str) -> list[str]:
    """A yielded turn is continued next (its passed ``yield_at`` dropped); only a yielded turn costs a rewrite.

    Returns:
        The ids of the turns continued.
    """
    cur.execute(
        "UPDATE ai_utils_turns SET status = 'resume' WHERE session_id = ? AND status = 'yielded' "
        "RETURNING turn_id, payload",
        (session_id,),
    )
    continued = []
    for turn_id, payload in cur.fetchall():
        kept = {k: v for k, v in loads(payload).items() if k != "yield_at"}
        cur.execute("UPDATE ai_utils_turns SET payload = ? WHERE turn_id = ?", (dumps(kept), turn_id))
        continued.append(str(turn_id))
    return continued


def _crashed(cur: Cursor, session_id: str) -> list[str]:
    """The session's turns whose worker started them (status ``running``); with the lease free, it died.

    Only these are continued on behalf of the next caller: a queued turn is merely not claimed yet (maybe by a live
    worker of this very process a moment from now), and must never get another session object's context.
    """
    cur.execute("SELECT turn_id FROM ai_utils_turns WHERE session_id = ? AND status = 'running'", (session_id,))
    return [str(r[0]) for r in cur.fetchall()]


# ``taken`` of a steer that joined a running turn (1: a prompt, or steers that became a turn of their own).
_JOINED = 2
# The steers of a session no turn has taken yet.
_WAITING = "FROM ai_utils_inputs WHERE session_id = ? AND kind = 'steer' AND taken = 0"


def _queue_turn(cur: Cursor, turn_id: str, session_id: str, seq: int, message_id: str, payload: str) -> None:
    cur.execute(
        "INSERT INTO ai_utils_turns (turn_id, session_id, seq, message_id, status, payload) "
        "VALUES (?, ?, ?, ?, 'queued', ?)",
        (turn_id, session_id, seq, message_id, payload),
    )


def _ask_earlier_input(cur: Cursor, session_id: str, message_id: str) -> None:
    cur.execute(
        "SELECT kind, turn_id FROM ai_utils_inputs WHERE session_id = ? AND message_id = ?", (session_id, message_id)
    )


def _earlier_input(seen: Any, session_id: str, message_id: str, kind: str) -> Any:
    """The ``(kind, turn_id)`` row of the input ``message_id`` already names, or ``None``; refuses the other kind."""
    if seen is not None and (seen[0] != kind or (kind == "prompt" and seen[1] is None)):
        other = "steer" if kind == "prompt" else "prompt"
        raise MessageIdInUseError(
            f"message_id {message_id!r} already names a {other} of session {session_id!r}; "
            f"one id names one input. Use a new message_id for this {kind}.",
            message_id=message_id,
        )
    return seen


class Accepted(NamedTuple):
    """What storing a prompt gave: its turn, its message id, whether it repeated one, the log's last cursor."""

    turn_id: str
    message_id: str
    repeated: bool
    last_cursor: int
    seq: int
    continued: tuple[str, ...] = ()
    """Earlier turns this prompt has the session continue: a yielded one, or the one a dead worker was running."""


def check_config(session_id: str, stored: tuple[Any, Any], given: SessionConfig | None) -> None:
    """`UserError` when a session is opened with a model or instructions other than those stored with it."""
    if given is None:
        return
    for name, have, want in (("model", stored[0], given.model), ("instructions", stored[1], given.instructions)):
        if want is not None and want != have:
            shown = repr(have) if name == "model" or have is None else f"other instructions ({len(have)} chars)"
            raise UserError(
                f"Session {session_id!r} was created with {name}={shown}; it cannot be opened with another "
                f"{name}. Open it without `{name}=` (it keeps its own) or start a new session."
            )


class Inputs(Leases):
    """The input half of `SessionStore`."""

    def _session(
        self,
        cur: Cursor,
        session_id: str,
        agent: str,
        *,
        create: bool,
        config: SessionConfig | None = None,
        message_id: str | None = None,
        kind: str = "prompt",
    ) -> tuple[Any, ...]:
        """Lock the session row: ``(agent, lease_token, last_cursor, next_seq, busy, yielded, earlier, orphaned)``.

        ``orphaned``: the session has open turns and nobody may be working on them (no lease, an expired one, or its
        holder died on this host).

        The earlier input ``message_id`` names (see `_earlier_input`) is read after the lock, in the same round trip.
        """
        if create:
            # Insert first: two processes creating one session at once must not both find it missing.
            cur.execute(
                "INSERT INTO ai_utils_sessions (session_id, agent, created, model, instructions) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (session_id, agent, time.time(), *((config.model, config.instructions) if config else (None, None))),
            )
        # What a prompt needs to know about the session's turns comes with the row (one round trip).
        cur.execute(
            "SELECT agent, lease_token, last_cursor, next_seq, model, instructions, "
            f"EXISTS (SELECT 1 FROM ai_utils_turns t WHERE t.session_id = s.session_id AND t.status IN {OPEN}), "
            "EXISTS (SELECT 1 FROM ai_utils_turns t WHERE t.session_id = s.session_id AND t.status = 'yielded'), "
            "lease_owner, lease_until FROM ai_utils_sessions s WHERE session_id = ?" + self.db.for_update,
            (session_id,),
        )
        earlier = None
        if message_id is not None:
            earlier = another_cursor(cur)  # queued behind the lock (Postgres pipeline): no round trip of its own
            _ask_earlier_input(earlier, session_id, message_id)
        row = cur.fetchone()
        if row is None:
            raise UserError(f"There is no session {session_id!r} in this store; prompt it first to create it.")
        if row[0] != agent:
            raise UserError(
                f"Session {session_id!r} belongs to the agent named {row[0]!r}, not {agent!r}. Open it from an "
                f"agent with name={row[0]!r} (a session keeps the name of the agent that created it)."
            )
        check_config(session_id, (row[4], row[5]), config)
        seen = None
        if earlier is not None and message_id is not None:
            seen = _earlier_input(earlier.fetchone(), session_id, message_id, kind)
        busy = bool(row[6])
        orphaned = busy and claimable(row[8], float(row[9]), time.time())
        return (*row[:4], busy, bool(row[7]), seen, orphaned)

    def session_row(self, session_id: str) -> tuple[str, str | None, str | None] | None:
        """``(agent, model, instructions)`` of a stored session, or ``None`` when it does not exist yet."""
        with self.db.read() as cur:
            cur.execute("SELECT agent, model, instructions FROM ai_utils_sessions WHERE session_id = ?", (session_id,))
            row = cur.fetchone()
        return None if row is None else (str(row[0]), row[1], row[2])

    def owner_of(self, session_id: str) -> str | None:
        """The agent name a session belongs to, or ``None`` when it does not exist yet."""
        row = self.session_row(session_id)
        return None if row is None else row[0]

    def accept_prompt(
        self,
        session_id: str,
        agent: str,
        message_id: str | None,
        payload: dict[str, Any],
        *,
        on_busy: str = "enqueue",
        config: SessionConfig | None = None,
        turn_id: str | None = None,
    ) -> Accepted:
        """Store a prompt and its queued turn in one transaction.

        ``turn_id`` is the new turn's id (a new one when ``None``). ``on_busy`` says what happens to the session's
        open turns: ``enqueue`` waits behind them, ``reject`` raises `SessionBusyError` (nothing stored),
        ``interrupt`` cancels them, ``rollback`` cancels them and has their messages removed from the thread. A
        yielded turn is continued first (``enqueue``/``reject``) or ends cancelled (``interrupt``/``rollback``).
        """
        body = dumps(payload)
        with self.db.write() as cur:
            _, _, last_cursor, next_seq, busy, yielded, seen, orphaned = self._session(
                cur, session_id, agent, create=True, config=config, message_id=message_id
            )
            if seen is not None and message_id is not None:
                return Accepted(str(seen[1]), message_id, True, int(last_cursor), 0)
            if on_busy == "reject":
                if busy:
                    raise SessionBusyError(
                        f"Session {session_id!r} is running a turn and the prompt said on_busy='reject'; nothing was "
                        "stored. Send it again when the turn ended, or use on_busy='enqueue' to wait behind it.",
                        session_id=session_id,
                    )
            message_id = message_id or uuid.uuid4().hex
            turn_id = turn_id or uuid.uuid4().hex
            seq = int(next_seq) + 1
            notify = ""
            if on_busy in ("interrupt", "rollback"):
                if on_busy == "rollback":
                    cur.execute(
                        f"UPDATE ai_utils_turns SET rollback = 1 WHERE session_id = ? AND status IN {_OPEN_OR_YIELDED}",
                        (session_id,),
                    )
                # Every turn accepted before this one is cancelled: a running one at its worker's next look.
                cur.execute("UPDATE ai_utils_sessions SET cancel_seq = ? WHERE session_id = ?", (seq - 1, session_id))
                notify = "control"
            continued: list[str] = []
            if orphaned:  # the turn a dead worker was running: whoever works on the session next continues it
                continued = _crashed(cur, session_id)
            if yielded:  # continued before this prompt (or, cancelled above, it ends at once)
                continued += _continue_yielded(cur, session_id)
            cur.execute(
                "UPDATE ai_utils_sessions SET next_seq = ? WHERE session_id = ?" + returning(self.db, notify=notify),
                (seq, session_id),
            )
            cur.execute(
                "INSERT INTO ai_utils_inputs (session_id, message_id, kind, turn_id, seq, taken) "
                "VALUES (?, ?, 'prompt', ?, ?, 1)",
                (session_id, message_id, turn_id, seq),
            )
            _queue_turn(cur, turn_id, session_id, seq, message_id, body)
        return Accepted(turn_id, message_id, False, int(last_cursor), seq, tuple(continued))

    def resume_yielded(self, session_id: str, agent: str, yield_at: float | None) -> tuple[str, str, int] | None:
        """Continue the session's yielded turn (with a new ``yield_at``).

        Returns:
            ``(turn_id, message_id, last_cursor)``, or ``None`` when no turn is yielded.
        """
        with self.db.write() as cur:
            last_cursor = self._session(cur, session_id, agent, create=False)[2]
            cur.execute(
                "SELECT turn_id, message_id, payload FROM ai_utils_turns WHERE session_id = ? AND status = 'yielded'",
                (session_id,),
            )
            row = cur.fetchone()
            if row is None:
                return None
            payload = {k: v for k, v in loads(row[2]).items() if k != "yield_at"}
            if yield_at is not None:
                payload["yield_at"] = yield_at
            cur.execute(
                "UPDATE ai_utils_turns SET status = 'resume', payload = ? WHERE turn_id = ?", (dumps(payload), row[0])
            )
        return str(row[0]), str(row[1]), int(last_cursor)

    def accept_steer(
        self, session_id: str, agent: str, message_id: str | None, text: str, config: SessionConfig | None = None
    ) -> tuple[str, str | None, list[str]]:
        """Store a steer: queued for the running turn, or (no turn open) as the next turn.

        A yielded turn is continued and the steer joins it, as it would join the turn had it kept running: a steer
        that became a turn of its own would run on the yielded turn's thread and leave that turn nothing to continue.

        Returns:
            ``(message_id, turn_id, continued)``; ``turn_id`` is set when the steer became a turn of its own,
            ``continued`` names the yielded turn it continues.
        """
        with self.db.write() as cur:
            _, _, _, next_seq, open_turns, yielded, seen, _ = self._session(
                cur, session_id, agent, create=True, config=config, message_id=message_id, kind="steer"
            )
            if seen is not None and message_id is not None:
                return message_id, seen[1], []
            message_id = message_id or uuid.uuid4().hex
            cur.execute("SELECT COUNT(*) " + _WAITING, (session_id,))
            if int(cur.fetchone()[0]) >= MAX_STEERS:
                raise UserError(
                    f"Session {session_id!r} already has {MAX_STEERS} steers waiting; wait for the turn to take "
                    "them (or cancel it) before steering again."
                )
            seq = int(next_seq) + 1
            cur.execute(
                "UPDATE ai_utils_sessions SET next_seq = ? WHERE session_id = ?" + returning(self.db, notify="steer"),
                (seq, session_id),
            )
            continued = _continue_yielded(cur, session_id) if yielded else []
            turn_id = None
            if not open_turns and not continued:
                turn_id = uuid.uuid4().hex
                _queue_turn(cur, turn_id, session_id, seq, message_id, dumps({"input": text}))
            cur.execute(
                "INSERT INTO ai_utils_inputs (session_id, message_id, kind, turn_id, seq, text, taken) "
                "VALUES (?, ?, 'steer', ?, ?, ?, ?)",
                (session_id, message_id, turn_id, seq, text, 1 if turn_id else 0),
            )
        return message_id, turn_id, continued

    def open_turns(self, session_id: str) -> list[str]:
        """The ids of the session's turns that still have work, oldest first."""
        with self.db.read() as cur:
            cur.execute(
                f"SELECT turn_id FROM ai_utils_turns WHERE session_id = ? AND status IN {OPEN} ORDER BY seq",
                (session_id,),
            )
            return [str(r[0]) for r in cur.fetchall()]

    def crashed_turns(self, session_id: str) -> list[str]:
        """The ids of the session's turns a worker started (status ``running``): with the lease free, it died."""
        with self.db.read() as cur:
            return _crashed(cur, session_id)

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
    def _join_steers(cur: Cursor, session_id: str, turn_id: str, taken: int = 1) -> None:
        cur.execute(
            "UPDATE ai_utils_inputs SET taken = ?, turn_id = ? WHERE session_id = ? AND kind = 'steer' AND taken = 0",
            (taken, turn_id, session_id),
        )

    def take_steers(self, session_id: str, token: int, turn_id: str, *, again: bool = False) -> list[tuple[str, str]]:
        """The queued steers, in order, now joined to running turn ``turn_id``: ``[(message_id, text)]``.

        With ``again`` (the first model call of a turn continued after a crash) the steers the turn took before come
        first: one taken just before the crash may never have reached the thread (the caller keeps those it lacks).
        """
        earlier: list[tuple[str, str]] = []
        if again:
            with self.db.read() as cur:
                cur.execute(
                    "SELECT message_id, text FROM ai_utils_inputs WHERE session_id = ? AND turn_id = ? "
                    f"AND kind = 'steer' AND taken = {_JOINED} ORDER BY seq",
                    (session_id, turn_id),
                )
                earlier = [(str(r[0]), str(r[1])) for r in cur.fetchall()]
        if not self._steers_waiting(session_id):
            return earlier
        with self.fenced(session_id, token) as (cur, _):
            steers = self._waiting_steers(cur, session_id)
            self._join_steers(cur, session_id, turn_id, _JOINED)
        return [*earlier, *((message_id, text) for message_id, text, _ in steers)]

    def steers_to_turn(self, session_id: str, token: int) -> tuple[str, list[str]] | None:
        """Steers that no turn took become the next turn (one user message each): ``(turn_id, steer message ids)``."""
        if not self._steers_waiting(session_id):
            return None
        with self.fenced(session_id, token) as (cur, _):
            steers = self._waiting_steers(cur, session_id)
            if not steers:
                return None
            turn_id = uuid.uuid4().hex
            message_id, _, seq = steers[0]
            _queue_turn(cur, turn_id, session_id, seq, message_id, dumps({"input": [s[1] for s in steers]}))
            self._join_steers(cur, session_id, turn_id)
        return turn_id, [s[0] for s in steers]

    def request_cancel(self, session_id: str) -> int:
        """Cancel every turn accepted so far; returns the highest cancelled sequence number."""
        with self.db.write() as cur:
            cur.execute(
                "UPDATE ai_utils_sessions SET cancel_seq = next_seq WHERE session_id = ?"
                + returning(self.db, notify="control"),
                (session_id,),
            )
            _continue_yielded(cur, session_id)  # a yielded turn ends cancelled too
            cur.execute("SELECT cancel_seq FROM ai_utils_sessions WHERE session_id = ?", (session_id,))
            row = cur.fetchone()
        return 0 if row is None else int(row[0])
