from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _services import Aimock
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.tools import tool

from ai_utils.exceptions import UserError
from ai_utils.llm import DEFAULT_MODELS, PROVIDERS, ChatOpenAICompatible, get_llm
from ai_utils.testing import FakeChatModel

THINK = {
    "match": {"userMessage": "think"},
    "response": {"content": "The answer is 42.", "reasoning": "Let me think step by step."},
}
HELLO = {"match": {"userMessage": "hi"}, "response": {"content": "hello"}}
WEATHER = {
    "match": {"userMessage": "weather"},
    "response": {"toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
}


@tool
def get_weather(city: str) -> str:
    """Return the weather in a city."""
    return "sunny"


def _chat_bodies(aimock: Aimock) -> list[dict[str, Any]]:
    return [b for b in aimock.request_bodies() if "messages" in b]


def _merge(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    return sum(chunks[1:], chunks[0])


def _http_llm(provider: str, aimock: Aimock, monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> BaseChatModel:
    """Point each HTTP provider at aimock the way a user would: key and base URL from the environment."""
    if provider == "openrouter":
        monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-secret")
        monkeypatch.setenv("OPENROUTER_BASE_URL", aimock.openrouter_base_url)
    elif provider == "openai":
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
        monkeypatch.setenv("OPENAI_BASE_URL", aimock.openai_base_url)
    elif provider == "groq":
        monkeypatch.setenv("CHATGROQ_API_KEY", "gsk-secret")
        monkeypatch.setenv("GROQ_BASE_URL", aimock.root)  # the groq SDK appends /openai/v1/chat/completions
    else:
        monkeypatch.setenv("LOCAL_LLM_BASE_URL", aimock.openai_base_url)
    return get_llm(provider, max_retries=0, **kwargs)


def test_openrouter_without_a_key_names_the_variable() -> None:
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        get_llm("openrouter")
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        get_llm()


@pytest.mark.parametrize(
    ("provider", "variable"), [("openai", "OPENAI_API_KEY"), ("groq", "CHATGROQ_API_KEY or GROQ_API_KEY")]
)
def test_other_providers_without_a_key_name_their_variables(provider: str, variable: str) -> None:
    with pytest.raises(UserError, match=variable):
        get_llm(provider)


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(UserError) as info:
        get_llm("mistral")

    message = str(info.value)
    assert "'mistral'" in message
    for provider in PROVIDERS:
        assert repr(provider) in message


@pytest.mark.parametrize("provider", ["openrouter", "openai", "groq", "local"])
def test_http_providers_invoke_stream_and_call_tools_over_real_http(
    provider: str, aimock: Aimock, monkeypatch: pytest.MonkeyPatch
) -> None:
    aimock.add(HELLO, WEATHER)
    llm = _http_llm(provider, aimock, monkeypatch, temperature=0.25)

    assert llm.invoke("hi").content == "hello"
    assert "".join(str(c.content) for c in llm.stream("hi")) == "hello"
    reply = llm.bind_tools([get_weather]).invoke("weather")

    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("get_weather", {"city": "Paris"})]
    bodies = _chat_bodies(aimock)
    assert len(bodies) == 3
    assert {b["model"] for b in bodies} == {DEFAULT_MODELS[provider]}
    # ChatOpenAI drops temperature for OpenAI's gpt-5 reasoning models, which reject it (the openai default).
    expected_temperature = None if provider == "openai" else 0.25
    assert all(b.get("temperature") == expected_temperature for b in bodies)
    assert bodies[1]["stream"] is True
    assert bodies[2]["tools"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize("provider", ["openrouter", "openai", "groq", "local"])
async def test_http_providers_work_async(provider: str, aimock: Aimock, monkeypatch: pytest.MonkeyPatch) -> None:
    aimock.add(HELLO)
    llm = _http_llm(provider, aimock, monkeypatch)

    assert (await llm.ainvoke("hi")).content == "hello"
    assert "".join([str(c.content) async for c in llm.astream("hi")]) == "hello"


@pytest.mark.parametrize("provider", ["openrouter", "groq"])
def test_one_model_serves_async_calls_from_successive_event_loops(
    provider: str, aimock: Aimock, monkeypatch: pytest.MonkeyPatch
) -> None:
    aimock.add(HELLO)
    llm = _http_llm(provider, aimock, monkeypatch)

    for _ in range(3):  # what run_sync, asyncio.run or per-test loops do
        with asyncio.Runner() as runner:
            assert runner.run(llm.ainvoke("hi")).content == "hello"
            assert runner.run(_collect(llm)) == "hello"


async def _collect(llm: BaseChatModel) -> str:
    return "".join([str(c.content) async for c in llm.astream("hi")])


def test_openrouter_reasoning_streams_separately_from_the_answer(aimock: Aimock) -> None:
    aimock.add(THINK)
    llm = get_llm("openrouter", reasoning="high", base_url=aimock.openrouter_base_url, api_key="x", max_retries=0)

    chunks = list(llm.stream("think"))

    text = "".join(str(c.content) for c in chunks)
    reasoning = "".join(b["reasoning"] for c in chunks for b in c.content_blocks if b["type"] == "reasoning")
    assert text == "The answer is 42."
    assert reasoning == "Let me think step by step."
    assert "think step" not in text
    full = _merge(chunks)
    assert [b["type"] for b in full.content_blocks] == ["reasoning", "text"]
    assert _chat_bodies(aimock)[0]["reasoning"] == {"effort": "high"}


def test_openrouter_reasoning_is_kept_in_plain_invoke_and_sent_back_next_turn(aimock: Aimock) -> None:
    aimock.add(THINK)
    llm = get_llm("openrouter", reasoning="low", base_url=aimock.openrouter_base_url, api_key="x", max_retries=0)

    first = llm.invoke("think")
    llm.invoke([HumanMessage("think"), first, HumanMessage("think")])

    assert first.content == "The answer is 42."
    assert first.content_blocks[0] == {"type": "reasoning", "reasoning": "Let me think step by step."}
    assert first.response_metadata["model_provider"] == "openrouter"
    sent_back = _chat_bodies(aimock)[1]["messages"][1]
    assert sent_back == {"role": "assistant", "content": "The answer is 42.", "reasoning": "Let me think step by step."}


async def test_local_reasoning_streams_async_and_uses_reasoning_effort(
    aimock: Aimock, monkeypatch: pytest.MonkeyPatch
) -> None:
    aimock.add(THINK)
    monkeypatch.setenv("LOCAL_LLM_BASE_URL", aimock.openai_base_url)
    llm = get_llm("local", "qwen3:4b", reasoning="medium", max_retries=0)

    chunks = [c async for c in llm.astream("think")]

    full = _merge(chunks)
    assert full.content == "The answer is 42."
    assert full.additional_kwargs["reasoning_content"] == "Let me think step by step."
    body = _chat_bodies(aimock)[0]
    assert body["model"] == "qwen3:4b"
    assert body["reasoning_effort"] == "medium"
    assert "reasoning" not in body


def test_openai_translates_reasoning_to_reasoning_effort(aimock: Aimock, monkeypatch: pytest.MonkeyPatch) -> None:
    aimock.add(HELLO)
    llm = _http_llm("openai", aimock, monkeypatch, reasoning="minimal")

    llm.invoke("hi")

    assert isinstance(llm, ChatOpenAICompatible)
    assert _chat_bodies(aimock)[0]["reasoning_effort"] == "minimal"


def test_groq_ignores_reasoning_and_accepts_groq_api_key(aimock: Aimock, monkeypatch: pytest.MonkeyPatch) -> None:
    aimock.add(HELLO)
    monkeypatch.setenv("GROQ_API_KEY", "gsk-secret")
    monkeypatch.setenv("GROQ_BASE_URL", aimock.root)

    get_llm("groq", reasoning="high", max_retries=0).invoke("hi")

    body = _chat_bodies(aimock)[0]
    assert body.get("reasoning_effort") is None
    assert "reasoning" not in body


def test_data_safe_merges_the_provider_block_into_extra_body(aimock: Aimock) -> None:
    aimock.add(HELLO)
    llm = get_llm(
        "openrouter",
        data_safe=True,
        reasoning="high",
        base_url=aimock.openrouter_base_url,
        api_key="x",
        max_retries=0,
        extra_body={"provider": {"order": ["mistral"]}, "reasoning": {"exclude": False}, "transforms": []},
    )

    llm.invoke("hi")

    body = _chat_bodies(aimock)[0]
    assert body["provider"] == {"order": ["mistral"], "data_collection": "deny", "zdr": True}
    assert body["reasoning"] == {"exclude": False, "effort": "high"}
    assert body["transforms"] == []


def test_without_options_openrouter_sends_no_extra_fields(aimock: Aimock) -> None:
    aimock.add(HELLO)
    get_llm("openrouter", base_url=aimock.openrouter_base_url, api_key="x", max_retries=0).invoke("hi")

    body = _chat_bodies(aimock)[0]
    assert "provider" not in body
    assert "reasoning" not in body
    assert "temperature" not in body


def test_env_chooses_provider_and_model_only_when_not_given(aimock: Aimock, monkeypatch: pytest.MonkeyPatch) -> None:
    aimock.add(HELLO)
    monkeypatch.setenv("AI_UTILS_PROVIDER", "local")
    monkeypatch.setenv("AI_UTILS_MODEL", "mistral:7b")
    monkeypatch.setenv("LOCAL_LLM_BASE_URL", aimock.openai_base_url)

    get_llm(max_retries=0).invoke("hi")
    get_llm("local", "phi4", max_retries=0).invoke("hi")

    get_llm("local", max_retries=0).invoke("hi")

    assert [b["model"] for b in _chat_bodies(aimock)] == ["mistral:7b", "phi4", "mistral:7b"]
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        get_llm("openrouter")  # an explicit provider wins over AI_UTILS_PROVIDER


def test_env_model_is_not_applied_to_another_explicit_provider(aimock: Aimock, monkeypatch: pytest.MonkeyPatch) -> None:
    aimock.add(HELLO)
    monkeypatch.setenv("AI_UTILS_MODEL", "anthropic/claude-sonnet-5")
    monkeypatch.setenv("LOCAL_LLM_BASE_URL", aimock.openai_base_url)

    get_llm("local", max_retries=0).invoke("hi")
    openrouter = get_llm("openrouter", api_key="x")

    assert _chat_bodies(aimock)[0]["model"] == "llama3.2:3b"
    assert openrouter.model_name == "anthropic/claude-sonnet-5"  # type: ignore[attr-defined]


def test_unknown_provider_from_env_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AI_UTILS_PROVIDER", "bedrock")

    with pytest.raises(UserError, match="Unknown provider 'bedrock'"):
        get_llm()


def test_explicit_base_url_wins_over_the_environment(aimock: Aimock, monkeypatch: pytest.MonkeyPatch) -> None:
    aimock.add(HELLO)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")

    llm = get_llm("openai", "gpt-4o-mini", api_key="x", base_url=aimock.openai_base_url, max_retries=0)

    assert llm.invoke("hi").content == "hello"


def test_local_needs_no_key_and_defaults_to_ollama() -> None:
    llm = get_llm("local")

    assert isinstance(llm, ChatOpenAICompatible)
    assert llm.openai_api_base == "http://localhost:11434/v1"
    assert llm.model_name == "llama3.2:3b"
    assert llm.openai_api_key is not None and llm.openai_api_key.get_secret_value() == "not-needed"


def test_keys_never_appear_in_repr_str_or_errors(aimock: Aimock) -> None:
    secret = "sk-or-v1-very-secret-value"
    llm = get_llm("openrouter", base_url=aimock.openrouter_base_url, api_key=secret, max_retries=0)

    assert secret not in repr(llm)
    assert secret not in str(llm)
    with pytest.raises(Exception) as info:
        llm.invoke("no fixture matches this")  # aimock answers 404
    assert secret not in str(info.value)
    assert secret not in repr(info.value)


def test_fake_provider_returns_the_scripted_model() -> None:
    llm = get_llm("fake", responses=["hello", "again"])

    assert isinstance(llm, FakeChatModel)
    assert llm.invoke("hi").content == "hello"
    assert get_llm("fake", "scripted", responses=["x"]).model_name == "scripted"


def test_fake_provider_without_responses_says_how_to_fix() -> None:
    with pytest.raises(UserError, match=r"responses=\["):
        get_llm("fake")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"provider": "local", "free": True}, "free=True works only with provider 'openrouter'"),
        ({"provider": "openrouter", "model": "x/y", "free": True}, "cannot be combined with model='x/y'"),
        ({"provider": "openai", "data_safe": True}, "data_safe=True cannot be enforced for provider 'openai'"),
        ({"provider": "claude-cli", "data_safe": True}, "cannot be enforced for provider 'claude-cli'"),
        ({"provider": "local", "reasoning": "extreme"}, "Unknown reasoning level 'extreme'"),
    ],
)
def test_options_that_do_not_fit_raise_user_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        get_llm(**kwargs)


def test_data_safe_is_accepted_for_local_models() -> None:
    assert isinstance(get_llm("local", data_safe=True), ChatOpenAICompatible)


def test_openai_lets_responses_only_models_use_the_responses_api() -> None:
    assert get_llm("openai", "gpt-5.6-sol", api_key="x").use_responses_api is True  # type: ignore[attr-defined]
    assert not get_llm("openai", api_key="x").use_responses_api  # type: ignore[attr-defined]  # decided per request
    assert get_llm("openrouter", "openai/gpt-5.6-sol", api_key="x").use_responses_api is False  # type: ignore[attr-defined]
    assert get_llm("local", "gpt-5.6-sol").use_responses_api is False  # type: ignore[attr-defined]
