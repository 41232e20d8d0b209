"""get_llm("anthropic" | "gemini" | "deepseek"), the chatgroq alias and the OpenAI Responses API, each against a
fake server speaking that provider's own wire format (tests/_provider_servers, checked against the SDKs first).

The fixtures set the key and base-URL variables a user would (``ANTHROPIC_API_KEY`` + ``ANTHROPIC_BASE_URL``,
``GOOGLE_API_KEY`` + ``GEMINI_BASE_URL``, ``DEEPSEEK_API_KEY`` + ``DEEPSEEK_BASE_URL``, ``OPENAI_*``).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from _provider_servers import (
    FakeAnthropicServer,
    FakeDeepSeekServer,
    FakeGeminiServer,
    FakeResponsesServer,
    ProviderServer,
)
from langchain_core.messages import AIMessageChunk
from langchain_core.tools import tool

from ai_utils import Agent, UserError, get_llm
from ai_utils._utils import run_sync
from ai_utils.client import is_tool_event
from ai_utils.llm import PROVIDERS


@tool
def get_weather(city: str) -> str:
    """Return the weather in a city."""
    return f"{city}: sunny"


def _servers(request: pytest.FixtureRequest, provider: str) -> tuple[ProviderServer, dict[str, Any]]:
    """The fake for ``provider`` (its env set by the fixture) and the get_llm options that select its protocol."""
    name, options = {
        "anthropic": ("anthropic_server", {}),
        "gemini": ("gemini_server", {}),
        "deepseek": ("deepseek_server", {}),
        "openai": ("responses_server", {"responses_api": True}),
    }[provider]
    server: ProviderServer = request.getfixturevalue(name)
    return server, options


NEW = ("anthropic", "gemini", "deepseek", "openai")


@pytest.mark.parametrize(
    ("provider", "variable"),
    [
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GOOGLE_API_KEY or GEMINI_API_KEY"),
        ("deepseek", "DEEPSEEK_API_KEY"),
    ],
)
def test_a_missing_key_names_its_variable(provider: str, variable: str) -> None:
    with pytest.raises(UserError, match=f"set the environment variable {variable}, or pass api_key="):
        get_llm(provider)


def test_gemini_also_takes_the_gemini_api_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini-var")
    llm = get_llm("gemini")
    assert llm.google_api_key.get_secret_value() == "from-gemini-var"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("module", "package", "extra"),
    [
        ("anthropic", "langchain_anthropic", "anthropic"),
        ("gemini", "langchain_google_genai", "gemini"),
        ("deepseek", "langchain_deepseek", "deepseek"),
    ],
)
def test_without_the_extra_the_leaf_module_names_the_install(
    monkeypatch: pytest.MonkeyPatch, module: str, package: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # as if the package were not installed
    monkeypatch.delitem(sys.modules, f"ai_utils.llm._{module}", raising=False)
    with pytest.raises(ImportError, match=rf'pip install "ai-utils\[{extra}\]"'):
        importlib.import_module(f"ai_utils.llm._{module}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "k")
    with pytest.raises(ImportError, match=rf"ai-utils\[{extra}\]"):
        get_llm(module)


def test_chatgroq_is_groq() -> None:
    llm = get_llm("chatgroq", api_key="gsk-test")
    assert type(llm).__name__ == "ChatGroq"
    with pytest.raises(UserError, match="CHATGROQ_API_KEY or GROQ_API_KEY"):
        get_llm("chatgroq")


def test_a_model_id_given_as_the_provider_gets_the_provider_model_form() -> None:
    with pytest.raises(UserError) as info:
        Agent(llm="gpt-4o")
    message = str(info.value)
    assert "Unknown provider 'gpt-4o'" in message
    assert '"openai:gpt-4o"' in message and message.endswith("get_llm('openai', 'gpt-4o').")
    with pytest.raises(UserError, match='"anthropic:claude-opus-5"'):
        get_llm("claude-opus-5")
    with pytest.raises(UserError, match="Did you mean 'gemini'"):
        get_llm("gemnii")
    assert {"anthropic", "gemini", "deepseek"} <= set(PROVIDERS)


def test_provider_model_strings_reach_the_new_providers(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.reply("Hi from Claude.")
    agent = Agent(llm="anthropic:claude-haiku-5-5")
    assert agent.invoke("hi") == "Hi from Claude."
    assert anthropic_server.calls[0].model == "claude-haiku-5-5"


@pytest.mark.parametrize("provider", NEW)
def test_text_reaches_each_provider_through_its_base_url_variable(
    request: pytest.FixtureRequest, provider: str
) -> None:
    server, options = _servers(request, provider)
    server.reply("Bonjour from the fake.", cache_read=7)
    llm = get_llm(provider, "the-model", max_retries=0, **options)

    reply = llm.invoke("hi")

    assert reply.text == "Bonjour from the fake."
    assert reply.usage_metadata is not None
    assert reply.usage_metadata.get("input_token_details", {}).get("cache_read") == 7
    [call] = server.calls
    assert call.model == "the-model" and call.text == "hi"


@pytest.mark.parametrize("provider", NEW)
def test_each_provider_streams_text_and_a_tool_call(request: pytest.FixtureRequest, provider: str) -> None:
    server, options = _servers(request, provider)
    server.reply("Let me check that.", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}}])
    llm = get_llm(provider, max_retries=0, **options).bind_tools([get_weather])

    chunks = [c for c in llm.stream("weather in Paris?") if isinstance(c, AIMessageChunk)]
    merged = sum(chunks[1:], chunks[0])

    assert len(chunks) > 3  # streamed in pieces, not one reply
    assert merged.text == "Let me check that."
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert server.calls[0].stream


@pytest.mark.parametrize("provider", NEW)
def test_an_agent_calls_a_tool_on_each_provider_and_answers(request: pytest.FixtureRequest, provider: str) -> None:
    server, options = _servers(request, provider)
    server.reply("Paris is sunny today.", when="Paris: sunny")  # after the tool result
    server.reply("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}}], when="weather")
    agent = Agent(llm=get_llm(provider, max_retries=0, **options), tools=[get_weather])

    chunks = list(agent.stream("What's the weather in Paris?", show_tool_calls=True))

    assert "".join(c for c in chunks if isinstance(c, str)) == "Paris is sunny today."
    tool_events = [c for c in chunks if is_tool_event(c)]
    assert [(e["phase"], e["tool_name"]) for e in tool_events] == [("start", "get_weather"), ("end", "get_weather")]
    assert len(server.calls) == 2
    assert "Paris: sunny" in server.calls[1].text  # the tool result went back in the provider's own format


@pytest.mark.parametrize("provider", NEW)
def test_async_calls_work_on_a_new_event_loop_each_time(request: pytest.FixtureRequest, provider: str) -> None:
    server, options = _servers(request, provider)
    server.reply("again")
    llm = get_llm(provider, max_retries=0, **options)

    async def once() -> str:
        return (await llm.ainvoke("hi")).text

    # One model, three loops (ai_utils' sync shells run one per call, as a test or a worker might): each loop gets
    # its own pooled client, closed with the loop, so none meets "Event loop is closed" or leaks a socket.
    assert [run_sync(once) for _ in range(3)] == ["again"] * 3


def test_anthropic_reasoning_becomes_its_effort_setting(anthropic_server: FakeAnthropicServer) -> None:
    get_llm("anthropic", "claude-opus-5-5", reasoning="high").invoke("think")
    get_llm("anthropic", "claude-opus-5-5", reasoning="minimal").invoke("think")
    efforts = [call.body["output_config"]["effort"] for call in anthropic_server.calls]
    assert efforts == ["high", "low"]


def test_gemini_reasoning_becomes_its_thinking_level(gemini_server: FakeGeminiServer) -> None:
    get_llm("gemini", "gemini-3.5-flash", reasoning="low").invoke("think")
    thinking = gemini_server.calls[0].body["generationConfig"]["thinkingConfig"]
    # Gemini's JSON (proto3 JSON) takes both field spellings; langchain-google-genai sends the snake_case one.
    assert (thinking.get("thinkingLevel") or thinking.get("thinking_level")).lower() == "low"


def test_gemini_max_retries_counts_retries_like_every_other_provider(gemini_server: FakeGeminiServer) -> None:
    gemini_server.fail(503, times=5)
    with pytest.raises(Exception, match="503"):
        get_llm("gemini", max_retries=0).invoke("hi")
    assert len(gemini_server.calls) == 1  # one attempt, no retry
    gemini_server.reset()
    gemini_server.fail(503, times=1)
    assert get_llm("gemini", max_retries=1).invoke("hi").text == "ok"
    assert len(gemini_server.calls) == 2


def test_deepseek_keeps_the_reasoning_apart_from_the_answer(deepseek_server: FakeDeepSeekServer) -> None:
    deepseek_server.reply("42.", thinking="Six times seven is 42.")
    reply = get_llm("deepseek", "deepseek-reasoner").invoke("?")
    assert reply.text == "42."
    assert [b["type"] for b in reply.content_blocks] == ["reasoning", "text"]


def test_openai_responses_api_organization_and_project(responses_server: FakeResponsesServer) -> None:
    llm = get_llm("openai", "gpt-4.1-mini", responses_api=True, organization="org-123", project="proj-9")
    assert llm.invoke("hi").text == "ok"
    [call] = responses_server.calls
    assert call.path == "/v1/responses"
    assert (call.headers["openai-organization"], call.headers["openai-project"]) == ("org-123", "proj-9")


def test_openai_only_options_are_refused_elsewhere() -> None:
    with pytest.raises(UserError, match="responses_api= is an option of provider 'openai', not 'anthropic'"):
        get_llm("anthropic", api_key="k", responses_api=True)
    with pytest.raises(UserError, match="responses_api='yes' must be True or False"):
        get_llm("openai", api_key="k", responses_api="yes")


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "deepseek"])
def test_a_misspelled_argument_is_refused_with_the_fix(provider: str) -> None:
    with pytest.raises(UserError, match="unknown argument temprature=. Did you mean temperature=?"):
        get_llm(provider, api_key="k", temprature=0.2)


def test_data_safe_is_refused_for_the_direct_providers() -> None:
    for provider in ("anthropic", "gemini", "deepseek"):
        with pytest.raises(UserError, match="data_safe=True cannot be enforced"):
            get_llm(provider, api_key="k", data_safe=True)
