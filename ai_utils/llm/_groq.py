"""`get_llm("groq")`: langchain-groq's `ChatGroq` (extra ``groq``).

ChatGroq takes ``base_url`` and its groq SDK appends ``/openai/v1/chat/completions``, so GROQ_BASE_URL
can point at any server that serves that path (aimock strips the ``/openai`` prefix). ChatGroq already
keeps Groq's reasoning text in ``additional_kwargs["reasoning_content"]``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from ai_utils._optional import missing_extra

try:
    import groq
    import httpx
    from langchain_groq import ChatGroq
except ImportError as _import_error:
    raise missing_extra("langchain-groq", extra="groq", feature='get_llm("groq")') from _import_error

__all__ = ["chat_groq"]


def chat_groq(*, model: str, api_key: str, base_url: str, temperature: float | None, **kwargs: Any) -> BaseChatModel:
    """Build a `ChatGroq`.

    Args:
        model: the Groq model id.
        api_key: the Groq API key.
        base_url: the API root without ``/openai/v1``.
        temperature: the sampling temperature, or None for Groq's default.
        **kwargs: passed to `ChatGroq` unchanged.

    Returns:
        The chat model.
    """
    params: dict[str, Any] = {"model": model, "api_key": api_key, "base_url": base_url, **kwargs}
    if "http_async_client" not in params:
        # Idle keep-alive connections would outlive the event loop that opened them (a new loop per
        # `run_sync`, per test) and then fail or leak; without them one client serves every loop.
        no_idle = httpx.Limits(max_connections=1000, max_keepalive_connections=0)
        params["http_async_client"] = groq.DefaultAsyncHttpxClient(limits=no_idle)
    if temperature is not None:
        params["temperature"] = temperature
    return ChatGroq(**params)
