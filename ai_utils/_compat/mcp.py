"""The one place that touches the MCP SDK's private API (``mcp``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["remember_output_schemas"]


def remember_output_schemas(session: Any, schemas: Iterable[tuple[str, dict[str, Any] | None]]) -> None:
    """Hand ``ClientSession`` tool output schemas it would otherwise list the tools again to learn.

    The SDK checks tool results against the schemas it saw in ``list_tools`` (``_tool_output_schemas``)
    and lists the tools again on the first call of a tool it has not seen. An SDK without the attribute
    just lists again, so a missing one is not an error here (``tests/test_compat.py`` reports it).
    """
    known = getattr(session, "_tool_output_schemas", None)
    if isinstance(known, dict):
        known.update(schemas)
