"""The tools one `JevToolCaller` run sees: local `JevTool`s and MCP tools, as `ToolEntry`s."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ai_utils.exceptions import UserError
from ai_utils.jev.tool_caller import _core as core
from ai_utils.jev.tool_caller._types import JevTool, to_json
from ai_utils.tools._mcp_config import MCPServer
from ai_utils.tools._normalize import check_unique

__all__ = ["by_name", "check_names", "jev_tool_entries", "mcp_entry", "mcp_value", "run_tools"]

_TOOL_FIELDS = frozenset({"name", "description", "func", "params"})


def jev_tool_entries(tools: Any) -> list[core.ToolEntry]:
    """Validate ``tools=``: `JevTool`s or mappings, unique non-empty names, non-empty descriptions.

    The jev adapter beside the one tool normaliser (`ai_utils.tools._normalize`): Jev picks a tool by its
    description and runs it with chosen candidates, so its tools are `JevTool`s, not LangChain tools;
    the duplicate-name rule is the shared one.
    """
    if isinstance(tools, str | bytes | Mapping | JevTool) or not isinstance(tools, Sequence):
        raise UserError(f"`tools` must be a list of JevTool (or mappings), got {type(tools).__name__}.")
    entries: list[core.ToolEntry] = []
    for item in tools:
        if isinstance(item, Mapping):
            unknown = set(item) - _TOOL_FIELDS
            if unknown:
                raise UserError(f"Tool keys {sorted(unknown)!r} are unknown; a tool has {sorted(_TOOL_FIELDS)!r}.")
            try:
                item = JevTool(**item)
            except TypeError as error:
                raise UserError(
                    f"Tool {item.get('name')!r} needs `name`, `description` and `func` ({error})."
                ) from None
        if not isinstance(item, JevTool):
            raise UserError(f"Cannot use {type(item).__name__} as a tool; pass `JevTool(name, description, func)`.")
        if not isinstance(item.name, str) or not item.name.strip():
            raise UserError(f"Tool name {item.name!r} must be a non-empty string.")
        if not isinstance(item.description, str) or not item.description.strip():
            raise UserError(f"Tool {item.name!r} needs a non-empty `description`: Jev picks tools by it.")
        if not callable(item.func):
            raise UserError(f"Tool {item.name!r}: `func` must be callable, got {type(item.func).__name__}.")
        if item.params is not None and not callable(item.params):
            core.check_static_shape(item.name, item.params)
        entries.append(core.ToolEntry(item.name, item.description, item.func, item.params))
    check_names(entries)
    return entries


def check_names(entries: Sequence[core.ToolEntry]) -> None:
    """Raise `UserError` naming every duplicate tool name (the shared rule of `ai_utils.tools._normalize`)."""
    check_unique([entry.name for entry in entries], picker="Jev")


def mcp_entry(server: MCPServer, tool: Any) -> core.ToolEntry:
    """An MCP tool as a tool entry: prefixed name, server description first, params by unprefixed name."""
    original = str((tool.metadata or {}).get("mcp_tool", tool.name))
    description = (tool.description or original).strip()
    if server.description and server.description.strip():
        description = f"{server.description.strip()}\n{description}"
    params = (server.params or {}).get(original)

    async def func(params: Mapping[str, Any]) -> Any:
        arguments = {name: to_json(value) for name, value in params.items()}
        return mcp_value(await tool.ainvoke(arguments))

    return core.ToolEntry(tool.name, description, func, params, server)


def mcp_value(content: Any) -> Any:
    """An MCP result as a value: the text when it is text only, else the content blocks."""
    if isinstance(content, list) and content and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "".join(str(block.get("text", "")) for block in content)
    return content


def by_name(tools: Sequence[core.ToolEntry]) -> dict[str, core.ToolEntry]:
    """``tools`` keyed by name (names are unique: checked when they were collected)."""
    return {tool.name: tool for tool in tools}


@asynccontextmanager
async def run_tools(
    local: Sequence[core.ToolEntry],
    servers: Sequence[MCPServer],
    check: Callable[[Sequence[core.ToolEntry]], None],
) -> AsyncIterator[dict[str, core.ToolEntry]]:
    """One run's tools: ``local`` plus what ``servers`` offer now; MCP sessions stay open until the run ends.

    ``check`` sees the full list once it is known (the caller warns about option keys that match no tool).
    """
    if not servers:
        yield by_name(local)
        return
    from ai_utils.tools.mcp import mcp_scope

    async with mcp_scope(servers) as scope:
        entries = list(local)
        for server in servers:
            entries += [mcp_entry(server, tool) for tool in scope.tools_by_server.get(server.name, [])]
        check_names(entries)
        if not entries:
            raise UserError(
                f"No tools: the MCP servers {[s.name for s in servers]!r} offer none and no local tools "
                "were given. Pass `tools=[...]` or check the servers."
            )
        check(entries)
        yield by_name(entries)
