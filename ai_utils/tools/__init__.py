"""Tools: `ToolRegistry`, MCP server config (`MCPServer`; the connection lives in `ai_utils.tools.mcp`).

Tavily lives in `ai_utils.tools.tavily` (extra `tavily`), MCP sessions in `ai_utils.tools.mcp` (extra `mcp`).
"""

from __future__ import annotations

from ai_utils.tools._mcp_config import MCPConnectionError, MCPServer
from ai_utils.tools.registry import ToolRegistry

__all__ = ["MCPConnectionError", "MCPServer", "ToolRegistry"]
