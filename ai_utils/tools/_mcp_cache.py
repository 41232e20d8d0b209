"""The per-process cache of MCP servers' tool definitions (see `clear_tool_cache`).

A run still opens and initializes its own session, but it lists a server's tools only the first time (and
again after ``TOOL_CACHE_TTL`` seconds, or when the server config or the server's reported name/version
changes). The cached definitions are bound to each run's session by `ai_utils.tools.mcp`, so every call
still goes through that run's connection.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ai_utils._compat.mcp import remember_output_schemas

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import Implementation
    from mcp.types import Tool as MCPTool

    from ai_utils.tools._mcp_config import MCPServer

__all__ = ["TOOL_CACHE_TTL", "ToolCacheKey", "cache_key", "clear_tool_cache", "connection_key", "tool_definitions"]

# Seconds a server's cached tool list is trusted before a run lists the tools again: a server may change
# its tools while it runs, and a new session is where a client would normally see that.
TOOL_CACHE_TTL = 60.0
# Servers (configs) whose tool lists are kept; per-user headers or auth make one entry per user.
_TOOL_CACHE_SIZE = 256
# Listing is paginated; a server that keeps returning cursors is broken, not big.
_MAX_TOOL_PAGES = 1000

ToolCacheKey = tuple[Any, ...]
_tool_cache: dict[ToolCacheKey, tuple[float, list[MCPTool], tuple[str, ...]]] = {}


def clear_tool_cache() -> None:
    """Forget every server's cached tool list, so the next run of each server lists its tools again.

    Runs cache tool definitions per process (keyed by the server's connection settings and the name and
    version the server reports); call this after changing a running server's tools without changing its
    version, or rely on the cache expiring after ``TOOL_CACHE_TTL`` seconds.
    """
    _tool_cache.clear()


def connection_key(server: MCPServer) -> ToolCacheKey:
    """Where and how we connect to ``server``: two servers with equal keys can share a session's tools."""

    def items(mapping: Mapping[str, str] | None) -> tuple[tuple[str, str], ...] | None:
        return None if mapping is None else tuple(sorted(mapping.items()))

    cwd = None if server.cwd is None else str(server.cwd)
    # `auth` by identity: two auth objects may stand for two users who see different tools.
    return (server.url, server.command, server.args, items(server.headers), server.auth, items(server.env), cwd)


def cache_key(server: MCPServer, info: Implementation) -> ToolCacheKey:
    """Everything that can change what a server lists: where and how we connect, and what it says it is."""
    return (*connection_key(server), info.name, info.version)


async def tool_definitions(session: ClientSession, key: ToolCacheKey) -> tuple[list[MCPTool], tuple[str, ...]]:
    """The server's tool definitions and their signature: from the process cache, else listed (all pages)."""
    cached = _tool_cache.get(key)
    if cached is not None and time.monotonic() - cached[0] < TOOL_CACHE_TTL:
        _, definitions, signature = cached
        # The SDK checks tool results against output schemas it learned from `list_tools`, and lists the
        # tools again on the first call of a tool it has not seen; hand it the cached schemas instead.
        remember_output_schemas(session, ((definition.name, definition.outputSchema) for definition in definitions))
        return definitions, signature
    definitions = []
    cursor: str | None = None
    for _ in range(_MAX_TOOL_PAGES):
        page = await session.list_tools(cursor=cursor)
        definitions.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            break
    else:
        raise RuntimeError(f"the server returned more than {_MAX_TOOL_PAGES} pages of tools")
    signature = tuple(definition.model_dump_json() for definition in definitions)
    _tool_cache.pop(key, None)
    _tool_cache[key] = (time.monotonic(), definitions, signature)
    if len(_tool_cache) > _TOOL_CACHE_SIZE:
        del _tool_cache[next(iter(_tool_cache))]  # the entry listed longest ago
    return definitions, signature
