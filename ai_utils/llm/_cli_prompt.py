"""Pure helpers of the CLI chat models: messages to a one-shot prompt, output excerpts, reasoning chunks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage

__all__ = ["excerpt", "reasoning_chunk", "render_prompt", "structured_instructions"]


def excerpt(text: str, limit: int = 800) -> str:
    """The last ``limit`` characters of ``text``, stripped (error output ends with the cause)."""
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def reasoning_chunk(text: str) -> AIMessageChunk:
    """A chunk that carries reasoning text only (shown as a ``{"type": "reasoning"}`` block)."""
    return AIMessageChunk(content="", additional_kwargs={"reasoning_content": text})


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.text, str) else str(message.content)


def render_prompt(messages: Sequence[BaseMessage]) -> tuple[str | None, str]:
    """Split a message list into (system prompt, prompt text) for a one-shot CLI call.

    A single user message is sent as is; a longer conversation is rendered as a transcript with the
    instruction to answer its last user message.

    Args:
        messages: the chat messages of one model call.

    Returns:
        The joined system messages (or None) and the prompt text.
    """
    system = "\n\n".join(_text(m) for m in messages if isinstance(m, SystemMessage)) or None
    turns = [m for m in messages if not isinstance(m, SystemMessage)]
    if len(turns) == 1 and isinstance(turns[0], HumanMessage):
        return system, _text(turns[0])
    lines = []
    for message in turns:
        if isinstance(message, HumanMessage):
            role = "User"
        elif isinstance(message, AIMessage):
            role = "Assistant"
        elif isinstance(message, ToolMessage):
            role = f"Tool result ({message.name or message.tool_call_id})"
        else:
            role = message.type.capitalize()
        text = _text(message)
        if isinstance(message, AIMessage):  # its tool calls, in the form the tool protocol asks for
            calls = [
                json.dumps({"tool": c["name"], "arguments": c["args"]}, ensure_ascii=False) for c in message.tool_calls
            ]
            text = "\n".join(part for part in (text, *calls) if part)
        lines.append(f"{role}: {text}")
    transcript = "\n\n".join(lines)
    return system, (
        f"<conversation>\n{transcript}\n</conversation>\n\n"
        "Reply as the Assistant to the last User message of the conversation above."
    )


def structured_instructions(schema: dict[str, Any]) -> str:
    """The system-prompt addition that asks a CLI for JSON matching ``schema``."""
    return (
        "Answer with one JSON value that matches this JSON schema, and nothing else "
        f"(no prose, no code fences):\n{json.dumps(schema, ensure_ascii=False)}"
    )
