from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from langgraph.store.base import BaseStore
from recall._fakes import open_store

# SqliteStore's vector index loads sqlite-vec through `sqlite3.Connection.enable_load_extension`, which the
# project's CPython build does not have (AttributeError in `SqliteStore.setup()`), so semantic tests run on
# InMemoryStore and PostgresStore+pgvector, and every other test on all three.
ALL = ["memory", "sqlite", "postgres"]
INDEXED = ["memory", "postgres"]


def _factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., BaseStore]]:
    kind = request.param
    uri = request.getfixturevalue("postgres_uri") if kind == "postgres" else None
    with ExitStack() as stack:

        def make(index: dict[str, Any] | None = None) -> BaseStore:
            return stack.enter_context(open_store(kind, uri, index))

        make.kind = kind  # type: ignore[attr-defined]
        yield make


@pytest.fixture(params=ALL)
def make_store(request: pytest.FixtureRequest) -> Iterator[Callable[..., BaseStore]]:
    """``make_store()``: a fresh store of this backend (InMemoryStore, SqliteStore, PostgresStore), no vector index."""
    yield from _factory(request)


@pytest.fixture(params=INDEXED)
def make_indexed_store(request: pytest.FixtureRequest) -> Iterator[Callable[..., BaseStore]]:
    """``make_indexed_store(index)``: a fresh InMemoryStore or PostgresStore (pgvector) with that vector index."""
    yield from _factory(request)
