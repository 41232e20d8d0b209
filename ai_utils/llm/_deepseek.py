"""`get_llm("deepseek")`: langchain-deepseek's `ChatDeepSeek` (extra ``deepseek``).

DeepSeek speaks OpenAI Chat Completions, so DEEPSEEK_BASE_URL is the root the ``/chat/completions`` path is
appended to (``https://api.deepseek.com/v1``). ChatDeepSeek keeps ``reasoning_content`` (deepseek-reasoner) in
``additional_kwargs`` and reports DeepSeek's context-cache hits as ``input_token_details["cache_read"]``.
Reasoning is the model's choice (the reasoner model thinks, the chat model does not), so ``reasoning=`` is
ignored, as for groq.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from ai_utils._optional import missing_extra
from ai_utils.llm._openai_compat import LoopBoundOpenAIClient

try:
    from langchain_deepseek import ChatDeepSeek
except ImportError as _import_error:
    raise missing_extra("langchain-deepseek", extra="deepseek", feature='get_llm("deepseek")') from _import_error

__all__ = ["ChatDeepSeekModel", "chat_deepseek"]


class ChatDeepSeekModel(LoopBoundOpenAIClient, ChatDeepSeek):
    """`ChatDeepSeek` whose async calls use one pooled client per event loop (see `LoopBoundOpenAIClient`)."""


def chat_deepseek(
    *, model: str, api_key: str, base_url: str, temperature: float | None, reasoning: str | None, **kwargs: Any
) -> BaseChatModel:
    """Build a `ChatDeepSeek`.

    Args:
        model: the DeepSeek model id.
        api_key: the DeepSeek API key.
        base_url: the API root ``/chat/completions`` is appended to.
        temperature: the sampling temperature, or None for the API default.
        reasoning: ignored (see the module docstring).
        **kwargs: passed to `ChatDeepSeek` unchanged.

    Returns:
        The chat model.
    """
    params: dict[str, Any] = {"model": model, "api_key": api_key, "api_base": base_url, **kwargs}
    if temperature is not None:
        params["temperature"] = temperature
    return ChatDeepSeekModel(**params)
