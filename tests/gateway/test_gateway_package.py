from __future__ import annotations

import asyncio

import pytest

import ai_utils.gateway as gateway_pkg
from ai_utils.gateway import AuditEntry, Gateway, GatewayEvent, Route


def test_supabase_names_load_lazily_and_unknown_names_raise() -> None:
    from ai_utils.gateway.supabase_audit import SupabaseAuditSink

    assert gateway_pkg.SupabaseAuditSink is SupabaseAuditSink
    assert "create table if not exists llm_feedback" in gateway_pkg.supabase_feedback_sql()
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = gateway_pkg.no_such_name


def test_a_failing_on_audit_error_hook_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def write(self, entry: AuditEntry) -> None:
            raise OSError("sink down")

    def on_audit_error(error: BaseException, entry: AuditEntry) -> None:
        raise RuntimeError("pager down")

    gateway = Gateway(
        routes=[Route("s", "fake", "m", {"responses": ["ok"]})],
        audit=Broken(),
        on_audit_error=on_audit_error,
        enforce_actor=False,
    )
    assert gateway.llm("s").invoke("hi").content == "ok"
    assert "on_audit_error failed" in caplog.text


async def test_a_failing_async_on_event_hook_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def on_event(event: GatewayEvent) -> None:
        raise RuntimeError("telemetry down")

    gateway = Gateway(routes=[Route("s", "fake", "m", {"responses": ["ok"]})], on_event=on_event, enforce_actor=False)
    assert (await gateway.llm("s").ainvoke("hi")).content == "ok"
    await asyncio.sleep(0.01)
    assert "telemetry down" in caplog.text


def test_gateway_modules_import_each_other_without_a_circle() -> None:
    import ast
    from graphlib import CycleError, TopologicalSorter
    from pathlib import Path

    root = Path(gateway_pkg.__file__).parent
    names = {
        ".".join(("ai_utils", "gateway", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__"): path
        for path in root.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        # Every import counts, also those under TYPE_CHECKING and inside functions.
        imported = {
            node.module
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module in names
        }
        graph[name] = imported - {name, "ai_utils.gateway"}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        raise AssertionError(f"import circle: {error.args[1]}") from None
