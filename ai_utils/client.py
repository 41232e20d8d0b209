"""The stream chunk protocol for clients: chunk types, type guards and an NDJSON line reader.

Imports nothing from LangChain, LangGraph or pydantic, so a frontend service, a CLI or a test can read
an agent's stream (``agent.stream(...)`` in process, or the ``application/x-ndjson`` body of
``StreamResponse`` over HTTP) without pulling in the agent stack. Only the standard library and
``typing_extensions`` (whose ``TypedDict`` pydantic accepts on Python 3.11, e.g. in FastAPI models).

A chunk is one of:

- ``str`` — text token(s) of the main agent's answer;
- ``InterruptEvent`` — the run paused for a human decision on one tool call (or a plain ``interrupt()``);
- ``InterruptBatch`` — several decisions are pending at once; ``items`` holds one ``InterruptEvent`` each;
- ``ToolEvent`` — a tool call started / ended (only with ``show_tool_calls=True``);
- ``ModeEvent`` — the mode a turn was routed to, first chunk of the turn (``Agent(modes=...)`` with
  ``show_tool_calls=True``);
- ``ReasoningEvent`` — reasoning text of the model (only with ``show_reasoning=True``);
- ``SubagentEvent`` — text of a subagent or nested graph (only with ``show_subagents=True``);
- ``CustomEvent`` — data a node or tool wrote with LangGraph's ``get_stream_writer()``;
- ``ErrorEvent`` — the last line of an HTTP stream that failed mid-run.

An interrupt chunk is always the last chunk of a run. Answer it with
``agent.stream(thread_id=..., decision=...)`` or, for a batch, ``decisions=[...]`` in ``items`` order
or ``decisions={item_id: decision}``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Literal, NotRequired, TypeAlias, TypeGuard, cast

from typing_extensions import TypedDict

__all__ = [
    "CustomEvent",
    "Decision",
    "ErrorEvent",
    "InterruptBatch",
    "InterruptEvent",
    "ModeEvent",
    "ReasoningEvent",
    "StreamChunk",
    "SubagentEvent",
    "ToolEvent",
    "aiter_ndjson",
    "is_custom_event",
    "is_error_event",
    "is_interrupt",
    "is_interrupt_batch",
    "is_mode_event",
    "is_reasoning_event",
    "is_subagent_event",
    "is_tool_event",
    "iter_ndjson",
    "parse_ndjson_line",
]


class InterruptEvent(TypedDict):
    """The run paused: a human must decide about one tool call (or answer a plain ``interrupt()``).

    Attributes:
        kind: always ``"interrupt"``.
        id: answer key: the LangGraph interrupt id, or ``"<interrupt id>:<index>"`` for one tool call
            of a batched human-in-the-loop request.
        question: text shown to the human (the tool's configured question/description).
        decisions: allowed answers, e.g. ``["approve", "edit", "reject"]``.
        tool_name: the tool waiting for approval; ``None`` for a plain ``interrupt()``.
        args: the tool call's arguments; ``None`` for a plain ``interrupt()``.
        options: the choices of a plain ``interrupt({"question": ..., "options": [...]})``, as given.
    """

    kind: Literal["interrupt"]
    id: str
    question: str
    decisions: list[str]
    tool_name: str | None
    args: dict[str, Any] | None
    options: NotRequired[list[Any]]


class InterruptBatch(TypedDict):
    """Several decisions pending at once (parallel gated tool calls or subagents).

    Attributes:
        kind: always ``"interrupt"``.
        items: one ``InterruptEvent`` per pending decision, in the order ``decisions=[...]`` expects.
    """

    kind: Literal["interrupt"]
    items: list[InterruptEvent]


class ToolEvent(TypedDict):
    """A tool call of the main agent started (``phase="start"``) or ended (``phase="end"``).

    Attributes:
        kind: always ``"tool"``.
        phase: ``"start"`` (with ``args``) or ``"end"`` (with ``output`` and ``status``).
        tool_name: the tool's name.
        id: the tool call id; start and end of one call share it.
        args: the arguments the model chose (start only).
        output: the tool's result as text (end only).
        status: ``"success"`` or ``"error"`` (end only).
    """

    kind: Literal["tool"]
    phase: Literal["start", "end"]
    tool_name: str
    id: str
    args: NotRequired[dict[str, Any]]
    output: NotRequired[str]
    status: NotRequired[Literal["success", "error"]]


class ModeEvent(TypedDict):
    """The mode the turn was routed to (``Agent(modes=router)``); the turn's first chunk.

    Attributes:
        kind: always ``"mode"``.
        mode: the mode's name, e.g. ``"assessment"``.
        tools: the tools the model is offered in this mode.
    """

    kind: Literal["mode"]
    mode: str
    tools: list[str]


class ReasoningEvent(TypedDict):
    """Reasoning text of the main agent's model.

    Attributes:
        kind: always ``"reasoning"``.
        text: a reasoning delta.
    """

    kind: Literal["reasoning"]
    text: str


class SubagentEvent(TypedDict):
    """Text produced inside a subagent or nested graph.

    Attributes:
        kind: always ``"subagent"``.
        text: a text delta of the subagent's model.
        namespace: the LangGraph namespace of the subgraph, e.g. ``["tools:3f27…"]``.
        name: the subagent's name, when the agent has one.
    """

    kind: Literal["subagent"]
    text: str
    namespace: list[str]
    name: NotRequired[str]


class CustomEvent(TypedDict):
    """Data a graph node or tool wrote with LangGraph's ``get_stream_writer()`` (``stream_mode="custom"``).

    Attributes:
        kind: always ``"custom"``.
        data: the value passed to the writer, unchanged.
        namespace: the subgraph's namespace, when a subgraph (e.g. a subagent) wrote it.
    """

    kind: Literal["custom"]
    data: Any
    namespace: NotRequired[list[str]]


class ErrorEvent(TypedDict):
    """The stream failed; this is its last line.

    Over HTTP (``StreamResponse``) a failure before the first line is the whole body instead, as JSON with
    status 400 (a `UserError`) or 500.

    Attributes:
        kind: always ``"error"``.
        type: the exception class name, e.g. ``"ProviderError"``.
        message: the exception's message for ai_utils' own errors; for any other error a generic text
            (unless the server exposes errors).
        error_id: the id the server logged the failure under (for errors other than a ``UserError``).
    """

    kind: Literal["error"]
    type: str
    message: str
    error_id: NotRequired[str]


StreamChunk: TypeAlias = (
    str
    | InterruptEvent
    | InterruptBatch
    | ToolEvent
    | ModeEvent
    | ReasoningEvent
    | SubagentEvent
    | CustomEvent
    | ErrorEvent
)
"""One item of ``agent.stream(...)`` or one line of a ``StreamResponse`` body."""

Decision: TypeAlias = str | Mapping[str, Any]
"""An answer to an interrupt: ``"approve"``, ``"reject"``, ``{"type": "reject", "message": str}``,
``{"type": "edit", "args": {...}}`` or ``{"type": "respond", "message": str}``; for a plain ``interrupt()``
any JSON value is passed through as the resume value."""


def _kind(chunk: object) -> object:
    return chunk.get("kind") if isinstance(chunk, dict) else None


def is_interrupt(chunk: object) -> TypeGuard[InterruptEvent | InterruptBatch]:
    """Tell whether ``chunk`` is an interrupt (a single ``InterruptEvent`` or an ``InterruptBatch``)."""
    return _kind(chunk) == "interrupt"


def is_interrupt_batch(chunk: object) -> TypeGuard[InterruptBatch]:
    """Tell whether ``chunk`` is an ``InterruptBatch`` (several pending decisions)."""
    return isinstance(chunk, dict) and chunk.get("kind") == "interrupt" and "items" in chunk


def is_tool_event(chunk: object) -> TypeGuard[ToolEvent]:
    """Tell whether ``chunk`` is a ``ToolEvent``."""
    return _kind(chunk) == "tool"


def is_mode_event(chunk: object) -> TypeGuard[ModeEvent]:
    """Tell whether ``chunk`` is a ``ModeEvent`` (the turn's mode)."""
    return _kind(chunk) == "mode"


def is_reasoning_event(chunk: object) -> TypeGuard[ReasoningEvent]:
    """Tell whether ``chunk`` is a ``ReasoningEvent``."""
    return _kind(chunk) == "reasoning"


def is_subagent_event(chunk: object) -> TypeGuard[SubagentEvent]:
    """Tell whether ``chunk`` is a ``SubagentEvent``."""
    return _kind(chunk) == "subagent"


def is_custom_event(chunk: object) -> TypeGuard[CustomEvent]:
    """Tell whether ``chunk`` is a ``CustomEvent`` (``get_stream_writer()`` data)."""
    return _kind(chunk) == "custom"


def is_error_event(chunk: object) -> TypeGuard[ErrorEvent]:
    """Tell whether ``chunk`` is an ``ErrorEvent`` (the stream failed)."""
    return _kind(chunk) == "error"


def parse_ndjson_line(line: str | bytes) -> StreamChunk | None:
    """Parse one line of an ``application/x-ndjson`` agent stream.

    Args:
        line: one line, with or without its trailing newline.

    Returns:
        The chunk, or ``None`` for a blank line.

    Raises:
        ValueError: when the line is not a JSON string or a JSON object with a ``kind``.
    """
    text = line.decode("utf-8") if isinstance(line, bytes) else line
    if not text.strip():
        return None
    value = json.loads(text)
    if isinstance(value, str) or (isinstance(value, dict) and isinstance(value.get("kind"), str)):
        return cast(StreamChunk, value)
    raise ValueError(f"Not a stream chunk: {text[:200]!r}. Each line must be a JSON string or an object with 'kind'.")


def iter_ndjson(lines: Iterable[str | bytes]) -> Iterator[StreamChunk]:
    """Read chunks from NDJSON lines, e.g. ``httpx.Response.iter_lines()``; blank lines are skipped.

    Args:
        lines: the body's lines.

    Yields:
        One chunk per non-blank line.
    """
    for line in lines:
        chunk = parse_ndjson_line(line)
        if chunk is not None:
            yield chunk


async def aiter_ndjson(lines: AsyncIterable[str | bytes]) -> AsyncIterator[StreamChunk]:
    """Async twin of ``iter_ndjson``, e.g. for ``httpx.Response.aiter_lines()``.

    Args:
        lines: the body's lines.

    Yields:
        One chunk per non-blank line.
    """
    async for line in lines:
        chunk = parse_ndjson_line(line)
        if chunk is not None:
            yield chunk
