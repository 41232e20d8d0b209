from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import CapabilityReport

from ai_utils.memory import MemorySaver, SupabaseCheckpointSaver, postgres_saver, sqlite_saver

_counter = itertools.count()


def _assert_all_base_pass(report: CapabilityReport) -> None:
    failures = {name: result.failures for name, result in report.results.items() if result.failures}
    assert report.passed_all_base(), f"conformance failures: {failures}"
    assert report.passed_all(), f"a detected extended capability failed: {failures}"


async def test_memory_saver_passes_all_base_conformance_capabilities() -> None:
    @checkpointer_test(name="MemorySaver")
    async def factory() -> AsyncIterator[MemorySaver]:
        yield MemorySaver()

    _assert_all_base_pass(await validate(factory))


async def test_sqlite_saver_passes_all_base_conformance_capabilities(tmp_path: Path) -> None:
    @checkpointer_test(name="sqlite_saver")
    async def factory() -> AsyncIterator[object]:
        with sqlite_saver(tmp_path / f"suite-{next(_counter)}.sqlite") as saver:
            yield saver

    _assert_all_base_pass(await validate(factory))


async def test_postgres_saver_passes_all_base_conformance_capabilities_and_prune(postgres_uri: str) -> None:
    @checkpointer_test(name="postgres_saver")
    async def factory() -> AsyncIterator[object]:
        name = f"conf_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(postgres_uri, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        with postgres_saver(postgres_uri.replace("/postgres?", f"/{name}?")) as saver:
            yield saver

    report = await validate(factory)
    _assert_all_base_pass(report)
    assert report.results["prune"] is not None and report.results["prune"].passed


async def test_supabase_saver_passes_all_base_conformance_capabilities(supabase_checkpoints) -> None:
    @checkpointer_test(name="SupabaseCheckpointSaver")
    async def factory() -> AsyncIterator[SupabaseCheckpointSaver]:
        yield supabase_checkpoints.fresh_saver()

    _assert_all_base_pass(await validate(factory))
