"""How the wrappers take ``sessions=``: tool declarations, the checkpointer, the middleware, opening, recovery."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.tools import BaseTool

from ai_utils.exceptions import UserError
from ai_utils.sessions._content import ImageResizer, check_resizer
from ai_utils.sessions._events import Emitter, check_sink
from ai_utils.sessions._middleware import DEEP_BUILTINS, SessionMiddleware
from ai_utils.sessions._schema import MAX_INSTRUCTIONS_BYTES, SessionConfig, shown
from ai_utils.sessions._session import Session
from ai_utils.sessions._store import SessionStore
from ai_utils.tools.durable import declared_idempotent

__all__ = ["DEFAULT_NAME", "SessionLink", "agent_name", "attach"]

DEFAULT_NAME = "default"


def _model_name(llm: Any) -> str | None:
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(llm, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(llm).__name__ if llm is not None else None


class SessionLink:
    """What a wrapper created with ``sessions=`` needs from them (it implements `ai_utils._run.durable.Sessions`).

    The wrapper gets it from `attach` and hands it to the run path, which never imports this package.

    Attributes:
        resize_image: the agent's prompt image hook.
        events: the agent's ``on_event`` sink.
    """

    def __init__(
        self,
        owner: str,
        store: SessionStore,
        *,
        deep: bool,
        resize_image: ImageResizer | None = None,
        on_event: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.owner = owner
        self.store = store
        self.deep = deep
        self.resize_image = resize_image
        self.events = Emitter(on_event)
        self._models: dict[str, Any] = {}

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

    # --- per-session configuration -----------------------------------------------------------------------

    def chat_model(self, model: str | None) -> Any:
        """The chat model for a session's ``model`` string (resolved once per process), ``None`` for the agent's."""
        if model is None:
            return None
        llm = self._models.get(model)
        if llm is None:
            from ai_utils._run.args import resolve_llm

            llm = self._models[model] = resolve_llm(model, owner=f"{self.owner}.session(model=...)")
        return llm

    def fingerprint(self, agent: Any, model: str | None) -> dict[str, Any]:
        """What a session's thread is written with: the agent's tool names and the model (to spot a change)."""
        servers = [f"{s.name}__*" for s in getattr(agent, "_servers", ())]
        return {"tools": sorted([t.name for t in agent._tools] + servers), "model": model or _model_name(agent.llm)}

    def _config(self, model: Any, instructions: Any) -> SessionConfig | None:
        if model is None and instructions is None:
            return None
        if model is not None:
            if not isinstance(model, str) or ":" not in model or not all(model.partition(":")[::2]):
                raise UserError(
                    f"session(model=...) must be a 'provider:model' string (as for get_llm), got {shown(model)}; "
                    "e.g. 'openai:gpt-4o-mini'."
                )
        if instructions is not None:
            if not isinstance(instructions, str):
                raise UserError(f"session(instructions=...) must be a str, got {type(instructions).__name__}.")
            size = len(instructions.encode("utf-8"))
            if size > MAX_INSTRUCTIONS_BYTES:
                raise UserError(
                    f"session(instructions=...) is {size} bytes; at most 64 KiB ({MAX_INSTRUCTIONS_BYTES} bytes). "
                    "Shorten them, or put reference material in a tool the model can call."
                )
        return SessionConfig(model, instructions)

    # --- opening and recovery ----------------------------------------------------------------------------

    def open(
        self, agent: Any, session_id: str | None, context: Any, model: Any = None, instructions: Any = None
    ) -> Session:
        """``agent.session(...)``: register the agent with this worker and open the session."""
        name = agent_name(agent)
        config = self._config(model, instructions)
        self.store.engine.register(agent, name)
        session = Session(agent, self.store, name, session_id, context, config)
        if config is not None:
            self.chat_model(config.model)  # an unknown provider or a missing key fails here, not in a turn
        return session

    def _continue(self, agent: Any, *, here: bool) -> tuple[set[str], dict[str, float]]:
        name = agent_name(agent)
        self.store.engine.register(agent, name)
        found = self.store.orphans(name)
        for session_id in found.free:
            self.store.engine.kick(session_id, owner=name, here=here)
        return set(found.free), found.elsewhere

    def recover(self, agent: Any, *, here: bool = False, wait: bool = False) -> int:
        """Continue every orphaned session of the agent; how many were continued.

        With ``wait``, also the sessions whose lease a worker on another host held: after waiting for those
        leases to expire (a lease that was renewed meanwhile belongs to a live worker and is left alone).
        """
        continued, elsewhere = self._continue(agent, here=here)
        if wait and elsewhere:
            time.sleep(max(max(elsewhere.values()) - time.time(), 0) + 0.05)
            more, _ = self._continue(agent, here=here)
            continued |= more
        return len(continued)

    async def arecover(self, agent: Any, *, wait: bool = False) -> int:
        """Async twin of `recover` (the continued turns run as tasks on this loop)."""
        continued, elsewhere = self._continue(agent, here=True)
        if wait and elsewhere:
            await asyncio.sleep(max(max(elsewhere.values()) - time.time(), 0) + 0.05)
            more, _ = self._continue(agent, here=True)
            continued |= more
        return len(continued)


def attach(
    owner: str,
    sessions: Any,
    *,
    deep: bool = False,
    resize_image: Any = None,
    on_event: Any = None,
) -> SessionLink:
    """Check ``sessions=`` (and the options that need it); the link the wrapper hands to the run path.

    Raises:
        UserError: not a session store, or a ``resize_image`` / ``on_event`` that is not callable.
    """
    if not isinstance(sessions, SessionStore):
        raise UserError(
            f"{owner}(sessions=...) needs a session store from sqlite_sessions(path), postgres_sessions(...) "
            f"or memory_sessions(), got {sessions!r}."
        )
    return SessionLink(
        owner,
        sessions,
        deep=deep,
        resize_image=check_resizer(resize_image, owner),
        on_event=check_sink(on_event, owner),
    )


def agent_name(agent: Any) -> str:
    """The name sessions are owned by (``"default"`` for an unnamed agent)."""
    return str(getattr(agent, "name", None) or DEFAULT_NAME)
