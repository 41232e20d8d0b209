from __future__ import annotations

import json
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ai_utils.exceptions import UserError
from ai_utils.gateway import (
    AuditEntry,
    AuditSink,
    Gateway,
    JsonlAuditSink,
    MemoryAuditSink,
    NoopAuditSink,
    Route,
    SqliteAuditSink,
)
from ai_utils.testing import audit as testing_audit

MOMENT = datetime(2030, 5, 6, 7, 8, 9, tzinfo=UTC)


def _entry(request_id: str = "r1", **overrides: object) -> AuditEntry:
    fields: dict[str, object] = {
        "request_id": request_id,
        "feature": "support",
        "provider": "fake",
        "model": "m",
        "status": "succeeded",
        "created_at": MOMENT,
        "actor": {"user_id": "u1"},
        "tenant_id": "t1",
        "latency_ms": 12.5,
        "usage": {"input_tokens": 3},
        "tools_requested": ["search"],
        "tools_used": ["search"],
        "policy_decisions": [{"rule": "require_actor", "allowed": True, "reason": None}],
        "metadata": {"ticket": 7},
    }
    fields.update(overrides)
    return AuditEntry(**fields)  # type: ignore[arg-type]


def test_entry_has_every_spec_field() -> None:
    assert set(_entry().to_dict()) == {
        "request_id", "feature", "provider", "model", "status", "actor", "tenant_id", "latency_ms", "usage",
        "tools_requested", "tools_used", "policy_decisions", "request_hash", "request_summary", "response_summary",
        "error_type", "error_message", "parent_run_id", "metadata", "created_at",
    }  # fmt: skip
    assert _entry().to_dict()["created_at"] == "2030-05-06T07:08:09+00:00"


def test_every_sink_satisfies_the_protocol() -> None:
    for sink in (NoopAuditSink(), MemoryAuditSink(), JsonlAuditSink("unused.jsonl"), SqliteAuditSink(":memory:")):
        assert isinstance(sink, AuditSink)


async def test_noop_and_memory_sinks() -> None:
    NoopAuditSink().write(_entry())
    await NoopAuditSink().awrite(_entry())
    sink = testing_audit.MemoryAuditSink()
    sink.write(_entry("a"))
    await sink.awrite(_entry("b"))
    assert [e.request_id for e in sink.entries] == ["a", "b"]


def test_jsonl_sink_appends_one_line_per_row(tmp_path: Path) -> None:
    sink = JsonlAuditSink(tmp_path / "logs" / "audit.jsonl")
    assert sink.read() == []
    sink.write(_entry("a"))
    sink.write(_entry("b", status="failed", error_type="network"))
    lines = (tmp_path / "logs" / "audit.jsonl").read_text().splitlines()
    assert [json.loads(line)["request_id"] for line in lines] == ["a", "b"]
    assert sink.read()[1]["error_type"] == "network"


def test_sqlite_sink_stores_rows_durably_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    sink = SqliteAuditSink(path)
    sink.write(_entry("a"))
    sink.write(_entry("b", status="blocked"))
    sink.close()

    reopened = SqliteAuditSink(path)
    rows = reopened.read()
    assert [r["request_id"] for r in rows] == ["a", "b"]
    assert rows[0]["actor"] == {"user_id": "u1"} and rows[0]["latency_ms"] == 12.5
    assert reopened.read(request_id="b")[0]["status"] == "blocked"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sqlite_sink_keeps_unicode_and_huge_numbers_in_json_fields(tmp_path: Path) -> None:
    sink = SqliteAuditSink(tmp_path / "audit.db")
    sink.write(_entry("a", metadata={"kunde": "Müller", "when": MOMENT}))
    sink.write(_entry("b", metadata={"big": 2**70, "when": MOMENT}))
    assert [row["metadata"] for row in sink.read()] == [
        {"kunde": "Müller", "when": str(MOMENT)},
        {"big": 2**70, "when": str(MOMENT)},
    ]


def test_sqlite_sink_rejects_duplicate_request_ids_so_the_gateway_reports_them(tmp_path: Path) -> None:
    sink = SqliteAuditSink(tmp_path / "a.db")
    sink.write(_entry("a"))
    with pytest.raises(sqlite3.IntegrityError):
        sink.write(_entry("a"))


def test_sqlite_sink_is_safe_across_threads(tmp_path: Path) -> None:
    sink = SqliteAuditSink(tmp_path / "a.db")
    threads = [threading.Thread(target=sink.write, args=(_entry(f"r{i}"),)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(sink.read()) == 20


def test_sqlite_sink_rejects_bad_table_names() -> None:
    with pytest.raises(UserError, match="identifier"):
        SqliteAuditSink(":memory:", table="x; drop table y")


def test_gateway_writes_to_sqlite_by_default_table(tmp_path: Path) -> None:
    sink = SqliteAuditSink(tmp_path / "a.db", table="custom_audit")
    gateway = Gateway(routes=[Route("s", "fake", "m", {"responses": ["hi"]})], audit=sink, enforce_actor=False)
    gateway.llm("s").invoke("x")
    with sqlite3.connect(tmp_path / "a.db") as conn:
        assert conn.execute("select count(*) from custom_audit").fetchone()[0] == 1


@pytest.mark.parametrize("table", ["x; drop table y", "tabl\u00e9", "a" * 64, "x-y", "", None, 5])
def test_sqlite_sinks_reject_any_non_identifier_table(table: Any) -> None:
    from ai_utils.gateway.feedback import SqliteFeedbackSink

    with pytest.raises(UserError, match="plain identifier"):
        SqliteAuditSink(":memory:", table=table)
    with pytest.raises(UserError, match="plain identifier"):
        SqliteFeedbackSink(":memory:", table=table)


def test_a_keyword_table_name_works_because_names_are_quoted(tmp_path: Path) -> None:
    sink = SqliteAuditSink(tmp_path / "a.db", table="order")
    gateway = Gateway(routes=[Route("s", "fake", "m", {"responses": ["hi"]})], audit=sink, enforce_actor=False)
    gateway.llm("s").invoke("x")
    assert [row["status"] for row in sink.read()] == ["succeeded"]
