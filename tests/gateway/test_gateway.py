from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from _services import Aimock
from langchain_core.language_models import BaseChatModel, FakeListLLM
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from ai_utils.exceptions import UserError
from ai_utils.gateway import (
    Actor,
    AuditEntry,
    AuditWriteError,
    Gateway,
    GatewayError,
    GatewayEvent,
    MemoryAuditSink,
    PolicyContext,
    PolicyDecision,
    Route,
    SqliteAuditSink,
    feature_registered,
    hash_canonical,
    tool_allowlist,
)
from ai_utils.testing import FakeChatModel


def _gateway(*responses: Any, **kwargs: Any) -> tuple[Gateway, MemoryAuditSink, list[GatewayEvent]]:
    sink = MemoryAuditSink()
    events: list[GatewayEvent] = []
    routes = [Route("support", "fake", "fake-1", {"responses": list(responses) or ["hello"]})]
    gateway = Gateway(routes=kwargs.pop("routes", routes), audit=sink, on_event=events.append, **kwargs)
    return gateway, sink, events


class FailingSink:
    def write(self, entry: AuditEntry) -> None:
        raise OSError("disk full")


@tool
def search(query: str) -> str:
    """Search the knowledge base."""
    return f"results for {query}"


@tool
def delete_account(user: str) -> str:
    """Delete a user account."""
    return "deleted"


def test_llm_call_writes_one_succeeded_row_and_started_then_succeeded_events() -> None:
    gateway, sink, events = _gateway("hello")
    reply = gateway.llm("support", actor={"user_id": "u1", "tenant_id": "t1"}, metadata={"ticket": 7}).invoke("hi")

    assert reply.content == "hello"
    [entry] = sink.entries
    assert (entry.feature, entry.provider, entry.model, entry.status) == ("support", "fake", "fake-1", "succeeded")
    assert entry.tenant_id == "t1"
    assert entry.actor == {"user_id": "u1", "tenant_id": "t1", "roles": [], "plan": None, "attributes": {}}
    assert entry.response_summary == "hello"
    assert "hi" in (entry.request_summary or "")
    assert entry.metadata == {"ticket": 7}
    assert entry.usage is not None and entry.usage["total_tokens"] > 0
    assert [d["rule"] for d in entry.policy_decisions] == ["feature_registered", "require_actor"]
    assert [e.type for e in events] == ["llm.call.started", "llm.call.succeeded"]
    assert {e.request_id for e in events} == {entry.request_id}
    assert reply.response_metadata["gateway_request_id"] == entry.request_id


def test_request_hash_is_the_canonical_hash_of_feature_model_messages_and_tools() -> None:
    gateway, sink, _ = _gateway("hello", "hello")
    gateway.llm("support", actor={"user_id": "u1"}).invoke("hi ü")
    gateway.llm("support", actor={"user_id": "u2"}).invoke("hi ü")

    first, second = sink.entries
    messages = [{"role": "human", "content": "hi ü"}]
    assert first.request_hash == hash_canonical(
        {"feature": "support", "model": "fake-1", "messages": messages, "tools": []}
    )
    assert second.request_hash == first.request_hash
    assert first.request_summary == '[{"content":"hi ü","role":"human"}]'


def test_missing_actor_is_blocked_before_the_model_is_called() -> None:
    gateway, sink, events = _gateway("never")
    llm = gateway.llm("support")
    assert isinstance(llm, FakeChatModel)

    with pytest.raises(GatewayError, match="needs an actor") as caught:
        llm.invoke("hi")

    assert llm.calls == []
    assert [(d.rule, d.allowed) for d in caught.value.decisions] == [
        ("feature_registered", True),
        ("require_actor", False),
    ]
    [entry] = sink.entries
    assert (entry.status, entry.error_type) == ("blocked", "policy")
    [event] = events
    assert (event.type, event.policy_rule, event.request_id) == (
        "llm.policy.blocked",
        "require_actor",
        entry.request_id,
    )


