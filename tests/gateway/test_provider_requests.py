"""`Gateway.complete` / `stream` on Anthropic, Gemini, the OpenAI Responses API and DeepSeek, each against a fake
server speaking that provider's own wire format (tests/_provider_servers, checked against the official SDKs).

The fixtures set ``ANTHROPIC_API_KEY`` + ``ANTHROPIC_BASE_URL`` (and the others) as a user would.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest
from _provider_servers import FakeAnthropicServer, FakeDeepSeekServer, FakeGeminiServer, ProviderServer
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool

from ai_utils import ModelOutputError, ModelProfiles
from ai_utils.gateway import DroppedContentReport, Gateway, GatewayError, MemoryAuditSink, Route

ACTOR = {"user_id": "u1"}
PNG_URL = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@tool
def get_weather(city: str) -> str:
    """Return the weather in a city."""
    return f"{city}: sunny"


PROVIDERS = {
    "anthropic": ("anthropic_server", {}),
    "gemini": ("gemini_server", {}),
    "deepseek": ("deepseek_server", {}),
    "openai": ("responses_server", {"responses_api": True}),
}


def _route(request: pytest.FixtureRequest, provider: str, **route: Any) -> tuple[ProviderServer, Route]:
    fixture, options = PROVIDERS[provider]
    server: ProviderServer = request.getfixturevalue(fixture)
    return server, Route("support", provider, "the-model", {"max_retries": 0, **options}, **route)


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_complete_reports_usage_cache_hit_latency_and_writes_them_to_the_audit_row(
    request: pytest.FixtureRequest, provider: str
) -> None:
    server, route = _route(request, provider)
    server.reply("Your refund is on its way.", input_tokens=11, cache_read=40)
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[route], audit=sink)

    response = gateway.complete("support", "Where is my refund?", actor=ACTOR, parent_run_id="run-7")

    assert response.text == "Your refund is on its way."
    assert (response.provider, response.model) == (provider, "the-model")
    assert response.cache_hit is True
    assert response.latency_ms > 0
    assert response.usage is not None and response.usage["input_token_details"]["cache_read"] == 40
    assert [b["type"] for b in response.content_blocks] == ["text"]
    assert not response.dropped_content
    [entry] = sink.entries
    assert (entry.status, entry.provider, entry.model, entry.parent_run_id) == (
        "succeeded",
        provider,
        "the-model",
        "run-7",
    )
    assert entry.usage is not None and entry.usage["input_token_details"]["cache_read"] == 40
    assert entry.usage["output_tokens"] == response.usage["output_tokens"] > 0
    [call] = server.calls
    assert call.text == "Where is my refund?"


def test_a_reply_without_cache_reads_is_no_cache_hit(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.reply("fresh", cache_creation=30)
    gateway = Gateway(routes=[Route("support", "anthropic", "claude-haiku-5-5")])
    response = gateway.complete("support", "hi", actor=ACTOR)
    assert response.cache_hit is False
    assert response.usage is not None and response.usage["input_token_details"]["cache_creation"] == 30


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai"])
def test_stream_delivers_text_and_a_tool_call_in_the_seed_chunks_and_audits_once(
    request: pytest.FixtureRequest, provider: str
) -> None:
    server, route = _route(request, provider)
    server.reply("Checking.", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}}])
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[route], audit=sink)

    chunks = list(gateway.stream("support", "weather in Paris?", actor=ACTOR, tools=[get_weather]))

    assert "".join(c["text"] for c in chunks if c["type"] == "text-delta") == "Checking."
    [complete] = [c for c in chunks if c["type"] == "tool-input-complete"]
    assert (complete["tool_name"], complete["input"]) == ("get_weather", {"city": "Paris"})
    assert chunks[-1]["type"] == "stop"
    [entry] = sink.entries
    assert entry.status == "succeeded" and entry.tools_requested == ["get_weather"]
    assert server.calls[0].stream


async def test_astream_and_acomplete_on_anthropic(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.reply("Hello there.")
    gateway = Gateway(routes=[Route("support", "anthropic", "claude-haiku-5-5")])
    texts = [c["text"] async for c in gateway.astream("support", "hi", actor=ACTOR) if c["type"] == "text-delta"]
    assert "".join(texts) == "Hello there."
    assert (await gateway.acomplete("support", "hi", actor=ACTOR)).text == "Hello there."


async def test_complete_asks_for_no_stream_even_inside_a_streamed_run_and_a_streaming_route_still_streams(
    anthropic_server: FakeAnthropicServer,
) -> None:
    # complete/acomplete use the route's model with streaming off (LangChain's per-call streaming-handler check is
    # skipped): their config names the gateway's callbacks, which replace an enclosing run's, so no streaming
    # handler was ever attached, even under astream_events. stream/astream stream; a streaming=True route too.
    anthropic_server.reply("Hello there.")
    sink = MemoryAuditSink()
    routes = [
        Route("support", "anthropic", "claude-haiku-5-5", {"max_retries": 0}),
        Route("live", "anthropic", "claude-haiku-5-5", {"max_retries": 0, "streaming": True}),
    ]
    gateway = Gateway(routes=routes, audit=sink)
    assert (await gateway.acomplete("support", "hi", actor=ACTOR)).text == "Hello there."
    assert gateway.complete("support", "hi", actor=ACTOR).text == "Hello there."

    async def node(question: str) -> str:
        return (await gateway.acomplete("support", question, actor=ACTOR)).text

    events = [event async for event in RunnableLambda(node).astream_events("hi", version="v2")]
    assert [event for event in events if event["event"] == "on_chat_model_stream"] == []
    assert [call.stream for call in anthropic_server.calls] == [False, False, False]
    assert "".join(
        [c["text"] async for c in gateway.astream("support", "hi", actor=ACTOR) if c["type"] == "text-delta"]
    )
    assert (await gateway.acomplete("live", "hi", actor=ACTOR)).text == "Hello there."
    assert [call.stream for call in anthropic_server.calls[3:]] == [True, True]
    assert [entry.status for entry in sink.entries] == ["succeeded"] * 5


def test_anthropic_gets_betas_max_tokens_temperature_and_a_json_schema(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.reply('{"ok": true}')
    gateway = Gateway(routes=[Route("support", "anthropic", "claude-sonnet-5-5")])
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

    response = gateway.complete(
        "support",
        "answer in JSON",
        actor=ACTOR,
        max_tokens=321,
        betas=["files-api-2025-04-14"],
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
    )

    assert not response.dropped_content
    [call] = anthropic_server.calls
    assert call.headers["anthropic-beta"] == "files-api-2025-04-14"
    assert call.body["max_tokens"] == 321
    assert call.body["output_config"]["format"]["schema"]["properties"] == schema["properties"]


def test_gemini_gets_its_own_names_for_the_options_and_reports_betas_dropped(
    gemini_server: FakeGeminiServer, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[DroppedContentReport] = []
    gateway = Gateway(routes=[Route("support", "gemini", "gemini-3.5-flash")])
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}

    response = gateway.complete(
        "support",
        "answer in JSON",
        actor=ACTOR,
        max_tokens=99,
        temperature=0.4,
        betas=["files-api-2025-04-14"],
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
        on_dropped_content=seen.append,
    )

    assert response.dropped_content.options == ("betas",)
    assert seen == [response.dropped_content]
    config = gemini_server.calls[0].body["generationConfig"]
    assert (config["maxOutputTokens"], config["temperature"]) == (99, 0.4)
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == schema
    assert "betas" not in str(gemini_server.calls[0].body) and "files-api" not in str(gemini_server.calls[0].headers)


def test_options_a_provider_does_not_take_are_dropped_and_reported_by_default_in_the_log(
    deepseek_server: FakeDeepSeekServer, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = Gateway(routes=[Route("support", "deepseek", "deepseek-chat")])
    schema = {"name": "answer", "schema": {"type": "object"}}
    with caplog.at_level(logging.WARNING, logger="ai_utils.gateway"):
        response = gateway.complete(
            "support",
            "hi",
            actor=ACTOR,
            betas=["x"],
            response_format={"type": "json_schema", "json_schema": schema},
        )
    assert set(response.dropped_content.options) == {"betas", "response_format"}
    assert "betas" in caplog.text and "response_format" in caplog.text
    assert "strict_text_only" not in caplog.text  # it refuses non-text content, not options
    [call] = deepseek_server.calls
    assert "response_format" not in call.body and "betas" not in call.body
    gateway.complete("support", "hi", actor=ACTOR, response_format="json_object")
    assert deepseek_server.calls[1].body["response_format"] == {"type": "json_object"}


def test_a_deepseek_route_is_text_only_strips_images_and_tools_and_strict_refuses_before_any_call(
    deepseek_server: FakeDeepSeekServer,
) -> None:
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", "deepseek", "deepseek-chat")], audit=sink)
    message = HumanMessage(
        content=[
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
        ]
    )

    response = gateway.complete("support", [message], actor=ACTOR, tools=[get_weather])

    assert (response.dropped_content.images, response.dropped_content.tools) == (1, ("get_weather",))
    [call] = deepseek_server.calls
    assert "image_url" not in str(call.body) and "tools" not in call.body
    assert call.text == "What is in this picture?"

    with pytest.raises(GatewayError, match="text-only"):
        gateway.complete("support", [message], actor=ACTOR, strict_text_only=True)
    assert len(deepseek_server.calls) == 1  # refused before the provider call
    assert [e.status for e in sink.entries] == ["succeeded", "blocked"]


PROFILES = ModelProfiles(
    {"claude-first": {"primary": "anthropic:claude-sonnet-5-5", "fallbacks": ["gemini:gemini-3.5-flash"]}}
)


@pytest.mark.parametrize("status", [529, 503])
def test_an_anthropic_primary_falls_back_to_gemini_and_the_audit_names_the_model_that_answered(
    anthropic_server: FakeAnthropicServer, gemini_server: FakeGeminiServer, status: int
) -> None:
    anthropic_server.fail(status, times=5)
    gemini_server.reply("Gemini answers.")
    sink = MemoryAuditSink()
    route = Route("support", "anthropic", "claude-first", {"profile": "claude-first", "profiles": PROFILES})
    gateway = Gateway(routes=[route], audit=sink)

    response = gateway.complete("support", "hi", actor=ACTOR, max_tokens=50, betas=["files-api-2025-04-14"])

    assert response.text == "Gemini answers."
    assert response.model == "gemini-3.5-flash"
    assert len(anthropic_server.calls) == 1  # no SDK retry inside a fallback chain
    assert anthropic_server.calls[0].headers["anthropic-beta"] == "files-api-2025-04-14"
    assert gemini_server.calls[0].body["generationConfig"]["maxOutputTokens"] == 50
    assert response.dropped_content.options == ("betas",)  # Gemini, the fallback, does not take it
    assert sink.entries[-1].model == "gemini-3.5-flash"


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_a_provider_4xx_is_never_retried_and_never_falls_back(
    anthropic_server: FakeAnthropicServer, gemini_server: FakeGeminiServer, status: int
) -> None:
    anthropic_server.fail(status, times=5)
    sink = MemoryAuditSink()
    route = Route("support", "anthropic", "claude-first", {"profile": "claude-first", "profiles": PROFILES})
    gateway = Gateway(routes=[route], audit=sink)

    with pytest.raises(Exception) as info:
        gateway.complete("support", "hi", actor=ACTOR)

    assert str(status) in str(info.value)
    assert len(anthropic_server.calls) == 1
    assert gemini_server.calls == []
    [entry] = sink.entries
    assert entry.status == "failed"


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_rejected_key_never_reaches_the_error_the_log_or_the_audit_row(
    request: pytest.FixtureRequest, provider: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, route = _route(request, provider)
    secret = "sk-live-NEVER-SHOWN-0123456789abcdef"
    env = {"anthropic": "ANTHROPIC_API_KEY", "gemini": "GOOGLE_API_KEY", "deepseek": "DEEPSEEK_API_KEY"}
    monkeypatch.setenv(env.get(provider, "OPENAI_API_KEY"), secret)
    # A hostile or broken provider echoes the key it was sent in its error body.
    server.fail(401, message=f"invalid api key {secret}")
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[route], audit=sink)

    with caplog.at_level(logging.DEBUG), pytest.raises(Exception) as info:
        gateway.complete("support", "hi", actor=ACTOR)

    assert secret not in str(info.value) and secret not in repr(info.value)
    assert secret not in caplog.text
    [entry] = sink.entries
    assert entry.status == "failed"
    assert secret not in repr(entry)
    assert secret in server.calls[0].headers.get("x-api-key", "") + str(server.calls[0].headers)


def test_gateway_llm_scrubs_an_echoed_key_too(
    anthropic_server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-ant-live-ECHOED-abcdef0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    anthropic_server.fail(401, message=f"bad key {secret}")
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", "anthropic", "claude-haiku-5-5", {"max_retries": 0})], audit=sink)

    with pytest.raises(Exception) as info:
        gateway.llm("support", actor=ACTOR).invoke("hi")

    assert secret not in str(info.value) and "[REDACTED:api_key]" in str(info.value)
    assert secret not in (sink.entries[0].error_message or "")


def _anthropic_reply(usage: str, args: str) -> str:
    return (
        '{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"},'
        f'{{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{args}}}],"stop_reason":"tool_use",'
        f'"stop_sequence":null,"usage":{{"input_tokens":{usage},"output_tokens":3}}}}'
    )


def _deepseek_reply(usage: str, args: str) -> str:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": args}}
    return (
        '{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
        f'"finish_reason":"tool_calls","message":{{"role":"assistant","content":"hi","tool_calls":[{json.dumps(call)}]}}}}],'
        f'"usage":{{"prompt_tokens":{usage},"completion_tokens":3,"total_tokens":5}}}}'
    )


# The provider SDKs' own pydantic models warn about a float where they expect an int before ai_utils sees the reply.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize(
    ("provider", "body", "where"),
    [
        ("anthropic", _anthropic_reply("NaN", '{"city":"Paris"}'), "token usage"),
        ("anthropic", _anthropic_reply("3", '{"city":Infinity}'), "get_weather"),
        ("deepseek", _deepseek_reply("1e999", '{"city":"Paris"}'), "token usage"),
        ("deepseek", _deepseek_reply("3", '{"city": {"lat": NaN}}'), "get_weather"),
    ],
)
async def test_a_reply_with_non_finite_numbers_is_a_model_output_error_and_a_failed_row(
    request: pytest.FixtureRequest, provider: str, body: str, where: str
) -> None:
    server, route = _route(request, provider)
    server.fail(200, body=body, times=2)
    sink = MemoryAuditSink()
    events: list[Any] = []
    gateway = Gateway(routes=[route], audit=sink, on_event=events.append)

    with pytest.raises(ModelOutputError, match=where):
        gateway.complete("support", "weather in Paris?", actor=ACTOR, tools=[get_weather])
    with pytest.raises(ModelOutputError, match="non-finite"):
        await gateway.acomplete("support", "weather in Paris?", actor=ACTOR, tools=[get_weather])

    assert [(e.status, e.error_type, e.usage) for e in sink.entries] == [("failed", "provider", None)] * 2
    assert [e.type for e in events if e.type != "llm.call.started"] == ["llm.call.failed"] * 2


def _gemini_image_reply(data: str, mime_type: str) -> dict[str, Any]:
    part = {"inlineData": {"mimeType": mime_type, "data": data}}
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "Here:"}, part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    }


def test_an_image_the_provider_returns_is_typed_by_its_bytes(gemini_server: FakeGeminiServer) -> None:
    png = PNG_URL.partition(",")[2]
    gemini_server.fail(200, body=_gemini_image_reply(png, "image/../../x"))
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("draw", "gemini", "gemini-3.5-flash-image", {"max_retries": 0})], audit=sink)

    response = gateway.complete("draw", "draw a dot", actor=ACTOR)

    [image] = [block for block in response.content_blocks if block["type"] == "image"]
    assert image["mime_type"] == "image/png"

    html = base64.b64encode(b"<html><script>alert(1)</script></html>").decode()
    gemini_server.fail(200, body=_gemini_image_reply(html, "image/png"))
    with pytest.raises(ModelOutputError, match="not a PNG, JPEG, GIF or WebP image"):
        gateway.complete("draw", "draw a dot", actor=ACTOR)
    assert [(e.status, e.error_type) for e in sink.entries] == [("succeeded", None), ("failed", "provider")]


def test_a_key_echoed_in_a_retried_gemini_error_never_reaches_the_log(
    gemini_server: FakeGeminiServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "AIza-live-ECHOED-0123456789abcdef"
    monkeypatch.setenv("GOOGLE_API_KEY", secret)
    # google-genai logs every retry with the error body it got; a broken server echoes the key it was sent.
    gemini_server.fail(503, message=f"overloaded for key {secret}", times=2)
    gateway = Gateway(routes=[Route("support", "gemini", "gemini-3.5-flash", {"max_retries": 1})])

    with caplog.at_level(logging.DEBUG), pytest.raises(Exception) as info:
        gateway.complete("support", "hi", actor=ACTOR)

    assert len(gemini_server.calls) == 2
    assert "Retrying" in caplog.text and "[REDACTED:api_key]" in caplog.text
    assert secret not in caplog.text and secret not in str(info.value)
