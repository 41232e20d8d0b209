"""A tiny stdio MCP server (FastMCP) used by `mcp_tools.py`; it is started as a subprocess, not run directly.

Tools: `echo(text)` and `add(a, b)`. Run by hand: `.venv/bin/python examples/mcp_echo_server.py` (speaks MCP on stdio).
"""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP

server = FastMCP("echo", log_level="WARNING")  # keep stderr quiet


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    server.run("stdio")
