from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.tools import tool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route as HttpRoute

from ai_utils.exceptions import UserError
from ai_utils.gateway import Actor, Gateway, Route, SqliteAuditSink
from ai_utils.gateway.feedback import (
    FeedbackEntry,
    FeedbackSink,
    FeedbackValidationError,
    MemoryFeedbackSink,
    NoopFeedbackSink,
    SqliteFeedbackSink,
    create_feedback_route,
    validate_feedback,
)

Serve = Callable[[Any], Any]


def _app(endpoint: Any) -> Starlette:
    return Starlette(routes=[HttpRoute("/api/feedback", endpoint, methods=["POST"])])


async def _auth(request: Request) -> dict[str, Any] | None:
    if request.headers.get("authorization") == "Bearer good":
        return {"actor": {"user_id": "u1", "tenant_id": "acme"}}
    return None


def _post(server: Any, body: Any = None, *, token: str | None = "good", **headers: str) -> httpx.Response:
    if token:
        headers["authorization"] = f"Bearer {token}"
    content = body if isinstance(body, (str, bytes)) else None
    return httpx.post(
        f"{server.base_url}/api/feedback",
        json=None if content is not None else body,
        content=content,
        headers=headers,
        timeout=10,
    )


def test_feedback_route_answers_401_400_403_and_200_over_real_http(serve: Serve) -> None:
    sink = MemoryFeedbackSink()
    server = serve(_app(create_feedback_route(authenticate=_auth, sink=sink, site_url="https://app.example.com")))

    assert _post(server, {"request_id": "r1", "score": 5}, token=None).status_code == 401
    bad_score = _post(server, {"request_id": "r1", "score": 6})
    assert bad_score.status_code == 400 and "score" in bad_score.json()["error"]
    long_comment = _post(server, {"request_id": "r1", "score": 4, "comment": "x" * 4001})
    assert long_comment.status_code == 400 and "4001" in long_comment.json()["error"]
    assert _post(server, "not json").status_code == 400
    assert _post(server, ["a list"]).status_code == 400
    cross = _post(server, {"request_id": "r1", "score": 5}, origin="https://evil.example.com")
    assert cross.status_code == 403
    assert _post(server, {"request_id": "r1", "score": 5}, referer="https://evil.example.com/page").status_code == 403
    assert sink.entries == []

    ok = _post(server, {"request_id": "r1", "score": 5, "user_id": "spoofed"}, origin="https://app.example.com")
    assert ok.status_code == 200 and ok.json() == {"ok": True, "request_id": "r1"}
    [entry] = sink.entries
    assert (entry.user_id, entry.tenant_id, entry.score) == ("u1", "acme", 5)
    assert entry.created_at is not None


