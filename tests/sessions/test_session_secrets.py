"""Secrets stay secret in a session's store (SPEC "Security amendments", issue #24), each shown as the attack, then
refused: a failed turn's ``turn_end.error`` (replayed to every reader, over HTTP too) never quotes the exception's
raw text or the session's ``context``; a key the user typed is redacted (guardrails) before the first write, so no
table of the store holds it."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _media import png
from langchain_core.messages import BaseMessage, HumanMessage

from ai_utils import Agent, ModelOutputError, durable_tool, guardrails, sqlite_sessions
from ai_utils.sessions import SessionStore
from ai_utils.testing import FunctionChatModel

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3
TOKEN = "tok-alice-7f3c9a2b61"


@dataclass
class Creds:
    api_token: str
    tenant: str = "acme"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    sessions = sqlite_sessions(tmp_path / "s.sqlite")
    yield sessions
    sessions.close()  # type: ignore[attr-defined]


def _everything_stored(path: Path) -> str:
    """Every value of every table of the SQLite store, as text."""
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out = []
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):  # names from sqlite_master
                out.extend(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in row)
    return "\n".join(out)


@pytest.mark.parametrize(
    ("failure", "kept"),
    [
        # A provider error quoting the key (as OpenAI's 401 does), a driver error quoting the context value:
        # neither is ours, so the line reads generically.
        (RuntimeError(f"Incorrect API key provided: {KEY}"), None),
        (ValueError(f"no row for token={TOKEN!r} in SELECT * FROM creds"), None),
        # Our own error keeps its message (it names the value and the fix), without the context value in it.
        (ModelOutputError(f"reply for {TOKEN} was not JSON; ask for JSON.", errors=[], attempts=1), "was not JSON"),
    ],
)
def test_a_failed_turn_stores_a_safe_error_never_the_raw_text_or_the_context(
    store: SessionStore, tmp_path: Path, caplog: pytest.LogCaptureFixture, failure: Exception, kept: str | None
) -> None:
    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        raise failure

    agent = Agent(llm=FunctionChatModel(reply), sessions=store, context_schema=Creds)
    s = agent.session(context=Creds(TOKEN))
    with caplog.at_level(logging.ERROR, logger="ai_utils.sessions"):
        result = s.prompt("hello").result(timeout=30)
    assert result.stop_reason == "error" and result.error is not None
    error = result.error
    end = [line["chunk"] for line in s.stream(0)][-1]
    assert end["kind"] == "turn_end" and end["error"] == error
    assert error["type"] == type(failure).__name__  # the class name stays: a client can branch on it
    assert KEY not in str(error) and TOKEN not in str(error)
    if kept is None:
        assert error["message"].startswith(f"The turn failed ({type(failure).__name__})")
        assert error["error_id"] in error["message"]
        # The server's log has the details under that id, with the context value cut out.
        logged = [r for r in caplog.records if error["error_id"] in r.getMessage()]
        assert logged and TOKEN not in logged[0].getMessage() and KEY not in logged[0].getMessage()
    else:
        assert kept in error["message"] and "[context]" in error["message"]
    stored = _everything_stored(tmp_path / "s.sqlite")
    assert KEY not in stored and TOKEN not in stored


def test_a_typed_key_is_redacted_before_the_first_write_in_every_table(store: SessionStore, tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    def wait_a_bit() -> str:
        """Wait until the test lets go."""
        started.set()
        assert release.wait(30)
        return "done"

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        if isinstance(messages[-1], HumanMessage) and "wait" in messages[-1].text:
            return {"tool_calls": [{"name": "wait_for_it", "args": {}}]}
        return "noted"

    wait_a_bit.__name__ = "wait_for_it"
    agent = Agent(
        llm=FunctionChatModel(reply),
        tools=[durable_tool(wait_a_bit, idempotent=True)],
        sessions=store,
        middleware=guardrails("standard"),
    )
    s = agent.session()
    # The attack: the user pastes a key into a prompt, into a text block next to an image, and into a steer.
    assert s.prompt(f"my key is {KEY}").result(timeout=30).stop_reason == "end_turn"
    blocks = [{"type": "text", "text": f"and {KEY}"}, {"type": "image", "data": png(1, 1), "mime_type": "image/png"}]
    assert s.prompt(blocks).result(timeout=30).stop_reason == "end_turn"
    running = s.prompt("wait for me")
    assert started.wait(30)
    s.steer(f"also {KEY}")
    release.set()
    assert running.result(timeout=30).stop_reason == "end_turn"
    steered = [line["chunk"] for line in s.stream(0) if isinstance(line["chunk"], dict)]
    shown = [c for c in steered if c["kind"] == "user_message"]
    assert shown and "[REDACTED:" in shown[0]["text"]
    assert any("[REDACTED:" in m.text for m in s.history() if isinstance(m, HumanMessage))
    assert KEY not in _everything_stored(tmp_path / "s.sqlite")
