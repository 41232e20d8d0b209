"""What the run path needs from durable sessions (SPEC §14), as a protocol: sessions implement it.

``Agent(sessions=store)`` asks ``ai_utils.sessions`` for a link (the wrapper's room may import sessions; this
room must not) and hands it to `ai_utils._run.setup`, which takes the checkpointer and the session middleware
from it; ``agent.session()`` / ``agent.recover()`` then go through the same link.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.tools import BaseTool

from ai_utils.exceptions import UserError

__all__ = ["SessionMethods", "Sessions"]


class Sessions(Protocol):
    """A wrapper's link to its session store (made by ``ai_utils.sessions._attach.attach``)."""

    store: Any

    def checkpointer(self, given: Any) -> Any:
        """The store's checkpointer; `UserError` when the wrapper was also given one."""
        ...

    def check_tools(self, tools: Sequence[BaseTool]) -> None:
        """`UserError` for a tool that does not declare whether it is safe to run twice."""
        ...

    def middleware(self, tools: Sequence[BaseTool], servers: Sequence[Any]) -> Any:
        """The session middleware, which is the graph's thread-repair step (it also lets steers join)."""
        ...

    def open(self, agent: Any, session_id: str | None, context: Any, model: Any, instructions: Any) -> Any:
        """Open (or create) one durable session of ``agent``."""
        ...

    def recover(self, agent: Any, *, wait: bool = False) -> int:
        """Continue the agent's orphaned sessions; how many."""
        ...

    async def arecover(self, agent: Any, *, wait: bool = False) -> int:
        """Async twin of `recover`."""
        ...


class SessionMethods:
    """``session()`` / ``recover()`` / ``arecover()`` of every wrapper, through its `Sessions` link."""

    _sessions_link: Sessions | None = None

    def _link(self, method: str = "session") -> Sessions:
        if self._sessions_link is None:
            raise UserError(
                f"{type(self).__name__}.{method}() needs durable sessions: create the agent with "
                "sessions=sqlite_sessions(path) (or memory_sessions())."
            )
        return self._sessions_link

    def session(
        self,
        session_id: str | None = None,
        *,
        context: Any = None,
        model: str | None = None,
        instructions: str | None = None,
    ) -> Any:
        """Open a durable session (a new id when ``None``).

        Args:
            session_id: the session's id (1-128 of letters, digits, ``.``, ``_``, ``-``), ``None`` for a new one.
            context: handed to the tools of the turns this object starts; never stored, never given to turns
                started from another session object.
            model: the session's chat model as a ``"provider:model"`` string (as `get_llm`), stored with it.
            instructions: added to the agent's system prompt for this session (at most 64 KiB), stored with it.

        Raises:
            UserError: the agent has no ``sessions=``, a bad id, model or instructions, a session of an agent with
                another name, or a session created with another ``model`` / ``instructions``.
        """
        return self._link().open(self, session_id, context, model, instructions)

    def recover(self, *, wait: bool = False) -> int:
        """Continue every session of this agent whose worker stopped mid-turn; returns how many.

        A turn whose worker was a dead process on this host is continued at once; one held by a worker on
        another host only once its lease expired — with ``wait=True`` this waits for those leases (a lease that
        is renewed meanwhile belongs to a live worker and is left alone). A continued turn gets no ``context``.
        """
        return self._link("recover").recover(self, wait=wait)

    async def arecover(self, *, wait: bool = False) -> int:
        """Async twin of `recover` (the continued turns run as tasks on this loop)."""
        return await self._link("arecover").arecover(self, wait=wait)
