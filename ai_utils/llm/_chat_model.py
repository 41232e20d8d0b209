"""`MessageChatModel` / `StreamingMessageChatModel`: a `BaseChatModel` written as message-level hooks.

LangChain's override points (``_generate``, ``_agenerate``, ``_stream``, ``_astream``) take
``(messages, stop, run_manager, **kwargs)`` and wrap every answer in ``ChatResult`` /
``ChatGenerationChunk``. Our chat models (the CLI models, the fallback chain, the test fakes) only
differ in how they produce the reply, so they implement hooks that return it as messages:

- `MessageChatModel._message` / `_amessage`: the whole reply as one `AIMessage`.
- `StreamingMessageChatModel._message_chunks` / `_amessage_chunks`: the reply as `AIMessageChunk`s. It is a
  separate class because LangChain streams through ``_stream`` whenever a class overrides it: a model
  without a stream of its own must not have one.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

__all__ = ["MessageChatModel", "StreamingMessageChatModel"]


class MessageChatModel(BaseChatModel):
    """A chat model whose subclasses answer with `_message` / `_amessage` (see the module docstring)."""

    @abstractmethod
    def _message(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> AIMessage:
        """The whole reply to ``messages`` (``kwargs``: the call's bound arguments, e.g. ``tools``)."""

    @abstractmethod
    async def _amessage(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> AIMessage:
        """Async twin of `_message`."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._message(messages, stop, kwargs))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=await self._amessage(messages, stop, kwargs))])


class StreamingMessageChatModel(MessageChatModel):
    """A `MessageChatModel` that also streams, with `_message_chunks` / `_amessage_chunks`.

    Attributes:
        report_tokens: also report each chunk to the run manager LangChain hands ``_stream`` as a new
            token (the CLI models do; the fakes leave every callback to LangChain).
    """

    report_tokens: ClassVar[bool] = False

    @abstractmethod
    def _message_chunks(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> Iterator[AIMessageChunk]:
        """The reply to ``messages`` as chunks whose sum is the whole reply."""

    @abstractmethod
    def _amessage_chunks(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> AsyncIterator[AIMessageChunk]:
        """Async twin of `_message_chunks`."""

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self._message_chunks(messages, stop, kwargs):
            generation = ChatGenerationChunk(message=chunk)
            if run_manager and self.report_tokens:
                run_manager.on_llm_new_token(generation.text, chunk=generation)
            yield generation

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        async for chunk in self._amessage_chunks(messages, stop, kwargs):
            generation = ChatGenerationChunk(message=chunk)
            if run_manager and self.report_tokens:
                await run_manager.on_llm_new_token(generation.text, chunk=generation)
            yield generation
