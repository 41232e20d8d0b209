"""Turn scripted replies into `AIMessage`s and `AIMessage`s into chunk streams.

Both fakes share this one path: a reply (str | AIMessage | Mapping) becomes a complete
`AIMessage` first; streaming then cuts that message into `AIMessageChunk`s whose sum equals it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import ToolCall, ToolCallChunk, tool_call, tool_call_chunk

from ai_utils.exceptions import UserError
from ai_utils.testing._logprobs import check_logprobs, first_token, token_logprobs

__all__ = ["Reply", "check_reply", "message_to_chunks", "to_ai_message"]

Reply = str | AIMessage | Mapping[str, Any]
"""One scripted model reply: plain text, a ready `AIMessage`, or a mapping (see `to_ai_message`)."""

_REPLY_KEYS = frozenset({"content", "tool_calls", "reasoning", "logprobs"})
_PIECES = re.compile(r"\S+\s*|\s+")
REASONING_KEY = "reasoning_content"


def check_reply(reply: object, *, where: str) -> None:
    """Raise `UserError` when ``reply`` is not a valid scripted reply.

    Args:
        reply: the value to check.
        where: names the reply in the message, e.g. ``"responses[2]"``.

    Raises:
        UserError: for a wrong type, unknown mapping keys or a tool call without a name.
    """
    if isinstance(reply, (str, AIMessage)):
        return
    if not isinstance(reply, Mapping):
        raise UserError(
            f"{where} must be a str, an AIMessage or a mapping, got {type(reply).__name__}: {reply!r}. "
            'Use e.g. "hello" or {"content": "...", "tool_calls": [{"name": "...", "args": {...}}]}.'
        )
    unknown = sorted(set(reply) - _REPLY_KEYS)
    if unknown:
        raise UserError(
            f"{where} has unknown keys {unknown!r}. Use only 'content', 'tool_calls', 'reasoning' and 'logprobs'."
        )
    content = reply.get("content", "")
    if not isinstance(content, (str, list)):
        raise UserError(f"{where}['content'] must be a str or a list of content blocks, got {content!r}.")
    reasoning = reply.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, str):
        raise UserError(f"{where}['reasoning'] must be a str, got {reasoning!r}.")
    if "logprobs" in reply and (problem := check_logprobs(reply["logprobs"], where=f"{where}['logprobs']")):
        raise UserError(problem + '. Use e.g. {"A": -0.1, "B": -2.4}.')
    calls = reply.get("tool_calls", [])
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):
        raise UserError(f"{where}['tool_calls'] must be a list of mappings, got {calls!r}.")
    for i, call in enumerate(calls):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise UserError(
                f"{where}['tool_calls'][{i}] must be a mapping with a 'name', got {call!r}. "
                'Use {"name": "tool_name", "args": {...}} (an "id" is optional).'
            )
        if not isinstance(call.get("args", {}), Mapping):
            raise UserError(f"{where}['tool_calls'][{i}]['args'] must be a mapping, got {call.get('args')!r}.")


def _words(text: str) -> int:
    return len(text.split())


def _usage(messages: Sequence[BaseMessage], message: AIMessage) -> UsageMetadata:
    """Small, deterministic token counts: whitespace-separated words in and out."""
    input_tokens = sum(_words(m.text) for m in messages)
    reasoning = message.additional_kwargs.get(REASONING_KEY)
    output_tokens = _words(message.text) + (_words(reasoning) if isinstance(reasoning, str) else 0)
    output_tokens += sum(1 + _words(json.dumps(tc["args"])) for tc in message.tool_calls)
    return UsageMetadata(
        input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
    )


def _with_ids(calls: Sequence[ToolCall], call_no: int, token: str) -> list[ToolCall]:
    return [
        tool_call(name=tc["name"], args=dict(tc["args"]), id=tc.get("id") or f"call_{call_no}_{i}_{token}")
        for i, tc in enumerate(calls)
    ]


def to_ai_message(
    reply: Reply, *, call_no: int, messages: Sequence[BaseMessage], model_name: str, where: str, token: str
) -> AIMessage:
    """Build the complete `AIMessage` for one model call.

    A mapping may hold ``content`` (str), ``tool_calls`` (``[{"name", "args", "id"?}]``),
    ``reasoning`` (str, stored as ``additional_kwargs["reasoning_content"]``) and ``logprobs``
    (token -> log-probability of the first answer token, stored as ``response_metadata["logprobs"]`` in
    the OpenAI shape that ``classify(..., llm=...)`` reads; ``content`` defaults to the likeliest token).
    Tool calls without an id get ``call_<call_no>_<index>_<token>``. Usage metadata (word counts) and response
    metadata are added unless the reply already carries them.

    Args:
        reply: the scripted reply.
        call_no: the 1-based number of this model call (used for generated tool-call ids).
        messages: the messages the model received (counted for ``input_tokens``).
        model_name: reported as ``response_metadata["model_name"]``.
        where: names the reply in error messages.
        token: the model instance's random id part, so generated ids differ between model instances and
            processes (a thread continued by another process must not get the ids it already holds).

    Returns:
        A fresh `AIMessage`; the scripted reply is never mutated.
    """
    check_reply(reply, where=where)
    if isinstance(reply, str):
        message = AIMessage(content=reply)
    elif isinstance(reply, AIMessage):
        message = reply.model_copy(deep=True)
        message.tool_calls = _with_ids(message.tool_calls, call_no, token)
    else:
        calls = [
            tool_call(name=c["name"], args=dict(c.get("args", {})), id=c.get("id")) for c in reply.get("tool_calls", [])
        ]
        reasoning = reply.get("reasoning")
        logprobs = reply.get("logprobs")
        content = reply.get("content", "")
        scripted_metadata: dict[str, Any] = {}
        if logprobs:
            content = content or first_token(logprobs)
            pieces = content.split() if isinstance(content, str) and content.split() else [first_token(logprobs)]
            scripted_metadata["logprobs"] = {"content": token_logprobs(pieces, logprobs, len(logprobs))}
        message = AIMessage(
            content=content,
            tool_calls=_with_ids(calls, call_no, token),
            additional_kwargs={REASONING_KEY: reasoning} if reasoning else {},
            response_metadata=scripted_metadata,
        )
    if message.usage_metadata is None:
        message.usage_metadata = _usage(messages, message)
    metadata = {"model_name": model_name, "finish_reason": "tool_calls" if message.tool_calls else "stop"}
    message.response_metadata = {**metadata, **message.response_metadata}
    return message


def _split_args(args: str) -> list[str]:
    mid = len(args) // 2
    return [args[:mid], args[mid:]] if mid else [args]


def _empty_like(message: AIMessage) -> str | list[str | dict[str, Any]]:
    # Empty chunks use the content's own type so that list content merges back into a list.
    return "" if isinstance(message.content, str) else []


def message_to_chunks(message: AIMessage) -> Iterator[AIMessageChunk]:
    """Cut a complete `AIMessage` into the chunks a streaming provider would send.

    Order: reasoning pieces (``additional_kwargs["reasoning_content"]``, shown by ``content_blocks``
    as ``{"type": "reasoning"}``), text pieces (split after whitespace, so they join to the content
    exactly), tool-call chunks (name and id first, the JSON args split over two chunks), then a last
    empty chunk with usage and response metadata and ``chunk_position="last"``. Summing the chunks
    gives back ``message`` (apart from ``id``).

    Args:
        message: the complete reply.

    Yields:
        `AIMessageChunk`s carrying ``message.id``.
    """
    extra = {k: v for k, v in message.additional_kwargs.items() if k != REASONING_KEY}
    if extra:
        yield AIMessageChunk(content=_empty_like(message), additional_kwargs=extra, id=message.id)
    reasoning = message.additional_kwargs.get(REASONING_KEY)
    if isinstance(reasoning, str):
        for piece in _PIECES.findall(reasoning):
            yield AIMessageChunk(content=_empty_like(message), additional_kwargs={REASONING_KEY: piece}, id=message.id)
    if isinstance(message.content, str):
        for piece in _PIECES.findall(message.content):
            yield AIMessageChunk(content=piece, id=message.id)
    elif message.content:
        yield AIMessageChunk(content=message.content, id=message.id)
    for index, tc in enumerate(message.tool_calls):
        for part, args in enumerate(_split_args(json.dumps(tc["args"]))):
            first = part == 0
            chunk: ToolCallChunk = tool_call_chunk(
                name=tc["name"] if first else None, args=args, id=tc["id"] if first else None, index=index
            )
            yield AIMessageChunk(content=_empty_like(message), tool_call_chunks=[chunk], id=message.id)
    yield AIMessageChunk(
        content=_empty_like(message),
        usage_metadata=message.usage_metadata,
        response_metadata=message.response_metadata,
        chunk_position="last",
        id=message.id,
    )
