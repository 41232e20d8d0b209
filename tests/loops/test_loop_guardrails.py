"""Guardrails inside a loop: policy.result events, and LoopPolicyDeniedError for a tool step a guardrail blocked."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool

from ai_utils import (
    Gateway,
    LoopPolicyDeniedError,
    LoopResult,
    LoopRunner,
    MemoryAuditSink,
    Route,
    agent_step,
    ctx,
    define_loop,
    guardrails,
    permission,
    tool_step,
)
from ai_utils.client import is_interrupt
from ai_utils.exceptions import LoopError
from ai_utils.testing import FunctionChatModel

ALLOW = [permission("all", resource="tool", action="call", effect="allow", match={"tool": "*"})]
KEY = "sk-abcdefghijklmnopqrstuvwx1234"


class Host:
    def __init__(self) -> None:
        self.fetched: list[str] = []
        self.deleted: list[str] = []

        @tool
        def fetch(url: str) -> str:
            """Fetch a URL."""
            self.fetched.append(url)
            return f"page at {url}; admin token {KEY}"

        @tool
        def delete_account(user_id: str) -> str:
            """Delete a user account."""
            self.deleted.append(user_id)
            return f"deleted {user_id}"

        self.tools = [fetch, delete_account]


def fetch_loop() -> Any:
    return define_loop(
        "fetcher",
        start="get",
        steps={"get": tool_step("fetch", input={"url": ctx("request.url")}, next="end")},
        permissions=ALLOW,
        result={"data": ctx("get")},
    )


def policy_events(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (e["step_key"], e["policy_id"], e["phase"], e["action"], e.get("tool"))
        for e in events
        if e["type"] == "policy.result"
    ]


def test_a_tool_step_a_guardrail_blocks_fails_the_run_with_loop_policy_denied_error() -> None:
    host, events = Host(), []
    runner = LoopRunner(fetch_loop(), tools=host.tools, middleware=guardrails("standard"), on_event=events.append)
    # The attack: a caller-seeded URL aims the tool step at the cloud metadata service (variants below).
    for index, url in enumerate(
        [
            "http://169.254.169.254/latest/meta-data",
            "http://127.0.0.1:8080/admin",
            "http://[::1]/",
            "http://0x7f000001/",
        ]
    ):
        thread = f"t{index}"
        with pytest.raises(LoopPolicyDeniedError, match="'network.private' blocked the call to 'fetch'") as caught:
            runner.invoke({"request": {"url": url}}, thread_id=thread)
        assert (caught.value.policy_id, caught.value.tool, caught.value.step_key) == ("network.private", "fetch", "get")
        assert isinstance(caught.value, LoopError) and runner.state(thread) == "failed"
        with pytest.raises(LoopPolicyDeniedError):
            runner.result(thread)  # the stored failure keeps its type
    assert host.fetched == []  # the tool never ran
    assert policy_events(events)[0] == ("get", "network.private", "tool_input", "block", "fetch")
    assert {r.error for r in runner.runs()} == {"LoopPolicyDeniedError"}
    # A public URL goes through, and the secret in the tool's result is redacted before it is saved.
    out = runner.invoke({"request": {"url": "https://example.com/"}}, thread_id="ok")
    assert isinstance(out, LoopResult) and host.fetched == ["https://example.com/"]
    assert KEY not in str(out.context) and "[REDACTED:" in out.data
    assert ("get", "secret.openai_api_key", "tool_output", "redact", "fetch") in policy_events(events)


def test_strict_blocks_a_destructive_tool_step_and_standard_asks_first() -> None:
    host = Host()
    loop = define_loop(
        "cleanup",
        start="remove",
        steps={"remove": tool_step("delete_account", input={"user_id": ctx("request.user")}, next="end")},
        permissions=ALLOW,
    )
    strict = LoopRunner(loop, tools=host.tools, middleware=guardrails("strict"))
    with pytest.raises(LoopPolicyDeniedError, match="tool.destructive"):
        strict.invoke({"request": {"user": "u-1"}}, thread_id="s")
    standard = LoopRunner(loop, tools=host.tools, middleware=guardrails("standard"))
    asked = standard.invoke({"request": {"user": "u-2"}}, thread_id="a")
    assert is_interrupt(asked) and asked["tool_name"] == "delete_account"  # type: ignore[index]
    assert host.deleted == []
    with pytest.raises(LoopPolicyDeniedError, match="tool.destructive"):
        standard.invoke(thread_id="a", decision="reject", gate_id=asked["gate_id"])  # type: ignore[index]
    asked = standard.invoke({"request": {"user": "u-3"}}, thread_id="b")
    out = standard.invoke(thread_id="b", decision="approve", gate_id=asked["id"])  # type: ignore[index]
    assert isinstance(out, LoopResult) and host.deleted == ["u-3"]


def test_guardrail_decisions_in_an_agent_step_are_policy_result_events_and_audit_rows() -> None:
    host, events = Host(), []

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return {"tool_calls": [{"name": "fetch", "args": {"url": "http://169.254.169.254/"}}]}
        return "I could not fetch that."

    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("loops", "fake", "scripted")], audit=sink, enforce_actor=False)
    loop = define_loop(
        "helper",
        start="help",
        steps={"help": agent_step(prompt="Help.", tools=["fetch"], next="end")},
        permissions=ALLOW,
        result={"data": ctx("help.text")},
    )
    runner = LoopRunner(
        loop,
        llm=FunctionChatModel(reply),
        tools=host.tools,
        middleware=guardrails("standard"),
        on_event=events.append,
        gateway_callbacks=[gateway.callback("loops")],
    )
    out = runner.invoke({"request": {"text": f"my key is {KEY}"}}, thread_id="h")
    assert isinstance(out, LoopResult) and out.data == "I could not fetch that."  # the agent step carries on
    assert host.fetched == []
    assert policy_events(events) == [
        ("help", "secret.openai_api_key", "input", "redact", None),
        ("help", "network.private", "tool_input", "block", "fetch"),
    ]
    rows = [e for e in sink.entries if e.provider == "ai_utils.loops" and e.metadata["event"] == "policy.result"]
    assert [r.status for r in rows] == ["succeeded", "blocked"]
    assert all(KEY not in str(r.metadata) for r in rows)
