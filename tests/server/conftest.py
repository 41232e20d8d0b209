"""Apps for the HTTP edge tests: a token check, a scripted agent with an approval-gated tool, a durable agent.

The scripted model (a `FunctionChatModel`) answers by the user's last message:

- ``"mail ..."``: text, then a ``send_mail`` call (the tool waits for approval); after the result: ``"Erledigt."``;
- ``"boom"``: a ``lookup`` call, then the next model call fails with a secret in its message (a failure after
  the first line);
- ``"crash"``: the first model call fails (a failure before the first line);
- anything else: ``"Hallo Welt."`` with some reasoning.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _services import require_node_package
from _ui_samples import SECRET
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from starlette.applications import Starlette
from starlette.requests import Request

from ai_utils import Actor, Agent, durable_tool, sqlite_sessions
from ai_utils.sessions import SessionStore
from ai_utils.testing import FunctionChatModel

TOKENS = {"alice-token": Actor(user_id="alice"), "bob-token": Actor(user_id="bob", tenant_id="acme")}


class Outbox:
    """What ``send_mail`` really sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []


def check_token(request: Request) -> Actor | None:
    """The bearer token's actor, or ``None`` (401)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return TOKENS.get(token) if scheme.lower() == "bearer" else None


def _last_human(messages: list[BaseMessage]) -> str:
    return next((str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage)), "")


def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
    said = _last_human(messages)
    answered = isinstance(messages[-1], ToolMessage)
    if said.startswith("crash"):
        raise RuntimeError(f"model down ({SECRET})")
    if said.startswith("boom"):
        if answered:
            raise RuntimeError(f"lost the connection ({SECRET})")
        return {"content": "Moment. ", "tool_calls": [{"name": "lookup", "args": {"key": "b"}}]}
    if said.startswith("mail"):
        if answered:
            return "Erledigt."
        return {
            "content": "Ich schreibe Anna. ",
            "tool_calls": [{"name": "send_mail", "args": {"to": "anna@example.com", "subject": "Termin"}}],
        }
    return {"content": "Hallo Welt.", "reasoning": "Ein Gruss."}


def make_tools(outbox: Outbox) -> list[Any]:
    def send_mail(to: str, subject: str) -> str:
        """Send an e-mail.

        Args:
            to: recipient.
            subject: subject line.
        """
        outbox.sent.append({"to": to, "subject": subject})
        return f"Mail an {to} verschickt."

    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: the key.
        """
        return f"value of {key}"

    return [send_mail, lookup]


@pytest.fixture
def authenticate() -> Callable[[Request], Actor | None]:
    """``authenticate=`` for the routes: ``Authorization: Bearer alice-token`` (or ``bob-token``)."""
    return check_token


@pytest.fixture
def outbox() -> Outbox:
    return Outbox()


@pytest.fixture
def agent(outbox: Outbox) -> Agent:
    """An agent with a checkpointer whose ``send_mail`` waits for approval."""
    return Agent(
        llm=FunctionChatModel(reply),
        tools=make_tools(outbox),
        checkpointer=InMemorySaver(),
        interrupt_on={"send_mail": {"decisions": ["approve", "reject"], "question": "Send this mail?"}},
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    sessions = sqlite_sessions(tmp_path / "sessions.sqlite", lease_seconds=5)
    yield sessions
    sessions.close()  # type: ignore[attr-defined]


@pytest.fixture
def durable(store: SessionStore, outbox: Outbox) -> Agent:
    """A durable agent on a SQLite session store, same tools and model."""
    send_mail, lookup = make_tools(outbox)
    return Agent(
        llm=FunctionChatModel(reply),
        tools=[durable_tool(send_mail, idempotent=False), durable_tool(lookup, idempotent=True)],
        sessions=store,
        name="support",
        interrupt_on={"send_mail": {"decisions": ["approve", "reject"], "question": "Send this mail?"}},
    )


@pytest.fixture
def app() -> Callable[..., Starlette]:
    def build(*route_lists: list[Any]) -> Starlette:
        return Starlette(routes=[route for routes in route_lists for route in routes])

    return build


@pytest.fixture
def node() -> Callable[[str, dict[str, Any]], Any]:
    """Run ``tests/server/<script>`` under Node with a JSON config; its stdout's last line is its JSON report."""
    modules = {
        "agui": require_node_package("@ag-ui/client/dist/index.mjs").as_uri(),
        "ai": require_node_package("ai/dist/index.js").as_uri(),
    }

    def run(script: str, config: dict[str, Any]) -> Any:
        path = Path(__file__).parent / script
        proc = subprocess.run(
            ["node", str(path), json.dumps({**config, "modules": modules})],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "SUPPRESS_TRANSFORMATION_WARNINGS": "true"},
        )
        assert proc.returncode == 0, f"node {script} failed:\n{proc.stdout}\n{proc.stderr}"
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return run