def test_trusted_origin_defaults_to_env_then_to_the_request_itself(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = MemoryFeedbackSink()
    server = serve(_app(create_feedback_route(authenticate=_auth, sink=sink)))
    body = {"request_id": "r1", "score": 3}
    assert _post(server, body, origin=server.base_url).status_code == 200
    assert _post(server, body, origin="http://127.0.0.1:1").status_code == 403
    monkeypatch.setenv("SITE_URL", "https://shop.example.com")
    assert _post(server, body, origin="https://shop.example.com:443").status_code == 200
    assert _post(server, body, origin=server.base_url).status_code == 403
    assert _post(server, body, origin="null").status_code == 403


def test_sync_hooks_enrich_and_report(serve: Serve) -> None:
    sink = MemoryFeedbackSink()
    seen: list[int] = []

    def authenticate(request: Request) -> Actor:
        return Actor(user_id="u2")

    def enrich(entry: FeedbackEntry, ctx: dict[str, Any]) -> dict[str, Any]:
        assert ctx["actor"].user_id == "u2" and isinstance(ctx["request"], Request)
        return {**entry.to_dict(), "metadata": {"feature": "support.triage"}}

    server = serve(
        _app(
            create_feedback_route(
                authenticate=authenticate, sink=sink, enrich_entry=enrich, telemetry=lambda e: seen.append(e.score)
            )
        )
    )
    assert _post(server, {"requestId": "r9", "score": 2, "tags": ["slow"]}, token=None).status_code == 200
    assert sink.entries[0].metadata == {"feature": "support.triage"}
    assert sink.entries[0].tags == ["slow"]
    assert seen == [2]


def test_async_hooks_and_hook_failures(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    async def enrich(entry: FeedbackEntry, ctx: dict[str, Any]) -> FeedbackEntry:
        return FeedbackEntry(**{**entry.to_dict(), "score": 6})

    async def telemetry(entry: FeedbackEntry) -> None:
        raise RuntimeError("metrics down")

    sink = MemoryFeedbackSink()
    bad_enrich = serve(_app(create_feedback_route(authenticate=_auth, sink=sink, enrich_entry=enrich)))
    assert _post(bad_enrich, {"request_id": "r", "score": 5}).status_code == 400

    ok = serve(_app(create_feedback_route(authenticate=_auth, sink=sink, telemetry=telemetry)))
    assert _post(ok, {"request_id": "r", "score": 5}).status_code == 200
    assert "metrics down" in caplog.text


def test_actor_without_user_id_is_401_and_sink_failure_is_500(serve: Serve) -> None:
    class Broken:
        def write(self, entry: FeedbackEntry) -> None:
            raise OSError("disk full")

    anon = serve(
        _app(create_feedback_route(authenticate=lambda r: {"actor": {"tenant_id": "t"}}, sink=NoopFeedbackSink()))
    )
    assert _post(anon, {"request_id": "r", "score": 5}).status_code == 401
    broken = serve(_app(create_feedback_route(authenticate=_auth, sink=Broken())))
    response = _post(broken, {"request_id": "r", "score": 5})
    assert response.status_code == 500 and "disk" not in response.text


@tool
def lookup(order: str) -> str:
    """Look up an order."""
    return "shipped"


def test_feedback_for_an_agent_run_joins_its_audit_rows(serve: Serve, tmp_path: Path) -> None:
    from ai_utils.agents import Agent

    db = tmp_path / "gateway.db"
    gateway = Gateway(
        routes=[
            Route(
                "support",
                "fake",
                "m",
                {
                    "responses": [
                        {"content": "", "tool_calls": [{"name": "lookup", "args": {"order": "A1"}}]},
                        "Shipped.",
                    ]
                },
            )
        ],
        audit=SqliteAuditSink(db),
    )
    agent = Agent(llm=gateway.llm("support", actor={"user_id": "u1"}), tools=[lookup])
    assert agent.invoke("where is A1?") == "Shipped."
    request_id = SqliteAuditSink(db).read()[-1]["request_id"]

    server = serve(_app(create_feedback_route(authenticate=_auth, sink=SqliteFeedbackSink(db))))
    assert _post(server, {"request_id": request_id, "score": 4, "comment": "quick"}).status_code == 200

    with sqlite3.connect(db) as conn:
        joined = conn.execute(
            "select a.feature, a.status, f.score, f.user_id from llm_audit_log a join llm_feedback f using (request_id)"
        ).fetchall()
    assert joined == [("support", "succeeded", 4, "u1")]
    assert SqliteFeedbackSink(db).read(request_id=request_id)[0].comment == "quick"


def test_validate_feedback_accepts_camel_case_and_optional_fields() -> None:
    entry = validate_feedback(
        {
            "requestId": "r",
            "userId": "u",
            "score": 1,
            "tenantId": "t",
            "comment": "x" * 4000,
            "tags": ["a"],
            "metadata": {"k": 1},
            "createdAt": "2030-01-01T00:00:00+00:00",
        }
    )
    assert (entry.request_id, entry.user_id, entry.tenant_id, entry.created_at) == (
        "r",
        "u",
        "t",
        "2030-01-01T00:00:00+00:00",
    )
    assert validate_feedback(entry) == entry


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("text", "JSON object"),
        ({"request_id": "r", "user_id": "u", "score": True}, "score"),
        ({"request_id": "r", "user_id": "u", "score": 0}, "score"),
        ({"request_id": "r", "user_id": "u", "score": 2.5}, "score"),
        ({"user_id": "u", "score": 2}, "request_id"),
        ({"request_id": "r", "user_id": " ", "score": 2}, "user_id"),
        ({"request_id": "r", "user_id": "u", "score": 2, "comment": 5}, "comment"),
        ({"request_id": "r", "user_id": "u", "score": 2, "tags": "a"}, "tags"),
        ({"request_id": "r", "user_id": "u", "score": 2, "metadata": [1]}, "metadata"),
        ({"request_id": "r", "user_id": "u", "score": 2, "created_at": "yesterday"}, "created_at"),
        ({"request_id": "r", "user_id": "u", "score": 2, "rating": 2}, "'rating'"),
    ],
)
def test_validate_feedback_rejects_bad_payloads(payload: Any, message: str) -> None:
    with pytest.raises(FeedbackValidationError, match=message):
        validate_feedback(payload)


def test_sinks_follow_the_protocol_and_reject_bad_tables() -> None:
    for sink in (NoopFeedbackSink(), MemoryFeedbackSink(), SqliteFeedbackSink(":memory:")):
        assert isinstance(sink, FeedbackSink)
    NoopFeedbackSink().write(validate_feedback({"request_id": "r", "user_id": "u", "score": 3}))
    with pytest.raises(UserError):
        SqliteFeedbackSink(":memory:", table="bad name")


def test_async_sinks_are_awaited(serve: Serve) -> None:
    class AsyncSink:
        def __init__(self) -> None:
            self.entries: list[FeedbackEntry] = []

        def write(self, entry: FeedbackEntry) -> None:
            raise AssertionError("the route must use awrite")

        async def awrite(self, entry: FeedbackEntry) -> None:
            self.entries.append(entry)

    sink = AsyncSink()
    server = serve(_app(create_feedback_route(authenticate=_auth, sink=sink)))
    assert _post(server, {"request_id": "r", "score": 5}).status_code == 200
    assert [e.request_id for e in sink.entries] == ["r"]