def test_unknown_feature_raises_gateway_error_with_a_blocked_row_and_event() -> None:
    gateway, sink, events = _gateway()
    with pytest.raises(GatewayError, match="'billing' has no route") as caught:
        gateway.llm("billing", actor={"user_id": "u1"})
    assert caught.value.decisions[-1].rule == "feature_registered"
    assert [e.status for e in sink.entries] == ["blocked"]
    assert [e.type for e in events] == ["llm.policy.blocked"]
    with pytest.raises(GatewayError, match="has no route"):
        gateway.route("billing")


def test_unknown_feature_is_refused_even_by_a_chain_without_feature_registered() -> None:
    gateway, sink, _ = _gateway(policy=[])
    with pytest.raises(GatewayError, match="has no route"):
        gateway.llm("billing")
    assert sink.entries == []


def test_a_callback_on_any_model_blocks_an_unknown_feature_at_call_time() -> None:
    gateway, sink, _ = _gateway()
    model = FakeChatModel(["x"])
    handler = gateway.callback("billing", actor=Actor(user_id="u1"))
    with pytest.raises(GatewayError):
        model.invoke("hi", config={"callbacks": [handler]})
    assert model.calls == []
    assert (sink.entries[0].provider, sink.entries[0].model, sink.entries[0].status) == ("", "", "blocked")


