"""Round-3 gateway additions next to `complete`: the judge's parent run, mapping rows in `MemoryAuditSink`,
`report_dropped_content` and the default dropped-content warning (counts only, never content)."""

from __future__ import annotations

import json
import logging

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ai_utils import DroppedContentReport, Gateway, GatewayError, MemoryAuditSink, Route, report_dropped_content
from ai_utils.gateway.judge import LLMJudge

IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/secret-diagram.png"}}


@tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    return order_id


def _conversation() -> list[object]:
    return [
        HumanMessage(content=[{"type": "text", "text": "Is my order late?"}, IMAGE]),
        AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"order_id": "A-1"}, "id": "c1"}]),
        ToolMessage(content="shipped", tool_call_id="c1"),
        HumanMessage(content="And now?"),
    ]


def test_the_judges_rows_carry_the_parent_run_id() -> None:
    reply = json.dumps({"dimensions": [{"name": "tone", "score": 1, "reasoning": "ok", "evidence": []}]})
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("judge", "fake", "m", {"responses": [reply]})], audit=sink)
    rubric = {"name": "r", "dimensions": [{"name": "tone", "description": "Polite?"}]}
    judge = LLMJudge(gateway=gateway, feature="judge", rubric=rubric, actor={"user_id": "ops"})

    assert judge.evaluate("Reply politely.", "Thanks!", parent_run_id="run-42").passed
    assert [e.parent_run_id for e in sink.entries] == ["run-42"]


def test_memory_audit_sink_takes_mapping_rows_as_a_users_own_test_writes_them() -> None:
    sink = MemoryAuditSink()
    sink.write({"feature": "support", "status": "succeeded"})
    sink.write({"request_id": "r1", "status": "pending"})
    sink.write({"request_id": "r1", "status": "succeeded"})
    assert sink.entries == [
        {"feature": "support", "status": "succeeded"},
        {"request_id": "r1", "status": "succeeded"},
    ]


def test_report_dropped_content_inventories_images_tool_calls_results_and_tools() -> None:
    report = report_dropped_content(_conversation(), tools=[lookup])
    assert (report.images, report.tool_calls, report.tool_results, report.tools) == (1, 1, 1, ("lookup",))
    assert report and report.has_content
    assert not report_dropped_content("plain text")
    assert not DroppedContentReport()


def test_a_text_only_route_strips_and_warns_with_counts_never_content(caplog: pytest.LogCaptureFixture) -> None:
    fake = Route("support", "fake", "m", {"responses": ["On its way."]}, text_only=True)
    gateway = Gateway(routes=[fake])
    with caplog.at_level(logging.WARNING, logger="ai_utils.gateway"):
        response = gateway.complete("support", _conversation(), actor={"user_id": "u1"}, tools=[lookup])
    assert response.text == "On its way."
    assert (response.dropped_content.images, response.dropped_content.tool_results) == (1, 1)
    assert "secret-diagram" not in caplog.text and "A-1" not in caplog.text and "shipped" not in caplog.text
    assert "image" in caplog.text


def test_strict_text_only_refuses_a_stream_before_the_provider_call() -> None:
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", "fake", "m", {"responses": []}, text_only=True)], audit=sink)
    stream = gateway.stream("support", _conversation(), actor={"user_id": "u1"}, strict_text_only=True)
    with pytest.raises(GatewayError):
        list(stream)
    assert [e.status for e in sink.entries] == ["blocked"]
