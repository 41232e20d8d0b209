"""The fake provider servers as pytest fixtures, each pointed at by its provider's environment variables.

Import them into a conftest: ``from _provider_servers.fixtures import anthropic_server as anthropic_server`` (and
``gemini_server``, ``responses_server``, ``deepseek_server``). Each fixture starts a fresh server and sets the key
and base-URL variables `get_llm` reads (``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``, ...), the way a user
points code at a local server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

import pytest

from _provider_servers import (
    FakeAnthropicServer,
    FakeDeepSeekServer,
    FakeGeminiServer,
    FakeResponsesServer,
    ProviderServer,
)

__all__ = ["anthropic_server", "deepseek_server", "gemini_server", "responses_server"]


_S = TypeVar("_S", bound=ProviderServer)


def _serve(server: _S, monkeypatch: pytest.MonkeyPatch, key_var: str, url_var: str) -> Iterator[_S]:
    with server:
        monkeypatch.setenv(key_var, str(server.api_key))
        monkeypatch.setenv(url_var, server.url)
        yield server


@pytest.fixture
def anthropic_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropicServer]:
    """A `FakeAnthropicServer`, with ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` set to it."""
    yield from _serve(FakeAnthropicServer(), monkeypatch, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


@pytest.fixture
def gemini_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGeminiServer]:
    """A `FakeGeminiServer`, with ``GOOGLE_API_KEY`` and ``GEMINI_BASE_URL`` set to it."""
    yield from _serve(FakeGeminiServer(), monkeypatch, "GOOGLE_API_KEY", "GEMINI_BASE_URL")


@pytest.fixture
def responses_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeResponsesServer]:
    """A `FakeResponsesServer`, with ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` set to it."""
    yield from _serve(FakeResponsesServer(), monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL")


@pytest.fixture
def deepseek_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDeepSeekServer]:
    """A `FakeDeepSeekServer`, with ``DEEPSEEK_API_KEY`` and ``DEEPSEEK_BASE_URL`` set to it."""
    yield from _serve(FakeDeepSeekServer(), monkeypatch, "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL")
