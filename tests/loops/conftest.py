"""Fixtures of the loop tests: a fresh Postgres database per test, and the run store of each kind."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ai_utils import LoopRunStore, memory_loop_runs, postgres_loop_runs, sqlite_loop_runs


@pytest.fixture
def postgres_db(postgres_uri: str) -> Iterator[str]:
    """URI of a fresh, empty database on the session's Postgres server (dropped afterwards)."""
    name = f"loops_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        conn.execute(f"create database {name}")
    yield postgres_uri.replace("/postgres?", f"/{name}?")
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def run_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LoopRunStore]:
    """A run store of each kind: in memory, in a SQLite file, in a real Postgres database."""
    if request.param == "memory":
        store = memory_loop_runs()
    elif request.param == "sqlite":
        store = sqlite_loop_runs(tmp_path / "runs.db")
    else:
        store = postgres_loop_runs(request.getfixturevalue("postgres_db"))
    with store:
        yield store
