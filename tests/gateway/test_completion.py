from __future__ import annotations

from typing import Any

import pytest
from _services import Aimock
from langchain_core.tools import tool

from ai_utils.gateway import Gateway, GatewayError, GatewayEvent, MemoryAuditSink, Route
from ai_utils.gateway.completion import StreamChunk, aconsume_stream, consume_stream


@tool
def search(query: str) -> str:
    """Search the knowledge base."""
    return query


def _gateway(*responses: Any) -> tuple[Gateway, MemoryAuditSink, list[GatewayEvent]]:
    sink = MemoryAuditSink()
    events: list[GatewayEvent] = []
    gateway = Gateway(
        routes=[Route("support", "fake", "fake-1", {"responses": list(responses)})], audit=sink, on_event=events.append
    )
    return gateway, sink, events


ACTOR = {"user_id": "u1"}
TOOL_REPLY = {
    "content": "Let me look.",
    "reasoning": "Need data.",
    "tool_calls": [{"name": "search", "args": {"query": "refund"}}],
}


def test_complete_returns_text_request_id_decisions_and_tool_calls() -> None:
    gateway, sink, _ = _gateway(TOOL_REPLY)
    response = gateway.complete(
        "support", [{"role": "user", "content": "Triage this ticket."}], actor=ACTOR, tools=[search]
    )
    assert response.text == "Let me look."
    assert (response.model_used, response.provider_used) == ("fake-1", "fake")
    assert [d.rule for d in response.policy_decisions] == ["feature_registered", "require_actor"]
    assert response.tool_calls == [
        {"tool_call_id": response.tool_calls[0]["tool_call_id"], "tool_name": "search", "input": {"query": "refund"}}
    ]
    assert response.stop_reason == "tool_calls"
    assert response.usage is not None
    [entry] = sink.entries
    assert entry.request_id == response.request_id
    assert entry.tools_requested == ["search"]


async def test_acomplete_and_denials() -> None:
    gateway, sink, _ = _gateway("hi")
    assert (await gateway.acomplete("support", "hello", actor=ACTOR)).text == "hi"
    with pytest.raises(GatewayError):
        await gateway.acomplete("support", "hello")
    assert [e.status for e in sink.entries] == ["succeeded", "blocked"]


def test_stream_yields_seed_chunks_and_audits_once_with_the_assembled_text() -> None:
    gateway, sink, events = _gateway(TOOL_REPLY)
    result = gateway.stream("support", "Triage", actor=ACTOR, tools=[search])
    assert events == []  # nothing runs before iteration
    chunks: list[StreamChunk] = list(result)

    types = [c["type"] for c in chunks]
    assert types[0] == "reasoning-delta" and types[-1] == "stop"
    assert "tool-input-delta" in types and types.count("tool-input-complete") == 1
    final = consume_stream(chunks)
    assert final.text == "Let me look." and final.reasoning_text == "Need data."
    assert [(c["tool_name"], c["input"]) for c in final.tool_calls] == [("search", {"query": "refund"})]
    assert final.stop_reason == "tool_calls"
    deltas = "".join(c["args_delta"] for c in chunks if c["type"] == "tool-input-delta")
    assert deltas.replace(" ", "") == '{"query":"refund"}'
    [entry] = sink.entries
    assert entry.request_id == result.request_id
    assert entry.response_summary == "Let me look."
    assert [e.type for e in events] == ["llm.call.started", "llm.call.succeeded"]
    with pytest.raises(TypeError, match="with `for`"):
        result.__aiter__()


async def test_astream_and_its_denial_at_iteration_start() -> None:
    gateway, sink, _ = _gateway("Hello world")
    result = gateway.astream("support", "hi", actor=ACTOR)
    final = await aconsume_stream(result)
    assert (final.text, final.reasoning_text, final.tool_calls) == ("Hello world", None, [])
    with pytest.raises(TypeError, match="async for"):
        iter(result)

    denied = gateway.astream("support", "hi")
    with pytest.raises(GatewayError):
        await aconsume_stream(denied)
    assert [e.status for e in sink.entries] == ["succeeded", "blocked"]


def test_stream_over_real_http_audits_the_assembled_text(aimock: Aimock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", aimock.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    aimock.add({"match": {"userMessage": "hi"}, "response": {"content": "hello from the provider"}})
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", "openai", "gpt-4.1-mini", {"max_retries": 0})], audit=sink)

    final = consume_stream(gateway.stream("support", "hi", actor=ACTOR))
    assert final.text == "hello from the provider"
    assert final.stop_reason == "stop"
    [entry] = sink.entries
    assert entry.response_summary == "hello from the provider"
    assert aimock.request_bodies()[0]["stream"] is True
