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
    "ChoiceAnswer": "ai_utils.jev",
    "ClassifyResult": "ai_utils.jev",
    "ConfidenceGate": "ai_utils.jev",
    "FakeChatModel": "ai_utils.testing",
    "FakeJevServer": "ai_utils.testing",
    "FunctionChatModel": "ai_utils.testing",
    "JevAPIError": "ai_utils.jev",
    "JevClient": "ai_utils.jev",
    "JevConnectionError": "ai_utils.jev",
    "JevDecisionModel": "ai_utils.jev",
    "JevError": "ai_utils.jev",
    "JevGated": "ai_utils.jev",
    "JevInterrupt": "ai_utils.jev",
    "JevNoParamOptionsError": "ai_utils.jev",
    "JevResponseError": "ai_utils.jev",
    "JevReturn": "ai_utils.jev",
    "JevTimeoutError": "ai_utils.jev",
    "JevTool": "ai_utils.jev",
    "JevToolCaller": "ai_utils.jev",
    "MCPConnectionError": "ai_utils.tools",
    "MCPServer": "ai_utils.tools",
    "MemorySaver": "ai_utils.memory",
    "ModelOutputError": "ai_utils.exceptions",
    "NoulAnswer": "ai_utils.jev",
    "ProviderError": "ai_utils.exceptions",
    "Questions": "ai_utils.jev",
    "ScoreAnswer": "ai_utils.jev",
    "SmartCheckpointSaver": "ai_utils.memory",
    "StreamResponse": "ai_utils.streaming",
    "SupabaseCheckpointSaver": "ai_utils.memory",
    "TavilySearch": "ai_utils.tools.tavily",
    "ToolRegistry": "ai_utils.tools",
    "UserError": "ai_utils.exceptions",
    "achat_summarizer": "ai_utils.memory",
    "aclassify": "ai_utils.jev",
    "aextract": "ai_utils.magic",
    "arewrite": "ai_utils.magic",
    "asession": "ai_utils.streaming",
    "astructure": "ai_utils.magic",
    "asummarize": "ai_utils.magic",
    "chat_summarizer": "ai_utils.memory",
    "choice": "ai_utils.jev",
    "classify": "ai_utils.jev",
    "extract": "ai_utils.magic",
    "format_checkpoint_messages_for_llm": "ai_utils.memory",
    "get_llm": "ai_utils.llm",
    "get_messages_array_from_checkpoint": "ai_utils.memory",
    "log_chunk": "ai_utils.streaming",
    "noul": "ai_utils.jev",
    "postgres_saver": "ai_utils.memory",
    "rewrite": "ai_utils.magic",
    "score": "ai_utils.jev",
    "sequence_model": "ai_utils.testing",
    "session": "ai_utils.streaming",
    "sqlite_saver": "ai_utils.memory",
    "static_model": "ai_utils.testing",
    "structure": "ai_utils.magic",
    "summarize": "ai_utils.magic",
    "tavily_search_tool": "ai_utils.tools.tavily",
}

if TYPE_CHECKING:
    from ai_utils.agents import Agent
    from ai_utils.chains import Chain
    from ai_utils.exceptions import AiUtilsError, ModelOutputError, ProviderError, UserError
    from ai_utils.jev import (
        ChoiceAnswer,
        ClassifyResult,
        ConfidenceGate,
        JevAPIError,
        JevClient,
        JevConnectionError,
        JevDecisionModel,
        JevError,
        JevGated,
        JevInterrupt,
        JevNoParamOptionsError,
        JevResponseError,
        JevReturn,
        JevTimeoutError,
        JevTool,
        JevToolCaller,
        NoulAnswer,
        Questions,
        ScoreAnswer,
        aclassify,
        choice,
        classify,
        noul,
        score,
    )
    from ai_utils.llm import ChatClaudeCLI, ChatCodexCLI, ChatOpenAICompatible, get_llm
    from ai_utils.magic import aextract, arewrite, astructure, asummarize, extract, rewrite, structure, summarize
    from ai_utils.memory import (
        MemorySaver,
        SmartCheckpointSaver,
        SupabaseCheckpointSaver,
        achat_summarizer,
        chat_summarizer,
        format_checkpoint_messages_for_llm,
        get_messages_array_from_checkpoint,
        postgres_saver,
        sqlite_saver,
    )
    from ai_utils.streaming import StreamResponse, asession, log_chunk, session
    from ai_utils.testing import FakeChatModel, FakeJevServer, FunctionChatModel, sequence_model, static_model
    from ai_utils.tools import MCPConnectionError, MCPServer, ToolRegistry
    from ai_utils.tools.tavily import TavilySearch, tavily_search_tool

__all__ = [
    "Agent",
    "AiUtilsError",
    "Chain",
    "ChatClaudeCLI",
    "ChatCodexCLI",
    "ChatOpenAICompatible",
    "ChoiceAnswer",
    "ClassifyResult",
    "ConfidenceGate",
    "FakeChatModel",
    "FakeJevServer",
    "FunctionChatModel",
    "JevAPIError",
    "JevClient",
    "JevConnectionError",
    "JevDecisionModel",
    "JevError",
    "JevGated",
    "JevInterrupt",
    "JevNoParamOptionsError",
    "JevResponseError",
    "JevReturn",
    "JevTimeoutError",
    "JevTool",
    "JevToolCaller",
    "MCPConnectionError",
    "MCPServer",
    "MemorySaver",
    "ModelOutputError",
    "NoulAnswer",
    "ProviderError",
    "Questions",
    "ScoreAnswer",
    "SmartCheckpointSaver",
    "StreamResponse",
    "SupabaseCheckpointSaver",
    "TavilySearch",
    "ToolRegistry",
    "UserError",
    "__version__",
    "achat_summarizer",
    "aclassify",
    "aextract",
    "arewrite",
    "asession",
    "astructure",
    "asummarize",
    "chat_summarizer",
    "choice",
    "classify",
    "extract",
    "format_checkpoint_messages_for_llm",
    "get_llm",
    "get_messages_array_from_checkpoint",
    "log_chunk",
    "noul",
    "postgres_saver",
    "rewrite",
    "score",
    "sequence_model",
    "session",
    "sqlite_saver",
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
