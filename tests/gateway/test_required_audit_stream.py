"""``audit_mode="required"`` with streaming: the audit row is known writable before any token is produced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ai_utils import Agent
from ai_utils.gateway import AuditEntry, AuditWriteError, Gateway, MemoryAuditSink, Route, SqliteAuditSink
from ai_utils.testing import FakeChatModel

ACTOR = {"user_id": "u1", "tenant_id": "acme"}


class TimelineSink(MemoryAuditSink):
    """A memory sink that also notes each write on a shared timeline."""

    def __init__(self, timeline: list[str]) -> None:
        super().__init__()
        self.timeline = timeline

    def write(self, entry: AuditEntry) -> None:
        self.timeline.append(f"audit:{entry.status}")
        super().write(entry)


class FailingSink:
    def write(self, entry: AuditEntry) -> None:
        raise OSError("audit database is down")


def _gateway(sink: Any, *responses: Any) -> Gateway:
    return Gateway(
        routes=[Route("support", "fake", "m", {"responses": list(responses) or ["Hello there, friend"]})],
        audit=sink,
        audit_mode="required",
        on_audit_error=lambda err, entry: None,
    )


def test_the_pending_row_is_written_before_the_first_token_and_completed_after_the_last() -> None:
    timeline: list[str] = []
    sink = TimelineSink(timeline)
    stream = _gateway(sink).stream("support", "hi", actor=ACTOR)
    for chunk in stream:
        timeline.append(chunk["type"])
    assert timeline[0] == "audit:pending"
    assert timeline.index("text-delta") > 0
    assert timeline[-2:] == ["audit:succeeded", "stop"] or timeline[-1] == "audit:succeeded"
    [entry] = sink.entries  # the pending row was completed in place
    assert (entry.request_id, entry.status, entry.response_summary) == (
        stream.request_id,
        "succeeded",
        "Hello there, friend",
    )


def test_sqlite_completes_the_pending_row_and_a_finished_row_stays_immutable(tmp_path: Path) -> None:
    sink = SqliteAuditSink(tmp_path / "audit.db")
    gateway = _gateway(sink, "one")
    first = gateway.stream("support", "hi", actor=ACTOR)
    assert "".join(c.get("text", "") for c in first) == "one"
    agent = Agent(llm=gateway.llm("support", actor=ACTOR))
    assert agent.invoke("again") == "one"
    rows = sink.read()
    assert [(r["status"], r["response_summary"], r["tenant_id"]) for r in rows] == [
        ("succeeded", "one", "acme"),
        ("succeeded", "one", "acme"),
    ]
    assert rows[0]["request_id"] == first.request_id
    with pytest.raises(Exception, match="UNIQUE"):
        sink.write(AuditEntry(**{**_entry_fields(rows[0]), "status": "failed"}))


def _entry_fields(row: dict[str, Any]) -> dict[str, Any]:
    from datetime import datetime

    return {**row, "created_at": datetime.fromisoformat(row["created_at"])}


def test_a_failing_sink_fails_the_stream_before_any_output_and_before_the_provider_call() -> None:
    gateway = _gateway(FailingSink())
    received: list[Any] = []
    with pytest.raises(AuditWriteError, match="required"):
        for chunk in gateway.stream("support", "hi", actor=ACTOR):
            received.append(chunk)
    assert received == []

    model = FakeChatModel(["never streamed"])
    with pytest.raises(AuditWriteError):
        for chunk in model.stream("hi", config={"callbacks": [gateway.callback("support", actor=ACTOR)]}):
            received.append(chunk)
    assert received == []
    assert model.calls == []  # the provider was never asked


async def test_async_streams_and_agent_streams_fail_before_any_token_too() -> None:
    gateway = _gateway(FailingSink())
    received: list[Any] = []
    with pytest.raises(AuditWriteError):
        async for chunk in gateway.astream("support", "hi", actor=ACTOR):
            received.append(chunk)
    agent = Agent(llm=gateway.llm("support", actor=ACTOR))
    with pytest.raises(AuditWriteError):
        async for piece in agent.astream("hi"):
            received.append(piece)
    assert received == []
