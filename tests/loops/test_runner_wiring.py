"""What LoopRunner wires into agent steps: gateway callbacks and audit, user middleware, tool_choice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.callbacks import BaseCallbackHandler
from loops._loop_support import Ledger, support_loop, support_model, support_tools

from ai_utils import (
    FakeChatModel,
    Gateway,
    LoopError,
    LoopResult,
    LoopRunner,
    MemoryAuditSink,
    MemorySaver,
    Route,
    UserError,
    agent_step,
    define_loop,
    permission,
    require_tool,
)
from ai_utils.client import is_interrupt


def test_gateway_callbacks_audit_every_model_call_and_every_loop_event() -> None:
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", "fake", "scripted")], audit=sink)
    handler = gateway.callback("support", actor={"user_id": "u-1", "tenant_id": "acme"})
    ledger = Ledger()
    runner = LoopRunner(
        support_loop(),
        llm=support_model(ledger),
        tools=support_tools(ledger),
        checkpointer=MemorySaver(),
        gateway_callbacks=[handler],
    )
    assert is_interrupt(runner.invoke({"request": {"order_id": "G-1", "text": "refund"}}, thread_id="g"))
    runner.invoke(thread_id="g", decision="approve")
    model_rows = [e for e in sink.entries if e.provider == "fake"]
    loop_rows = [e for e in sink.entries if e.provider == "ai_utils.loops"]
    assert len(model_rows) == ledger.count("model") == 2
    assert all(e.status == "succeeded" and e.actor and e.actor["user_id"] == "u-1" for e in model_rows)
    kinds = [e.metadata["event"] for e in loop_rows]
    assert kinds.count("approval.required") == 1 and "loop.transition" in kinds
    assert {e.model for e in loop_rows} == {"support-flow"} and {e.feature for e in loop_rows} == {"support"}
    gate = [e for e in loop_rows if e.metadata["event"] == "permission.result"]
    assert [(e.policy_decisions[0]["rule"], e.metadata["effect"]) for e in gate] == [
        ("support-tools", "allow"),
        ("refund-approval", "approval"),
        ("refund-approval", "allow"),
    ]
    assert all(e.metadata["thread_id"] == "g" and e.tenant_id == "acme" for e in loop_rows)
    # Tool arguments never reach the audit rows of loop events.
    assert all("G-1" not in str(e.metadata) for e in loop_rows)


def test_a_denied_call_is_a_blocked_audit_row() -> None:
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("s", "fake", "m")], audit=sink, enforce_actor=False)
    loop = define_loop(
        "deny",
        start="a",
        steps={"a": agent_step(tools=["read"], next="end")},
        permissions=[permission("no", resource="tool", action="call", effect="deny", match={"tool": "read"})],
    )
    llm = FakeChatModel([{"tool_calls": [{"name": "read", "args": {"path": "x"}}]}, "ok"])
    runner = LoopRunner(loop, llm=llm, tools=support_tools(Ledger()), gateway_callbacks=[gateway.callback("s")])
    runner.invoke({"request": {}}, thread_id="d")
    blocked = [e for e in sink.entries if e.status == "blocked"]
    assert len(blocked) == 1 and blocked[0].policy_decisions == [{"rule": "no", "allowed": False, "reason": "deny"}]


class Recorder(AgentMiddleware[AgentState[Any], Any, Any]):
    """A stand-in for guardrails: sees every model request of the agent steps."""

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str | None] = []

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        self.prompts.append(request.system_prompt)
        return handler(request)


def test_middleware_reaches_every_agent_step() -> None:
    recorder, ledger = Recorder(), Ledger()
    runner = LoopRunner(support_loop(), llm=support_model(ledger), tools=support_tools(ledger), middleware=[recorder])
    out = runner.invoke({"request": {"order_id": "M", "text": "password"}}, thread_id="m")
    assert isinstance(out, LoopResult)
    assert recorder.prompts == ["Classify the request.", "Classify the request.", None, None]


class ToolChoices(BaseCallbackHandler):
    def __init__(self) -> None:
        self.choices: list[Any] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.choices.append(kwargs.get("invocation_params", {}).get("tool_choice"))


def test_require_tool_is_sent_until_the_tool_ran_and_enforced_after() -> None:
    choices, ledger = ToolChoices(), Ledger()
    loop = define_loop(
        "rt",
        start="answer",
        steps={
            "answer": agent_step(tools=["read", "search_docs"], tool_choice=require_tool("search_docs"), next="end")
        },
        permissions=[permission("ok", resource="tool", action="call", effect="allow", match={"tool": "*"})],
        result={"presentation": {"text": {"$context": "answer.text"}}},
    )
    llm = FakeChatModel([{"tool_calls": [{"name": "search_docs", "args": {"query": "q"}}]}, "Found it."])
    runner = LoopRunner(loop, llm=llm, tools=support_tools(ledger), gateway_callbacks=[choices])
    out = runner.invoke({"request": {}}, thread_id="ok")
    assert isinstance(out, LoopResult) and out.presentation == {"text": "Found it."}
    assert choices.choices == ["search_docs", None]

    lazy = LoopRunner(loop, llm=FakeChatModel(["I know without searching."]), tools=support_tools(ledger))
    with pytest.raises(LoopError, match="requires the tool 'search_docs'") as caught:
        lazy.invoke({"request": {}}, thread_id="lazy")
    assert caught.value.step_key == "answer"


def test_an_approval_raised_by_user_middleware_uses_the_same_interrupt_and_decision_path() -> None:
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    ledger = Ledger()
    loop = define_loop(
        "hitl",
        start="a",
        steps={"a": agent_step(tools=["search_docs"], next="end")},
        permissions=[permission("ok", resource="tool", action="call", effect="allow", match={"tool": "*"})],
        result={"presentation": {"text": {"$context": "a.text"}}},
    )
    llm = FakeChatModel([{"tool_calls": [{"name": "search_docs", "args": {"query": "q"}}]}, "Done."])
    hitl = HumanInTheLoopMiddleware(
        {"search_docs": {"allowed_decisions": ["approve", "edit", "reject"]}}, interrupt_mode="per_call"
    )
    runner = LoopRunner(loop, llm=llm, tools=support_tools(ledger), middleware=hitl, checkpointer=MemorySaver())
    paused = runner.invoke({"request": {}}, thread_id="h")
    assert is_interrupt(paused) and paused["tool_name"] == "search_docs" and "edit" in paused["decisions"]
    assert ledger.count("tool") == 0
    out = runner.invoke(thread_id="h", decision={"type": "edit", "args": {"query": "edited"}})
    assert isinstance(out, LoopResult) and out.presentation == {"text": "Done."}
    assert ledger.rows == [{"kind": "tool", "name": "search_docs", "args": {"query": "edited"}}]


def test_on_event_must_be_a_plain_function() -> None:
    async def listener(event: dict[str, Any]) -> None: ...

    with pytest.raises(UserError, match="sync"):
        LoopRunner(support_loop(), llm=FakeChatModel(["x"]), tools=support_tools(Ledger()), on_event=listener)


def test_guardrails_plug_into_the_agent_steps() -> None:
    from ai_utils import guardrails

    fetched: list[str] = []

    def fetch_url(url: str) -> str:
        """Fetch a page."""
        fetched.append(url)
        return "token: sk-proj-4fGh7Jk2Lm9Np3Qr5St8Uv1Wx6Yz0Ab2Cd"

    loop = define_loop(
        "guarded",
        start="browse",
        steps={"browse": agent_step(tools=["fetch_url"], next="end")},
        permissions=[permission("web", resource="tool", action="call", effect="allow", match={"tool": "fetch_url"})],
        result={"presentation": {"text": {"$context": "browse.text"}}},
    )
    calls = [
        {"name": "fetch_url", "args": {"url": "http://169.254.169.254/latest/meta-data"}},
        {"name": "fetch_url", "args": {"url": "https://example.com/docs"}},
    ]
    llm = FakeChatModel([{"tool_calls": calls}, "Found sk-proj-4fGh7Jk2Lm9Np3Qr5St8Uv1Wx6Yz0Ab2Cd there."])
    decisions: list[dict[str, Any]] = []
    runner = LoopRunner(
        loop, llm=llm, tools=[fetch_url], middleware=guardrails("standard", on_decision=decisions.append)
    )
    out = runner.invoke({"request": {}}, thread_id="g")
    assert isinstance(out, LoopResult)
    assert fetched == ["https://example.com/docs"]  # the metadata address never left
    assert "sk-proj" not in str(llm.calls[1]) and "sk-proj" not in str(out.context)
    assert out.presentation == {"text": "Found [REDACTED:openai_api_key] there."}
    assert {d["policy_id"] for d in decisions} >= {"network.private", "secret.openai_api_key"}
