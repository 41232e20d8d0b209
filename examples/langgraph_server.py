"""The README's support agent as a LangGraph Server: `langgraph_api_routes` over durable sessions (SPEC §21).

Any LangGraph client talks to it as to a LangGraph deployment: `langgraph_sdk.get_client(url=..., api_key=...)`,
`RemoteGraph("support", url=..., api_key=...)`, the JS `@langchain/langgraph-sdk` `Client` and React's
`useStream({apiUrl, assistantId: "support"})`. A thread is a durable session, a run is one of its turns: a run
survives the server process that started it, and any number of server processes on one Postgres serve the same
threads (no Redis, no licence).

Runs offline with a scripted model; with OPENROUTER_API_KEY set it uses the real provider (`get_llm()`).
Clients send an API key (`x-api-key`, what `get_client(api_key=...)` sends); the keys and their users come from
AI_UTILS_API_KEYS (``key=user,key2=user2``) -- without it the server makes one key and prints it.

One process on a SQLite file:

    .venv/bin/python examples/langgraph_server.py --port 8123 --db support.sqlite

Several workers on one Postgres (every one continues the runs a dead one left, after its lease):

    export AI_UTILS_API_KEYS="dev-key=alice" LANGGRAPH_DB="postgresql://user:pw@db-host/app"
    .venv/bin/uvicorn --app-dir examples --factory langgraph_server:from_env --port 8123 --workers 4
    .venv/bin/uvicorn --app-dir examples --factory langgraph_server:from_env --port 8124   # another machine

Then, from Python:

    from langgraph_sdk import get_sync_client
    client = get_sync_client(url="http://127.0.0.1:8123", api_key="dev-key")
    thread = client.threads.create()
    for part in client.runs.stream(thread["thread_id"], "support", input={"messages": [
            {"role": "user", "content": "Where is B-42?"}]}, stream_mode="messages-tuple"):
        print(part.event, part.data)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from starlette.applications import Starlette
from starlette.requests import Request

from ai_utils import Actor, Agent, durable_tool, get_llm, langgraph_api_routes, postgres_sessions, sqlite_sessions
from ai_utils.sessions import SessionStore
from ai_utils.testing import FunctionChatModel


def get_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: the order, e.g. ``B-42``.
    """
    return f"order {order_id}: shipped"


def refund(order_id: str, execution_id: str) -> str:
    """Refund an order.

    Args:
        order_id: the order to refund.
        execution_id: the call's idempotency key (the same when a crashed run calls it again).
    """
    return f"refunded {order_id} (idempotency key {execution_id[:8]}...)"  # pass execution_id to your payment API


def pick_model() -> BaseChatModel:
    """The real provider when OPENROUTER_API_KEY is set, else a scripted model."""
    if os.environ.get("OPENROUTER_API_KEY"):
        return get_llm()

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        said = next(
            (
                str(m.content)
                for m in reversed(messages)
                if isinstance(m, HumanMessage) and "[system note]" not in str(m.content)
            ),
            "",
        )
        order = said.rstrip("?.! ").split()[-1] if said.split() else "B-42"
        if isinstance(messages[-1], ToolMessage):
            return f"Done: {messages[-1].content}."
        name = "refund" if said.lower().startswith("refund") else "get_order"
        return {"content": "Let me check. ", "tool_calls": [{"name": name, "args": {"order_id": order}}]}

    return FunctionChatModel(reply)


class ApiKeys:
    """``x-api-key`` (or ``Authorization: Bearer``) -> its user; anything else -> ``None`` (a 401).

    Replace it with your own check (a JWT, a session cookie) returning an `Actor`. A thread belongs to the user
    who created it: anyone else gets a 404.
    """

    def __init__(self, spec: str | None) -> None:
        if not spec:
            key = secrets.token_urlsafe(16)
            print(f"no AI_UTILS_API_KEYS set: use the API key {key} (user 'dev')", flush=True)
            spec = f"{key}=dev"
        pairs = (item.split("=", 1) for item in spec.split(",") if item.strip())
        self.keys = {key.strip(): Actor(user_id=user.strip()) for key, user in pairs}

    def __call__(self, request: Request) -> Actor | None:
        key = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
        return self.keys.get(key) if key else None


def open_store(db: str | Path, lease_seconds: float) -> SessionStore:
    """A Postgres session store for a ``postgresql://`` URI, else a SQLite file (sessions and checkpoints)."""
    if str(db).startswith(("postgres://", "postgresql://")):
        return postgres_sessions(str(db), lease_seconds=lease_seconds)
    return sqlite_sessions(Path(db), lease_seconds=lease_seconds)


def support_agent(store: SessionStore, llm: BaseChatModel | None = None) -> Agent:
    """The README's support agent; a refund waits for a human's approval."""
    return Agent(
        llm=llm or pick_model(),
        prompt="You answer questions about orders.",
        tools=[durable_tool(get_order, idempotent=True), durable_tool(refund, idempotent=True, writes=True)],
        sessions=store,
        name="support",
        interrupt_on={"refund": {"decisions": ["approve", "edit", "reject"], "question": "Refund this order?"}},
    )


def create_app(
    db: str | Path, *, llm: BaseChatModel | None = None, lease_seconds: float = 30.0, api_keys: str | None = None
) -> Starlette:
    """The app: the LangGraph Server API for the assistant ``"support"`` on the session store in ``db``.

    Args:
        db: a SQLite file or a ``postgresql://`` URI; every server process on it serves the same threads.
        llm: the chat model; defaults to `pick_model()`.
        lease_seconds: how soon another process continues a run whose server died.
        api_keys: ``key=user,...``; defaults to AI_UTILS_API_KEYS.
    """
    store = open_store(db, lease_seconds)
    agent = support_agent(store, llm)
    agent.recover()  # continue the runs a previous server left unfinished (the routes keep doing so)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        store.close()  # type: ignore[attr-defined]

    authenticate = ApiKeys(api_keys if api_keys is not None else os.environ.get("AI_UTILS_API_KEYS"))
    app = Starlette(
        routes=langgraph_api_routes({"support": agent}, sessions=store, authenticate=authenticate), lifespan=lifespan
    )
    app.state.store = store
    return app


def from_env() -> Starlette:
    """The uvicorn factory: LANGGRAPH_DB (default ``support.sqlite``), LANGGRAPH_LEASE_SECONDS (default 30)."""
    return create_app(
        os.environ.get("LANGGRAPH_DB", "support.sqlite"),
        lease_seconds=float(os.environ.get("LANGGRAPH_LEASE_SECONDS", "30")),
    )


def main() -> None:
    """Serve the API on 127.0.0.1."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--db", default="support.sqlite", help="a SQLite file or a postgresql:// URI")
    parser.add_argument("--lease", type=float, default=30.0, help="lease_seconds of the session store")
    args = parser.parse_args()
    print(f"LangGraph API on http://127.0.0.1:{args.port} (assistant 'support')", flush=True)
    uvicorn.run(create_app(args.db, lease_seconds=args.lease), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
