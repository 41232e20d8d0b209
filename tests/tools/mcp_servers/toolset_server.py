"""A FastMCP stdio test server whose tools are read from a file at start: one tool per line, named by it.

Usage: ``python toolset_server.py TOOLFILE``. Each tool ``<name>(text: str)`` returns ``"<name>: <text>"``, so
tests can change what a server lists between runs by rewriting TOOLFILE.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP

server = FastMCP("toolset", log_level="WARNING")


def _register(name: str) -> None:
    def answer(text: str) -> str:
        return f"{name}: {text}"

    server.add_tool(answer, name=name, description=f"Answer as {name}.")


for line in Path(sys.argv[1]).read_text().split():
    _register(line)

if __name__ == "__main__":
    server.run(transport="stdio")
