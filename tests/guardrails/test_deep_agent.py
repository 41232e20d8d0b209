"""Guardrails on a `DeepAgent`: the same middleware, the same redaction, blocks and approvals."""

from __future__ import annotations

from typing import Any

from guardrails._secrets import SECRETS
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from ai_utils import DeepAgent, guardrails
from ai_utils.client import is_interrupt
from ai_utils.testing import FakeChatModel

KEY, KEY_TEXT = SECRETS["anthropic_api_key"]


def test_deep_agent_redacts_blocks_private_targets_and_asks_before_deleting() -> None:
    deleted: list[str] = []
    fetched: list[str] = []

    @tool
    def fetch_url(url: str) -> str:
        """Fetch a page."""
        fetched.append(url)
        return "page"

    @tool
    def delete_branch(name: str) -> str:
        """Delete a git branch."""
        deleted.append(name)
        return f"deleted {name}"

    decisions: list[dict[str, Any]] = []
    model = FakeChatModel(
        [
            {"tool_calls": [{"name": "fetch_url", "args": {"url": "http://169.254.169.254/latest/"}}]},
            {"tool_calls": [{"name": "delete_branch", "args": {"name": "old"}}]},
            f"Branch removed; your key was {KEY_TEXT}",
        ]
    )
    agent = DeepAgent(
        llm=model,
        tools=[fetch_url, delete_branch],
        middleware=guardrails("standard", on_decision=decisions.append),
    )

    chunks = list(agent.stream(f"clean up, my key is {KEY_TEXT}", thread_id="d"))
    assert is_interrupt(chunks[-1]) and chunks[-1]["tool_name"] == "delete_branch"
    assert fetched == [] and deleted == []

    answer = agent.invoke(decision="approve", thread_id="d")

    assert deleted == ["old"] and fetched == []
    assert KEY not in answer and "[REDACTED:anthropic_api_key]" in answer
    seen = "\n".join(str(m.content) for call in model.calls for m in call)
    assert KEY not in seen
    blocked = [m for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert "private-network destination (metadata)" in blocked[-1].text
    assert [d["policy_id"] for d in decisions] == [
        "secret.anthropic_api_key",
        "network.private",
        "tool.destructive",
        "tool.destructive",
        "secret.anthropic_api_key",
    ]


def test_deep_agent_strict_stream_is_buffered_and_redacted() -> None:
    secret, text = SECRETS["aws_access_key"]
    agent = DeepAgent(llm=FakeChatModel([f"here: {text} ok"]), middleware=guardrails("strict"))
    chunks = list(agent.stream("what is the key?", thread_id="s"))
    assert chunks == ["here: aws_access_key_id = [REDACTED:aws_access_key] ok"]
