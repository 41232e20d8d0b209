"""MCP test servers: server-everything (Node) and our stateful FastMCP counter server, on 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _services import free_port, running

COUNTER_SERVER = Path(__file__).parent / "mcp_servers" / "counter_server.py"


@pytest.fixture(scope="session")
def counter_url() -> Iterator[str]:
    """Our FastMCP counter server over streamable HTTP; ``GET <root>/_closed`` lists terminated sessions."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with running([sys.executable, str(COUNTER_SERVER), "http", str(port)], ready_url=url):
        yield url
