"""`get_llm("gemini")`: langchain-google-genai's `ChatGoogleGenerativeAI`, Gemini Developer API (extra ``gemini``).

The google-genai SDK appends ``/v1beta/models/<model>:generateContent`` to the base URL, so GEMINI_BASE_URL is
the API root (``https://generativelanguage.googleapis.com``). The Developer API (API key) is used even when
``GOOGLE_GENAI_USE_VERTEXAI`` is set; pass ``vertexai=True`` for Vertex AI. Cached prompt tokens arrive in
``usage_metadata["input_token_details"]["cache_read"]``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from ai_utils._optional import missing_extra

try:
    from langchain_google_genai import ChatGoogleGenerativeAI
except ImportError as _import_error:
    raise missing_extra("langchain-google-genai", extra="gemini", feature='get_llm("gemini")') from _import_error

__all__ = ["ChatGoogleGenerativeAI", "chat_gemini"]


def chat_gemini(
    *, model: str, api_key: str, base_url: str, temperature: float | None, reasoning: str | None, **kwargs: Any
) -> BaseChatModel:
    """Build a `ChatGoogleGenerativeAI` for the Gemini Developer API.

    Args:
        model: the Gemini model id.
        api_key: the Google AI Studio key.
        base_url: the API root.
        temperature: the sampling temperature, or None for the API default.
        reasoning: Gemini's thinking level (``minimal``/``low``/``medium``/``high``).
        **kwargs: passed to `ChatGoogleGenerativeAI`, except ``max_retries``: as for every other provider it
            counts retries after the first attempt, while the Google SDK counts attempts (its ``1`` means no
            retry), so ``max_retries=N`` becomes N + 1 attempts.

    Returns:
        The chat model.
    """
    params: dict[str, Any] = {"model": model, "api_key": api_key, "base_url": base_url, **kwargs}
    params.setdefault("vertexai", False)
    if "max_retries" in params:
        params["max_retries"] = int(params["max_retries"]) + 1
    if temperature is not None:
        params["temperature"] = temperature
    if reasoning is not None:
        params["reasoning_effort"] = reasoning
    return ChatGoogleGenerativeAI(**params)
