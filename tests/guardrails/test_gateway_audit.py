"""Guardrail decisions in the gateway's audit rows (real SQLite), never with the secret they acted on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from guardrails._secrets import SECRETS
from langchain_core.tools import tool

from ai_utils import Agent, Gateway, MemorySaver, Route, SqliteAuditSink, guardrails
from ai_utils.client import is_interrupt
from ai_utils.testing import FakeChatModel, MemoryAuditSink

ACTOR = {"user_id": "u1"}
OPENAI_KEY, OPENAI_TEXT = SECRETS["openai_api_key"]
AWS_KEY, AWS_TEXT = SECRETS["aws_access_key"]
GITHUB, GITHUB_TEXT = SECRETS["github_token"]


def _guard_rows(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Per row, the guardrail decisions (the gateway's own decisions carry ``rule`` instead)."""
    return [[d for d in row["policy_decisions"] if "policy_id" in d] for row in rows]


def test_decisions_land_in_the_audit_row_of_the_call_they_belong_to(tmp_path: Path) -> None:
    @tool
    def read_ticket(ticket_id: str) -> str:
        """Read a support ticket."""
        return f"Ticket {ticket_id}: customer pasted {AWS_TEXT}"

    sink = SqliteAuditSink(tmp_path / "audit.db")
    gateway = Gateway(routes=[Route("support", "fake", "m")], audit=sink)
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel(
        [
            {"tool_calls": [{"name": "read_ticket", "args": {"ticket_id": "T-1"}}]},
            {"tool_calls": [{"name": "read_ticket", "args": {"ticket_id": "http://10.0.0.7/t"}}]},
            f"Done. Your token {GITHUB_TEXT} was rotated.",
        ]
    )
    agent = Agent(
        llm=model,
        tools=[read_ticket],
        checkpointer=MemorySaver(),
        middleware=guardrails("standard", on_decision=decisions.append),
        callbacks=[gateway.callback("support", actor=ACTOR)],
    )

    answer = agent.invoke(f"my key {OPENAI_TEXT} stopped working", thread_id="t")
    assert OPENAI_KEY not in answer and GITHUB not in answer

    rows = SqliteAuditSink(tmp_path / "audit.db").read()  # reopened: what an auditor reads
    assert len(rows) == 3
    assert _guard_rows(rows) == [
        [{"policy_id": "secret.openai_api_key", "phase": "input", "action": "redact", "risk": "high"}],
        [
            {
                "policy_id": "secret.aws_access_key",
                "phase": "tool_output",
                "action": "redact",
                "risk": "high",
                "tool": "read_ticket",
            }
        ],
        [
            {
                "policy_id": "network.private",
                "phase": "tool_input",
                "action": "block",
                "risk": "high",
                "tool": "read_ticket",
            },
            {"policy_id": "secret.github_token", "phase": "output", "action": "redact", "risk": "high"},
        ],
    ]
    # The gateway's own policy chain still comes first in every row.
    assert all(row["policy_decisions"][0]["rule"] == "feature_registered" for row in rows)
    # Same events, same order, to on_decision.
    assert decisions == [d for row in _guard_rows(rows) for d in row]
    # No secret anywhere: request summaries, response summaries, metadata.
    dumped = json.dumps(rows, default=str)
    assert OPENAI_KEY not in dumped and AWS_KEY not in dumped and GITHUB not in dumped
    assert "[REDACTED:github_token]" in rows[2]["response_summary"]


async def test_an_approval_across_the_pause_is_audited_with_the_call_that_saw_the_result() -> None:
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("ops", "fake", "m")], audit=sink)
    deleted: list[str] = []

    @tool
    def delete_project(name: str) -> str:
        """Delete a project."""
        deleted.append(name)
        return f"deleted {name}"

    model = FakeChatModel(
        [{"tool_calls": [{"name": "delete_project", "args": {"name": "demo"}}]}, f"Deleted. Key: {OPENAI_TEXT}"]
    )
    agent = Agent(
        llm=model,
        tools=[delete_project],
        checkpointer=MemorySaver(),
        middleware=guardrails(),
        callbacks=[gateway.callback("ops", actor=ACTOR)],
    )

    paused = await agent.ainvoke("delete demo", thread_id="p")
    assert is_interrupt(paused) and deleted == []
    answer = await agent.ainvoke(decision="approve", thread_id="p")
    assert deleted == ["demo"] and OPENAI_KEY not in answer

    rows = [entry.to_dict() for entry in sink.entries]
    guard = _guard_rows(rows)
    # The approval is recorded with the model call that saw the approved tool's result.
    assert [(d["action"], d.get("tool")) for d in guard[1]] == [
        ("require_approval", "delete_project"),
        ("approved", "delete_project"),
        ("redact", None),
    ]
    assert OPENAI_KEY not in json.dumps(rows, default=str)
