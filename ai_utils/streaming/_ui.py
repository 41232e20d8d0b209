"""What the UI protocol encoders (AG-UI, Vercel AI) share: the chunk dispatch, open parts, SSE frames, drivers.

An encoder is sans-IO (after pydantic-ai's ``UIEventStream``): ``feed(chunk)`` returns the protocol events for
one chunk, ``fail(error_event)`` closes what is open and returns the one terminal error event, ``close()``
closes what is open and ends the run. Events are plain camelCase dicts with absent fields left out, so they
are cheap to build and to encode; ``tests/streaming`` validates them against the protocols' own models.

A durable session's lines (``{"cursor", "chunk"}``) are fed with their cursor: it names the message ids a
line opens (``msg-<cursor>``), so a replay from the same cursor gives the client the same ids, and it is the
SSE ``id:`` of the line's last event, so a reconnect (``Last-Event-ID`` / ``?cursor=``) resumes after it.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, TypeAlias

import anyio

from ai_utils.client import ErrorEvent, InterruptEvent, ToolEvent
from ai_utils.streaming._closing import Closing
from ai_utils.streaming._encode import PASS_THROUGH, ErrorHook, error_line, error_status, failure_event, json_value

_text_json: Callable[[Any], bytes]
try:
    from orjson import dumps as _text_json
except ImportError:  # pragma: no cover - orjson comes with langsmith
    _text_json = json_value

__all__ = ["Event", "UIEncoder", "fresh_id", "aencode_events", "aevents", "is_stream_line", "sse_frame", "turn_error"]

# Ids an encoder makes up (message ids, a run id nobody gave) need only be unique: a random prefix per process and
# a counter cost nothing per response, where a uuid4 per id costs a system call each.
_PROCESS = [uuid.uuid4().hex[:10]]
_COUNTER = itertools.count(1)
os.register_at_fork(after_in_child=lambda: _PROCESS.__setitem__(0, uuid.uuid4().hex[:10]))


def fresh_id(kind: str = "msg") -> str:
    """An id unique across processes and responses, e.g. ``msg-3f2a9c01b7-42``."""
    return f"{kind}-{_PROCESS[0]}-{next(_COUNTER)}"


Event: TypeAlias = dict[str, Any]
"""One protocol event: a JSON object in the protocol's own (camelCase) field names."""


def is_stream_line(item: object) -> bool:
    """Whether ``item`` is a durable session's log line (``{"cursor", "chunk"}``) rather than a bare chunk."""
    return type(item) is dict and "cursor" in item and "chunk" in item and "kind" not in item


def sse_frame(event: Event | str, cursor: int | None = None) -> bytes:
    """One Server-Sent Events frame: ``data: <json>`` (and ``id: <cursor>``), then a blank line.

    Args:
        event: the event (a JSON object), or a literal data text such as ``"[DONE]"``.
        cursor: the SSE event id, when the event ends a stored line.
    """
    data = event.encode() if isinstance(event, str) else json_value(event)
    if cursor is None:
        return b"data: " + data + b"\n\n"
    return b"id: %d\ndata: " % cursor + data + b"\n\n"


def turn_error(chunk: Mapping[str, Any]) -> ErrorEvent:
    """The error object for a ``turn_end`` line whose turn failed.

    The log stores the exception's own text; only ai_utils' own errors (whose messages name the bad value and
    the fix) pass it on, any other failure (a driver error may hold SQL, paths or data) reads generically.
    """
    from ai_utils import exceptions

    stored = chunk.get("error")
    error: Mapping[str, Any] = stored if isinstance(stored, Mapping) else {}
    name = str(error.get("type") or "Error")
    known = getattr(exceptions, name, None)
    if isinstance(known, type) and issubclass(known, exceptions.AiUtilsError) and error.get("message"):
        return {"kind": "error", "type": name, "message": str(error["message"])}
    return {"kind": "error", "type": name, "message": f"The turn failed ({name}); the server's log has the details."}


