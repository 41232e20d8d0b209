from __future__ import annotations

from collections.abc import Iterator

import pytest
from _openai_server import openai_server as openai_server

from ai_utils.testing.jev_server import FakeJevServer


@pytest.fixture
def jev() -> Iterator[FakeJevServer]:
    """A fresh fake Jev server on 127.0.0.1 for this test."""
    with FakeJevServer() as server:
        yield server
