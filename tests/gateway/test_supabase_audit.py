from __future__ import annotations

from datetime import UTC, datetime

import pytest
from _supabase import SupabaseStack
from postgrest.exceptions import APIError
from supabase import Client

from ai_utils.exceptions import UserError
from ai_utils.gateway import AuditEntry, AuditWriteError, Gateway, Route
from ai_utils.gateway.supabase_audit import SupabaseAuditSink, supabase_audit_sql


@pytest.fixture(scope="module")
def audit_table(supabase_stack: SupabaseStack) -> str:
    supabase_stack.run_sql(supabase_audit_sql("gw_audit_test"), wait_for="gw_audit_test")
    return "gw_audit_test"


def test_sql_renames_the_table_and_rejects_bad_names() -> None:
    sql = supabase_audit_sql("my_audit")
    assert "create table if not exists my_audit" in sql and "llm_audit_log" not in sql
    with pytest.raises(UserError, match="identifier"):
        supabase_audit_sql("Bad-Name")


def test_gateway_rows_land_in_postgrest(supabase_client: Client, audit_table: str) -> None:
    sink = SupabaseAuditSink(supabase_client, audit_table)
    gateway = Gateway(routes=[Route("support", "fake", "m", {"responses": ["hello"]})], audit=sink)
    gateway.llm("support", actor={"user_id": "u1", "tenant_id": "t1"}, metadata={"ticket": 7}).invoke("hi")

    rows = supabase_client.table(audit_table).select("*").eq("tenant_id", "t1").execute().data
    assert len(rows) == 1
    row = rows[0]
    assert (row["feature"], row["status"], row["response_summary"]) == ("support", "succeeded", "hello")
    assert row["actor"]["user_id"] == "u1"
    assert row["metadata"] == {"ticket": 7}
    assert row["policy_decisions"][1]["rule"] == "require_actor"


def test_postgrest_rejection_fails_a_required_call(supabase_client: Client, audit_table: str) -> None:
    reported: list[BaseException] = []
    sink = SupabaseAuditSink(supabase_client, audit_table)
    entry = AuditEntry(
        request_id="dup-1", feature="f", provider="p", model="m", status="succeeded", created_at=datetime.now(UTC)
    )
    sink.write(entry)
    with pytest.raises(APIError):
        sink.write(entry)

    gateway = Gateway(
        routes=[Route("support", "fake", "m", {"responses": ["hello"]})],
        audit=SupabaseAuditSink(supabase_client, "no_such_table"),
        audit_mode="required",
        on_audit_error=lambda err, e: reported.append(err),
        enforce_actor=False,
    )
    with pytest.raises(AuditWriteError):
        gateway.llm("support").invoke("hi")
    assert isinstance(reported[0], APIError)


def test_feedback_lands_in_postgrest_and_joins_the_audit_row(
    supabase_stack: SupabaseStack, supabase_client: Client, audit_table: str
) -> None:
    from ai_utils.gateway.feedback import validate_feedback
    from ai_utils.gateway.supabase_feedback import SupabaseFeedbackSink, supabase_feedback_sql

    supabase_stack.run_sql(supabase_feedback_sql("gw_feedback_test"), wait_for="gw_feedback_test")
    gateway = Gateway(
        routes=[Route("support", "fake", "m", {"responses": ["hi"]})],
        audit=SupabaseAuditSink(supabase_client, audit_table),
    )
    gateway.llm("support", actor={"user_id": "u9", "tenant_id": "t9"}).invoke("x")
    request_id = (
        supabase_client.table(audit_table).select("request_id").eq("tenant_id", "t9").execute().data[0]["request_id"]
    )
    sink = SupabaseFeedbackSink(supabase_client, "gw_feedback_test")
    sink.write(validate_feedback({"request_id": request_id, "user_id": "u9", "score": 5, "tags": ["fast"]}))

    rows = supabase_client.table("gw_feedback_test").select("*").eq("request_id", request_id).execute().data
    assert [(r["score"], r["tags"], r["user_id"]) for r in rows] == [(5, ["fast"], "u9")]
    assert rows[0]["created_at"]


def test_required_mode_streams_after_a_pending_row_and_completes_it(supabase_client: Client, audit_table: str) -> None:
    sink = SupabaseAuditSink(supabase_client, audit_table)
    gateway = Gateway(
        routes=[Route("support", "fake", "m", {"responses": ["streamed reply"]})], audit=sink, audit_mode="required"
    )
    stream = gateway.stream("support", "hi", actor={"user_id": "u3", "tenant_id": "t-required"})
    first = next(iter(stream))
    seen = supabase_client.table(audit_table).select("status").eq("request_id", stream.request_id).execute().data
    assert seen == [{"status": "pending"}]  # written before the first chunk arrived
    assert first["type"] == "text-delta"
    assert list(stream)[-1]["type"] == "stop"
    rows = supabase_client.table(audit_table).select("*").eq("tenant_id", "t-required").execute().data
    assert [(r["status"], r["response_summary"]) for r in rows] == [("succeeded", "streamed reply")]
