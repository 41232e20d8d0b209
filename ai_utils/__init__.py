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
    "AiUtilsError": "ai_utils.exceptions",
    "Chain": "ai_utils.chains",
    "ChatClaudeCLI": "ai_utils.llm",
    "ChatCodexCLI": "ai_utils.llm",
    "ChatOpenAICompatible": "ai_utils.llm",
    "FakeChatModel": "ai_utils.testing",
    "FunctionChatModel": "ai_utils.testing",
    "ModelOutputError": "ai_utils.exceptions",
    "ProviderError": "ai_utils.exceptions",
    "ToolRegistry": "ai_utils.tools",
    "UserError": "ai_utils.exceptions",
    "aextract": "ai_utils.magic",
    "arewrite": "ai_utils.magic",
    "astructure": "ai_utils.magic",
    "asummarize": "ai_utils.magic",
    "extract": "ai_utils.magic",
    "get_llm": "ai_utils.llm",
    "rewrite": "ai_utils.magic",
    "sequence_model": "ai_utils.testing",
    "static_model": "ai_utils.testing",
    "structure": "ai_utils.magic",
    "summarize": "ai_utils.magic",
}

if TYPE_CHECKING:
    from ai_utils.chains import Chain
    from ai_utils.exceptions import AiUtilsError, ModelOutputError, ProviderError, UserError
    from ai_utils.llm import ChatClaudeCLI, ChatCodexCLI, ChatOpenAICompatible, get_llm
    from ai_utils.magic import (
        aextract,
        arewrite,
        astructure,
        asummarize,
        extract,
        rewrite,
        structure,
        summarize,
    )
    from ai_utils.testing import FakeChatModel, FunctionChatModel, sequence_model, static_model
    from ai_utils.tools import ToolRegistry

__all__ = [
    "AiUtilsError",
    "Chain",
    "ChatClaudeCLI",
    "ChatCodexCLI",
    "ChatOpenAICompatible",
    "FakeChatModel",
    "FunctionChatModel",
    "ModelOutputError",
    "ProviderError",
    "ToolRegistry",
    "UserError",
    "__version__",
    "aextract",
    "arewrite",
    "astructure",
    "asummarize",
    "extract",
    "get_llm",
    "rewrite",
    "sequence_model",
    "static_model",
    "structure",
    "summarize",
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
