"""Tools: `ToolRegistry`, `ToolResult`/`AgentAction`, MCP server config (`MCPServer`; sessions: `ai_utils.tools.mcp`).

Tavily lives in `ai_utils.tools.tavily` (extra `tavily`), MCP sessions in `ai_utils.tools.mcp` (extra `mcp`).
"""

from __future__ import annotations

from ai_utils.tools._mcp_config import MCPConnectionError, MCPServer
from ai_utils.tools.registry import ToolRegistry
from ai_utils.tools.results import AgentAction, ToolResult

__all__ = ["AgentAction", "MCPConnectionError", "MCPServer", "ToolRegistry", "ToolResult"]