class UIEncoder:
    """Chunks in, protocol events out: the dispatch and the bookkeeping both protocols need.

    Subclasses implement the ``on_*`` hooks; the base tracks the open text and reasoning parts, the tool
    calls shown as started and not yet ended (to tie an approval to its call), and whether the terminal event
    was sent (`done`: later chunks give no events). While a text part is open, ``delta_prefix`` is its text
    event's SSE frame up to the delta's value: a token then costs one JSON string encoding (`aencode_events`),
    as an NDJSON line does.
    """

    # Immutable state starts as class attributes: an encoder is built per response, and every attribute set in
    # ``__init__`` is paid again for each one.
    delta_prefix: bytes | None = None
    cursor: int | None = None
    done = False
    text_id: str | None = None
    reasoning_id: str | None = None
    _prefix = ""  # the message ids' random prefix, made by the first `new_id` that needs it
    _count = 0

    def __init__(self) -> None:
        self.open_tools: dict[str, ToolEvent] = {}

    def new_id(self) -> str:
        """A message id unique in the thread: from the line's cursor in a session log, else a random prefix."""
        self._count += 1
        if self.cursor is not None:
            return f"msg-{self.cursor}" if self._count == 1 else f"msg-{self.cursor}-{self._count}"
        if not self._prefix:
            self._prefix = f"{fresh_id()}-"
        return f"{self._prefix}{self._count}"

    def feed(self, chunk: Any, cursor: int | None = None) -> list[Event]:
        """The events for one chunk (``cursor``: its position in a session log)."""
        if self.done:
            return []
        if cursor is not None:
            self.cursor, self._count = cursor, 0
        if isinstance(chunk, str):  # LangChain's text is a str subclass
            return self.on_text(chunk) if chunk else []
        if type(chunk) is not dict and not isinstance(chunk, Mapping):  # a dict skips the ABC's isinstance
            return self.on_other("custom", {"data": chunk})
        kind = chunk.get("kind")
        if kind == "tool":
            return self._tool(chunk)
        if kind == "reasoning":
            return self.on_reasoning(str(chunk.get("text", "")))
        if kind == "interrupt":
            items = chunk.get("items")
            return self.on_interrupt(list(items) if isinstance(items, list) else [chunk])  # type: ignore[list-item]
        if kind == "error":
            return self.fail(chunk)  # type: ignore[arg-type]
        if kind == "turn_start":
            return self.on_turn_start(chunk)
        if kind == "turn_resume":
            return self.on_turn_resume(chunk)
        if kind == "turn_end":
            return self.on_turn_end(chunk)
        if kind == "user_message":
            return self.on_user_message(chunk)
        rest = {k: v for k, v in chunk.items() if k != "kind"}
        return self.on_other(kind if isinstance(kind, str) and kind else "custom", rest)

    def _tool(self, chunk: Mapping[str, Any]) -> list[Event]:
        call_id = str(chunk.get("id", ""))
        if chunk.get("phase") == "start":
            self.open_tools[call_id] = chunk  # type: ignore[assignment]
            return self.on_tool_start(call_id, str(chunk.get("tool_name", "")), chunk.get("args") or {})
        started = self.open_tools.pop(call_id, None)
        return self.on_tool_end(call_id, str(chunk.get("tool_name", "")), chunk, started is not None)

    def tool_call_of(self, item: InterruptEvent) -> str | None:
        """The id of the started call an approval item is about (same tool and arguments), once per call."""
        for call_id, start in self.open_tools.items():
            if start.get("tool_name") == item.get("tool_name") and (start.get("args") or {}) == (
                item.get("args") or {}
            ):
                del self.open_tools[call_id]
                return call_id
        return None

    def close_parts(self) -> list[Event]:
        """Close the open text and reasoning parts."""
        out = self.on_text_end() if self.text_id is not None else []
        if self.reasoning_id is not None:
            out += self.on_reasoning_end()
        return out

    def fail(self, error: ErrorEvent) -> list[Event]:
        """Close what is open, then the one terminal error event; later chunks give nothing."""
        if self.done:
            return []
        out = self.close_parts() + self.on_error(error)
        self.done = True
        return out

    # --- hooks ------------------------------------------------------------------------------------------

    def on_text(self, text: str) -> list[Event]:
        raise NotImplementedError

    def on_text_end(self) -> list[Event]:
        raise NotImplementedError

    def on_reasoning(self, text: str) -> list[Event]:
        raise NotImplementedError

    def on_reasoning_end(self) -> list[Event]:
        raise NotImplementedError

    def on_tool_start(self, call_id: str, name: str, args: Any) -> list[Event]:
        raise NotImplementedError

    def on_tool_end(self, call_id: str, name: str, chunk: Mapping[str, Any], started: bool) -> list[Event]:
        raise NotImplementedError

    def on_interrupt(self, items: list[InterruptEvent]) -> list[Event]:
        raise NotImplementedError

    def on_other(self, kind: str, data: dict[str, Any]) -> list[Event]:
        raise NotImplementedError

    def on_turn_start(self, chunk: Mapping[str, Any]) -> list[Event]:
        raise NotImplementedError

    def on_turn_resume(self, chunk: Mapping[str, Any]) -> list[Event]:
        raise NotImplementedError

    def on_turn_end(self, chunk: Mapping[str, Any]) -> list[Event]:
        raise NotImplementedError

    def on_user_message(self, chunk: Mapping[str, Any]) -> list[Event]:
        raise NotImplementedError

    def on_error(self, error: ErrorEvent) -> list[Event]:
        raise NotImplementedError

    def close(self) -> list[Event]:
        """Close what is open and end the stream (no events once `done`)."""
        raise NotImplementedError


