"""`ChatOpenAICompatible`: `ChatOpenAI` for OpenAI-compatible servers, keeping the reasoning text.

Why a subclass: langchain-openai targets the official OpenAI API only and drops the non-standard
reasoning fields that OpenRouter (`delta.reasoning`, `reasoning_details`), DeepSeek, vLLM, Ollama and
aimock (`delta.reasoning_content`) send. langchain-openrouter's `ChatOpenRouter` reads only
`reasoning`, talks through a different SDK and cannot point at a plain OpenAI-compatible server.
So we keep ChatOpenAI's transport, tool calling and structured output and only lift the reasoning
text into ``additional_kwargs["reasoning_content"]`` -- the key `langchain_core.messages`
turns into a ``{"type": "reasoning"}`` content block, never mixed into the text.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any

import openai
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI
from langchain_openai.chat_models.base import BaseChatOpenAI
from pydantic import PrivateAttr

from ai_utils._loop_resources import on_loop_close

__all__ = ["ChatOpenAICompatible", "LoopBoundOpenAIClient", "reasoning_text"]


def reasoning_text(payload: Mapping[str, Any]) -> str | None:
    """The reasoning text of one streamed ``delta`` or one reply ``message``, if any.

    ``reasoning_content`` (DeepSeek, vLLM, Ollama) wins over ``reasoning`` (OpenRouter) because servers
    that send both send the same text twice; ``reasoning_details`` is the fallback OpenRouter uses for
    some providers.

    Args:
        payload: a Chat Completions ``delta`` or ``message`` as a dict.

    Returns:
        The reasoning text, or None when the payload carries none.
    """
    for key in ("reasoning_content", "reasoning"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    details = payload.get("reasoning_details")
    if isinstance(details, list):
        parts = [
            text
            for item in details
            if isinstance(item, Mapping)
            for text in (item.get("text"), item.get("summary"))
            if isinstance(text, str) and text
        ]
        if parts:
            return "".join(parts)
    return None


class LoopBoundOpenAIClient(BaseChatOpenAI):
    """A `BaseChatOpenAI` (`ChatOpenAI`, ``ChatDeepSeek``) whose async calls use one pooled client per event loop.

    langchain-openai shares one async HTTP client per base URL across instances and event loops (and
    ChatDeepSeek keeps one per instance); a pooled connection from a finished loop then fails with "Event loop
    is closed" (a new loop per `run_sync`, per test, per `asyncio.run`). So each loop gets its own pooled client
    (keep-alive matters: without it every call pays a new TLS handshake), closed with the loop when ai_utils runs
    it (`ai_utils._loop_resources`). A model given its own ``http_async_client`` keeps it.
    """

    _loop_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Any]] = PrivateAttr(
        default_factory=weakref.WeakKeyDictionary
    )

    def _bind_async_client_to_loop(self) -> None:
        if self.http_async_client is not None or self.root_async_client is None:
            return
        loop = asyncio.get_running_loop()
        # Read from pydantic's private dict: ``self._loop_clients`` raises and catches an AttributeError inside
        # pydantic on every read, and every call asks.
        table: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Any]]
        table = (self.__pydantic_private__ or {})["_loop_clients"]
        clients = table.get(loop)
        if clients is None:
            root = self.root_async_client.copy(http_client=openai.DefaultAsyncHttpxClient())
            clients = table[loop] = (root, root.chat.completions)
            on_loop_close(root.close)
        if self.root_async_client is not clients[0] or self.async_client is not clients[1]:
            self.root_async_client, self.async_client = clients  # pydantic assignments: only on a loop change

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        self._bind_async_client_to_loop()
        return await super()._agenerate(*args, **kwargs)

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        self._bind_async_client_to_loop()
        async for chunk in super()._astream(*args, **kwargs):
            yield chunk


class ChatOpenAICompatible(LoopBoundOpenAIClient, ChatOpenAI):
    """A `ChatOpenAI` for any OpenAI-compatible Chat Completions server that keeps reasoning text.

    Reasoning arrives in ``additional_kwargs["reasoning_content"]`` of every (streamed) message, so
    ``message.content_blocks`` starts with a ``{"type": "reasoning", "reasoning": ...}`` block while
    ``message.content`` holds only the answer. Uses Chat Completions, which every compatible server
    speaks, unless ``use_responses_api`` says otherwise (``get_llm("openai", responses_api=True)``).
    Async calls use one pooled client per event loop (`LoopBoundOpenAIClient`).

    Attributes:
        provider_label: the ``response_metadata["model_provider"]`` of replies. Not ``"openai"``: that
            name selects langchain-core's OpenAI block translator, which ignores reasoning.
        history_reasoning_key: when set (``"reasoning"`` for OpenRouter), earlier assistant messages
            are sent back with their reasoning under this key, so multi-turn reasoning stays coherent.
    """

    use_responses_api: bool | None = False
    provider_label: str = "openai_compatible"
    history_reasoning_key: str | None = None

    def _convert_chunk_to_generation_chunk(
        self,
        chunk: dict[str, Any],
        default_chunk_class: type,
        base_generation_info: dict[str, Any] | None,
    ) -> ChatGenerationChunk | None:
        generation = super()._convert_chunk_to_generation_chunk(chunk, default_chunk_class, base_generation_info)
        if generation is None:
            return None
        message = generation.message
        message.response_metadata["model_provider"] = self.provider_label
        choices = chunk.get("choices") or chunk.get("chunk", {}).get("choices") or []
        if choices and isinstance(message, AIMessageChunk):
            text = reasoning_text(choices[0].get("delta") or {})
            if text:
                message.additional_kwargs["reasoning_content"] = text
        return generation

    def _create_chat_result(
        self,
        response: dict[str, Any] | openai.BaseModel,
        generation_info: dict[str, Any] | None = None,
    ) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        raw = (
            response
            if isinstance(response, dict)
            else response.model_dump(exclude={"choices": {"__all__": {"message": {"parsed"}}}}, warnings=False)
        )
        for generation, choice in zip(result.generations, raw.get("choices") or [], strict=False):
            generation.message.response_metadata["model_provider"] = self.provider_label
            text = reasoning_text(choice.get("message") or {})
            if text:
                generation.message.additional_kwargs["reasoning_content"] = text
        if result.llm_output is not None:
            result.llm_output["model_provider"] = self.provider_label
        return result

    def _get_request_payload(
        self,
        input_: LanguageModelInput,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        key = self.history_reasoning_key
        if key and isinstance(payload.get("messages"), list):
            messages = self._convert_input(input_).to_messages()
            for message, sent in zip(messages, payload["messages"], strict=False):
                text = message.additional_kwargs.get("reasoning_content") if isinstance(message, AIMessage) else None
                if isinstance(text, str) and text:
                    sent[key] = text
        return payload
