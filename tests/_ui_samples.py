"""Chunk streams the UI protocol tests share (tests/streaming, tests/server): every chunk kind, an approval."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ai_utils.client import InterruptEvent, StreamChunk

SECRET = "password=hunter2"

APPROVAL: InterruptEvent = {
    "kind": "interrupt",
    "id": "int-1",
    "question": "Send this mail?",
    "decisions": ["approve", "reject"],
    "tool_name": "send_mail",
    "args": {"to": "anna@example.com"},
}

# Every chunk kind the agents emit today, plus kinds other rooms add (actions, follow-ups).
EVERYTHING: list[Any] = [
    {"kind": "mode", "mode": "support", "tools": ["send_mail"]},
    {"kind": "reasoning", "text": "Anna wants "},
    {"kind": "reasoning", "text": "a mail."},
    "Ich ",
    "schreibe. ",
    {"kind": "tool", "phase": "start", "tool_name": "lookup", "id": "c1", "args": {"key": "anna"}},
    {
        "kind": "tool",
        "phase": "end",
        "tool_name": "lookup",
        "id": "c1",
        "output": "anna@example.com",
        "status": "success",
    },
    {"kind": "tool", "phase": "start", "tool_name": "flaky", "id": "c2", "args": {}},
    {"kind": "tool", "phase": "end", "tool_name": "flaky", "id": "c2", "output": "Error: timeout", "status": "error"},
    {"kind": "custom", "data": {"progress": 0.5}},
    {"kind": "subagent", "text": "sub text", "namespace": ["tools:1"]},
    {"kind": "user_message", "text": "Und Bob auch.", "id": "steer-1"},
    {"kind": "action", "id": "refund", "status": "valid", "params": {"amount": 5}},
    {"kind": "follow_up", "text": "Noch etwas?"},
    "Fertig.",
    {"kind": "tool", "phase": "start", "tool_name": "send_mail", "id": "c3", "args": {"to": "anna@example.com"}},
    APPROVAL,
]


async def failing(chunks: list[StreamChunk], exc: BaseException) -> AsyncIterator[StreamChunk]:
    for chunk in chunks:
        yield chunk
    raise exc


def turn(turn_id: str, body: list[Any], stop: str = "end_turn", **end: Any) -> list[Any]:
    start = {"kind": "turn_start", "turn_id": turn_id, "session_id": "s-1", "message_id": f"m-{turn_id}"}
    usage = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
    return [start, *body, {"kind": "turn_end", "turn_id": turn_id, "stop_reason": stop, "usage": usage, **end}]
