"""How the wrappers take ``sessions=``: tool declarations, the checkpointer, the middleware, recovery."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool

from ai_utils.exceptions import UserError
from ai_utils.sessions._middleware import DEEP_BUILTINS, SessionMiddleware
from ai_utils.sessions._session import Session
from ai_utils.sessions._store import SessionStore
from ai_utils.tools.durable import declared_idempotent

__all__ = ["DEFAULT_NAME", "attach", "open_session", "recover"]

DEFAULT_NAME = "default"


def attach(
    owner: str,
    sessions: Any,
    *,
    tools: Sequence[BaseTool],
    servers: Sequence[Any],
    checkpointer: Any,
    deep: bool = False,
) -> tuple[Any, SessionMiddleware]:
    """Check ``sessions=`` and the tools; the checkpointer and middleware the agent's graph needs.

    Raises:
        UserError: not a session store, a checkpointer given as well, or a tool without ``idempotent``.
    """
    if not isinstance(sessions, SessionStore):
        raise UserError(
            f"{owner}(sessions=...) needs a session store from sqlite_sessions(path), postgres_sessions(...) "
            f"or memory_sessions(), got {sessions!r}."
        )
    if checkpointer not in (None, True) and checkpointer is not sessions.checkpointer:
        raise UserError(
            f"{owner}: pass either `sessions=` (it brings its own checkpointer in the same database) or "
            "`checkpointer=`, not both."
        )
    undeclared = [t.name for t in tools if declared_idempotent(t) is None]
    if undeclared:
        raise UserError(
            f"{owner} with sessions= needs every tool to declare whether it is safe to run twice; "
            f"{undeclared!r} do not. Wrap each: durable_tool(tool, idempotent=True) for lookups or writes keyed "
            "on execution_id, idempotent=False otherwise (or set tool.metadata['idempotent'], or the "
            "ToolRegistry key 'idempotent')."
        )
    table: dict[str, bool] = dict(DEEP_BUILTINS) if deep else {}
    for server in servers:
        # MCP tools default to idempotent=False; MCPServer(idempotent=[...]) names the safe ones.
        for name in getattr(server, "idempotent", ()):
            table[f"{server.name}__{name}"] = True
    return sessions.checkpointer, SessionMiddleware(table)


def _store_of(agent: Any) -> SessionStore:
    store = getattr(agent, "sessions", None)
    if not isinstance(store, SessionStore):
        raise UserError(
            f"{type(agent).__name__}.session() needs durable sessions: create the agent with "
            "sessions=sqlite_sessions(path) (or memory_sessions())."
        )
    return store


def agent_name(agent: Any) -> str:
    """The name sessions are owned by (``"default"`` for an unnamed agent)."""
    return str(getattr(agent, "name", None) or DEFAULT_NAME)


def open_session(agent: Any, session_id: str | None, context: Any) -> Session:
    """``agent.session(...)``: register the agent with this worker and open the session."""
    store = _store_of(agent)
    name = agent_name(agent)
    store.engine.register(agent, name)
    return Session(agent, store, name, session_id, context)


def recover(agent: Any, *, here: bool = False) -> int:
    """Continue every orphaned session of this agent (open turns, no live lease); how many were continued."""
    store = _store_of(agent)
    name = agent_name(agent)
    store.engine.register(agent, name)
    orphans = store.orphans(name)
    for session_id in orphans:
        store.engine.kick(session_id, here=here)
    return len(orphans)
