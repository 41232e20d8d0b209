"""`get_llm("anthropic")`: langchain-anthropic's `ChatAnthropic` (extra ``anthropic``).

The Anthropic SDK appends ``/v1/messages`` to the base URL, so ANTHROPIC_BASE_URL is the API root
(``https://api.anthropic.com``). ChatAnthropic already reports prompt-cache reads and writes in
``usage_metadata["input_token_details"]`` (``cache_read`` / ``cache_creation``), maps its SDK's errors to
LangChain's ``ModelError`` family (429 and 5xx/529 retryable, other 4xx not) and takes per-call ``betas``.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import PrivateAttr

from ai_utils._loop_resources import on_loop_close
from ai_utils._optional import missing_extra

try:
    import anthropic
    from langchain_anthropic import ChatAnthropic
except ImportError as _import_error:
    raise missing_extra("langchain-anthropic", extra="anthropic", feature='get_llm("anthropic")') from _import_error

__all__ = ["ChatAnthropicModel", "chat_anthropic"]


class ChatAnthropicModel(ChatAnthropic):
    """`ChatAnthropic` whose async calls use one pooled client per event loop.

    langchain-anthropic shares one async HTTP client per base URL across instances and event loops; its pooled
    connections belong to the loop that opened them, so a second loop (`run_sync`, `asyncio.run`, a test) fails
    with "Event loop is closed". As for the OpenAI-compatible models, each loop gets its own pooled client,
    closed with the loop when ai_utils runs it (`ai_utils._loop_resources`).
    """

    _loop_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anthropic.AsyncClient] = PrivateAttr(
        default_factory=weakref.WeakKeyDictionary
    )

    @property
    def _async_client(self) -> anthropic.AsyncClient:
        loop = asyncio.get_running_loop()
        # Read from pydantic's private dict: ``self._loop_clients`` raises and catches an AttributeError inside
        # pydantic on every read, and every call asks.
        clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anthropic.AsyncClient]
        clients = (self.__pydantic_private__ or {})["_loop_clients"]
        client = clients.get(loop)
        if client is None:
            params = dict(self._client_params)
            http: dict[str, Any] = {"base_url": params["base_url"]}
            if "timeout" in params:
                http["timeout"] = params["timeout"]
            if self.anthropic_proxy:
                http["proxy"] = self.anthropic_proxy
            client = anthropic.AsyncClient(**params, http_client=anthropic.DefaultAsyncHttpxClient(**http))
            clients[loop] = client
            on_loop_close(client.close)
        return client


def chat_anthropic(
    *, model: str, api_key: str, base_url: str, temperature: float | None, reasoning: str | None, **kwargs: Any
) -> BaseChatModel:
    """Build a `ChatAnthropic`.

    Args:
        model: the Claude model id.
        api_key: the Anthropic API key.
        base_url: the API root (without ``/v1``).
        temperature: the sampling temperature, or None for the API default.
        reasoning: ``reasoning_effort`` (``output_config.effort``; langchain-anthropic adds adaptive thinking
            where the model supports it); ``"minimal"`` becomes ``"low"``, Anthropic's lowest level.
        **kwargs: passed to `ChatAnthropic` unchanged (``max_tokens``, ``betas``, ``timeout``, ...).

    Returns:
        The chat model.
    """
    params: dict[str, Any] = {"model": model, "api_key": api_key, "base_url": base_url, **kwargs}
    if temperature is not None:
        params["temperature"] = temperature
    if reasoning is not None:
        params["reasoning_effort"] = "low" if reasoning == "minimal" else reasoning
    return ChatAnthropicModel(**params)
