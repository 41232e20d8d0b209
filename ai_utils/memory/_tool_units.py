"""Pure message arithmetic for `SmartCheckpointSaver`: token estimates, tool units, the safe cut.

A *tool unit* is an AIMessage with tool calls plus every ToolMessage answering one of its calls. Units
can interleave (``AI(a, b), AI(c), Tool(a), Tool(c), Tool(b)``), so the cut is computed from the
index of each ToolMessage's call instead of from neighbouring messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import convert_to_messages

__all__ = [
    "SUMMARY_ID_PREFIX",
    "Tally",
    "count_turn_messages",
    "dangling_calls",
    "estimate_tokens",
    "is_summary",
    "safe_cut",
    "split_summary",
    "tally_write",
]

SUMMARY_ID_PREFIX = "ai_utils_summary"
"""Id prefix of the rolling-summary SystemMessage (ids survive every serializer)."""

_CHARS_PER_TOKEN = 4
_PER_MESSAGE_TOKENS = 3


def is_summary(message: BaseMessage) -> bool:
    """True for the rolling-summary SystemMessage written by `SmartCheckpointSaver`."""
    return isinstance(message, SystemMessage) and str(message.id or "").startswith(SUMMARY_ID_PREFIX)


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        total = 0
        for block in content:
            if isinstance(block, str):
                total += len(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                total += len(block["text"])
            else:
                total += len(str(block))
        return total
    return len(str(content))


def estimate_tokens(message: BaseMessage) -> int:
    """Approximate tokens of one message: characters / 4 over text and tool-call arguments, + 3."""
    chars = _content_chars(message.content)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            chars += len(call["name"]) + len(str(call["args"]))
    return chars // _CHARS_PER_TOKEN + _PER_MESSAGE_TOKENS


def _is_turn_message(message: BaseMessage) -> bool:
    return message.type in ("human", "ai")


def count_turn_messages(messages: Iterable[BaseMessage]) -> int:
    """How many user and AI messages ``messages`` holds (tool results travel with their AI message)."""
    return sum(1 for m in messages if _is_turn_message(m))


class Tally:
    """Running counters for one thread, updated from the writes LangGraph stores.

    Attributes:
        tokens: approximate tokens of every message in the thread.
        since_summary: user/AI messages added since the last summary.
        count: messages in the thread (lets a caller holding the list notice writes it never saw).
        exact: False once a write could not be counted (an Overwrite, a RemoveMessage, a foreign value);
            the caller then recounts from the real message list.
    """

    __slots__ = ("count", "exact", "since_summary", "tokens")

    def __init__(self, tokens: int = 0, since_summary: int = 0, count: int = 0, *, exact: bool = True) -> None:
        self.tokens = tokens
        self.since_summary = since_summary
        self.count = count
        self.exact = exact

    @classmethod
    def of(cls, messages: Sequence[BaseMessage], sizes: dict[str, int] | None = None) -> Tally:
        """Count a full message list exactly; ``sizes`` caches token estimates by message id across calls."""
        summary, body = split_summary(messages)
        kept = int(summary.response_metadata.get("kept", 0)) if summary is not None else 0
        if sizes is None:
            tokens = sum(estimate_tokens(m) for m in messages)
        else:
            if len(sizes) > 2 * len(messages) + 64:
                sizes.clear()
            tokens = 0
            for message in messages:
                size = sizes.get(message.id) if message.id else None
                if size is None:
                    size = estimate_tokens(message)
                    if message.id:
                        sizes[message.id] = size
                tokens += size
        return cls(tokens, max(0, count_turn_messages(body) - kept), len(messages))


def tally_write(tally: Tally, value: Any) -> None:
    """Add one write to the ``messages`` channel (a message-like or a list of them) to ``tally``."""
    items = value if isinstance(value, list) else [value]
    for item in items:
        message = item
        if not isinstance(message, BaseMessage):
            try:
                message = convert_to_messages([item])[0]
            except Exception:
                tally.exact = False
                continue
        if isinstance(message, RemoveMessage):
            tally.exact = False
            continue
        tally.tokens += estimate_tokens(message)
        tally.count += 1
        if _is_turn_message(message):
            tally.since_summary += 1


def split_summary(messages: Sequence[BaseMessage]) -> tuple[SystemMessage | None, list[BaseMessage]]:
    """Separate the rolling summary (the last one, if several) from the other messages."""
    summary: SystemMessage | None = None
    body: list[BaseMessage] = []
    for message in messages:
        if is_summary(message):
            summary = message  # type: ignore[assignment]
        else:
            body.append(message)
    return summary, body


def _call_owners(messages: Sequence[BaseMessage]) -> dict[int, int]:
    """Position of each ToolMessage -> position of the AIMessage that made its call.

    The owner is the nearest earlier AIMessage with that call id: some providers and local models reuse
    ids such as ``call_0`` in every turn, and tying a result to the first use would keep the whole thread.
    """
    latest: dict[str, int] = {}
    owners: dict[int, int] = {}
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["id"]:
                    latest[call["id"]] = index
        elif isinstance(message, ToolMessage) and message.tool_call_id in latest:
            owners[index] = latest[message.tool_call_id]
    return owners


def safe_cut(messages: Sequence[BaseMessage], keep_last: int) -> int:
    """Index where the verbatim tail starts: the last ``keep_last`` user/AI messages, never splitting a tool unit.

    The cut moves to earlier messages (keeps more) until no ToolMessage in the tail answers a call made
    before the cut; a ToolMessage whose call is unknown stays with the message before it.

    Args:
        messages: the conversation without the rolling summary.
        keep_last: user/AI messages to keep verbatim.

    Returns:
        ``cut`` such that ``messages[cut:]`` is the tail (0 when everything must be kept).
    """
    cut = len(messages)
    seen = 0
    while cut > 0 and seen < keep_last:
        cut -= 1
        if _is_turn_message(messages[cut]):
            seen += 1
    owners = _call_owners(messages)
    # need[i]: the earliest index a ToolMessage at or after i depends on (its call's AIMessage).
    need = [len(messages)] * (len(messages) + 1)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        own = len(messages)
        if isinstance(message, ToolMessage):
            own = owners.get(index, index - 1)
        need[index] = min(need[index + 1], own)
    while cut > 0 and need[cut] < cut:
        cut = max(need[cut], 0)
    return cut


def dangling_calls(messages: Sequence[BaseMessage]) -> set[str]:
    """Tool-call ids of AIMessages that have no ToolMessage answer yet (a turn still in its tool loop)."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            open_calls.update(call["id"] for call in message.tool_calls if call["id"])
        elif isinstance(message, ToolMessage):
            open_calls.discard(message.tool_call_id)
    return open_calls
