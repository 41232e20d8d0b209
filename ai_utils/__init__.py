"""ai_utils: a LangGraph agent toolkit for LangChain developers.

Every public name is importable from here. Imports are lazy (PEP 562): ``import ai_utils``
loads no LangChain module and needs no optional extra; a name's module loads on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> module that defines it. Keep in step with the TYPE_CHECKING block and __all__ (a test checks).
_LAZY: dict[str, str] = {
    "Agent": "ai_utils.agents",
    "AiUtilsError": "ai_utils.exceptions",
    "Chain": "ai_utils.chains",
    "ChatClaudeCLI": "ai_utils.llm",
    "ChatCodexCLI": "ai_utils.llm",
    "ChatOpenAICompatible": "ai_utils.llm",
    "FakeChatModel": "ai_utils.testing",
    "FunctionChatModel": "ai_utils.testing",
    "MCPConnectionError": "ai_utils.tools",
    "MCPServer": "ai_utils.tools",
    "ModelOutputError": "ai_utils.exceptions",
    "ProviderError": "ai_utils.exceptions",
    "StreamResponse": "ai_utils.streaming",
    "TavilySearch": "ai_utils.tools.tavily",
    "ToolRegistry": "ai_utils.tools",
    "UserError": "ai_utils.exceptions",
    "aextract": "ai_utils.magic",
    "arewrite": "ai_utils.magic",
    "asession": "ai_utils.streaming",
    "astructure": "ai_utils.magic",
    "asummarize": "ai_utils.magic",
    "extract": "ai_utils.magic",
    "get_llm": "ai_utils.llm",
    "log_chunk": "ai_utils.streaming",
    "rewrite": "ai_utils.magic",
    "sequence_model": "ai_utils.testing",
    "session": "ai_utils.streaming",
    "static_model": "ai_utils.testing",
    "structure": "ai_utils.magic",
    "summarize": "ai_utils.magic",
    "tavily_search_tool": "ai_utils.tools.tavily",
}

if TYPE_CHECKING:
    from ai_utils.agents import Agent
    from ai_utils.chains import Chain
    from ai_utils.exceptions import AiUtilsError, ModelOutputError, ProviderError, UserError
    from ai_utils.llm import ChatClaudeCLI, ChatCodexCLI, ChatOpenAICompatible, get_llm
    from ai_utils.magic import aextract, arewrite, astructure, asummarize, extract, rewrite, structure, summarize
    from ai_utils.streaming import StreamResponse, asession, log_chunk, session
    from ai_utils.testing import FakeChatModel, FunctionChatModel, sequence_model, static_model
    from ai_utils.tools import MCPConnectionError, MCPServer, ToolRegistry
    from ai_utils.tools.tavily import TavilySearch, tavily_search_tool

__all__ = [
    "Agent",
    "AiUtilsError",
    "Chain",
    "ChatClaudeCLI",
    "ChatCodexCLI",
    "ChatOpenAICompatible",
    "FakeChatModel",
    "FunctionChatModel",
    "MCPConnectionError",
    "MCPServer",
    "ModelOutputError",
    "ProviderError",
    "StreamResponse",
    "TavilySearch",
    "ToolRegistry",
    "UserError",
    "__version__",
    "aextract",
    "arewrite",
    "asession",
    "astructure",
    "asummarize",
    "extract",
    "get_llm",
    "log_chunk",
    "rewrite",
    "sequence_model",
    "session",
    "static_model",
    "structure",
    "summarize",
    "tavily_search_tool",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ai_utils' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
