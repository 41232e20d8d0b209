"""What a gateway call leaves out: `report_dropped_content`, `DroppedContentReport`, text-only stripping.

A route to a text-only model (``Route(..., text_only=True)``; DeepSeek routes are text-only by default) gets the
messages without images, files, tool calls, tool results and declared tools; what was left out is reported
(`GatewayResponse.dropped_content`, ``on_dropped_content``, by default a logged warning that names counts, never
content). With ``strict_text_only=True`` such a call is refused instead. Request options the provider does not
take (``betas`` outside Anthropic, ...) are reported in the same report.

```python
from ai_utils.gateway import report_dropped_content

report = report_dropped_content(messages, tools=[search])
if report:
    print(report.images, report.tool_calls, report.tool_results, report.tools)
```
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.utils.function_calling import convert_to_openai_tool

from ai_utils.exceptions import UserError

__all__ = [
    "DroppedContentReport",
    "OnDroppedContent",
    "as_messages",
    "log_dropped_content",
    "report_dropped_content",
    "strip_non_text",
]

logger = logging.getLogger("ai_utils.gateway")

# Content block types (LangChain standard, OpenAI Chat Completions and Responses, Anthropic, Gemini via LangChain).
_TEXT = frozenset({"text", "input_text", "output_text"})
_IMAGES = frozenset({"image", "image_url", "input_image"})
_TOOL_CALLS = frozenset({"tool_use", "tool_call", "function_call", "server_tool_call", "server_tool_use"})
_TOOL_RESULTS = frozenset({"tool_result", "function_call_output", "server_tool_result", "web_search_tool_result"})
# Reasoning is the model's own scratchpad, not content the caller sent: a text-only route drops it unreported.
_REASONING = frozenset({"reasoning", "thinking", "redacted_thinking"})


@dataclass(frozen=True)
class DroppedContentReport:
    """An inventory of non-text content (and, for a call, the request options a provider does not take).

    Falsy when empty. Counts only: the report never holds the content itself.

    Args:
        images: image blocks.
        tool_calls: tool calls in assistant messages.
        tool_results: tool results (tool messages and ``tool_result`` blocks).
        tools: names of the declared tools.
        other: other non-text blocks (files, audio, video, documents, ...).
        options: request options that were not sent (e.g. ``"betas"`` outside Anthropic).
    """

    images: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    tools: tuple[str, ...] = ()
    other: int = 0
    options: tuple[str, ...] = field(default=())

    @property
    def has_content(self) -> bool:
        """Whether there is non-text content (anything but ``options``)."""
        return bool(self.images or self.tool_calls or self.tool_results or self.tools or self.other)

    def __bool__(self) -> bool:
        return self.has_content or bool(self.options)

    def with_options(self, options: Iterable[str]) -> DroppedContentReport:
        """This report plus dropped request option names.

        Args:
            options: the option names.

        Returns:
            A new report.
        """
        return replace(self, options=tuple(dict.fromkeys((*self.options, *options))))

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict.

        Returns:
            Every field by name (tuples as lists).
        """
        return {
            "images": self.images,
            "tool_calls": self.tool_calls,
            "tool_results": self.tool_results,
            "tools": list(self.tools),
            "other": self.other,
            "options": list(self.options),
        }

    def describe(self) -> str:
        """The report in words, counts and names only (what the default warning logs).

        Returns:
            E.g. ``"2 image(s), 1 tool call(s), tools search, options betas"``.
        """
        parts = [
            f"{count} {label}(s)"
            for count, label in (
                (self.images, "image"),
                (self.tool_calls, "tool call"),
                (self.tool_results, "tool result"),
                (self.other, "other non-text block"),
            )
            if count
        ]
        if self.tools:
            parts.append(f"tools {', '.join(self.tools)}")
        if self.options:
            parts.append(f"options {', '.join(self.options)}")
        return ", ".join(parts) or "nothing"


NOTHING_DROPPED = DroppedContentReport()
"""The empty report (frozen, so shared): what a call that drops nothing carries."""

OnDroppedContent = Callable[[DroppedContentReport], Any]
"""``on_dropped_content(report)``: told what a call left out, before the provider is called."""


