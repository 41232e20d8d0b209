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
- ``ActionEvent`` / ``FollowUpEvent`` — an action the model proposed (``!>``, validated by the agent's action
  registry) and a suggested next prompt (``?>``) of ``Agent(actions=...)``; the directive lines themselves
  never appear in the text chunks;
- ``ErrorEvent`` — the last line of an HTTP stream that failed mid-run;
- ``UserMessageEvent`` — a steer joined a durable session's running turn (SPEC §14);
- ``TurnStartEvent`` / ``TurnResumeEvent`` / ``TurnYieldEvent`` / ``TurnEndEvent`` / ``TurnRollbackEvent`` —
  a durable session's turn events.

A durable session's ``stream(cursor)`` yields ``StreamLine``s: ``{"cursor": n, "chunk": <chunk>}``.

An interrupt chunk is always the last chunk of a run. Answer it with
``agent.stream(thread_id=..., decision=...)`` or, for a batch, ``decisions=[...]`` in ``items`` order
or ``decisions={item_id: decision}`` (``ai_utils.approve_all(chunk)`` approves every item; one ``decision=``
for a batch is refused).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Literal, NotRequired, TypeAlias, TypeGuard, cast, get_args

from typing_extensions import TypedDict, TypeIs

__all__ = [
    "ActionEvent",
    "CustomEvent",
    "Decision",
    "ErrorEvent",
    "FollowUpEvent",
    "InterruptBatch",
    "InterruptEvent",
    "ModeEvent",
    "ReasoningEvent",
    "StreamChunk",
    "StreamLine",
    "SubagentEvent",
    "ToolEvent",
    "TurnEndEvent",
    "TurnResumeEvent",
    "TurnRollbackEvent",
    "TurnStartEvent",
    "TurnYieldEvent",
    "UserMessageEvent",
    "aiter_ndjson",
    "is_action_event",
    "is_custom_event",
    "is_error_event",
    "is_follow_up_event",
    "is_interrupt",
    "is_interrupt_batch",
    "is_mode_event",
    "is_reasoning_event",
    "is_subagent_event",
    "is_tool_event",
    "is_turn_event",
    "is_user_message",
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
        gate_id: the gate a governed loop waits at (``LoopRunner.invoke(decision=..., gate_id=...)``), as given
            in a plain interrupt's ``{"gate_id": ...}``.
    """

    kind: Literal["interrupt"]
    id: str
    question: str
    decisions: list[str]
    tool_name: str | None
    args: dict[str, Any] | None
    options: NotRequired[list[Any]]
    gate_id: NotRequired[str]


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


class ActionEvent(TypedDict):
    """An action the model proposed with a ``!> <id> <json>`` line, after the action registry's policy gate.

    Only ``Agent(actions=registry)`` emits it; it is shown, never executed: the caller decides.

    Attributes:
        kind: always ``"action"``.
        id: the canonical action id (the proposed id when the registry does not know it).
        status: the registry's verdict: ``"allowed"``, ``"requires_confirmation"`` or ``"blocked"``.
        params: the action's parameters (parsed by the action's schema when it has one).
    """

    kind: Literal["action"]
    id: str
    status: Literal["allowed", "requires_confirmation", "blocked"]
    params: dict[str, Any]


class FollowUpEvent(TypedDict):
    """A suggested next prompt the model offered with a ``?> <text>`` line (``Agent(actions=registry)``).

    Attributes:
        kind: always ``"follow_up"``.
        text: the suggestion.
    """

    kind: Literal["follow_up"]
    text: str


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
        code: a stable code when the error has one (e.g. ``"SESSION_BUSY"``, answered with HTTP 409).
    """

    kind: Literal["error"]
    type: str
    message: str
    error_id: NotRequired[str]
    code: NotRequired[str]


class UserMessageEvent(TypedDict):
    """A steer (``session.steer(text)``) joined the running turn as a user message.

    Attributes:
        kind: always ``"user_message"``.
        text: the steer's text.
        id: the steer's ``message_id`` (or the generated one).
    """

    kind: Literal["user_message"]
    text: str
    id: str


class TurnStartEvent(TypedDict):
    """A durable session's turn started.

    Attributes:
        kind: always ``"turn_start"``.
        turn_id: the turn.
        session_id: its session.
        message_id: the prompt's message id.
    """

    kind: Literal["turn_start"]
    turn_id: str
    session_id: str
    message_id: str


class TurnResumeEvent(TypedDict):
    """A turn continues: in a new process after the one running it stopped, or after it yielded.

    Attributes:
        kind: always ``"turn_resume"``.
        turn_id: the turn.
    """

    kind: Literal["turn_resume"]
    turn_id: str