def test_policy_denial_makes_no_http_request_to_the_provider(aimock: Aimock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", aimock.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    aimock.add({"match": {"userMessage": "hi"}, "response": {"content": "hello"}})
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", "openai", "gpt-4.1-mini", {"max_retries": 0})], audit=sink)

    with pytest.raises(GatewayError):
        gateway.llm("support").invoke("hi")
    assert aimock.journal() == []

    reply = gateway.llm("support", actor={"user_id": "u1"}).invoke("hi")
    assert reply.content == "hello"
    assert len(aimock.journal()) == 1
    assert [e.status for e in sink.entries] == ["blocked", "succeeded"]
    assert sink.entries[1].usage is not None


def test_provider_error_writes_a_failed_row_with_the_classified_type(
    aimock: Aimock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", aimock.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    aimock.add({"match": {"userMessage": "hi"}, "response": {"error": {"message": "slow down"}, "status": 429}})
    gateway, sink, events = _gateway(routes=[Route("support", "openai", "gpt-4.1-mini", {"max_retries": 0})])

    with pytest.raises(Exception, match="slow down"):
        gateway.llm("support", actor={"user_id": "u1"}).invoke("hi")

    [entry] = sink.entries
    assert (entry.status, entry.error_type) == ("failed", "rate_limit")
    assert "slow down" in (entry.error_message or "")
    assert [e.type for e in events] == ["llm.call.started", "llm.call.failed"]
    assert events[-1].error_type == "rate_limit"


def test_disallowed_tool_is_blocked_and_allowed_tools_pass() -> None:
    gateway, sink, events = _gateway(
        "ok", "ok", policy=[feature_registered, tool_allowlist({"support": {"search"}})], enforce_actor=False
    )
    denied = gateway.llm("support").bind_tools([search, delete_account])
    with pytest.raises(GatewayError, match="delete_account"):
        denied.invoke("hi")
    assert events[-1].type == "llm.policy.blocked"
    assert sink.entries[-1].tools_requested == ["search", "delete_account"]

    gateway.llm("support").bind_tools([search]).invoke("hi")
    assert sink.entries[-1].status == "succeeded"
    assert sink.entries[-1].tools_requested == ["search"]


def test_custom_rule_sees_metadata_and_can_deny() -> None:
    def closed(context: PolicyContext) -> PolicyDecision | None:
        if context.metadata.get("after_hours"):
            return PolicyDecision("business_hours", False, "Support is closed.")
        return None

    gateway, sink, _ = _gateway("a", policy=[feature_registered, closed])
    with pytest.raises(GatewayError, match="Support is closed"):
        gateway.llm("support", metadata={"after_hours": True}).invoke("hi")
    gateway.llm("support").invoke("hi")
    assert [e.policy_decisions for e in sink.entries] == [
        [
            {"rule": "feature_registered", "allowed": True, "reason": None},
            {"rule": "business_hours", "allowed": False, "reason": "Support is closed."},
        ],
        [{"rule": "feature_registered", "allowed": True, "reason": None}],
    ]


def test_enforce_actor_false_allows_anonymous_calls() -> None:
    gateway, sink, _ = _gateway("hi", enforce_actor=False)
    assert gateway.llm("support").invoke("x").content == "hi"
    assert sink.entries[0].actor is None


def test_default_actor_is_merged_and_secret_attributes_stay_out_of_audit_and_events() -> None:
    gateway, sink, events = _gateway(
        "hi", default_actor={"tenant_id": "acme", "roles": ["agent"], "attributes": {"region": "eu"}}
    )
    actor = Actor(user_id="u1", attributes={"api_key": "sk-secret", "session_token": "tok"})
    gateway.llm("support", actor=actor).invoke("x")
    [entry] = sink.entries
    assert entry.actor == {
        "user_id": "u1",
        "tenant_id": "acme",
        "roles": ["agent"],
        "plan": None,
        "attributes": {"region": "eu"},
    }
    assert "sk-secret" not in repr(entry) + repr(events)


def test_default_actor_alone_satisfies_require_actor() -> None:
    gateway, sink, _ = _gateway("hi", default_actor=Actor(user_id="system"))
    gateway.llm("support").invoke("x")
    assert sink.entries[0].actor is not None and sink.entries[0].actor["user_id"] == "system"


def test_injected_clock_sets_created_at() -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    gateway, sink, _ = _gateway("hi", now=lambda: moment, enforce_actor=False)
    gateway.llm("support").invoke("x")
    assert sink.entries[0].created_at == moment


def test_stream_is_audited_once_at_the_end_with_the_text_and_without_reasoning() -> None:
    gateway, sink, events = _gateway({"content": "Hello there", "reasoning": "SECRET PLAN"}, enforce_actor=False)
    chunks = list(gateway.llm("support").stream("hi"))
    assert len(chunks) > 1
    [entry] = sink.entries
    assert entry.response_summary == "Hello there"
    assert "SECRET PLAN" not in repr(entry)
    assert [e.type for e in events] == ["llm.call.started", "llm.call.succeeded"]


async def test_async_invoke_and_astream_are_audited() -> None:
    gateway, sink, events = _gateway("one", {"content": "two", "tool_calls": [{"name": "search", "args": {}}]})
    llm = gateway.llm("support", actor={"user_id": "u1"})
    assert (await llm.ainvoke("a")).content == "one"
    chunks = [c async for c in llm.astream("b")]
    assert chunks
    assert [(e.status, e.response_summary, e.tools_used) for e in sink.entries] == [
        ("succeeded", "one", []),
        ("succeeded", "two", ["search"]),
    ]
    assert [e.type for e in events].count("llm.call.succeeded") == 2


async def test_async_denial_raises_gateway_error() -> None:
    gateway, sink, _ = _gateway("x")
    with pytest.raises(GatewayError):
        await gateway.llm("support").ainvoke("hi")
    assert sink.entries[0].status == "blocked"


async def test_async_on_event_hooks_run_on_the_loop() -> None:
    seen: list[str] = []

    async def on_event(event: GatewayEvent) -> None:
        seen.append(event.type)

    gateway = Gateway(routes=[Route("s", "fake", "m", {"responses": ["x"]})], on_event=on_event, enforce_actor=False)
    await gateway.llm("s").ainvoke("hi")
    await asyncio.sleep(0)
    assert seen == ["llm.call.started", "llm.call.succeeded"]


def test_async_on_event_hook_in_a_sync_run_completes_before_the_call_returns() -> None:
    seen: list[str] = []

    async def on_event(event: GatewayEvent) -> None:
        seen.append(event.type)

    gateway = Gateway(routes=[Route("s", "fake", "m", {"responses": ["x"]})], on_event=on_event, enforce_actor=False)
    gateway.llm("s").invoke("hi")
    assert seen == ["llm.call.started", "llm.call.succeeded"]


def test_a_failing_on_event_hook_never_fails_the_call(caplog: pytest.LogCaptureFixture) -> None:
    def on_event(event: GatewayEvent) -> None:
        raise RuntimeError("telemetry down")

    gateway = Gateway(routes=[Route("s", "fake", "m", {"responses": ["x"]})], on_event=on_event, enforce_actor=False)
    assert gateway.llm("s").invoke("hi").content == "x"
    assert "telemetry down" in caplog.text


def test_best_effort_audit_failure_is_reported_and_the_call_succeeds() -> None:
    reported: list[tuple[str, str]] = []
    gateway, _, events = _gateway("fine", enforce_actor=False)
    gateway = Gateway(
        routes=list(gateway.routes.values()),
        audit=FailingSink(),
        on_audit_error=lambda err, entry: reported.append((str(err), entry.status)),
        on_event=events.append,
        enforce_actor=False,
    )
    assert gateway.llm("support").invoke("hi").content == "fine"
    assert reported == [("disk full", "succeeded")]
    assert events[-1].type == "llm.call.succeeded"


def test_required_audit_failure_fails_the_call_after_on_audit_error() -> None:
    order: list[str] = []
    events: list[GatewayEvent] = []
    gateway = Gateway(
        routes=[Route("support", "fake", "m", {"responses": ["fine"]})],
        audit=FailingSink(),
        audit_mode="required",
        on_audit_error=lambda err, entry: order.append(f"reported {entry.request_id}"),
        on_event=events.append,
        enforce_actor=False,
    )
    with pytest.raises(AuditWriteError, match="required") as caught:
        gateway.llm("support").invoke("hi")
    assert isinstance(caught.value.__cause__, OSError)
    assert order == [f"reported {events[0].request_id}"]
    assert (events[-1].type, events[-1].error_type) == ("llm.call.failed", "audit")


def test_default_on_audit_error_logs_the_whole_row(caplog: pytest.LogCaptureFixture) -> None:
    gateway = Gateway(routes=[Route("s", "fake", "m", {"responses": ["x"]})], audit=FailingSink(), enforce_actor=False)
    gateway.llm("s", metadata={"order": "A-17"}).invoke("hi")
    assert "disk full" in caplog.text and "A-17" in caplog.text


def test_required_mode_still_raises_the_denial_when_the_blocked_row_cannot_be_written() -> None:
    gateway = Gateway(
        routes=[Route("s", "fake", "m", {"responses": ["x"]})],
        audit=FailingSink(),
        audit_mode="required",
        on_audit_error=lambda err, entry: None,
    )
    with pytest.raises(GatewayError, match="needs an actor") as caught:
        gateway.llm("s").invoke("hi")
    assert not isinstance(caught.value, AuditWriteError)


class FailsAfterPendingSink:
    """Takes the pending row of required mode, then fails (the disk filled up during the call)."""

    def write(self, entry: AuditEntry) -> None:
        if entry.status != "pending":
            raise OSError("disk full")


def test_required_mode_keeps_the_provider_error_when_the_failed_row_cannot_be_written() -> None:
    reported: list[str] = []
    gateway = Gateway(
        routes=[Route("s", "fake", "m", {"responses": []})],
        audit=FailsAfterPendingSink(),
        audit_mode="required",
        on_audit_error=lambda err, entry: reported.append(entry.status),
        enforce_actor=False,
    )
    model = FakeChatModel(["only one"])
    model.invoke("a")
    with pytest.raises(UserError, match="no reply for call 2"):
        model.invoke("b", config={"callbacks": [gateway.callback("s")]})
    assert reported == ["failed"]


def test_constructor_rejects_duplicate_features_and_unknown_audit_modes() -> None:
    with pytest.raises(UserError, match="routed twice"):
        Gateway(routes=[Route("a", "fake", "m"), Route("a", "fake", "n")])
    with pytest.raises(UserError, match="audit_mode"):
        Gateway(routes=[], audit_mode="sometimes")  # type: ignore[arg-type]


def test_agent_run_writes_one_sqlite_row_per_model_call(tmp_path: Any) -> None:
    from ai_utils.agents import Agent

    sink = SqliteAuditSink(tmp_path / "audit.db")
    events: list[GatewayEvent] = []
    gateway = Gateway(
        routes=[
            Route(
                "support",
                "fake",
                "fake-1",
                {
                    "responses": [
                        {"content": "", "tool_calls": [{"name": "search", "args": {"query": "refund"}}]},
                        "Done.",
                    ]
                },
            )
        ],
        audit=sink,
        on_event=events.append,
    )
    agent = Agent(llm=gateway.llm("support", actor={"user_id": "u1"}), tools=[search])
    assert agent.invoke("find refund policy") == "Done."

    rows = sink.read()
    assert [(r["status"], r["tools_used"]) for r in rows] == [("succeeded", ["search"]), ("succeeded", [])]
    assert all(r["tools_requested"] == ["search"] for r in rows)
    assert [e.type for e in events] == ["llm.call.started", "llm.call.succeeded"] * 2
    assert [e.request_id for e in events[1::2]] == [r["request_id"] for r in rows]
    assert all(r["parent_run_id"] for r in rows)


def test_agent_run_with_the_callback_in_config_is_audited_per_model_call() -> None:
    from langchain.agents import create_agent

    gateway, sink, _ = _gateway(enforce_actor=False)
    model = FakeChatModel([{"content": "", "tool_calls": [{"name": "search", "args": {"query": "x"}}]}, "Done."])
    graph = create_agent(model, tools=[search])
    handler = gateway.callback("support")
    result = graph.invoke({"messages": [("user", "hi")]}, config={"callbacks": [handler]})
    assert result["messages"][-1].content == "Done."
    assert [e.request_id for e in sink.entries] == list(handler.request_ids)
    assert len(sink.entries) == 2


def test_returned_message_carries_the_request_id_for_feedback() -> None:
    gateway, sink, _ = _gateway(enforce_actor=False)
    message = gateway.llm("support").invoke("hi")
    assert isinstance(message, AIMessage)
    assert message.response_metadata["gateway_request_id"] == sink.entries[0].request_id


class _LegacyUsageModel(BaseChatModel):
    """Reports usage only in llm_output, like older provider integrations."""

    @property
    def _llm_type(self) -> str:
        return "legacy"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage("legacy"))],
            llm_output={"token_usage": {"prompt_tokens": 3, "completion_tokens": 1}},
        )


def test_usage_falls_back_to_llm_output_and_completion_models_are_audited() -> None:
    gateway, sink, events = _gateway(enforce_actor=False)
    handler = gateway.callback("support", metadata={"source": "legacy"})
    _LegacyUsageModel().invoke("hi", config={"callbacks": [handler]})
    FakeListLLM(responses=["plain completion"]).invoke("prompt text", config={"callbacks": [handler]})

    assert [(e.usage, e.response_summary) for e in sink.entries] == [
        ({"prompt_tokens": 3, "completion_tokens": 1}, "legacy"),
        (None, "plain completion"),
    ]
    assert "prompt text" in (sink.entries[1].request_summary or "")
    assert events[-1].to_dict()["type"] == "llm.call.succeeded"
    assert events[-1].to_dict()["metadata"] == {"source": "legacy"}


def test_thread_id_is_kept_and_langchain_internals_are_dropped_from_metadata() -> None:
    gateway, sink, _ = _gateway(enforce_actor=False)
    gateway.llm("support").invoke("hi", config={"metadata": {"thread_id": "t-1", "ls_extra": 1, "team": "a"}})
    assert sink.entries[0].metadata == {"thread_id": "t-1", "team": "a"}
