"""Redact before the first write: a key the user types is in no checkpoint, session table or stream line, ever.

LangGraph stores a run's input before any middleware runs, and a durable session stores a prompt or steer before its
turn starts. Each test reads every table and every byte of the real SQLite files afterwards.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from guardrails._secrets import SECRETS
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ai_utils import Agent, DeepAgent, durable_tool, guardrails, sqlite_saver, sqlite_sessions
from ai_utils.client import is_user_message
from ai_utils.testing import FakeChatModel, FunctionChatModel

KEYS = {kind: SECRETS[kind] for kind in ("openai_api_key", "github_token", "private_key", "aws_secret_key")}


def _everything(folder: Path) -> bytes:
    """Every row of every table of every SQLite file in ``folder``, and the files' raw bytes (WAL included)."""
    out = bytearray()
    for path in sorted(folder.iterdir()):
        out += path.read_bytes()
        if path.suffix in (".db", ".sqlite"):
            with sqlite3.connect(path) as db:
                tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                assert tables
                for table in tables:
                    for row in db.execute(f'SELECT * FROM "{table}"'):  # table names from sqlite_master
                        out += repr(row).encode()
                        out += b"".join(v for v in row if isinstance(v, bytes))
    return bytes(out)


def _leaks(folder: Path, secret: str) -> bool:
    # Stored as UTF-8 (JSON, msgpack) or as escaped JSON (a private key's newlines as ``\n``); any line of it counts.
    data = _everything(folder)
    return any(line.encode() in data for line in secret.splitlines() if len(line) > 20)


@pytest.mark.parametrize("kind", sorted(KEYS))
@pytest.mark.parametrize("how", ["invoke", "stream", "messages"])
def test_a_typed_key_never_reaches_the_sqlite_checkpointer(tmp_path: Path, kind: str, how: str) -> None:
    secret, text = KEYS[kind]
    prompt: Any = f"please use {text} from now on"
    if how == "messages":
        prompt = [HumanMessage(prompt)]

    def run(folder: Path, middleware: Any) -> None:
        folder.mkdir()
        agent = Agent(
            llm=FakeChatModel(["Noted."]), checkpointer=sqlite_saver(folder / "threads.db"), middleware=middleware
        )
        if how == "stream":
            assert "".join(c for c in agent.stream(prompt, thread_id="t") if isinstance(c, str)) == "Noted."
        else:
            assert agent.invoke(prompt, thread_id="t") == "Noted."

    # The attack surface: without guardrails the first (input) checkpoint keeps what the user typed.
    run(tmp_path / "plain", ())
    assert _leaks(tmp_path / "plain", secret)

    decisions: list[dict[str, Any]] = []
    run(tmp_path / "guarded", guardrails("standard", on_decision=decisions.append))
    assert not _leaks(tmp_path / "guarded", secret)
    # Reported once, with the turn's first model call, as before.
    assert decisions == [{"policy_id": f"secret.{kind}", "phase": "input", "action": "redact", "risk": "high"}]


async def test_async_runs_and_deep_agents_redact_before_the_first_write_too(tmp_path: Path) -> None:
    secret, text = KEYS["github_token"]
    agent = Agent(
        llm=FakeChatModel(["ok"]), checkpointer=sqlite_saver(tmp_path / "a.db"), middleware=guardrails("strict")
    )
    assert await agent.ainvoke(f"token {text}", thread_id="t") == "ok"
    deep = DeepAgent(
        llm=FakeChatModel(["ok"]), checkpointer=sqlite_saver(tmp_path / "d.db"), middleware=[guardrails("standard")]
    )
    assert deep.invoke(f"token {text}", thread_id="t") == "ok"
    assert not _leaks(tmp_path, secret)


def test_a_typed_key_never_reaches_any_table_of_the_session_store(tmp_path: Path) -> None:
    secret, text = KEYS["openai_api_key"]
    other, other_text = KEYS["github_token"]
    started, release = threading.Event(), threading.Event()
    seen: list[list[str]] = []

    def slow_lookup(city: str) -> str:
        """Weather for a city (slow)."""
        started.set()
        release.wait(30)
        return f"{city}: rain"

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        seen.append([m.text for m in messages])
        if not any(isinstance(m, AIMessage) for m in messages):
            return {"tool_calls": [{"name": "slow_lookup", "args": {"city": "Bergen"}}]}
        return "done"

    decisions: list[dict[str, Any]] = []
    store = sqlite_sessions(tmp_path / "sessions.db")
    try:
        agent = Agent(
            llm=FunctionChatModel(reply),
            tools=[durable_tool(slow_lookup, idempotent=True)],
            sessions=store,
            middleware=guardrails("standard", on_decision=decisions.append),
        )
        s = agent.session()
        turn = s.prompt(f"my key is {text}, weather in Bergen?")  # the prompt: turn payload + inputs table
        assert started.wait(30)
        s.steer(f"and my token is {other_text}")  # joins the running turn: a `user_message` line
        release.set()
        chunks = list(turn)
        s.steer(f"again: {text}")  # no turn running: becomes a turn of its own
        deadline = time.monotonic() + 30
        while store.busy(s.id) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not store.busy(s.id)
        replayed = list(s.stream(0))
    finally:
        store.close()  # type: ignore[attr-defined]

    joined = [c for c in chunks if is_user_message(c)]
    assert joined == [
        {
            "kind": "user_message",
            "text": f"and my token is {other_text}".replace(other, "[REDACTED:github_token]"),
            "id": joined[0]["id"],
        }
    ]
    for key in (secret, other):
        assert key not in repr(replayed) and key not in repr(seen)
        assert not _leaks(tmp_path, key)
    assert [d["policy_id"] for d in decisions] == [
        "secret.openai_api_key",
        "secret.github_token",
        "secret.openai_api_key",
    ]
