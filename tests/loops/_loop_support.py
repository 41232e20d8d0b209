"""The seed's support flow (SPEC §15 example) and a call ledger, shared by the loop tests and the resume process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel

from ai_utils import Loop, agent_step, ctx, define_loop, otherwise, permission, require_tool, tool_step, when
from ai_utils.testing import FunctionChatModel


class Triage(BaseModel):
    """The triage step's structured answer."""

    needs_refund: bool
    category: str


def support_loop() -> Loop:
    """The SPEC §15 loop, verbatim."""
    return define_loop(
        "support-flow",
        start="triage",
        steps={
            "triage": agent_step(
                prompt="Classify the request.",
                tools=["read"],
                output=Triage,
                next=[when("triage.needs_refund == true", "refund"), otherwise("answer")],
            ),
            "answer": agent_step(tools=["read", "search_docs"], tool_choice=require_tool("search_docs"), next="end"),
            "refund": tool_step(
                "issue_refund",
                input={"order_id": ctx("request.order_id"), "reason": "customer"},
                save_as="refund",
                next="end",
            ),
        },
        permissions=[
            permission(
                "support-tools",
                resource="tool",
                action="call",
                effect="allow",
                match={"tool": ["read", "search_docs"]},
            ),
            permission(
                "refund-approval",
                resource="tool",
                action="call",
                effect="approval",
                match={"tool": "issue_refund"},
                message="Refunds require human approval.",
            ),
        ],
        result={"data": ctx("refund"), "presentation": {"text": ctx("answer.text")}},
    )


class Ledger:
    """Every model and tool call, appended to a file (so a count survives the process) or kept in memory."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._memory: list[dict[str, Any]] = []

    def add(self, kind: str, name: str, args: Any = None) -> None:
        row = {"kind": kind, "name": name, "args": args}
        if self.path is None:
            self._memory.append(row)
        else:
            with self.path.open("a") as file:
                file.write(json.dumps(row) + "\n")

    @property
    def rows(self) -> list[dict[str, Any]]:
        if self.path is None:
            return list(self._memory)
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]

    def count(self, kind: str, name: str | None = None) -> int:
        return sum(1 for r in self.rows if r["kind"] == kind and (name is None or r["name"] == name))


def support_tools(ledger: Ledger) -> list[BaseTool]:
    @tool
    def read(path: str) -> str:
        """Read a policy file."""
        ledger.add("tool", "read", {"path": path})
        return "Refunds are possible within 30 days."

    @tool
    def search_docs(query: str) -> str:
        """Search the help center."""
        ledger.add("tool", "search_docs", {"query": query})
        return "To reset your password open Settings > Security."

    @tool
    def issue_refund(order_id: str, reason: str) -> dict[str, Any]:
        """Refund an order."""
        ledger.add("tool", "issue_refund", {"order_id": order_id, "reason": reason})
        return {"refund_id": f"R-{order_id}", "order_id": order_id, "status": "issued"}

    return [read, search_docs, issue_refund]


def support_model(ledger: Ledger) -> FunctionChatModel:
    """A scripted support model: triage reads the policy, then classifies; answer searches, then answers."""

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
        results = [m for m in messages if isinstance(m, ToolMessage)]
        ledger.add("model", "triage" if system == "Classify the request." else "answer")
        if system == "Classify the request.":
            if not results:
                return {"tool_calls": [{"name": "read", "args": {"path": "refund-policy.md"}}]}
            text = json.loads(_first_human(messages).split("\n", 1)[1])["request"]["text"]
            return {
                "tool_calls": [
                    {
                        "name": "Triage",
                        "args": {"needs_refund": "refund" in text.lower(), "category": "billing"},
                    }
                ]
            }
        if not results:
            return {"tool_calls": [{"name": "search_docs", "args": {"query": "reset password"}}]}
        return "Open Settings > Security to reset your password."

    return FunctionChatModel(reply)


def _first_human(messages: list[BaseMessage]) -> str:
    return next(m.text for m in messages if m.type == "human")
