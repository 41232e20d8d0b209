"""The one place that touches ``langchain-core``'s private chat-model API.

`ai_utils.jev._logprob_http` sends a chat model's request itself and must hand callbacks and the reply
exactly what `BaseChatModel.agenerate` would; these are the pieces of that method it reuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.language_models.chat_models import _gen_info_and_msg_metadata

if TYPE_CHECKING:
    from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

__all__ = ["agenerate", "generate", "invocation_params", "llm_type", "ls_params", "response_metadata", "serialized"]


def response_metadata(generation: ChatGeneration | ChatGenerationChunk) -> dict[str, Any]:
    """The ``response_metadata`` `BaseChatModel` gives a generation's message (generation info + metadata)."""
    return _gen_info_and_msg_metadata(generation)


def ls_params(llm: BaseChatModel, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The model's LangSmith parameters (``ls_provider``, ``ls_model_name``, ...) with its defaults."""
    return dict(llm._get_ls_params_with_defaults(**kwargs))


def invocation_params(llm: BaseChatModel, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The invocation parameters `BaseChatModel` reports to ``on_chat_model_start``."""
    return llm._get_invocation_params(stop=None, **kwargs)


def serialized(llm: BaseChatModel) -> dict[str, Any]:
    """The model's serialized form, as `BaseChatModel` passes it to callbacks."""
    return llm._serialized


def generate(
    llm: BaseChatModel, messages: list[BaseMessage], run: CallbackManagerForLLMRun | None, kwargs: Mapping[str, Any]
) -> ChatResult:
    """One request through the model's own transport (its retries, its errors), without its run machinery."""
    return llm._generate(messages, run_manager=run, **kwargs)


async def agenerate(
    llm: BaseChatModel,
    messages: list[BaseMessage],
    run: AsyncCallbackManagerForLLMRun | None,
    kwargs: Mapping[str, Any],
) -> ChatResult:
    """Async `generate`."""
    return await llm._agenerate(messages, run_manager=run, **kwargs)


def llm_type(llm: BaseChatModel) -> str:
    """The model's type name (``_llm_type``, which every chat model implements), e.g. ``"openai-chat"``."""
    return llm._llm_type