class TurnEndEvent(TypedDict):
    """A durable session's turn ended.

    Attributes:
        kind: always ``"turn_end"``.
        turn_id: the turn.
        stop_reason: ``"end_turn"``, ``"interrupted"``, ``"max_model_turns"``, ``"max_output_tokens"``,
            ``"refused"``, ``"cancelled"``, ``"error"`` or ``"unknown"``.
        usage: the summed token usage of the turn's model calls.
        error: ``{"type", "message"}`` when ``stop_reason == "error"`` (``"TimeoutError"`` for a cancel by
            ``timeout``).
    """

    kind: Literal["turn_end"]
    turn_id: str
    stop_reason: str
    usage: dict[str, int]
    error: NotRequired[dict[str, str]]


class TurnYieldEvent(TypedDict):
    """A turn stopped at its ``yield_at`` before its next model call; the next prompt or ``resume()`` continues it.

    Attributes:
        kind: always ``"turn_yield"``.
        turn_id: the turn.
    """

    kind: Literal["turn_yield"]
    turn_id: str


class TurnRollbackEvent(TypedDict):
    """A turn cancelled by a prompt with ``on_busy="rollback"``: its messages were removed from the thread.

    Attributes:
        kind: always ``"turn_rollback"``.
        turn_id: the turn.
    """

    kind: Literal["turn_rollback"]
    turn_id: str


StreamChunk: TypeAlias = (
    str
    | InterruptEvent
    | InterruptBatch
    | ToolEvent
    | ModeEvent
    | ReasoningEvent
    | SubagentEvent
    | CustomEvent
    | ActionEvent
    | FollowUpEvent
    | ErrorEvent
    | UserMessageEvent
    | TurnStartEvent
    | TurnResumeEvent
    | TurnYieldEvent
    | TurnEndEvent
    | TurnRollbackEvent
)
"""One item of ``agent.stream(...)`` or one line of a ``StreamResponse`` body."""


class StreamLine(TypedDict):
    """One stored line of a durable session's stream log.

    Attributes:
        cursor: its position (1, 2, 3, ... per session, no gaps); reconnect with ``stream(cursor)``.
        chunk: the chunk.
    """

    cursor: int
    chunk: StreamChunk


Decision: TypeAlias = str | Mapping[str, Any]
"""An answer to an interrupt: ``"approve"``, ``"reject"``, ``{"type": "reject", "message": str}``,
``{"type": "edit", "args": {...}}`` or ``{"type": "respond", "message": str}``; for a plain ``interrupt()``
any JSON value is passed through as the resume value."""

DecisionType: TypeAlias = Literal["approve", "edit", "reject", "respond"]
"""The kinds of answer a tool approval takes: a string `Decision`, or the ``type`` of a mapping one."""

DECISION_TYPES: tuple[DecisionType, ...] = get_args(DecisionType)
"""Every `DecisionType` (the one definition of the set; the HITL config and the decision mapper check against it)."""


def _kind(chunk: object) -> object:
    return chunk.get("kind") if isinstance(chunk, dict) else None


def is_interrupt(chunk: object) -> TypeIs[InterruptEvent | InterruptBatch]:
    """Tell whether ``chunk`` is an interrupt (a single ``InterruptEvent`` or an ``InterruptBatch``).

    A `TypeIs`: after ``if is_interrupt(result): ...``, the ``else`` branch knows ``result`` is the answer.
    """
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


def is_action_event(chunk: object) -> TypeGuard[ActionEvent]:
    """Tell whether ``chunk`` is an ``ActionEvent`` (a validated ``!>`` action proposal)."""
    return _kind(chunk) == "action"


def is_follow_up_event(chunk: object) -> TypeGuard[FollowUpEvent]:
    """Tell whether ``chunk`` is a ``FollowUpEvent`` (a ``?>`` follow-up suggestion)."""
    return _kind(chunk) == "follow_up"


def is_error_event(chunk: object) -> TypeGuard[ErrorEvent]:
    """Tell whether ``chunk`` is an ``ErrorEvent`` (the stream failed)."""
    return _kind(chunk) == "error"


def is_user_message(chunk: object) -> TypeGuard[UserMessageEvent]:
    """Tell whether ``chunk`` is a ``UserMessageEvent`` (a steer joined the turn)."""
    return _kind(chunk) == "user_message"


def is_turn_event(
    chunk: object,
) -> TypeGuard[TurnStartEvent | TurnResumeEvent | TurnYieldEvent | TurnEndEvent | TurnRollbackEvent]:
    """Tell whether ``chunk`` is a durable session's turn event (start, resume, yield, end or rollback)."""
    return _kind(chunk) in ("turn_start", "turn_resume", "turn_yield", "turn_end", "turn_rollback")


def parse_ndjson_line(line: str | bytes) -> StreamChunk | StreamLine | None:
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
    if isinstance(value, dict) and isinstance(value.get("cursor"), int) and "chunk" in value:
        return cast(StreamLine, value)
    raise ValueError(f"Not a stream chunk: {text[:200]!r}. Each line must be a JSON string or an object with 'kind'.")


def iter_ndjson(lines: Iterable[str | bytes]) -> Iterator[StreamChunk | StreamLine]:
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


async def aiter_ndjson(lines: AsyncIterable[str | bytes]) -> AsyncIterator[StreamChunk | StreamLine]:
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
