"""Fake provider servers speaking each provider's own wire format, on `ai_utils.testing`'s `LocalHTTPServer`.

- `FakeAnthropicServer`: Anthropic Messages (``/v1/messages``), JSON and SSE, tool use, cache tokens.
- `FakeGeminiServer`: Gemini ``generateContent`` / ``streamGenerateContent`` (SSE), function calls.
- `FakeResponsesServer`: OpenAI Responses (``/v1/responses``), JSON and SSE, function calls.
- `FakeDeepSeekServer`: DeepSeek Chat Completions (``reasoning_content``, context-cache usage), JSON and SSE.

Each was written from its SDK's own request/response models and is checked against the official SDK client
first (tests/llm/test_provider_servers.py), so tests through LangChain and ai_utils run against a faithful
wire format. Scripting (`reply`, `reply_with`, `fail`) and the journal (`calls`) are shared (`_base.py`).
"""

from __future__ import annotations

from _provider_servers._anthropic import FakeAnthropicServer
from _provider_servers._base import ProviderServer, RecordedCall, Reply, ToolCall
from _provider_servers._deepseek import FakeDeepSeekServer
from _provider_servers._gemini import FakeGeminiServer
from _provider_servers._openai_responses import FakeResponsesServer

__all__ = [
    "FakeAnthropicServer",
    "FakeDeepSeekServer",
    "FakeGeminiServer",
    "FakeResponsesServer",
    "ProviderServer",
    "RecordedCall",
    "Reply",
    "ToolCall",
]
