"""Who owns a durable session: the actor that created it over HTTP, stored in the session store's own database.

One row per session (``ai_utils_session_owners``: session id, agent name, owner key), written in one
transaction with the check that nobody owns it yet, so two actors racing for one new id cannot both win.
A session without a row (created in code, or by another tool on the same store) belongs to no HTTP actor:
the routes answer 404 for it, as for another actor's session (fail closed). The table lives beside the
store's own tables and is created on first use; nothing else in the store changes.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["Owners"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ai_utils_session_owners (
        session_id TEXT PRIMARY KEY, agent TEXT NOT NULL, owner TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)""",
)


class Owners:
    """The owner rows of one session store, for the sessions of one agent.

    Args:
        store: the agent's `SessionStore` (its ``db`` is the store's connection or pool).
        agent: the agent's name; a session of another agent is nobody's here.
    """

    def __init__(self, store: Any, agent: str) -> None:
        self.store = store
        self.agent = agent
        self._ready = False

    def _setup(self) -> None:
        if not self._ready:
            self.store.db.setup(_SCHEMA)
            self._ready = True

    def claim(self, session_id: str, owner: str) -> bool:
        """Make ``owner`` the owner of a new session; ``True`` if it is (now or already) theirs.

        ``False`` when another actor (or another agent) owns it, or when it exists without an owner.
        """
        self._setup()
        if self.store.owner_of(session_id) is not None and self.owner(session_id) is None:
            return False  # a session made outside these routes: no HTTP actor may take it over
        with self.store.db.write() as cur:
            cur.execute(
                "INSERT INTO ai_utils_session_owners (session_id, agent, owner, created) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                (session_id, self.agent, owner, time.time()),
            )
            cur.execute("SELECT agent, owner FROM ai_utils_session_owners WHERE session_id = ?", (session_id,))
            row = cur.fetchone()
        return row is not None and (str(row[0]), str(row[1])) == (self.agent, owner)

    def owner(self, session_id: str) -> tuple[str, str] | None:
        """``(agent, owner key)`` of a session, or ``None`` when it has no owner row."""
        self._setup()
        with self.store.db.read() as cur:
            cur.execute("SELECT agent, owner FROM ai_utils_session_owners WHERE session_id = ?", (session_id,))
            row = cur.fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    def owns(self, session_id: str, owner: str) -> bool:
        """Whether ``owner`` owns the session (through this agent)."""
        return self.owner(session_id) == (self.agent, owner)
