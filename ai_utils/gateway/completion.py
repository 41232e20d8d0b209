"""`Gateway.complete` / `Gateway.stream`: the seed's request/response API on top of the governed model.

Stream chunks are the seed's ``LLMStreamChunk`` in snake_case: ``{"type": "text-delta", "text"}``,
``{"type": "reasoning-delta", "text"}``, ``{"type": "tool-input-delta", "tool_call_id", "tool_name", "args_delta"}``,
``{"type": "tool-input-complete", "tool_call_id", "tool_name", "input"}`` and ``{"type": "stop", "reason"}``.
Reasoning never enters the assembled text.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from typing_extensions import TypedDict

from ai_utils.gateway.dropped import DroppedContentReport
from ai_utils.gateway.policy import PolicyDecision

__all__ = [
    "GatewayResponse",
    "GatewayStream",
    "ReasoningDelta",
    "Stop",
    "StreamChunk",
    "StreamFinal",
    "TextDelta",
    "ToolInputComplete",
    "ToolInputDelta",
    "aconsume_stream",
    "consume_stream",
]


class TextDelta(TypedDict):
    """Visible reply text."""

    type: Literal["text-delta"]
    text: str


class ReasoningDelta(TypedDict):
    """Reasoning text (metadata only; never part of the assembled text)."""

    type: Literal["reasoning-delta"]
    text: str


class ToolInputDelta(TypedDict):
    """A piece of a tool call's JSON arguments."""

    type: Literal["tool-input-delta"]
    tool_call_id: str
    tool_name: str
    args_delta: str


class ToolInputComplete(TypedDict):
    """A finished tool call with parsed input."""

    type: Literal["tool-input-complete"]
    tool_call_id: str
    tool_name: str
    input: Any


class Stop(TypedDict):
    """The end of the reply."""

    type: Literal["stop"]
    reason: str | None


StreamChunk: TypeAlias = TextDelta | ReasoningDelta | ToolInputDelta | ToolInputComplete | Stop


@dataclass(frozen=True)
class GatewayResponse:
    """The result of `Gateway.complete` (the seed's ``LLMResponse``).

    Args:
        text: the visible reply text (reasoning left out); empty for a tool-only reply, see ``content_blocks``.
        message: the LangChain `AIMessage`.
        usage: token counts as LangChain reports them (``input_tokens``, ``output_tokens``, ``total_tokens``,
            ``input_token_details`` with ``cache_read`` / ``cache_creation`` where the provider reports them),
            or ``None``.
        model: the model that answered (with a profile route, the fallback that did), as in the audit row.
        provider: the route's provider.
        request_id: the gateway request id (audit row, events, feedback).
        latency_ms: end-to-end gateway latency, including the audit write.
        cache_hit: whether the provider reported prompt tokens read from its cache.
        content_blocks: the reply as LangChain's standard content blocks (text, reasoning, tool calls, images).
        dropped_content: what the call did not send (non-text content on a text-only route, request options the
            provider does not take); falsy when nothing was dropped.
        policy_decisions: every policy decision of the call.
        tool_calls: ``[{"tool_call_id", "tool_name", "input"}]``.
        stop_reason: the provider's finish reason, if reported.
    """

    text: str
    message: AIMessage
    usage: dict[str, Any] | None
    model: str
    provider: str
    request_id: str
    latency_ms: float
    cache_hit: bool
    content_blocks: list[dict[str, Any]]
    dropped_content: DroppedContentReport = field(default_factory=DroppedContentReport)
    policy_decisions: list[PolicyDecision] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None

    @property
    def model_used(self) -> str:
        """The seed's ``modelUsed``: same as ``model``."""
        return self.model

    @property
    def provider_used(self) -> str:
        """The seed's ``providerUsed``: same as ``provider``."""
        return self.provider


