"""A governed support loop: triage -> answer, or triage -> refund behind a human approval that survives a restart.

The loop is declared once (`define_loop`); every tool call, the model's and the refund step's, passes the
permission rules; the refund pauses with the rule's message until someone approves it. The run lives in
SQLite, so the approval is given to a *new* `LoopRunner` (as a new process would), and the refund runs once,
without the triage running again. Offline a scripted model drives the steps; with OPENROUTER_API_KEY set the
real model does. Run: `.venv/bin/python examples/governed_refund.py`
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import SystemMessage, ToolMessage
from pydantic import BaseModel

from ai_utils import (
    LoopRunner,
    agent_step,
    ctx,
    define_loop,
    get_llm,
    otherwise,
    permission,
    require_tool,
    sqlite_saver,
    tool_step,
    when,
)
from ai_utils.client import is_interrupt
from ai_utils.testing import FunctionChatModel

REFUNDS: list[str] = []


class Triage(BaseModel):
    needs_refund: bool
    category: str


def read(path: str) -> str:
    """Read a policy document."""
    return "Refunds are possible within 30 days of delivery."


def search_docs(query: str) -> str:
    """Search the help center."""
    return "Reset your password under Settings > Security."


def issue_refund(order_id: str, reason: str) -> dict[str, str]:
    """Refund an order."""
    REFUNDS.append(order_id)
    return {"refund_id": f"R-{order_id}", "status": "issued"}


LOOP = define_loop(
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
            "support-tools", resource="tool", action="call", effect="allow", match={"tool": ["read", "search_docs"]}
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


def scripted(messages: list[Any], tools: list[Any]) -> Any:
    """Offline stand-in: triage classifies by keyword; answer searches first, then answers."""
    system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
    searched = any(isinstance(m, ToolMessage) for m in messages)
    if system == "Classify the request.":
        wants_refund = "refund" in messages[-1].text.lower()
        return {"tool_calls": [{"name": "Triage", "args": {"needs_refund": wants_refund, "category": "billing"}}]}
    if not searched:
        return {"tool_calls": [{"name": "search_docs", "args": {"query": "reset password"}}]}
    return "You can reset your password under Settings > Security."


def pick_llm() -> Any:
    if os.environ.get("OPENROUTER_API_KEY"):
        print("(real provider via get_llm())")
        return get_llm()
    print("(offline: scripted model; set OPENROUTER_API_KEY for the real one)")
    return FunctionChatModel(scripted)


def runner(saver: Any, llm: Any, events: list[str]) -> LoopRunner:
    return LoopRunner(
        LOOP,
        llm=llm,
        tools=[read, search_docs, issue_refund],
        checkpointer=saver,
        on_event=lambda e: events.append(e["type"]),
    )


def main() -> None:
    llm = pick_llm()
    events: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "loops.sqlite"
        with sqlite_saver(db) as saver:
            question = runner(saver, llm, events).invoke(
                {"request": {"order_id": "A-1001", "text": "How do I reset my password?"}}, thread_id="ticket-1"
            )
            print("answer:", question.presentation["text"])  # type: ignore[union-attr]

            paused = runner(saver, llm, events).invoke(
                {"request": {"order_id": "A-1002", "text": "Please refund my order."}}, thread_id="ticket-2"
            )
            assert is_interrupt(paused)
            print(f"paused: {paused['question']} ({paused['tool_name']} {paused['args']})")  # type: ignore[index]

        # "Restart": a new saver and runner on the same file, as another process would have.
        with sqlite_saver(db) as saver:
            later = runner(saver, llm, events)
            print("state after restart:", later.state("ticket-2"))
            done = later.invoke(thread_id="ticket-2", decision="approve")
            print("state:", later.state("ticket-2"))
            print(f"refund issued: {done.data['refund_id']} (refunds made: {REFUNDS})")  # type: ignore[union-attr]
    print("approvals asked:", events.count("approval.required"))


if __name__ == "__main__":
    main()
