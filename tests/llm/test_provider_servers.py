"""The fake provider servers are faithful: each is driven first by its provider's official SDK client.

Every reply body is also validated against the SDK's own pydantic models (Gemini's forbid unknown fields, so
a misspelled key fails there), and every stream event against the SDK's event union. Only then do the tests in
tests/llm, tests/gateway and tests/routing use the servers through LangChain and ai_utils.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
from _provider_servers import FakeAnthropicServer, FakeDeepSeekServer, FakeGeminiServer, FakeResponsesServer
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from pydantic import BaseModel, TypeAdapter

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _sse_events(body: bytes) -> list[dict[str, Any]]:
    events = []
    for block in body.decode().split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line.removeprefix("data: ")))
    return events


def _only_known_fields(model: type[BaseModel], data: dict[str, Any]) -> None:
    unknown = set(data) - {f.alias or name for name, f in model.model_fields.items()} - set(model.model_fields)
    assert not unknown, f"{model.__name__} has no fields {sorted(unknown)}"


# -- Anthropic ------------------------------------------------------------------------------------------------


def _anthropic(server: FakeAnthropicServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=0)


def test_anthropic_sdk_reads_a_message_with_text_tool_use_and_cache_usage(
    anthropic_server: FakeAnthropicServer,
) -> None:
    anthropic_server.reply(
        "Let me check.",
        tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}}],
        cache_read=40,
        cache_creation=8,
    )
    client = _anthropic(anthropic_server)
    tool = {"name": "get_weather", "description": "Weather.", "input_schema": WEATHER_TOOL["parameters"]}
    raw = client.messages.with_raw_response.create(
        model="claude-sonnet-5-5",
        max_tokens=256,
        system="Be brief.",
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[tool],  # type: ignore[list-item]
    )
    message = raw.parse()

    assert raw.headers["request-id"].startswith("req_fake_")
    assert [block.type for block in message.content] == ["text", "tool_use"]
    tool_use = message.content[1]
    assert isinstance(tool_use, anthropic.types.ToolUseBlock)
    assert (tool_use.name, tool_use.input) == ("get_weather", {"city": "Paris"})
    assert message.stop_reason == "tool_use"
    assert (message.usage.cache_read_input_tokens, message.usage.cache_creation_input_tokens) == (40, 8)
    body = raw.http_response.json()
    anthropic.types.Message.model_validate(body)
    _only_known_fields(anthropic.types.Message, body)
    _only_known_fields(anthropic.types.Usage, body["usage"])
    [call] = anthropic_server.calls
    assert call.headers["anthropic-version"] and call.body["tools"][0]["input_schema"]["required"] == ["city"]
    assert call.body["system"] == "Be brief."


def test_anthropic_sdk_streams_text_and_tool_input_and_validates_every_event(
    anthropic_server: FakeAnthropicServer,
) -> None:
    anthropic_server.reply(
        "Sunny in Paris today.",
        tool_calls=[{"name": "get_weather", "args": {"city": "Paris", "days": 2}}],
        cache_read=12,
    )
    client = _anthropic(anthropic_server)
    with client.messages.stream(
        model="claude-sonnet-5-5", max_tokens=256, messages=[{"role": "user", "content": "Weather?"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()

    assert text == "Sunny in Paris today."
    assert final.content[-1].type == "tool_use" and final.content[-1].input == {"city": "Paris", "days": 2}
    assert final.usage.cache_read_input_tokens == 12 and final.usage.output_tokens == 5
    # The raw events, one by one, against the SDK's own event union.
    raw = httpx_post_stream(anthropic_server)
    adapter: TypeAdapter[Any] = TypeAdapter(anthropic.types.RawMessageStreamEvent)
    kinds = []
    for event in _sse_events(raw):
        if event["type"] != "ping":
            adapter.validate_python(event)
        kinds.append(event["type"])
    assert kinds[:2] == ["message_start", "ping"] and kinds[-2:] == ["message_delta", "message_stop"]


def httpx_post_stream(server: FakeAnthropicServer) -> bytes:
    import httpx

    headers = {"x-api-key": str(server.api_key), "anthropic-version": "2023-06-01"}
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "Weather?"}]}
    response = httpx.post(f"{server.url}/v1/messages", json=body, headers=headers)
    assert response.headers["content-type"] == "text/event-stream"
    return response.content


def test_anthropic_sdk_sees_overloaded_bad_request_and_wrong_key_as_its_own_errors(
    anthropic_server: FakeAnthropicServer,
) -> None:
    client = _anthropic(anthropic_server)
    request: dict[str, Any] = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    anthropic_server.fail(529, message="Overloaded")
    with pytest.raises(anthropic.OverloadedError, match="Overloaded"):
        client.messages.create(**request)
    anthropic_server.fail(400, message="max_tokens: must be positive")
    with pytest.raises(anthropic.BadRequestError, match="must be positive"):
        client.messages.create(**request)
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(api_key="wrong", base_url=anthropic_server.url, max_retries=0).messages.create(**request)


def test_anthropic_sdk_sends_betas_as_the_anthropic_beta_header(anthropic_server: FakeAnthropicServer) -> None:
    client = _anthropic(anthropic_server)
    client.beta.messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}], betas=["computer-use-2025-01-24"]
    )
    assert anthropic_server.calls[0].headers["anthropic-beta"] == "computer-use-2025-01-24"


# -- Gemini ---------------------------------------------------------------------------------------------------


def _gemini(server: FakeGeminiServer) -> genai.Client:
    return genai.Client(api_key=server.api_key, http_options=genai_types.HttpOptions(base_url=server.url))


def _gemini_tools() -> genai_types.GenerateContentConfig:
    declaration = genai_types.FunctionDeclaration(
        name="get_weather", description="Weather.", parameters_json_schema=WEATHER_TOOL["parameters"]
    )
    return genai_types.GenerateContentConfig(tools=[genai_types.Tool(function_declarations=[declaration])])


def test_gemini_sdk_reads_text_function_calls_and_cached_tokens(gemini_server: FakeGeminiServer) -> None:
    gemini_server.reply("Checking.", tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}}], cache_read=30)
    client = _gemini(gemini_server)
    response = client.models.generate_content(
        model="gemini-flash-latest", contents="Weather in Rome?", config=_gemini_tools()
    )

    assert response.text == "Checking."
    assert [(c.name, c.args) for c in response.function_calls or []] == [("get_weather", {"city": "Rome"})]
    assert response.usage_metadata is not None and response.usage_metadata.cached_content_token_count == 30
    assert response.candidates and response.candidates[0].finish_reason == genai_types.FinishReason.STOP
    [call] = gemini_server.calls
    assert call.path.endswith("/models/gemini-flash-latest:generateContent")
    assert call.body["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    # extra="forbid" in google-genai's models: every key the fake sends is a real field.
    import httpx

    raw = httpx.post(
        f"{gemini_server.url}{call.path}", json=call.body, headers={"x-goog-api-key": str(gemini_server.api_key)}
    ).json()
    genai_types.GenerateContentResponse.model_validate(raw)


def test_gemini_sdk_streams_text_then_a_function_call_with_cumulative_usage(gemini_server: FakeGeminiServer) -> None:
    gemini_server.reply("It is warm in Rome.", tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}}])
    client = _gemini(gemini_server)
    chunks = list(
        client.models.generate_content_stream(model="gemini-flash-latest", contents="Rome?", config=_gemini_tools())
    )

    assert "".join(c.text or "" for c in chunks if not c.function_calls) == "It is warm in Rome."
    assert [fc.name for c in chunks for fc in c.function_calls or []] == ["get_weather"]
    assert chunks[-1].candidates and chunks[-1].candidates[0].finish_reason == genai_types.FinishReason.STOP
    usage = [c.usage_metadata.candidates_token_count for c in chunks if c.usage_metadata]
    assert usage == sorted(usage) and usage[-1] == 6  # cumulative, as the API reports it
    [call] = gemini_server.calls
    assert call.path.endswith(":streamGenerateContent") and call.query == {"alt": "sse"}


def test_gemini_sdk_raises_server_and_client_errors(gemini_server: FakeGeminiServer) -> None:
    client = _gemini(gemini_server)
    gemini_server.fail(503, message="The model is overloaded.")
    with pytest.raises(genai_errors.ServerError) as server_error:
        client.models.generate_content(model="gemini-flash-latest", contents="hi")
    assert (server_error.value.code, server_error.value.status) == (503, "UNAVAILABLE")
    gemini_server.fail(400, message="Invalid JSON payload.")
    with pytest.raises(genai_errors.ClientError) as client_error:
        client.models.generate_content(model="gemini-flash-latest", contents="hi")
    assert client_error.value.code == 400


# -- OpenAI Responses -----------------------------------------------------------------------------------------


def _openai(server: FakeResponsesServer | FakeDeepSeekServer) -> openai.OpenAI:
    return openai.OpenAI(api_key=server.api_key, base_url=server.url, max_retries=0)


def test_openai_sdk_reads_a_response_with_text_and_a_function_call(responses_server: FakeResponsesServer) -> None:
    responses_server.reply("On it.", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}}], cache_read=64)
    client = _openai(responses_server)
    raw = client.responses.with_raw_response.create(
        model="gpt-4.1-mini", input="Weather in Oslo?", tools=[{"type": "function", **WEATHER_TOOL, "strict": True}]
    )
    response = raw.parse()

    assert response.output_text == "On it."
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Oslo"})]
    assert response.usage is not None and response.usage.input_tokens_details.cached_tokens == 64
    body = raw.http_response.json()
    openai.types.responses.Response.model_validate(body)
    _only_known_fields(openai.types.responses.Response, body)
    assert responses_server.calls[0].body["tools"][0]["name"] == "get_weather"


def test_openai_sdk_streams_a_response_and_every_event_validates(responses_server: FakeResponsesServer) -> None:
    responses_server.reply("Cold and clear.", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}}])
    client = _openai(responses_server)
    with client.responses.stream(model="gpt-4.1-mini", input="Oslo?") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()

    assert final.output_text == "Cold and clear."
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    import httpx

    raw = httpx.post(
        f"{responses_server.url}/responses",
        json={"model": "m", "input": "Oslo?", "stream": True},
        headers={"authorization": f"Bearer {responses_server.api_key}"},
    )
    adapter: TypeAdapter[Any] = TypeAdapter(openai.types.responses.ResponseStreamEvent)
    numbers = [adapter.validate_python(event).sequence_number for event in _sse_events(raw.content)]
    assert numbers == list(range(len(numbers)))


def test_openai_sdk_sees_the_responses_errors(responses_server: FakeResponsesServer) -> None:
    client = _openai(responses_server)
    responses_server.fail(503)
    with pytest.raises(openai.InternalServerError):
        client.responses.create(model="m", input="hi")
    responses_server.fail(400, message="Unsupported parameter: 'betas'.")
    with pytest.raises(openai.BadRequestError, match="betas"):
        client.responses.create(model="m", input="hi")


# -- DeepSeek (OpenAI SDK, as DeepSeek's own docs use it) -----------------------------------------------------


def test_openai_sdk_reads_deepseek_reasoning_and_cache_hit_tokens(deepseek_server: FakeDeepSeekServer) -> None:
    deepseek_server.reply("42.", thinking="Six times seven.", cache_read=16)
    client = _openai(deepseek_server)
    completion = client.chat.completions.create(model="deepseek-reasoner", messages=[{"role": "user", "content": "?"}])
    message = completion.choices[0].message
    assert message.content == "42."
    assert (message.model_extra or {})["reasoning_content"] == "Six times seven."
    assert completion.usage is not None and (completion.usage.model_extra or {})["prompt_cache_hit_tokens"] == 16

    chunks = list(
        client.chat.completions.create(
            model="deepseek-reasoner", messages=[{"role": "user", "content": "?"}], stream=True
        )
    )
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks)
    assert reasoning == "Six times seven."
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "42."
    assert chunks[-1].usage is not None and chunks[-1].choices[0].finish_reason == "stop"


def test_deepseek_refuses_an_image_part_like_the_real_api(deepseek_server: FakeDeepSeekServer) -> None:
    client = _openai(deepseek_server)
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    with pytest.raises(openai.BadRequestError, match="image_url"):
        client.chat.completions.create(model="deepseek-chat", messages=[{"role": "user", "content": [image]}])