class _ContentBlocks:
    """``GatewayResponse.content_blocks`` of a response `response_from` built without it.

    LangChain's provider block translators are not free and most callers read ``text``: the blocks are translated
    from ``message`` on first read and then kept in the instance, where a value given to ``__init__`` lives too.
    """

    def __get__(self, response: GatewayResponse | None, owner: type | None = None) -> Any:
        if response is None:
            return self
        blocks = [dict(block) for block in response.message.content_blocks]
        response.__dict__["content_blocks"] = blocks
        return blocks


# A non-data descriptor set after the dataclass is made, so ``content_blocks`` stays a required field.
setattr(GatewayResponse, "content_blocks", _ContentBlocks())  # noqa: B010


@dataclass
class StreamFinal:
    """What `consume_stream` assembles.

    Args:
        text: the text deltas joined (no reasoning).
        reasoning_text: the reasoning deltas joined, or ``None``.
        tool_calls: ``[{"tool_call_id", "tool_name", "input"}]``.
        stop_reason: the stop chunk's reason.
    """

    text: str = ""
    reasoning_text: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None

    def add(self, chunk: StreamChunk) -> None:
        """Fold one chunk in.

        Args:
            chunk: the chunk.
        """
        if chunk["type"] == "text-delta":
            self.text += chunk["text"]
        elif chunk["type"] == "reasoning-delta":
            self.reasoning_text = (self.reasoning_text or "") + chunk["text"]
        elif chunk["type"] == "tool-input-complete":
            self.tool_calls.append(
                {"tool_call_id": chunk["tool_call_id"], "tool_name": chunk["tool_name"], "input": chunk["input"]}
            )
        elif chunk["type"] == "stop":
            self.stop_reason = chunk["reason"]


def consume_stream(chunks: Iterable[StreamChunk]) -> StreamFinal:
    """Drain a chunk stream into its assembled form.

    Args:
        chunks: stream chunks.

    Returns:
        The `StreamFinal`.
    """
    final = StreamFinal()
    for chunk in chunks:
        final.add(chunk)
    return final


async def aconsume_stream(chunks: AsyncIterable[StreamChunk]) -> StreamFinal:
    """Async `consume_stream`.

    Args:
        chunks: stream chunks.

    Returns:
        The `StreamFinal`.
    """
    final = StreamFinal()
    async for chunk in chunks:
        final.add(chunk)
    return final


class _Translator:
    """Turn LangChain message chunks into seed stream chunks."""

    def __init__(self) -> None:
        self.merged: AIMessageChunk | None = None
        self.calls: dict[int, tuple[str, str]] = {}

    def feed(self, chunk: BaseMessage) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        if not isinstance(chunk, AIMessageChunk):
            return out
        self.merged = chunk if self.merged is None else self.merged + chunk
        for block in chunk.content_blocks:
            if block["type"] == "reasoning" and (reasoning := block.get("reasoning")):
                out.append({"type": "reasoning-delta", "text": str(reasoning)})
        if text := chunk.text:
            out.append({"type": "text-delta", "text": text})
        for part in chunk.tool_call_chunks:
            index = part.get("index") or 0
            known = self.calls.get(index, ("", ""))
            call_id, name = part.get("id") or known[0], part.get("name") or known[1]
            self.calls[index] = (call_id, name)
            if part.get("args"):
                out.append(
                    {
                        "type": "tool-input-delta",
                        "tool_call_id": call_id,
                        "tool_name": name,
                        "args_delta": part["args"] or "",
                    }
                )
        return out

    def finish(self) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        merged = self.merged
        if merged is not None:
            for call in merged.tool_calls:
                out.append(
                    {
                        "type": "tool-input-complete",
                        "tool_call_id": call.get("id") or "",
                        "tool_name": call["name"],
                        "input": call["args"],
                    }
                )
        metadata = merged.response_metadata if merged is not None else {}
        reason = metadata.get("finish_reason") or metadata.get("stop_reason")
        out.append({"type": "stop", "reason": reason})
        return out


def translate(source: Iterator[BaseMessage]) -> Iterator[StreamChunk]:
    """Translate a model's ``stream`` into stream chunks.

    Args:
        source: the model's chunk iterator.

    Yields:
        Stream chunks, ending with ``stop``.
    """
    translator = _Translator()
    for chunk in source:
        yield from translator.feed(chunk)
    yield from translator.finish()


