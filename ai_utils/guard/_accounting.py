"""`context_accounting`: how many tokens of a model request each kind of context takes — counts, never content.

Seed: polpo "Runtime inspection" (``createRuntimeContextAccounting``): categories and totals are standard so any
inspector shows the same breakdown; tokenisation is the host's concern, so the counts here are the house
estimate (characters / 4 plus a small per-message overhead, `ai_utils.memory._tool_units.estimate_tokens`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage, convert_to_messages
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from typing_extensions import TypedDict

from ai_utils.exceptions import UserError
from ai_utils.guard._trust import TRUST_KEY
from ai_utils.memory._tool_units import estimate_tokens

__all__ = ["ContextCategory", "ContextSegment", "context_accounting"]

ContextCategory = Literal["system", "history", "tools", "memory", "retrieved", "tool_results"]

_LABELS: dict[ContextCategory, str] = {
    "system": "System prompt",
    "history": "Conversation history",
    "tools": "Tool definitions",
    "memory": "Memory",
    "retrieved": "Retrieved documents",
    "tool_results": "Tool results",
}
# The header of the §17 memory block (`format_memory_context`); a system prompt that embeds it counts that part
# as memory.
_MEMORY_HEADER = "HEALTH MEMORY (untrusted factual snippets"


class ContextSegment(TypedDict):
    """One row of `context_accounting`: a category, its label and its approximate tokens (never content)."""

    category: ContextCategory
    label: str
    tokens: int


def _chars(text: str) -> int:
    return -(-len(text) // 4)


def _system(message: SystemMessage, totals: dict[ContextCategory, int]) -> None:
    text = message.text
    start = text.find(_MEMORY_HEADER)
    if start < 0:
        totals["system"] += estimate_tokens(message)
        return
    end = text.find("\n\n", start)
    memory = text[start:] if end < 0 else text[start:end]
    totals["memory"] += _chars(memory)
    totals["system"] += estimate_tokens(message) - _chars(memory)


def _tool_result(message: ToolMessage) -> ContextCategory:
    trust = message.response_metadata.get(TRUST_KEY)
    kind = trust.get("kind") if isinstance(trust, Mapping) else None
    if kind == "memory" or (kind is None and (message.name or "").startswith("memory_")):
        return "memory"
    if kind == "retrieved":
        return "retrieved"
    return "tool_results"


def _tool_tokens(tool: Any) -> int:
    if isinstance(tool, (BaseTool, Mapping)) or callable(tool):
        schema = convert_to_openai_tool(tool)
        return _chars(json.dumps(schema, ensure_ascii=False, default=str))
    raise UserError(f"`tools` entries must be tools, functions or tool schemas, got {tool!r}.")


def context_accounting(
    messages: Sequence[BaseMessage | Mapping[str, Any]], *, tools: Sequence[Any] = ()
) -> list[ContextSegment]:
    """Approximate tokens of a model request by category: system, history, tools, memory, retrieved, tool results.

    Example:
        ```python
        context_accounting(agent.get_state("t1").values["messages"], tools=agent.tools)
        # [{'category': 'system', 'label': 'System prompt', 'tokens': 0},
        #  {'category': 'history', 'label': 'Conversation history', 'tokens': 41}, ...]
        ```

    Tool results count by the kind context trust gave them (``memory``, ``retrieved``; memory tools also by name);
    a system message that embeds the `format_memory_context` block counts that block as memory.

    Args:
        messages: the request's messages (LangChain messages or ``{"role", "content"}`` mappings).
        tools: the tools offered to the model (their JSON schemas count as ``tools``).

    Returns:
        One row per category, always all six, in the order above: ``{"category", "label", "tokens"}`` — counts
        and labels only, never content.

    Raises:
        UserError: something that is not a message list or a tool.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise UserError(f"`messages` must be a list of messages, got {type(messages).__name__}.")
    try:
        items: list[Any] = list(messages)
        converted = convert_to_messages(items)
    except (ValueError, TypeError, NotImplementedError) as error:
        raise UserError(f"`messages` holds something that is not a message ({type(error).__name__}).") from None
    totals: dict[ContextCategory, int] = dict.fromkeys(_LABELS, 0)
    for message in converted:
        if isinstance(message, SystemMessage):
            _system(message, totals)
        elif isinstance(message, ToolMessage):
            totals[_tool_result(message)] += estimate_tokens(message)
        elif isinstance(message, (AIMessage, BaseMessage)):
            totals["history"] += estimate_tokens(message)
    for tool in tools:
        totals["tools"] += _tool_tokens(tool)
    return [{"category": c, "label": _LABELS[c], "tokens": n} for c, n in totals.items()]
