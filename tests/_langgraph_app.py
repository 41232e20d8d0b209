"""The LangGraph API test app: the README's support agent (scripted) behind `langgraph_api_routes`.

Used in process (the ``serve`` fixture) and as a uvicorn factory in subprocesses (the kill test):
``uvicorn --factory _langgraph_app:from_env`` with ``LG_DB`` (a Postgres URI or a SQLite path),
``LG_LEASE`` (seconds) and ``LG_TOOL_SECONDS`` (how long ``slow_lookup`` takes in that process).

The scripted model answers by the user's last message:

- ``"refund <id>"``: a ``refund`` call (it waits for approval), then ``"Done: <the tool's answer>."``;
- ``"slow <key>"``: a ``slow_lookup`` call (it blocks until the test opens `GATE`, or sleeps
  ``LG_TOOL_SECONDS``), then ``"Done: <the tool's answer>."``;
- anything else: ``"Let me look. "`` and a ``get_order`` call (it writes a custom progress event), then
  ``"<id> is shipped."``.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.config import get_stream_writer
from starlette.applications import Starlette
from starlette.requests import Request

from ai_utils import Actor, Agent, durable_tool, langgraph_api_routes, postgres_sessions, sqlite_sessions
from ai_utils.sessions import SessionStore
from ai_utils.testing import FunctionChatModel

KEYS = {"alice-key": Actor(user_id="alice"), "bob-key": Actor(user_id="bob", tenant_id="acme")}


class Gate:
    """Holds ``slow_lookup`` calls until opened; counts the calls that started."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.started = 0

    def reset(self) -> None:
        self.event.clear()
        self.started = 0


GATE = Gate()


def authenticate(request: Request) -> Actor | None:
    """``x-api-key`` (what ``get_client(api_key=...)`` sends) or ``Authorization: Bearer``."""
    key = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
    return KEYS.get(key)


def get_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: the order.
    """
    get_stream_writer()({"progress": f"looking up {order_id}"})
    return f"order {order_id}: shipped"


def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id: the order.
    """
    return f"refunded {order_id}"


def slow_lookup(key: str) -> str:
    """Look something up slowly.

    Args:
        key: what to look up.
    """
    GATE.started += 1
    seconds = float(os.environ.get("LG_TOOL_SECONDS", "-1"))
    if seconds >= 0:
        time.sleep(seconds)
    elif not GATE.event.wait(60):
        raise TimeoutError("the gate was never opened")
    return f"value of {key}"


def _said(messages: list[BaseMessage]) -> str:
    """The user's last message (a continued turn's ``[system note]`` for the model is not the user's)."""
    said = (str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage))
    return next((text for text in said if not text.startswith("[system note]")), "")


def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
    said = _said(messages)
    messages = [m for m in messages if not str(m.content).startswith("[system note]")]
    answered = isinstance(messages[-1], ToolMessage)
    words = said.split()
    target = words[-1] if words else "B-42"
    if said.startswith(("refund", "slow")) and answered:
        return f"Done: {messages[-1].content}."
    if said.startswith("refund"):
        return {"content": "", "tool_calls": [{"name": "refund", "args": {"order_id": target}}]}
    if said.startswith("slow"):
        return {"content": "One moment. ", "tool_calls": [{"name": "slow_lookup", "args": {"key": target}}]}
    if answered:
        match = re.search(r"order (\S+):", str(messages[-1].content))
        return f"{match.group(1) if match else target} is shipped."
    return {"content": "Let me look. ", "tool_calls": [{"name": "get_order", "args": {"order_id": target}}]}


def support_agent(store: SessionStore) -> Agent:
    """The README's support agent, scripted."""
    return Agent(
        llm=FunctionChatModel(reply),
        tools=[
            durable_tool(get_order, idempotent=True),
            durable_tool(refund, idempotent=True, writes=True),
            durable_tool(slow_lookup, idempotent=True),
        ],
        sessions=store,
        name="support",
        interrupt_on={"refund": {"decisions": ["approve", "edit", "reject"], "question": "Refund this order?"}},
    )


def create_app(store: SessionStore) -> Starlette:
    """The API app on ``store``."""
    agent = support_agent(store)
    app = Starlette(routes=langgraph_api_routes({"support": agent}, sessions=store, authenticate=authenticate))
    app.state.store = store
    return app


def from_env() -> Starlette:
    """The uvicorn factory: ``LG_DB`` names the store (a ``postgresql://`` URI or a SQLite path)."""
    db = os.environ["LG_DB"]
    lease = float(os.environ.get("LG_LEASE", "30"))
    store = (
        postgres_sessions(db, lease_seconds=lease)
        if db.startswith("postgres")
        else sqlite_sessions(Path(db), lease_seconds=lease)
    )
    return create_app(store)
