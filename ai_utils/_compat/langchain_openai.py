"""The one place that calls ``langchain-openai``'s private `BaseChatOpenAI` methods on a model.

Imports nothing from ``langchain_openai`` at run time: the functions take the caller's model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.messages.ai import UsageMetadata
    from langchain_core.outputs import ChatResult
    from langchain_openai.chat_models.base import BaseChatOpenAI

__all__ = ["chat_result", "request_payload", "usage_metadata", "uses_responses_api"]


def request_payload(llm: BaseChatOpenAI, messages: Sequence[BaseMessage], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The request body (before the SDK's own merging) the model would send for ``messages``."""
    payload: dict[str, Any] = llm._get_request_payload(messages, **kwargs)
    return payload


def uses_responses_api(llm: BaseChatOpenAI, payload: dict[str, Any]) -> bool:
    """Whether the model would send ``payload`` to the Responses API instead of Chat Completions."""
    return bool(llm._use_responses_api(payload))


def chat_result(llm: BaseChatOpenAI, response: dict[str, Any]) -> ChatResult:
    """The model's own `ChatResult` for a Chat Completions reply body."""
    result: ChatResult = llm._create_chat_result(response)
    return result


def usage_metadata(usage: dict[str, Any], service_tier: str | None) -> UsageMetadata:
    """The ``usage_metadata`` the model's `chat_result` gives a reply with this ``usage`` and ``service_tier``."""
    from langchain_openai.chat_models.base import _create_usage_metadata

    return _create_usage_metadata(usage, service_tier)
