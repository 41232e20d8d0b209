"""`get_llm("gemini")`: langchain-google-genai's `ChatGoogleGenerativeAI`, Gemini Developer API (extra ``gemini``).

The google-genai SDK appends ``/v1beta/models/<model>:generateContent`` to the base URL, so GEMINI_BASE_URL is
the API root (``https://generativelanguage.googleapis.com``). The Developer API (API key) is used even when
``GOOGLE_GENAI_USE_VERTEXAI`` is set; pass ``vertexai=True`` for Vertex AI. Cached prompt tokens arrive in
``usage_metadata["input_token_details"]["cache_read"]``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import PrivateAttr

from ai_utils._loop_resources import on_loop_close
from ai_utils._optional import missing_extra

try:
    from langchain_google_genai import ChatGoogleGenerativeAI
except ImportError as _import_error:
    raise missing_extra("langchain-google-genai", extra="gemini", feature='get_llm("gemini")') from _import_error

__all__ = ["ChatGeminiModel", "chat_gemini"]

# Shorter values are not keys (a dummy "k" would blank every "k" in a log line).
_MIN_KEY = 8


class _KeyScrubber(logging.Filter):
    """Replace the keys of the Gemini models built here in the SDK's log lines.

    google-genai logs each retry at INFO with the error it got, quoting the provider's error body; a broken or
    hostile server that echoes the key it was sent would put the key in the application's logs.
    """

    def __init__(self) -> None:
        super().__init__()
        self.keys: set[str] = set()
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.keys:
            return True
        text = record.getMessage()
        found = [key for key in self.keys if key in text]
        if found:
            for key in found:
                text = text.replace(key, "[REDACTED:api_key]")
            record.msg, record.args = text, None
        return True


_SCRUBBER = _KeyScrubber()
# The logger google-genai's retries log to (a filter sees only records logged to its own logger).
logging.getLogger("google_genai._api_client").addFilter(_SCRUBBER)


def _scrub_in_logs(key: str) -> None:
    if len(key) >= _MIN_KEY and key not in _SCRUBBER.keys:
        with _SCRUBBER.lock:
            _SCRUBBER.keys = {*_SCRUBBER.keys, key}  # a new set: `filter` iterates without the lock


async def _close_loop_pool(pool: Any) -> None:
    """Close the connection pool ``pool`` keeps for the running loop (and only that one)."""
    loop = asyncio.get_running_loop()
    lock = getattr(pool, "_loop_clients_lock", None)
    clients = getattr(pool, "_loop_clients", None)
    if lock is None or not isinstance(clients, dict):
        return
    with lock:
        inner = clients.pop(loop, None)
    if inner is not None:
        await inner.aclose()


class ChatGeminiModel(ChatGoogleGenerativeAI):
    """`ChatGoogleGenerativeAI` whose per-loop connection pools are closed with the loop ai_utils runs.

    google-genai already keeps one pooled async HTTP client per event loop, but closes them only on an explicit
    ``aclose()`` from a running loop; a loop that ends (`run_sync`, `asyncio.run`, a test) leaves its sockets open
    until garbage collection. The SDK has no public per-loop close, so this reaches its pool's per-loop table
    (guarded: a future SDK without it is left as it is) and closes that loop's pool when ai_utils closes the loop
    (`ai_utils._loop_resources`), like the other providers' per-loop clients.
    """

    _closing_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = PrivateAttr(default_factory=weakref.WeakSet)

    @property
    def async_client(self) -> Any:
        aio = super().async_client
        loop = asyncio.get_running_loop()
        # Read from pydantic's private dict: ``self._closing_loops`` raises and catches an AttributeError inside
        # pydantic on every read, and every call asks.
        closing: weakref.WeakSet[asyncio.AbstractEventLoop] = (self.__pydantic_private__ or {})["_closing_loops"]
        if loop not in closing:
            closing.add(loop)
            pool = getattr(getattr(aio, "_api_client", None), "_async_httpx_client", None)
            if pool is not None:
                on_loop_close(lambda: _close_loop_pool(pool))  # not the loop: a closer must not keep it alive
        return aio


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
    _scrub_in_logs(api_key)
    params: dict[str, Any] = {"model": model, "api_key": api_key, "base_url": base_url, **kwargs}
    params.setdefault("vertexai", False)
    if "max_retries" in params:
        params["max_retries"] = int(params["max_retries"]) + 1
    if temperature is not None:
        params["temperature"] = temperature
    if reasoning is not None:
        params["reasoning_effort"] = reasoning
    return ChatGeminiModel(**params)
