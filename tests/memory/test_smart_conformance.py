"""`SmartCheckpointSaver` passes LangGraph's checkpointer conformance suite over InMemorySaver and SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES
from langgraph.checkpoint.conformance.report import CapabilityReport
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from ai_utils.memory.smart import SmartCheckpointSaver
from ai_utils.testing import static_model


def _failures(report: CapabilityReport) -> str:
    return "\n".join(f"{name}: {failure}" for name, result in report.results.items() for failure in result.failures)


def _assert_full(report: CapabilityReport) -> None:
    assert report.passed_all_base(), _failures(report)
    assert report.conformance_level() == "FULL", _failures(report)
    assert {capability.value for capability in BASE_CAPABILITIES} <= set(report.results)


async def test_smart_saver_over_in_memory_saver_passes_every_base_capability() -> None:
    @checkpointer_test(name="SmartCheckpointSaver(InMemorySaver)")
    async def factory() -> AsyncIterator[SmartCheckpointSaver]:
        yield SmartCheckpointSaver(InMemorySaver(), llm=static_model("summary"))

    _assert_full(await validate(factory))


async def test_smart_saver_over_sqlite_passes_every_base_capability(tmp_path: Path) -> None:
    counter = iter(range(1000))

    @checkpointer_test(name="SmartCheckpointSaver(AsyncSqliteSaver)")
    async def factory() -> AsyncIterator[SmartCheckpointSaver]:
        path = tmp_path / f"conformance-{next(counter)}.sqlite"
        async with AsyncSqliteSaver.from_conn_string(str(path)) as inner:
            await inner.setup()
            yield SmartCheckpointSaver(inner, llm=static_model("summary"))

    _assert_full(await validate(factory))


def test_smart_saver_claims_only_the_optional_capabilities_its_inner_saver_has() -> None:
    plain = SmartCheckpointSaver(InMemorySaver())

    class PruningSaver(InMemorySaver):
        def prune(self, thread_ids: object, *, strategy: str = "keep_latest") -> None:
            self.pruned = (thread_ids, strategy)

    pruning_inner = PruningSaver()
    pruning = SmartCheckpointSaver(pruning_inner)
    pruning.prune(["t1"], strategy="delete")

    assert isinstance(plain, SmartCheckpointSaver)
    assert isinstance(pruning, SmartCheckpointSaver)
    assert pruning_inner.pruned == (["t1"], "delete")
    assert type(plain).prune is InMemorySaver.prune
    assert type(pruning).prune is not type(plain).prune


async def test_smart_saver_over_the_package_sqlite_saver_passes_every_base_capability(tmp_path: Path) -> None:
    from ai_utils.memory.sqlite import sqlite_saver

    counter = iter(range(1000))

    @checkpointer_test(name="SmartCheckpointSaver(sqlite_saver)")
    async def factory() -> AsyncIterator[SmartCheckpointSaver]:
        with sqlite_saver(tmp_path / f"package-{next(counter)}.sqlite") as inner:
            yield SmartCheckpointSaver(inner, llm=static_model("summary"))

    _assert_full(await validate(factory))


async def test_smart_saver_over_postgres_passes_every_base_capability(postgres_uri: str) -> None:
    import uuid

    import psycopg

    from ai_utils.memory import postgres_saver

    @checkpointer_test(name="SmartCheckpointSaver(postgres_saver)")
    async def factory() -> AsyncIterator[SmartCheckpointSaver]:
        name = f"smart_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(postgres_uri, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        with postgres_saver(postgres_uri.replace("/postgres?", f"/{name}?")) as inner:
            yield SmartCheckpointSaver(inner, llm=static_model("summary"))

    report = await validate(factory)
    _assert_full(report)
    assert report.results["prune"].passed


async def test_smart_saver_over_supabase_passes_every_base_capability(supabase_checkpoints: Any) -> None:
    @checkpointer_test(name="SmartCheckpointSaver(SupabaseCheckpointSaver)")
    async def factory() -> AsyncIterator[SmartCheckpointSaver]:
        yield SmartCheckpointSaver(supabase_checkpoints.fresh_saver(), llm=static_model("summary"))

    _assert_full(await validate(factory))
