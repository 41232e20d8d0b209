"""The project's own OpenAI-compatible test server as a pytest fixture (`ai_utils.testing.FakeOpenAIServer`).

Use it where aimock cannot go: token logprobs with ``top_logprobs``, OpenRouter ``message.images``,
scripted failures (``server.fail(503)`` then a normal reply) and a journal of parsed request bodies.
Import the fixture into a conftest: ``from _openai_server import openai_server as openai_server``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ai_utils.testing import FakeOpenAIServer


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A fresh FakeOpenAIServer on 127.0.0.1 (key ``server.api_key``, base URL ``server.url``) for one test."""
    with FakeOpenAIServer() as server:
        yield server
