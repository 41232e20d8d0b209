"""One agent turn in its own process (used by test_agent_memory.py): python _memory_proc.py DB MESSAGE."""

from __future__ import annotations

import sys
from typing import Any

from langchain_core.messages import HumanMessage

from ai_utils import Agent
from ai_utils.memory import sqlite_saver
from ai_utils.testing import FunctionChatModel


def reply(messages: list[Any], tools: list[Any]) -> Any:
    said = [m.content for m in messages if isinstance(m, HumanMessage)]
    if said[-1].startswith("Ich heisse"):
        # Turn 1 also uses a tool, so the stored thread holds a tool call and its result.
        if not any(getattr(m, "tool_calls", None) for m in messages):
            return {"tool_calls": [{"name": "remember", "args": {"fact": said[-1]}}]}
        return "Freut mich!"
    name = next((s.removeprefix("Ich heisse ").rstrip(".") for s in said if s.startswith("Ich heisse")), None)
    return f"Du heisst {name}." if name else "Das weiss ich nicht."


def remember(fact: str) -> str:
    """Note a fact about the user."""
    return f"noted: {fact}"


if __name__ == "__main__":
    db, message = sys.argv[1], sys.argv[2]
    with sqlite_saver(db) as saver:
        agent = Agent(llm=FunctionChatModel(reply), tools=[remember], checkpointer=saver)
        print(agent.invoke(message, thread_id="max"))
