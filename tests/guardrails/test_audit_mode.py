"""``mode="audit"``: every decision made and reported as when enforcing, and not one byte of the run changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from guardrails._secrets import SECRETS
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool

from ai_utils import Agent, Gateway, Route, SqliteAuditSink, guardrails, sqlite_saver
from ai_utils.testing import FakeChatModel

KEY, KEY_TEXT = SECRETS["openai_api_key"]
JWT, JWT_TEXT = SECRETS["jwt"]
AWS, AWS_TEXT = SECRETS["aws_access_key"]


class Tools:
    def __init__(self) -> None:
        self.ran: list[str] = []

        @tool
        def fetch_url(url: str) -> str:
            """Fetch a web page."""
            self.ran.append(f"fetch {url}")
            return "<html>status page</html>"

        @tool
        def delete_user(user_id: int) -> str:
            """Delete a user account."""
            self.ran.append(f"delete {user_id}")
            return "deleted"

        self.tools = [fetch_url, delete_user]


def _script() -> list[Any]:
    return [
        {"tool_calls": [{"id": "c1", "name": "fetch_url", "args": {"url": "http://10.0.0.7/status"}}]},
        {"tool_calls": [{"id": "c2", "name": "delete_user", "args": {"user_id": 7}}]},
        {"content": f"All done. The session is {JWT_TEXT}", "reasoning": f"the old key was {AWS_TEXT}"},
    ]


def _run(middleware: Any, path: Path, *, stream: bool, gateway: Gateway | None = None) -> dict[str, Any]:
    """One turn through a fresh agent; what the user, the model, the tools and the thread saw."""
    tools = Tools()
    model = FakeChatModel(_script())
    decisions: list[dict[str, Any]] = []
    agent = Agent(
        llm=model,
        tools=tools.tools,
        checkpointer=sqlite_saver(path),
        middleware=middleware(decisions.append) if middleware is not None else (),
        callbacks=[gateway.callback("support", actor={"user_id": "u1"})] if gateway is not None else (),
    )
    prompt = f"my key {KEY_TEXT} stopped working, check the status page and remove user 7"
    if stream:
        out: Any = list(agent.stream(prompt, thread_id="t", show_tool_calls=True, show_reasoning=True))
    else:
        out = agent.invoke(prompt, thread_id="t")
    stored: list[BaseMessage] = agent.graph.get_state({"configurable": {"thread_id": "t"}}).values["messages"]
    return {
        "out": out,
        "ran": tools.ran,
        "decisions": decisions,
        "model_saw": [[(m.type, m.content, m.additional_kwargs) for m in call] for call in model.calls],
        "stored": [
            (m.type, m.content, m.additional_kwargs, getattr(m, "tool_calls", None), m.response_metadata)
            for m in stored
            if m.type != "ai"  # an AI message's response_metadata names its call (ids differ per run)
        ]
        + [(m.type, m.content, m.additional_kwargs, m.tool_calls) for m in stored if m.type == "ai"],  # type: ignore[attr-defined]
    }


def _strict(mode: str) -> Any:
    return lambda report: guardrails("strict", mode=mode, on_decision=report)


@pytest.mark.parametrize("stream", [False, True])
def test_audit_changes_no_byte_and_reports_what_strict_enforcement_decides(tmp_path: Path, stream: bool) -> None:
    plain = _run(None, tmp_path / "plain.db", stream=stream)
    enforced = _run(_strict("enforce"), tmp_path / "enforce.db", stream=stream)
    audited = _run(_strict("audit"), tmp_path / "audit.db", stream=stream)

    # The attack as the enforcing run stops it: private address and destructive tool not run, secrets redacted.
    assert enforced["ran"] == []
    assert KEY not in repr(enforced["model_saw"]) and JWT not in repr(enforced["out"])
    assert AWS not in repr(enforced["stored"]) and KEY not in repr(enforced["stored"])

    # Audit: byte for byte what the run without guardrails did (answer / every stream chunk, model input, tools,
    # the stored thread, including message metadata) ...
    for key in ("out", "ran", "model_saw", "stored"):
        assert audited[key] == plain[key], key
    assert plain["ran"] == ["fetch http://10.0.0.7/status", "delete 7"]
    assert JWT in repr(audited["out"]) and KEY in repr(audited["model_saw"])
    # ... while it reports exactly the decisions the enforcing run acted on.
    assert audited["decisions"] == enforced["decisions"]
    assert enforced["decisions"] == [
        {"policy_id": "secret.openai_api_key", "phase": "input", "action": "redact", "risk": "high"},
        {"policy_id": "network.private", "phase": "tool_input", "action": "block", "risk": "high", "tool": "fetch_url"},
        {
            "policy_id": "tool.destructive",
            "phase": "tool_input",
            "action": "block",
            "risk": "high",
            "tool": "delete_user",
        },
        {"policy_id": "secret.jwt", "phase": "output", "action": "redact", "risk": "high"},
        {"policy_id": "secret.aws_access_key", "phase": "output", "action": "redact", "risk": "high"},
    ]


def test_audit_rows_of_the_gateway_carry_the_same_decisions_as_enforcement(tmp_path: Path) -> None:
    def rows(mode: str | None) -> list[dict[str, Any]]:
        sink = SqliteAuditSink(tmp_path / f"audit-{mode}.db")
        gateway = Gateway(routes=[Route("support", "fake", "m")], audit=sink)
        middleware = _strict(mode) if mode is not None else None
        _run(middleware, tmp_path / f"thread-{mode}.db", stream=False, gateway=gateway)
        return SqliteAuditSink(tmp_path / f"audit-{mode}.db").read()

    plain, enforced, audited = rows(None), rows("enforce"), rows("audit")

    def guard(row: dict[str, Any]) -> list[dict[str, Any]]:
        return [d for d in row["policy_decisions"] if "policy_id" in d]

    assert len(plain) == len(enforced) == len(audited) == 3
    assert [guard(r) for r in audited] == [guard(r) for r in enforced]
    assert [guard(r) for r in enforced] == [
        [{"policy_id": "secret.openai_api_key", "phase": "input", "action": "redact", "risk": "high"}],
        [
            {
                "policy_id": "network.private",
                "phase": "tool_input",
                "action": "block",
                "risk": "high",
                "tool": "fetch_url",
            }
        ],
        [
            {
                "policy_id": "tool.destructive",
                "phase": "tool_input",
                "action": "block",
                "risk": "high",
                "tool": "delete_user",
            },
            {"policy_id": "secret.jwt", "phase": "output", "action": "redact", "risk": "high"},
        ],
    ]
    # The audited rows show the run as it happened (the same answer the plain run's row shows); enforcement's, the
    # redacted answer.
    assert audited[-1]["response_summary"] == plain[-1]["response_summary"] and JWT in audited[-1]["response_summary"]
    assert JWT not in enforced[-1]["response_summary"]


def test_audit_mode_under_standard_reports_the_approval_it_would_ask_for_and_does_not_pause(tmp_path: Path) -> None:
    tools = Tools()
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([{"tool_calls": [{"name": "delete_user", "args": {"user_id": 3}}]}, "removed"])
    agent = Agent(
        llm=model,
        tools=tools.tools,
        checkpointer=sqlite_saver(tmp_path / "t.db"),
        middleware=guardrails("standard", mode="audit", on_decision=decisions.append),
    )
    assert agent.invoke("remove user 3", thread_id="t") == "removed"  # no interrupt chunk
    assert tools.ran == ["delete 3"]
    assert decisions == [
        {
            "policy_id": "tool.destructive",
            "phase": "tool_input",
            "action": "require_approval",
            "risk": "high",
            "tool": "delete_user",
        }
    ]
