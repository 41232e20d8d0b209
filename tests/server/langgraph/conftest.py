"""The LangGraph API served on real uvicorn (the ``serve`` fixture) over a SQLite session store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _langgraph_app import GATE, Gate, create_app
from conftest import LiveServer

from ai_utils import sqlite_sessions
from ai_utils.sessions import SessionStore


@pytest.fixture
def gate() -> Iterator[Gate]:
    """The gate ``slow_lookup`` waits at (opened at the end: never leave a tool waiting)."""
    GATE.reset()
    yield GATE
    GATE.event.set()


@pytest.fixture
def lg_store(tmp_path: Path) -> Iterator[SessionStore]:
    store = sqlite_sessions(tmp_path / "threads.sqlite", lease_seconds=5)
    yield store
    store.close()  # type: ignore[attr-defined]


@pytest.fixture
def url(lg_store: SessionStore, serve: Callable[[Any], LiveServer], gate: Gate) -> str:
    """The API's base URL (the test app on uvicorn)."""
    return serve(create_app(lg_store)).base_url
