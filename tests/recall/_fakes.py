"""Test doubles for memory tests: embeddings that know their texts, embeddings that fail, one store per backend."""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

DIMS = 8


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class TableEmbeddings(Embeddings):
    """A fake embedding model with chosen vectors for chosen texts; any other text gets a fixed hash vector.

    A real model's geometry is what a semantic ranking test needs to control, so the test says which texts are
    close to which; the vectors still go through the store's real index (pgvector, sqlite-vec, numpy).
    """

    def __init__(self, table: Mapping[str, Sequence[float]] | None = None, *, dims: int = DIMS) -> None:
        self.table = {k: _unit(v) for k, v in (table or {}).items()}
        self.dims = dims
        self.model = f"table-{dims}"
        self.calls = 0

    def _one(self, text: str) -> list[float]:
        self.calls += 1
        if text in self.table:
            return list(self.table[text])
        digest = hashlib.sha256(text.encode()).digest()
        return _unit([b - 128 for b in digest[: self.dims]])

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


class FailingEmbeddings(TableEmbeddings):
    """Embeds like `TableEmbeddings` until ``failing`` is switched on; then every call fails like a provider outage."""

    def __init__(self, *, dims: int = DIMS) -> None:
        super().__init__(dims=dims)
        self.failing = False

    def _one(self, text: str) -> list[float]:
        if self.failing:
            raise ConnectionError("embedding provider unreachable")
        return super()._one(text)


def index(embeddings: Embeddings, dims: int = DIMS) -> dict[str, Any]:
    """The store index config memory items use (the ``content`` field)."""
    return {"dims": dims, "embed": embeddings, "fields": ["content"]}


@contextmanager
def fresh_database(postgres_uri: str) -> Iterator[str]:
    """A new database on the session's Postgres server, dropped afterwards."""
    name = f"recall_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield postgres_uri.replace("/postgres?", f"/{name}?")
    finally:
        with psycopg.connect(postgres_uri, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextmanager
def open_store(kind: str, postgres_uri: str | None, index_config: dict[str, Any] | None = None) -> Iterator[BaseStore]:
    """An empty store of ``kind`` ("memory", "sqlite", "postgres"), with ``index_config`` as its vector index."""
    if kind == "memory":
        yield InMemoryStore(index=index_config)  # type: ignore[arg-type]
    elif kind == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(":memory:", index=index_config) as store:  # type: ignore[arg-type]
            store.setup()
            yield store
    elif kind == "postgres":
        from langgraph.store.postgres import PostgresStore

        assert postgres_uri is not None
        with fresh_database(postgres_uri) as uri, PostgresStore.from_conn_string(uri, index=index_config) as store:  # type: ignore[arg-type]
            store.setup()
            yield store
    else:  # pragma: no cover
        raise AssertionError(kind)
