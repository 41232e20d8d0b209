"""One step of a guarded agent in its own process (used by test_restart.py).

``python _approval_proc.py DB LEDGER start`` asks the agent to clean up (it pauses for approval);
``python _approval_proc.py DB LEDGER approve`` resumes the paused thread in a fresh process.
Every model call and tool run appends a line to LEDGER, so the test can count them across processes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from ai_utils import Agent, guardrails
from ai_utils.memory import sqlite_saver
from ai_utils.testing import FunctionChatModel

KEY = "sk-proj-4fGh7Jk2Lm9Np3Qr5St8Uv1Wx6Yz0Ab2Cd"
LEDGER = Path(sys.argv[2])


def note(line: str) -> None:
    with LEDGER.open("a") as f:
        f.write(line + "\n")


def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    note("model: " + " | ".join(str(m.content) for m in messages))
    if not any(isinstance(m, ToolMessage) for m in messages):
        # Both calls in one step: the safe one runs at once, the destructive one waits for approval.
        return {
            "tool_calls": [
                {"name": "list_branches", "args": {}, "id": "c1"},
                {"name": "delete_branch", "args": {"name": "old"}, "id": "c2"},
            ]
        }
    return "Cleaned up."


def list_branches() -> str:
    """List git branches."""
    note("tool: list_branches")
    return "main, old"


def delete_branch(name: str) -> str:
    """Delete a git branch."""
    note(f"tool: delete_branch {name}")
    return f"deleted {name}"


if __name__ == "__main__":
    db, step = sys.argv[1], sys.argv[3]
    with sqlite_saver(db) as saver:
        agent = Agent(
            llm=FunctionChatModel(reply),
            tools=[list_branches, delete_branch],
            checkpointer=saver,
            middleware=guardrails("standard", on_decision=lambda d: note(f"decision: {d['policy_id']} {d['action']}")),
        )
        if step == "start":
            print(agent.invoke(f"clean up the repo, token {KEY}", thread_id="repo"))
        else:
            print(agent.invoke(decision="approve", thread_id="repo"))
