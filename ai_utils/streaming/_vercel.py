"""Vercel AI SDK UI message stream: stream chunks -> UI message chunks (``useChat``, ``readUIMessageStream``).

One response is one assistant message: ``start`` first, ``finish`` (or ``error``) last, sent as SSE with the
header ``x-vercel-ai-ui-message-stream: v1`` and ``data: [DONE]`` at the end, as the AI SDK's own
``createUIMessageStreamResponse`` does. Mapping:

- text -> ``text-start`` / ``text-delta`` / ``text-end``; reasoning -> ``reasoning-start`` / ``-delta`` / ``-end``;
- tool start -> ``tool-input-available``; tool end -> ``tool-output-available`` (``tool-output-error`` when
  the tool failed), after a ``tool-input-available`` when the call was not shown in this stream;
- an approval interrupt -> ``tool-approval-request`` (``approvalId`` = the item id, ``toolCallId`` = the call),
  answered by the next request's ``approval-responded`` tool part; a plain interrupt -> ``data-interrupt``;
- a steer that joined the turn -> ``steering-message``;
- every other chunk kind -> ``data-<kind>`` with the chunk's other fields as ``data`` (a session's turn
  events are ``transient``: they reach ``onData`` but are not kept in the message);
- a failure -> ``error`` (after closing open parts), and nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Collection, Iterable, Mapping
from typing import Any

from ai_utils.client import ErrorEvent, InterruptEvent
from ai_utils.streaming._ui import Event, UIEncoder, _text_json, aevents, fresh_id, turn_error

__all__ = ["VERCEL_HEADERS", "VercelEncoder", "to_vercel_ai"]

VERCEL_HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
"""The header that tells the AI SDK the body is a UI message stream."""

# How a durable turn's stop reason reads as the AI SDK's finish reason.
_FINISH = {
    "end_turn": "stop",
    "interrupted": "tool-calls",
    "max_model_turns": "length",
    "max_output_tokens": "length",
    "refused": "content-filter",
}
_TURN_EVENTS = frozenset({"turn_start", "turn_resume", "turn_end", "turn_yield", "turn_rollback"})


class VercelEncoder(UIEncoder):
    """Stream chunks (or a session's log lines) -> AI SDK UI message chunks; one instance per response.

    Args:
        message_id: the assistant message's id: the one the client continues (an approval answer) or a new
            one; ``None`` takes the first turn's id in a session log, else a generated one.
        known_tool_calls: tool call ids the client's message already holds (their results need no input part).
    """

    started = False
    finish_reason = "stop"

    def __init__(self, *, message_id: str | None = None, known_tool_calls: Collection[str] = ()) -> None:
        super().__init__()
        self.message_id = message_id
        self.shown: set[str] = set(known_tool_calls)

    def _begin(self, message_id: str | None = None) -> list[Event]:
        if self.started:
            return []
        self.started = True
        self.message_id = self.message_id or message_id or fresh_id()
        return [{"type": "start", "messageId": self.message_id}]

    def on_text(self, text: str) -> list[Event]:
        if self.text_id is not None:
            return [{"type": "text-delta", "id": self.text_id, "delta": text}]
        out = self._begin() if not self.started else []  # the check inline: no call once started
        if self.reasoning_id is not None:
            out += self.on_reasoning_end()
        self.text_id = self.new_id()
        # The id is our own str (a counter or a cursor): plain orjson writes it, no fallback call needed.
        self.delta_prefix = b'data: {"type":"text-delta","id":%s,"delta":' % _text_json(self.text_id)
        out.append({"type": "text-start", "id": self.text_id})
        out.append({"type": "text-delta", "id": self.text_id, "delta": text})
        return out

    def on_text_end(self) -> list[Event]:
        event = {"type": "text-end", "id": self.text_id}
        self.text_id = self.delta_prefix = None
        return [event]

    def on_reasoning(self, text: str) -> list[Event]:
        if not text:
            return []
        out = self._begin()
        if self.reasoning_id is None:
            if self.text_id is not None:
                out += self.on_text_end()
            self.reasoning_id = self.new_id()
            out.append({"type": "reasoning-start", "id": self.reasoning_id})
        out.append({"type": "reasoning-delta", "id": self.reasoning_id, "delta": text})
        return out

    def on_reasoning_end(self) -> list[Event]:
        event = {"type": "reasoning-end", "id": self.reasoning_id}
        self.reasoning_id = None
        return [event]

    def _input(self, call_id: str, name: str, args: Any) -> Event:
        self.shown.add(call_id)
        return {"type": "tool-input-available", "toolCallId": call_id, "toolName": name, "input": args}

    def on_tool_start(self, call_id: str, name: str, args: Any) -> list[Event]:
        out = self._begin() if not self.started else []
        if self.text_id is not None or self.reasoning_id is not None:
            out += self.close_parts()
        out.append(self._input(call_id, name, args))
        return out

    def on_tool_end(self, call_id: str, name: str, chunk: Mapping[str, Any], started: bool) -> list[Event]:
        out = self._begin() if not self.started else []
        if self.text_id is not None or self.reasoning_id is not None:
            out += self.close_parts()
        if call_id not in self.shown:
            out.append(self._input(call_id, name, {}))
        output = chunk.get("output")
        if chunk.get("status") == "error":
            out.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": str(output or "")})
        else:
            out.append({"type": "tool-output-available", "toolCallId": call_id, "output": output})
        return out

    def on_interrupt(self, items: list[InterruptEvent]) -> list[Event]:
        out = self._begin() + self.close_parts()
        for item in items:
            if not item.get("tool_name"):
                out.append({"type": "data-interrupt", "id": item["id"], "data": item})
                continue
            call_id = self.tool_call_of(item)
            if call_id is None:
                call_id = item["id"]
                out.append(self._input(call_id, str(item["tool_name"]), item.get("args") or {}))
            request: Event = {"type": "tool-approval-request", "approvalId": item["id"], "toolCallId": call_id}
            if item.get("question"):
                request["reason"] = item["question"]
            out.append(request)
        self.finish_reason = "tool-calls"
        return out

    def on_other(self, kind: str, data: dict[str, Any]) -> list[Event]:
        event: Event = {"type": f"data-{kind}", "data": data}
        if kind in _TURN_EVENTS:
            event["transient"] = True
        return [*self._begin(), event]

    def on_user_message(self, chunk: Mapping[str, Any]) -> list[Event]:
        out = self._begin() + self.close_parts()
        text = str(chunk.get("text", ""))
        out.append(
            {
                "type": "steering-message",
                "id": str(chunk.get("id") or self.new_id()),
                "parts": [{"type": "text", "text": text}],
            }
        )
        return out

    def on_turn_start(self, chunk: Mapping[str, Any]) -> list[Event]:
        out = self._begin(str(chunk.get("turn_id") or "") or None)
        return out + self.on_other("turn_start", {k: v for k, v in chunk.items() if k != "kind"})

    def on_turn_resume(self, chunk: Mapping[str, Any]) -> list[Event]:
        out = self._begin(str(chunk.get("turn_id") or "") or None)
        return out + self.on_other("turn_resume", {k: v for k, v in chunk.items() if k != "kind"})

    def on_turn_end(self, chunk: Mapping[str, Any]) -> list[Event]:
        out = self._begin() + self.close_parts()
        stop = chunk.get("stop_reason")
        if stop == "error":
            return out + self.fail(turn_error(chunk))
        self.finish_reason = _FINISH.get(str(stop), "other")
        return out + self.on_other("turn_end", {k: v for k, v in chunk.items() if k != "kind"})

    def on_error(self, error: ErrorEvent) -> list[Event]:
        return [*self._begin(), {"type": "error", "errorText": error["message"]}]

    def close(self) -> list[Event]:
        """Close what is open and finish the message."""
        if self.done:
            return []
        out = self._begin() if not self.started else []
        if self.text_id is not None or self.reasoning_id is not None:
            out += self.close_parts()
        out.append({"type": "finish", "finishReason": self.finish_reason})
        self.done = True
        return out


def to_vercel_ai(chunks: AsyncIterable[Any] | Iterable[Any], *, message_id: str | None = None) -> AsyncIterator[Event]:
    r"""Turn an agent's chunk stream (or a durable session's log lines) into AI SDK UI message chunks.

    Each chunk is a JSON-ready dict as the AI SDK's ``uiMessageChunkSchema`` reads it; send it as an SSE frame
    ``data: <json>\\n\\n`` with ``Content-Type: text/event-stream`` and ``x-vercel-ai-ui-message-stream: v1``,
    and end the body with ``data: [DONE]\\n\\n``. The whole stream is one assistant message: ``start`` ...
    ``finish``, or ``error`` after closing what is open (generic text for errors that are not ai_utils' own).
    An approval interrupt is a ``tool-approval-request``. A sync iterable is read in worker threads.

    Example:
        ```python
        parts = to_vercel_ai(agent.astream("Hi", thread_id="chat-1", show_tool_calls=True))
        ```

    Args:
        chunks: e.g. ``agent.astream(..., show_tool_calls=True)`` or ``session.astream(cursor)``.
        message_id: the assistant message's id (generated when ``None``).

    Returns:
        An async iterator of UI message chunks.
    """
    return aevents(VercelEncoder(message_id=message_id), chunks)
