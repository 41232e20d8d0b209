"""One `Agent` / `DeepAgent` call in its own process, for the crash tests (test_thread_repair.py).

Usage: python _crash_proc.py '<json>' with keys
  kind: "agent" or "deep"; db: the sqlite_saver file; thread: thread id
  input: the user message, or null to continue the stored run (``invoke(None, ...)``)
  method: "invoke" or "stream"; crash: the tool `lookup` calls os._exit(3) (a crash inside a tool)
Prints one JSON line: {"result": ..., "calls": [[[type, text, tool_call_ids], ...] per model call],
"sound": [bool per call: every tool call the model saw had a result], "runs": tool runs}.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ai_utils import Agent, DeepAgent
from ai_utils.memory import sqlite_saver
from ai_utils.testing import FunctionChatModel


def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
    last = messages[-1]
    if isinstance(last, HumanMessage) and "look" in str(last.content):
        return {"tool_calls": [{"name": "lookup", "args": {"query": str(last.content)}}]}
    if isinstance(last, ToolMessage):
        return f"answer from tool: {last.text}"
    return f"plain answer to {str(last.content)!r}"


def sound(messages: list[BaseMessage]) -> bool:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return all(c["id"] in answered for m in messages if isinstance(m, AIMessage) for c in m.tool_calls)


def describe(message: BaseMessage) -> list[Any]:
    return [message.type, message.text, [c["id"] for c in getattr(message, "tool_calls", [])]]


def main(args: dict[str, Any]) -> None:
    runs: list[str] = []

    def lookup(query: str) -> str:
        """Look something up."""
        runs.append(query)
        if args.get("crash"):
            os._exit(3)
        return f"found {query}"

    model = FunctionChatModel(reply)
    with sqlite_saver(args["db"]) as saver:
        if args["kind"] == "agent":
            agent: Agent | DeepAgent = Agent(llm=model, tools=[lookup], checkpointer=saver)
        else:
            agent = DeepAgent(llm=model, tools=[lookup], checkpointer=saver)
        if args["method"] == "invoke":
            result: Any = agent.invoke(args["input"], thread_id=args["thread"])
        else:
            result = list(agent.stream(args["input"], thread_id=args["thread"], show_tool_calls=True))
    print(
        json.dumps(
            {
                "result": result,
                "calls": [[describe(m) for m in call] for call in model.calls],
                "sound": [sound(call) for call in model.calls],
                "runs": runs,
            }
        )
    )


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
