"""Chat models for every provider: `get_llm` and the classes it returns.

- `get_llm(provider, model, ...)`: OpenRouter (default), OpenAI, Groq, any local OpenAI-compatible
  server, the Claude Code / Codex CLIs, and the scripted fake model.
- `ChatOpenAICompatible`: `ChatOpenAI` that keeps the reasoning text of OpenRouter, DeepSeek, vLLM, ...
- `ChatClaudeCLI` / `ChatCodexCLI`: the locally logged-in CLIs as chat models.
"""

from __future__ import annotations

from ai_utils.llm._claude_cli import ChatClaudeCLI
from ai_utils.llm._cli import ToolsNotSupportedError
from ai_utils.llm._codex_cli import ChatCodexCLI
from ai_utils.llm._factory import DEFAULT_MODELS, PROVIDERS, get_llm
from ai_utils.llm._openai_compat import ChatOpenAICompatible

__all__ = [
    "ChatClaudeCLI",
    "ChatCodexCLI",
    "ChatOpenAICompatible",
    "DEFAULT_MODELS",
    "PROVIDERS",
    "ToolsNotSupportedError",
    "get_llm",
]
