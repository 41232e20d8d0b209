"""The one tool normaliser every wrapper uses: registry tools, any `BaseTool`, plain functions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.tools import BaseTool, tool

from ai_utils._compat.langgraph import quiet_tool_runtime, quiet_tool_schema
from ai_utils.exceptions import UserError

__all__ = ["check_unique", "normalize_tools"]


def normalize_tools(tools: Iterable[Any]) -> list[BaseTool]:
    """Turn ``tools`` into LangChain tools with unique names.

    Args:
        tools: `BaseTool`s (e.g. from `ToolRegistry`, MCP, `create_rag_tool`) and plain functions with
            a docstring (converted with `langchain_core.tools.tool`).

    Returns:
        The tools, in order.

    Raises:
        UserError: an item is neither a tool nor a function, or two tools share a name.
    """
    # Before any tool schema of the run is built (deepagents builds its file tools after this): pydantic must never
    # dump a tool's injected runtime, whose warnings would quote the run's `context`.
    quiet_tool_runtime()
    if isinstance(tools, (str, bytes, BaseTool)) or callable(tools):
        raise UserError(f"`tools` must be a list of tools, got {tools!r}. Wrap it: `tools=[my_tool]`.")
    out: list[BaseTool] = []
    for item in tools:
        if isinstance(item, BaseTool):
            out.append(item)
        elif callable(item):
            if not (getattr(item, "__doc__", None) or "").strip():
                raise UserError(
                    f"Function tool {getattr(item, '__name__', item)!r} has no docstring; the model needs a "
                    "description. Add a docstring or use `ToolRegistry` / `@tool(description=...)`."
                )
            out.append(tool(item))
        else:
            raise UserError(f"Cannot use {item!r} as a tool. Pass `BaseTool`s (e.g. from `ToolRegistry`) or functions.")
    check_unique([t.name for t in out])
    for item in out:
        quiet_tool_schema(item.args_schema)  # a tool built before quiet_tool_runtime()
    return out


def check_unique(names: Iterable[str], *, picker: str = "the model") -> None:
    """Raise `UserError` naming every tool name that appears more than once (``picker``: who picks by name)."""
    seen: set[str] = set()
    dupes: list[str] = []
    for name in names:
        if name in seen and name not in dupes:
            dupes.append(name)
        seen.add(name)
    if dupes:
        raise UserError(f"Duplicate tool names {dupes!r}: {picker} picks tools by name. Rename or drop one of each.")
