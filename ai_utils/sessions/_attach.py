"""How the wrappers take ``sessions=``: tool declarations, the checkpointer, the middleware, opening, recovery."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool

from ai_utils.exceptions import UserError
from ai_utils.sessions._middleware import DEEP_BUILTINS, SessionMiddleware
from ai_utils.sessions._session import Session
from ai_utils.sessions._store import SessionStore
from ai_utils.tools.durable import declared_idempotent

__all__ = ["DEFAULT_NAME", "SessionLink", "agent_name", "attach"]

DEFAULT_NAME = "default"


class SessionLink:
    """What a wrapper created with ``sessions=`` needs from them (it implements `ai_utils._run.durable.Sessions`).

    The wrapper gets it from `attach` and hands it to the run path, which never imports this package.
    """

    def __init__(self, owner: str, store: SessionStore, *, deep: bool) -> None:
        self.owner = owner
        self.store = store
        self.deep = deep

    def checkpointer(self, given: Any) -> Any:
        """The store's checkpointer (``given`` must be left out: the store brings its own)."""
        if given not in (None, True) and given is not self.store.checkpointer:
            raise UserError(
                f"{self.owner}: pass either `sessions=` (it brings its own checkpointer in the same database) or "
                "`checkpointer=`, not both."
            )
        return self.store.checkpointer

    def check_tools(self, tools: Sequence[BaseTool]) -> None:
        """Raise `UserError` for a tool that does not declare ``idempotent``."""
        undeclared = [t.name for t in tools if declared_idempotent(t) is None]
        if undeclared:
            raise UserError(
                f"{self.owner} with sessions= needs every tool to declare whether it is safe to run twice; "
                f"{undeclared!r} do not. Wrap each: durable_tool(tool, idempotent=True) for lookups or writes keyed "
                "on execution_id, idempotent=False otherwise (or set tool.metadata['idempotent'], or the "
                "ToolRegistry key 'idempotent')."
            )

    def middleware(self, tools: Sequence[BaseTool], servers: Sequence[Any]) -> SessionMiddleware:
        """The session middleware (the agent's repair step) for these tools and MCP servers."""
        self.check_tools(tools)
        table: dict[str, bool] = dict(DEEP_BUILTINS) if self.deep else {}
        for server in servers:
            # MCP tools default to idempotent=False; MCPServer(idempotent=[...]) names the safe ones.
            for name in getattr(server, "idempotent", ()):
                table[f"{server.name}__{name}"] = True
        return SessionMiddleware(table)

    def open(self, agent: Any, session_id: str | None, context: Any) -> Session:
        """``agent.session(...)``: register the agent with this worker and open the session."""
        name = agent_name(agent)
        self.store.engine.register(agent, name)
        return Session(agent, self.store, name, session_id, context)

    def recover(self, agent: Any, *, here: bool = False) -> int:
        """Continue every orphaned session of the agent (open turns, no live lease); how many were continued."""
        name = agent_name(agent)
        self.store.engine.register(agent, name)
        orphans = self.store.orphans(name)
        for session_id in orphans:
            self.store.engine.kick(session_id, here=here)
        return len(orphans)


def attach(owner: str, sessions: Any, *, deep: bool = False) -> SessionLink:
    """Check ``sessions=``; the link the wrapper hands to the run path.

    Raises:
        UserError: not a session store.
    """
    if not isinstance(sessions, SessionStore):
        raise UserError(
            f"{owner}(sessions=...) needs a session store from sqlite_sessions(path), postgres_sessions(...) "
            f"or memory_sessions(), got {sessions!r}."
        )
    return SessionLink(owner, sessions, deep=deep)


def agent_name(agent: Any) -> str:
    """The name sessions are owned by (``"default"`` for an unnamed agent)."""
    return str(getattr(agent, "name", None) or DEFAULT_NAME)