async def _aiter(source: AsyncIterable[Any] | Iterable[Any]) -> AsyncIterator[Any]:
    """An async iterator over ``source``; a sync one is advanced in worker threads, never on the event loop."""
    if isinstance(source, AsyncIterable):
        async for item in source:
            yield item
        return
    iterator: Iterator[Any] = iter(source)
    done = object()
    with Closing(iterator):
        while (item := await anyio.to_thread.run_sync(next, iterator, done)) is not done:
            yield item


async def aevents(encoder: UIEncoder, source: AsyncIterable[Any] | Iterable[Any]) -> AsyncIterator[Event]:
    """The events of a whole chunk stream (bare chunks or session lines); a failure ends it with the error event."""
    iterator = _aiter(source)
    async with Closing(iterator):
        try:
            async for item in iterator:
                if is_stream_line(item):
                    events = encoder.feed(item["chunk"], item["cursor"])
                else:
                    events = encoder.feed(item)
                for event in events:
                    yield event
                if encoder.done:
                    return
            events = encoder.close()
        except BaseException as exc:
            if isinstance(exc, PASS_THROUGH):
                raise
            events = encoder.fail(failure_event(exc))
        for event in events:
            yield event


def _frames(events: list[Event], cursor: int | None) -> bytes:
    """The SSE frames of one chunk's events; the last one carries the chunk's cursor as its ``id``."""
    try:  # orjson without options first: what it refuses (a TypeError) takes the NDJSON lines' fallbacks
        data = list(map(_text_json, events))  # no comprehension frame: orjson called straight from C
    except TypeError:
        data = list(map(json_value, events))
    # One join between the frames and one `%` around them: `+` per frame would copy the growing body again.
    if cursor is None:
        return b"data: %b\n\n" % b"\n\ndata: ".join(data) if data else b""
    last = data.pop()
    if data:
        return b"data: %b\n\nid: %d\ndata: %b\n\n" % (b"\n\ndata: ".join(data), cursor, last)
    return b"id: %d\ndata: %b\n\n" % (cursor, last)


async def aencode_events(
    encoder: UIEncoder,
    lines: AsyncIterable[Any],
    *,
    expose_errors: bool = False,
    on_error: ErrorHook | None = None,
    last: bytes = b"",
) -> AsyncIterator[bytes]:
    """SSE frames of a chunk (or session line) stream, for a streaming response.

    A failure before the first frame is one `ErrorLine` (the JSON error object; the response sends it with
    its status as ``application/json``); after it, the encoder's terminal error event. ``last`` (e.g.
    ``data: [DONE]``) ends every stream that got past its first frame.
    """
    iterator = aiter(lines)
    sent = False
    # While a text part is open: its delta frame's two ends (the encoder's delta_prefix, read again after every
    # feed, the only thing that changes it, and the closing brace), so a token's frame is one join with the
    # token's JSON string as the separator: no format string to parse, no tuple per token (callgrind: ~610
    # instructions for the join against ~715 for a `%` into a pre-built frame, ~900 for the orjson call).
    ends: tuple[bytes, bytes] | None = None
    prefix: bytes | None = None
    async with Closing(iterator):
        try:
            async for item in iterator:
                if ends is not None and isinstance(item, str):  # the hot path: one more token of open text
                    try:
                        text = _text_json(item)
                    except TypeError:  # what orjson refuses takes the NDJSON lines' fallback
                        text = json_value(item)
                    yield text.join(ends)
                    continue
                if type(item) is dict and "cursor" in item and "chunk" in item and "kind" not in item:  # is_stream_line
                    cursor: int | None = item["cursor"]
                    events = encoder.feed(item["chunk"], cursor)
                else:
                    cursor, events = None, encoder.feed(item)
                if encoder.delta_prefix is not prefix:
                    prefix = encoder.delta_prefix
                    ends = (prefix, b"}\n\n") if prefix else None
                if events:
                    sent = True
                    yield _frames(events, cursor)  # one body part per chunk, however many events it made
                if encoder.done:
                    break
            else:
                events = encoder.close()
                sent = sent or bool(events)
                if events:
                    yield _frames(events, None)
        except BaseException as exc:
            if isinstance(exc, PASS_THROUGH):
                raise
            error = failure_event(exc, expose=expose_errors, on_error=on_error)
            if not sent:
                yield error_line(error, error_status(exc))
                return
            yield _frames(encoder.fail(error), None)
        if last:
            yield last