def test_agent_run_with_gateway_callbacks_is_audited_per_model_call_and_takes_feedback(
    serve: Serve, tmp_path: Path
) -> None:
    from ai_utils import Agent, FakeChatModel

    db = tmp_path / "gateway.db"
    events: list[Any] = []
    gateway = Gateway(routes=[Route("support", "fake", "m")], audit=SqliteAuditSink(db), on_event=events.append)
    handler = gateway.callback("support", actor={"user_id": "u7", "tenant_id": "acme"})
    llm = FakeChatModel([{"content": "", "tool_calls": [{"name": "lookup", "args": {"order": "B2"}}]}, "Shipped."])

    agent = Agent(llm=llm, tools=[lookup])
    assert agent.invoke("where is B2?", callbacks=[handler]) == "Shipped."

    rows = SqliteAuditSink(db).read()
    assert [(r["status"], r["tools_used"]) for r in rows] == [("succeeded", ["lookup"]), ("succeeded", [])]
    assert [r["request_id"] for r in rows] == list(handler.request_ids)
    assert [e.type for e in events] == ["llm.call.started", "llm.call.succeeded"] * 2
    assert [e.request_id for e in events[1::2]] == [r["request_id"] for r in rows]

    server = serve(_app(create_feedback_route(authenticate=_auth, sink=SqliteFeedbackSink(db))))
    assert _post(server, {"request_id": rows[-1]["request_id"], "score": 5}).status_code == 200
    with sqlite3.connect(db) as conn:
        joined = conn.execute(
            "select a.tenant_id, f.score from llm_audit_log a join llm_feedback f using (request_id)"
        ).fetchall()
    assert joined == [("acme", 5)]


def test_the_stored_tenant_and_user_are_the_actors_only(serve: Serve, tmp_path: Path) -> None:
    sink = SqliteFeedbackSink(tmp_path / "feedback.db")

    def enrich(entry: FeedbackEntry, ctx: dict[str, Any]) -> dict[str, Any]:
        return {**entry.to_dict(), "tenant_id": "other-corp", "user_id": "someone-else", "tags": ["enriched"]}

    server = serve(_app(create_feedback_route(authenticate=_auth, sink=sink)))
    other = _post(server, {"request_id": "r1", "score": 4, "tenant_id": "other-corp"})
    assert other.status_code == 403
    assert "tenant" in other.json()["error"]
    assert _post(server, {"request_id": "r1", "score": 4, "tenantId": "other-corp"}).status_code == 403
    assert sink.read() == []
    same = _post(server, {"request_id": "r2", "score": 4, "tenant_id": "acme", "userId": "spoofed"})
    assert same.status_code == 200
    plain = _post(server, {"request_id": "r3", "score": 2})
    assert plain.status_code == 200
    enriched = serve(_app(create_feedback_route(authenticate=_auth, sink=sink, enrich_entry=enrich)))
    assert _post(enriched, {"request_id": "r4", "score": 5}).status_code == 200
    rows = [(e.request_id, e.user_id, e.tenant_id, e.tags) for e in sink.read()]
    assert rows == [("r2", "u1", "acme", []), ("r3", "u1", "acme", []), ("r4", "u1", "acme", ["enriched"])]


def test_an_actor_without_tenant_cannot_name_one(serve: Serve) -> None:
    sink = MemoryFeedbackSink()
    route = create_feedback_route(authenticate=lambda r: Actor(user_id="solo"), sink=sink)
    server = serve(_app(route))
    assert _post(server, {"request_id": "r", "score": 3, "tenant_id": "acme"}).status_code == 403
    assert _post(server, {"request_id": "r", "score": 3}).status_code == 200
    assert [(e.user_id, e.tenant_id) for e in sink.entries] == [("solo", None)]


def test_oversized_and_deeply_nested_bodies_are_refused(serve: Serve) -> None:
    sink = MemoryFeedbackSink()
    server = serve(_app(create_feedback_route(authenticate=_auth, sink=sink)))
    huge = _post(server, {"request_id": "r", "score": 3, "metadata": {"blob": "x" * 10_000_000}})
    assert huge.status_code == 413
    assert "65536 bytes" in huge.json()["error"]
    # Deeper than Python's JSON decoder can go: was a 500.
    deep = '{"request_id": "r", "score": 3, "metadata": {"a": ' + "[" * 20_000 + "]" * 20_000 + "}}"
    refused = _post(server, deep, **{"content-type": "application/json"})
    assert refused.status_code == 400
    assert "nested deeper than 16" in refused.json()["error"]
    nested: Any = "leaf"
    for _ in range(20):
        nested = {"n": nested}
    assert _post(server, {"request_id": "r", "score": 3, "metadata": nested}).status_code == 400
    assert _post(server, "null", **{"content-type": "application/json"}).status_code == 400
    fine = _post(server, {"request_id": "r", "score": 3, "metadata": {"a": {"b": [1, 2, {"c": 3}]}}})
    assert fine.status_code == 200
    assert len(sink.entries) == 1