async def atranslate(source: AsyncIterator[BaseMessage]) -> AsyncIterator[StreamChunk]:
    """Translate a model's ``astream`` into stream chunks.

    Args:
        source: the model's async chunk iterator.

    Yields:
        Stream chunks, ending with ``stop``.
    """
    translator = _Translator()
    async for chunk in source:
        for item in translator.feed(chunk):
            yield item
    for item in translator.finish():
        yield item


@dataclass
class GatewayStream:
    """The result of `Gateway.stream`: iterate it (sync or async) for chunks.

    The policy runs when iteration starts: a denial raises `GatewayError` then, before the provider call. The
    audit row is written once, after ``stop``.

    Args:
        request_id: known before the first chunk (announce it to clients early).
        model_used: the route's model.
        provider_used: the route's provider.
        chunks: a sync or async iterator of chunks.
        dropped_content: what the call does not send (see `GatewayResponse`), known before the first chunk.
    """

    request_id: str
    model_used: str
    provider_used: str
    chunks: Iterator[StreamChunk] | AsyncIterator[StreamChunk]
    dropped_content: DroppedContentReport = field(default_factory=DroppedContentReport)

    def __iter__(self) -> Iterator[StreamChunk]:
        """Iterate a stream made by `Gateway.stream`.

        Returns:
            The chunk iterator.

        Raises:
            TypeError: this stream came from `Gateway.astream`; use ``async for``.
        """
        if not isinstance(self.chunks, Iterator):
            raise TypeError("This stream came from Gateway.astream; iterate it with `async for`.")
        return self.chunks

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        """Iterate a stream made by `Gateway.astream`.

        Returns:
            The async chunk iterator.

        Raises:
            TypeError: this stream came from `Gateway.stream`; use ``for``.
        """
        if not isinstance(self.chunks, AsyncIterator):
            raise TypeError("This stream came from Gateway.stream; iterate it with `for`.")
        return self.chunks


def cache_hit(usage: Mapping[str, Any] | None) -> bool:
    """Whether ``usage`` reports prompt tokens read from the provider's cache."""
    details = (usage or {}).get("input_token_details")
    return isinstance(details, Mapping) and bool(details.get("cache_read"))


def response_from(
    message: BaseMessage,
    *,
    request_id: str,
    model: str,
    provider: str,
    decisions: Sequence[PolicyDecision],
    started: float,
    dropped: DroppedContentReport,
) -> GatewayResponse:
    """Build a `GatewayResponse` from the governed model's reply.

    Args:
        message: the reply.
        request_id: the request id (the audit row's).
        model: the model that answered.
        provider: the route's provider.
        decisions: the call's policy decisions.
        started: ``time.perf_counter()`` when the gateway call started.
        dropped: what the call did not send.

    Returns:
        The response.
    """
    ai = message if isinstance(message, AIMessage) else AIMessage(content=message.content)
    usage = dict(ai.usage_metadata) if ai.usage_metadata else None
    metadata = ai.response_metadata
    # Every gateway call builds one: filled in one step rather than through the frozen __init__ (one
    # object.__setattr__ per field), ``content_blocks`` left to `_ContentBlocks` (translated on first read).
    response = object.__new__(GatewayResponse)
    response.__dict__.update(
        text=ai.text,
        message=ai,
        usage=usage,
        model=model,
        provider=provider,
        request_id=request_id,
        latency_ms=round((time.perf_counter() - started) * 1000, 3),
        cache_hit=cache_hit(usage),
        dropped_content=dropped,
        policy_decisions=list(decisions),
        tool_calls=[
            {"tool_call_id": c.get("id") or "", "tool_name": c["name"], "input": c["args"]} for c in ai.tool_calls
        ],
        stop_reason=metadata.get("finish_reason") or metadata.get("stop_reason"),
    )
    return response
