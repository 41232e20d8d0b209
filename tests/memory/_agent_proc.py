"""Run one agent turn in a separate process (used by the restart and kill -9 tests).

Usage: python _agent_proc.py '<json>' with keys
  backend: "sqlite:<path>" or a postgres URI
  thread: thread id
  user: the user message, or null to resume the thread with invoke(None, config)
  responses: FakeChatModel replies
  ready_file: if set, the tool `slow_lookup` writes this file and then blocks (the parent kills us)
Prints one JSON line: {"calls": [[message text, ...] per model call], "messages": [[type, text], ...]}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool

from ai_utils.memory import postgres_saver, sqlite_saver
from ai_utils.testing import FakeChatModel


def main(args: dict[str, Any]) -> None:
    ready_file = args.get("ready_file")

    @tool
    def slow_lookup(query: str) -> str:
        """Look something up (slowly)."""
        if ready_file:
            Path(ready_file).write_text("running")
            time.sleep(60)
        return f"result for {query}"

    backend: str = args["backend"]
    saver = sqlite_saver(backend.removeprefix("sqlite:")) if backend.startswith("sqlite:") else postgres_saver(backend)
    model = FakeChatModel(args["responses"])
    agent = create_agent(model=model, tools=[slow_lookup], checkpointer=saver)
    config = {"configurable": {"thread_id": args["thread"]}}
    payload = None if args["user"] is None else {"messages": [("user", args["user"])]}
    result = agent.invoke(payload, config, durability="sync")
    print(
        json.dumps(
            {
                "calls": [[str(m.text) for m in call] for call in model.calls],
                "messages": [[m.type, str(m.text)] for m in result["messages"]],
            }
        )
    )
    saver.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
