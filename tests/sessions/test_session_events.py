"""``on_event`` diagnostics (SPEC §14b): turn, lease and model events, ``checkpoint.mismatch`` — and never a
credential, a context value or message content in any of them."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from ai_utils import Agent, durable_tool, sqlite_sessions
from ai_utils.testing import FakeChatModel


@dataclass
class Creds:
    api_key: str


def test_on_event_reports_turns_leases_and_model_calls_without_content(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []

    @tool
    def lookup(city: str, runtime: ToolRuntime[Creds]) -> str:
        """Weather for a city."""
        return f"{city}: sunny (key {runtime.context.api_key[:2]}...)"

    store = sqlite_sessions(tmp_path / "e.sqlite")
    try:
        llm = FakeChatModel([{"tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}}]}, "SECRET-ANSWER-TEXT"])
        agent = Agent(
            llm=llm,
            tools=[durable_tool(lookup, idempotent=True)],
            sessions=store,
            context_schema=Creds,
            on_event=events.append,
            name="ev",
        )
        s = agent.session(context=Creds(api_key="sk-live-TOPSECRET"))
        turn = s.prompt("PRIVATE-QUESTION-TEXT about Oslo", message_id="q-1")
        assert turn.result().stop_reason == "end_turn"
    finally:
        store.close()  # type: ignore[attr-defined]
    types = [e["type"] for e in events]
    assert types[0] == "turn.accepted" and "turn.started" in types and "lease.acquired" in types
    assert types.count("model.request") == 2 and "turn.ended" in types
    accepted = events[0]
    assert accepted["session_id"] == s.id and accepted["turn_id"] == turn.id and accepted["message_id"] == "q-1"
    requests = [e for e in events if e["type"] == "model.request"]
    assert all(e["attempt"] == 1 and e["elapsed_ms"] >= 0 and e["ok"] for e in requests)
    ended = next(e for e in events if e["type"] == "turn.ended")
    assert ended["stop_reason"] == "end_turn" and ended["usage"]["total_tokens"] > 0
    assert all(isinstance(e["at"], float) for e in events)
    text = json.dumps(events)
    for secret in ("sk-live-TOPSECRET", "PRIVATE-QUESTION-TEXT", "SECRET-ANSWER-TEXT", "sunny"):
        assert secret not in text


def test_a_thread_written_with_another_tool_set_or_model_is_reported(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []

    def lookup(city: str) -> str:
        """Weather."""
        return "sunny"

    def book(city: str) -> str:
        """Book a trip."""
        return "booked"

    path = tmp_path / "m.sqlite"
    store = sqlite_sessions(path)
    try:
        old = Agent(llm=FakeChatModel(["hi"]), tools=[durable_tool(lookup, idempotent=True)], sessions=store)
        old.session("trip").prompt("hello").result()
    finally:
        store.close()  # type: ignore[attr-defined]
    store = sqlite_sessions(path)
    try:
        new = Agent(
            llm=FakeChatModel(["again"], model_name="fake-2"),
            tools=[durable_tool(book, idempotent=False)],
            sessions=store,
            on_event=events.append,
        )
        new.session("trip").prompt("hello again").result()
        new.session("trip").prompt("and once more").result()  # nothing changed since: no second event
    finally:
        store.close()  # type: ignore[attr-defined]
    mismatches = [e for e in events if e["type"] == "checkpoint.mismatch"]
    assert len(mismatches) == 1
    changed = mismatches[0]["changed"]
    assert changed["tools"] == {"added": ["book"], "removed": ["lookup"]}
    assert changed["model"]["now"] == "fake-2"


async def test_an_async_sink_is_awaited_and_a_failing_sink_never_fails_the_turn(tmp_path: Path) -> None:
    seen: list[str] = []

    async def sink(event: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        seen.append(event["type"])

    def broken(event: dict[str, Any]) -> None:
        raise RuntimeError("sink down")

    store = sqlite_sessions(tmp_path / "a.sqlite")
    try:
        ok = Agent(llm=FakeChatModel(["fine"]), sessions=store, on_event=sink, name="ok")
        assert (await (await ok.session().aprompt("hi")).aresult()).output == "fine"
        bad = Agent(llm=FakeChatModel(["still fine"]), sessions=store, on_event=broken, name="bad")
        assert (await (await bad.session().aprompt("hi")).aresult()).output == "still fine"
    finally:
        store.close()  # type: ignore[attr-defined]
    await asyncio.sleep(0.05)
    assert "turn.ended" in seen