def as_messages(messages: Any) -> list[BaseMessage]:
    """The call's messages as LangChain messages.

    A string is one human message; dicts, tuples and messages are read by LangChain's ``convert_to_messages``.

    Args:
        messages: the caller's messages.

    Returns:
        The messages.

    Raises:
        UserError: ``messages`` is empty or not a message list.
    """
    if isinstance(messages, str):
        return [HumanMessage(messages)]
    if isinstance(messages, PromptValue):
        return messages.to_messages()
    if isinstance(messages, BaseMessage):
        return [messages]
    if type(messages) is list and messages and all(isinstance(m, BaseMessage) for m in messages):
        return list(messages)  # already messages (the gateway's own list, read again by report_dropped_content)
    if not isinstance(messages, Sequence) or not messages:
        raise UserError(
            f"messages={messages!r} is not a message list. Pass a string, LangChain messages or "
            '[{"role": "user", "content": "..."}].'
        )
    try:
        return convert_to_messages(messages)
    except (ValueError, TypeError, NotImplementedError) as err:
        raise UserError(f"Cannot read the messages ({err}). Use LangChain messages or role/content dicts.") from err


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        return str(name or tool.get("name") or tool.get("type") or "tool")
    name = getattr(tool, "name", None)
    if isinstance(name, str):
        return name
    try:
        return str(convert_to_openai_tool(tool)["function"]["name"])
    except Exception:
        return getattr(tool, "__name__", None) or type(tool).__name__


def _blocks(message: BaseMessage) -> list[Any]:
    return message.content if isinstance(message.content, list) else []


def _block_type(block: Any) -> str | None:
    if isinstance(block, str):
        return "text"
    if isinstance(block, Mapping):
        kind = block.get("type")
        return kind if isinstance(kind, str) else None
    return None


def report_dropped_content(messages: Any, tools: Sequence[Any] | None = None) -> DroppedContentReport:
    """Inventory the non-text content of a message list (what a text-only model would not get).

    Counts image blocks, tool calls, tool results (tool messages and ``tool_result`` blocks), other non-text
    blocks, and names the declared ``tools``. Run it on your own input before a call, as the gateway does for
    text-only routes.

    Args:
        messages: a string, LangChain messages or ``{"role", "content"}`` dicts.
        tools: the tools a call would declare (anything ``bind_tools`` accepts).

    Returns:
        The `DroppedContentReport` (falsy when the messages are text only and no tools are declared).
    """
    images = tool_calls = tool_results = other = 0
    for message in as_messages(messages):
        if isinstance(message, ToolMessage):
            tool_results += 1
            continue
        block_calls = 0
        for block in _blocks(message):
            kind = _block_type(block)
            if kind is None or kind in _TEXT or kind in _REASONING:
                continue
            if kind in _IMAGES:
                images += 1
            elif kind in _TOOL_CALLS:
                block_calls += 1
            elif kind in _TOOL_RESULTS:
                tool_results += 1
            else:
                other += 1
        if isinstance(message, AIMessage):
            # Anthropic replies carry each call twice (a tool_use block and a tool_calls entry): count it once.
            block_calls = max(block_calls, len(message.tool_calls) + len(message.invalid_tool_calls))
        tool_calls += block_calls
    names = tuple(_tool_name(tool) for tool in tools or ())
    if not (images or tool_calls or tool_results or names or other):
        return NOTHING_DROPPED
    return DroppedContentReport(
        images=images, tool_calls=tool_calls, tool_results=tool_results, tools=names, other=other
    )


def _text_only(message: BaseMessage) -> BaseMessage | None:
    """The message with its text alone, or ``None`` when no text is left (or it is a tool result)."""
    if isinstance(message, ToolMessage):
        return None
    content = message.content
    if isinstance(content, list):
        kept = [b for b in content if _block_type(b) in _TEXT]
        content = kept if any(b if isinstance(b, str) else b.get("text") for b in kept) else ""
    update: dict[str, Any] = {"content": content}
    if isinstance(message, AIMessage):
        kwargs = {k: v for k, v in message.additional_kwargs.items() if k not in ("tool_calls", "function_call")}
        update.update(tool_calls=[], invalid_tool_calls=[], tool_call_chunks=[], additional_kwargs=kwargs)
    if not content:
        return None
    return message.model_copy(update=update)


def strip_non_text(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages as a text-only model takes them: text blocks only, no tool calls, no tool results.

    Messages left without text are dropped.

    Args:
        messages: the messages.

    Returns:
        The stripped messages (possibly empty).
    """
    out: list[BaseMessage] = []
    for message in messages:
        kept = _text_only(message)
        if kept is not None:
            out.append(kept)
    return out


def log_dropped_content(report: DroppedContentReport, *, feature: str, provider: str, model: str) -> None:
    """The default ``on_dropped_content``: one warning naming the route and the counts, never the content.

    Args:
        report: what was dropped.
        feature: the feature.
        provider: the route's provider.
        model: the route's model.
    """
    # strict_text_only refuses non-text content only; for request options the provider does not take, the fix is
    # not to ask for them on this route.
    content = report.images or report.tool_calls or report.tool_results or report.tools or report.other
    fix = "strict_text_only=True to refuse such calls" if content else "leave these options out for this provider"
    logger.warning(
        "Gateway feature %r (%s:%s) did not send %s. Pass on_dropped_content=... to handle it, or %s.",
        feature,
        provider,
        model,
        report.describe(),
        fix,
    )
