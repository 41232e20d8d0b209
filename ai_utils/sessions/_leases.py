"""Session leases: one worker at a time runs a session's turns, and a replaced worker's writes are refused.

A lease is a row lock with a time limit: ``claim`` takes it when it is free or expired and bumps the
session's ``lease_token``; every write a running turn makes goes through `Leases.fenced`, one transaction
that first checks the token is still this worker's (`SessionFencedError` otherwise, rolled back).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from ai_utils.exceptions import SessionFencedError
from ai_utils.sessions._schema import Cursor, Db

__all__ = ["Leases"]


class Leases:
    """The lease half of `SessionStore` (``db``, ``owner``, ``lease_seconds`` and ``leases`` are set there)."""

    db: Db
    owner: str
    lease_seconds: float
    # Lease tokens this worker holds (or held until it was fenced): the checkpointer fences with them.
    leases: dict[str, int]

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
