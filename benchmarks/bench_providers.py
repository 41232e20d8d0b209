"""`gateway.acomplete()` vs the raw LangChain model's ``ainvoke`` for each direct provider (issue #31).

Each provider runs against its fake server on 127.0.0.1 speaking that provider's own wire format
(tests/_provider_servers, checked against the official SDKs): Anthropic Messages, Gemini generateContent, the
OpenAI Responses API and DeepSeek Chat Completions, zero model latency. Ours: ``Gateway.acomplete`` on a route
to that provider (policy chain, per-request options bound in the provider's terms, a `MemoryAuditSink` row with
usage, the `GatewayResponse` with latency and cache hit). Anchor: the provider's LangChain class
(``ChatAnthropic``, ``ChatGoogleGenerativeAI``, ``ChatOpenAI(use_responses_api=True)``, ``ChatDeepSeek``) built
directly and called with ``ainvoke``: the same request over the same HTTP stack.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _harness import Metric
from _provider_servers import (
    FakeAnthropicServer,
    FakeDeepSeekServer,
    FakeGeminiServer,
    FakeResponsesServer,
    ProviderServer,
)

from ai_utils.gateway import Gateway, MemoryAuditSink, Route

PROMPT = "Summarise the refund policy in one sentence."
ACTOR = {"user_id": "u1"}
MODEL = "bench-model"

# provider -> (server class, key variable, base-URL variable, get_llm options)
_PROVIDERS: dict[str, tuple[type[ProviderServer], str, str, dict[str, Any]]] = {
    "anthropic": (FakeAnthropicServer, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", {}),
    "gemini": (FakeGeminiServer, "GOOGLE_API_KEY", "GEMINI_BASE_URL", {}),
    "openai": (FakeResponsesServer, "OPENAI_API_KEY", "OPENAI_BASE_URL", {"responses_api": True}),
    "deepseek": (FakeDeepSeekServer, "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", {}),
}


def _server(provider: str) -> ProviderServer:
    cls, key_env, url_env, _ = _PROVIDERS[provider]
    server = cls()
    server.start()
    atexit.register(server.stop)
    server.reply("Refunds are paid within 14 days of a return.", cache_read=12)
    os.environ[key_env] = str(server.api_key)
    os.environ[url_env] = server.url
    return server


def _raw(provider: str, server: ProviderServer) -> Any:
    key = str(server.api_key)
    if provider == "anthropic":
        from langchain_anthropic import ChatAnthropic

        return ChatAnthropic(model=MODEL, api_key=key, base_url=server.url, max_retries=0)  # type: ignore[call-arg]
    if provider == "gemini":
        from langchain_google_genai import ChatGoogleGenerativeAI

        return ChatGoogleGenerativeAI(model=MODEL, api_key=key, base_url=server.url, max_retries=1, vertexai=False)
    if provider == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=MODEL, api_key=key, base_url=server.url, max_retries=0, use_responses_api=True)  # type: ignore[arg-type]
    from langchain_deepseek import ChatDeepSeek

    return ChatDeepSeek(model=MODEL, api_key=key, api_base=server.url, max_retries=0)  # type: ignore[arg-type]


def _metric(provider: str) -> Metric:
    server = _server(provider)
    options = {"max_retries": 0, **_PROVIDERS[provider][3]}
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", provider, MODEL, options)], audit=sink)
    raw = _raw(provider, server)

    async def ours() -> None:
        response = await gateway.acomplete("support", PROMPT, actor=ACTOR)
        assert response.cache_hit, response

    async def anchor() -> None:
        await raw.ainvoke(PROMPT)

    def forget() -> None:  # untimed: keep the journals and rows from growing over the rounds
        sink.entries.clear()
        with server._lock:
            server._calls.clear()

    return Metric(
        f"providers: gateway.acomplete / raw LangChain ainvoke ({provider})",
        ours,
        anchor,
        1.10,
        note=f"fake {provider} server on 127.0.0.1 (its own wire format, zero model latency); ours: Gateway route "
        "with policy chain, MemoryAuditSink row with usage, GatewayResponse; anchor: the provider's LangChain "
        "class built directly, same prompt.",
        ours_setup=forget,
        anchor_setup=forget,
    )


def metrics() -> list[Metric]:
    return [_metric(provider) for provider in _PROVIDERS]
