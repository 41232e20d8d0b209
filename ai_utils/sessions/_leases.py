"""Session leases: one worker at a time runs a session's turns, and a replaced worker's writes are refused.

A lease is a row lock with a time limit: ``claim`` takes it when it is free or expired, or when its holder
is a dead process on this host (`ai_utils.sessions._holder`), and bumps the session's ``lease_token``; every
write a running turn makes goes through `Leases.fenced`, one transaction that first checks the token is
still this worker's (`SessionFencedError` otherwise, rolled back).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from ai_utils.exceptions import SessionFencedError
from ai_utils.sessions._holder import Holder, host_id
from ai_utils.sessions._schema import Cursor, Db, another_cursor, commit_early

__all__ = ["Held", "Leases", "Orphans", "claimable", "returning"]

_OPEN = "('queued', 'running', 'resume')"
T = TypeVar("T")


def returning(db: Db, *columns: str, notify: str = "") -> str:
    """A ``RETURNING`` clause for the columns, plus the dialect's notification.

    ``notify`` is ``"lines"`` (lines were stored), ``"ends"`` (lines ending a turn), ``"control"`` or ``"steer"`` (a
    steer was stored). A Postgres
    ``NOTIFY`` rides on the statement this way, costing no round trip of its own.
    """
    exprs = list(columns)
    if notify:
        kinds = {"lines": db.notify, "ends": db.notify_ends, "control": db.notify_control, "steer": db.notify_steer}
        expr = kinds[notify]
        if expr:
            exprs.append(expr)
    return f" RETURNING {', '.join(exprs)}" if exprs else ""


@dataclass(frozen=True)
class Held:
    """A lease `Leases.try_claim` could not take."""

    holder: Holder | None
    """Who holds it (``None``: unknown, or another worker took it just now)."""
    until: float
    """Its expiry (unix time) unless renewed."""
    busy: bool
    """Whether the session has an open turn or a waiting steer (else there is nothing to wait for)."""


@dataclass(frozen=True)
class Orphans:
    """Sessions of an agent with open turns: whose worker is gone, and whose lease another host still holds."""

    free: list[str]
    """No live lease (none, expired, or its holder is a dead process on this host): continue them now."""
    elsewhere: dict[str, float]
    """Held by a worker on another host: ``session_id -> lease_until`` (taken over once that passes)."""


class Leases:
    """The lease half of `SessionStore` (``db``, ``owner``, ``lease_seconds`` and ``leases`` are set there)."""

    db: Db
    owner: str
    lease_seconds: float
    # Lease tokens this worker holds (or held until it was fenced): the checkpointer fences with them.
    leases: dict[str, int]
    # session -> (token, last_cursor) as this worker's last committed write under that lease left the session (only
    # the lease holder stores lines): its next write need not read the cursor first (`fenced`).
    tails: dict[str, tuple[int, int]]

    def claim(self, session_id: str) -> tuple[int, str | None] | None:
        """Take the session's lease when it is free, expired or held by a dead process of this host.

        Returns:
            ``(token, previous holder)`` (the holder only when it was a dead local process), else ``None``.
        """
        got = self.try_claim(session_id)
        return got if isinstance(got, tuple) else None

    def try_claim(self, session_id: str) -> tuple[int, str | None] | Held:
        """`claim`, or (not taken) who holds the lease, until when, and whether the session has work at all."""
        got = self._try_claim(session_id)
        return got if isinstance(got, Held) else got[:2]

    def _try_claim(
        self, session_id: str, also: Callable[[Cursor], Callable[[], T]] | None = None
    ) -> tuple[int, str | None, T | None] | Held:
        """`try_claim`, plus what ``also`` reads with the claim.

        ``also`` queues a read on a second cursor right behind the claim and returns its reader: with a lease taken at
        once the claim, that read and the commit are one round trip (Postgres). After a dead holder's takeover there is
        no read (``None``: the caller reads itself).
        """
        now = time.time()
        until = now + self.lease_seconds
        claim = (
            "UPDATE ai_utils_sessions SET lease_owner = ?, lease_token = lease_token + 1, lease_until = ? "
            "WHERE session_id = ? AND (lease_owner IS NULL OR lease_until < ?)"
        )
        held: Any = None
        with self.db.batch() as cur:
            if self.db.claim_reads_holder:
                # A lease not taken comes back with its holder, from the same statement: no second round trip.
                # The holder is read as of the statement's start (a claim that waited for another one sees the row
                # from before it: `holder` may be stale, and a takeover then checks the token it read).
                cur.execute(
                    f"WITH c AS ({claim} RETURNING lease_token, last_cursor) SELECT c.lease_token, c.last_cursor, "
                    f"{_HOLDER_COLUMNS} FROM ai_utils_sessions s LEFT JOIN c ON TRUE WHERE s.session_id = ?",
                    (self.owner, until, session_id, now, session_id),
                )
            else:
                cur.execute(
                    claim + returning(self.db, "lease_token", "last_cursor"), (self.owner, until, session_id, now)
                )
            read = None if also is None else also(another_cursor(cur))
            commit_early(cur)  # nothing else to write: the results come back with the commit
            row = cur.fetchone()
            if self.db.claim_reads_holder:
                if row is None:  # no such session
                    return Held(None, 0.0, False)
                if row[0] is None:  # not taken: the holder is in the same row
                    held, row = row[2:], None
            extra = None if row is None or read is None else read()
        if row is None:
            return self._take_over(session_id, until, held)
        token = int(row[0])
        self.leases[session_id] = token
        self.tails[session_id] = (token, int(row[1]))  # the claim locked the row: no line was stored since
        return token, None, extra

    def _take_over(self, session_id: str, until: float, held: Any = None) -> tuple[int, str | None, None] | Held:
        """Who holds the lease (and whether the session has work); a dead holder of this host's is taken over now.

        ``held``: ``(lease_owner, lease_token, lease_until, busy)`` when the failed claim read it already.
        """
        if held is None:
            with self.db.read() as cur:
                cur.execute(f"SELECT {_HOLDER_COLUMNS} FROM ai_utils_sessions s WHERE session_id = ?", (session_id,))
                held = cur.fetchone()
        if held is None:
            return Held(None, 0.0, False)
        holder = Holder.parse(held[0])
        if holder is None or not holder.dead_here():
            return Held(holder, float(held[2]), bool(held[3]))
        # Its holder died on this host: take it over now, only if nobody else did since that read (same token).
        with self.db.write() as cur:
            cur.execute(
                "UPDATE ai_utils_sessions SET lease_owner = ?, lease_token = lease_token + 1, lease_until = ? "
                "WHERE session_id = ? AND lease_token = ?" + returning(self.db, "lease_token"),
                (self.owner, until, session_id, held[1]),
            )
            row = cur.fetchone()
            if row is None:
                return Held(None, 0.0, True)  # taken by another worker just now
            token = int(row[0])
        self.leases[session_id] = token
        return token, str(held[0]), None

    def renew_all(self) -> set[str]:
        """Extend every lease this worker holds, in one statement; the sessions whose lease it still held."""
        with self.db.keeper() as cur:
            cur.execute(
                "UPDATE ai_utils_sessions SET lease_until = ? WHERE lease_owner = ?" + returning(self.db, "session_id"),
                (time.time() + self.lease_seconds, self.owner),
            )
            return {str(row[0]) for row in cur.fetchall()}

    def cancel_seqs(self) -> dict[str, int]:
        """``session_id -> cancel_seq`` of the sessions this worker holds (turns up to it are cancelled)."""
        with self.db.keeper() as cur:
            cur.execute("SELECT session_id, cancel_seq FROM ai_utils_sessions WHERE lease_owner = ?", (self.owner,))
            return {str(row[0]): int(row[1]) for row in cur.fetchall()}

    def release(self, session_id: str, token: int) -> None:
        """Give the lease back (a fenced worker's release changes nothing); wakes waiting workers elsewhere."""
        forgot = False
        try:
            with self.db.write() as cur:
                cur.execute(
                    "UPDATE ai_utils_sessions SET lease_owner = NULL, lease_until = 0 "
                    "WHERE session_id = ? AND lease_token = ?" + returning(self.db, notify="control"),
                    (session_id, token),
                )
                forgot = cur.rowcount == 1 and self.forget(session_id, token)  # before the commit: see `forget`
        except BaseException:
            if forgot:  # not committed: still this worker's lease
                self.leases[session_id] = token
            raise

    def forget(self, session_id: str, token: int) -> bool:
        """Drop ``token`` from `leases` (``False``: not listed), before the commit that gives the lease back.

        The keeper reports a held lease its renewal missed as taken over; a lease given back (committed) but still
        listed would be reported so (a spurious ``lease.lost``).
        """
        self.tails.pop(session_id, None)
        if self.leases.get(session_id) == token:
            del self.leases[session_id]
            return True
        return False

    @contextlib.contextmanager
    def fenced(self, session_id: str, token: int) -> Iterator[tuple[Cursor, int]]:
        """A write transaction that holds only while ``token`` is the session's lease: ``(cursor, last_cursor)``.

        Where the dialect checks the lease in SQL (`Db.fence_check`) and this worker's own last write under the lease
        left the cursor it knows (`tails`), the check rides with the writes and nothing is read first (Postgres: one
        round trip); a stale token fails that statement, the transaction rolls back, `SessionFencedError`. A caller
        that stored lines records the new tail after the commit (`tail`).
        """
        tail = self.tails.pop(session_id, None)
        try:
            with self.db.batch() as cur:
                if self.db.fence_check and tail is not None and tail[0] == token:
                    cur.execute(self.db.fence_check, (session_id, token))
                    last = tail[1]
                else:
                    last = self.check_fence(cur, session_id, token)[0]
                yield cur, last
        except self.db.fence_errors:
            raise _fenced_error(session_id, token) from None

    def tail(self, session_id: str, token: int, last: int) -> None:
        """Record the cursor this worker's committed write under lease ``token`` left the session at."""
        if self.leases.get(session_id) == token:
            self.tails[session_id] = (token, last)

    def check_fence(self, cur: Cursor, session_id: str, token: int) -> tuple[int, int]:
        """Lock the session row in write transaction ``cur``; ``(last_cursor, cancel_seq)`` while ``token`` holds.

        Raises:
            SessionFencedError: ``token`` is no longer the session's lease (the transaction is rolled back).
        """
        cur.execute(
            "SELECT lease_token, last_cursor, cancel_seq FROM ai_utils_sessions WHERE session_id = ?"
            + self.db.for_update,
            (session_id,),
        )
        row = cur.fetchone()
        if row is None or int(row[0]) != token:
            raise _fenced_error(session_id, token)
        return int(row[1]), int(row[2])

    def lease_free(self, session_id: str) -> bool:
        """Whether a worker may take the session now: nobody holds its lease, it expired, or its holder died here."""
        with self.db.read() as cur:
            cur.execute("SELECT lease_owner, lease_until FROM ai_utils_sessions WHERE session_id = ?", (session_id,))
            row = cur.fetchone()
        return row is None or claimable(row[0], float(row[1]), time.time())

    def orphans(self, agent: str) -> Orphans:
        """Sessions of ``agent`` with open turns whose worker is gone, and those another host still holds."""
        with self.db.read() as cur:
            cur.execute(
                "SELECT s.session_id, s.lease_owner, s.lease_until FROM ai_utils_sessions s WHERE s.agent = ? AND "
                f"EXISTS (SELECT 1 FROM ai_utils_turns t WHERE t.session_id = s.session_id AND t.status IN {_OPEN})",
                (agent,),
            )
            rows = cur.fetchall()
        now = time.time()
        free: list[str] = []
        elsewhere: dict[str, float] = {}
        for session_id, owner, until in rows:
            if claimable(owner, float(until), now):
                free.append(str(session_id))
                continue
            holder = Holder.parse(owner)
            if holder is None or holder.host != host_id():
                elsewhere[str(session_id)] = float(until)
        return Orphans(free, elsewhere)


# Who holds a session's lease, until when, and whether the session has work (an open turn or a waiting steer).
_HOLDER_COLUMNS = (
    "s.lease_owner, s.lease_token, s.lease_until, "
    f"EXISTS (SELECT 1 FROM ai_utils_turns WHERE session_id = s.session_id AND status IN {_OPEN}) "
    "OR EXISTS (SELECT 1 FROM ai_utils_inputs WHERE session_id = s.session_id AND kind = 'steer' AND taken = 0)"
)


def _fenced_error(session_id: str, token: int) -> SessionFencedError:
    return SessionFencedError(
        f"Session {session_id!r} was taken over by another worker (lease token {token} is stale); "
        "this worker's writes are refused.",
        session_id=session_id,
    )


def claimable(owner: object, until: float, now: float) -> bool:
    """Whether a lease ``(owner, until)`` may be taken at ``now``: free, expired, or its holder died on this host."""
    if owner is None or until < now:
        return True
    holder = Holder.parse(owner)
    return holder is not None and holder.dead_here()
