"""One turn of an `Agent` on a FunctionChatModel that calls a tool once per turn, on a sqlite thread.

Usage: python _fake_ids_proc.py <sqlite path> <thread id> <user message>
Prints one JSON line: the tool events of the turn's stream (``show_tool_calls=True``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ai_utils import Agent, FunctionChatModel, sqlite_saver
from ai_utils.client import is_tool_event


def lookup(term: str) -> str:
    """Look a term up."""
    return f"found {term}"


def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    # After the last user message: first call the tool, then answer.
    last_user = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    if not any(isinstance(m, ToolMessage) for m in messages[last_user:]):
        return {"tool_calls": [{"name": "lookup", "args": {"term": messages[last_user].text}}]}
    return "done"


def main(path: str, thread: str, user: str) -> None:
    saver = sqlite_saver(path)
    agent = Agent(llm=FunctionChatModel(reply), tools=[lookup], checkpointer=saver)
    events = [c for c in agent.stream(user, thread_id=thread, show_tool_calls=True) if is_tool_event(c)]
    print(json.dumps(events))
    saver.close()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main(*sys.argv[1:4])
