"""MCP tools: an Agent uses the tools of a stdio MCP server, one connection held for the whole run.

Starts `examples/mcp_echo_server.py` (a FastMCP server) with this Python — no Node needed. Tools arrive
prefixed with the server name (`echo__add`). Offline a scripted model calls the tool; with
OPENROUTER_API_KEY set the real model does. Run: `.venv/bin/python examples/mcp_tools.py`
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ai_utils import Agent, MCPServer, get_llm, log_chunk
from ai_utils.testing import FakeChatModel

SERVER = MCPServer(
    "echo",
    command=sys.executable,
    args=[str(Path(__file__).with_name("mcp_echo_server.py"))],
    description="Echo and add numbers.",
)


def main() -> None:
    if os.environ.get("OPENROUTER_API_KEY"):
        print("(real provider via get_llm())")
        llm = get_llm()
    else:
        print("(offline: scripted model; set OPENROUTER_API_KEY for the real one)")
        llm = FakeChatModel([{"tool_calls": [{"name": "echo__add", "args": {"a": 19, "b": 23}}]}, "19 + 23 = 42."])
    agent = Agent(llm=llm, prompt="Use the MCP tools for arithmetic.", mcp_server=SERVER)
    question = "What is 19 + 23? Use the tool."
    print(f"You: {question}\nAssistant:")
    for chunk in agent.stream(question, show_tool_calls=True):
        log_chunk(chunk)
    print()


if __name__ == "__main__":
    main()
