"""AG-UI: stream chunks -> AG-UI protocol events (``ag-ui-protocol``'s event types), and approvals back.

Mapping (one run per agent stream, one run per turn of a durable session's log):

- text -> ``TEXT_MESSAGE_START`` / ``_CONTENT`` / ``_END`` under one message id per run of text;
- reasoning -> ``REASONING_START``, ``REASONING_MESSAGE_START`` / ``_CONTENT`` / ``_END``, ``REASONING_END``;
- tool start -> ``TOOL_CALL_START`` + ``TOOL_CALL_ARGS`` (the arguments as JSON) + ``TOOL_CALL_END``;
  tool end -> ``TOOL_CALL_RESULT`` (``metadata.status`` ``"error"`` when the tool failed);
- a steer that joined the turn -> a ``TEXT_MESSAGE_*`` with role ``user``;
- an interrupt -> the run's ``RUN_FINISHED`` carries ``outcome: {"type": "interrupt", "interrupts": [...]}``;
  each interrupt's ``id`` is the item id a ``resume`` entry answers, a tool approval advertises
  `ApprovalPayload`'s JSON schema as ``responseSchema``;
- a cancelled turn -> ``RUN_FINISHED`` with ``outcome: {"type": "cancelled"}``;
- a failure (or a turn that ended in error) -> ``RUN_ERROR``, after closing what is open; nothing follows it;
- every other chunk kind (``custom``, ``mode``, ``subagent``, ``turn_resume``, kinds added later) ->
  ``CUSTOM`` with ``name`` = the kind and ``value`` = the chunk's other fields.

The event dicts are built by hand instead of through ``ag_ui.core``'s pydantic models: building and dumping
a model per token costs several times the whole NDJSON line. The type names come from the package, and the
tests validate every emitted event against its models.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from ai_utils._optional import missing_extra
from ai_utils.client import Decision, ErrorEvent, InterruptEvent
from ai_utils.streaming._encode import json_value
from ai_utils.streaming._ui import Event, UIEncoder, aevents, fresh_id, turn_error
from ai_utils.streaming._ui import _text_json as _dumps

try:
    from ag_ui.core import EventType
except ImportError as _import_error:
    raise missing_extra("ag-ui-protocol", extra="server", feature="the AG-UI stream") from _import_error

__all__ = ["AGUI_VERSION", "AgUiEncoder", "ApprovalPayload", "approval_decision", "to_ag_ui"]

AGUI_VERSION = "1.0"
"""The AG-UI protocol version the events follow (sent as ``RUN_STARTED.protocolVersion``)."""

_RUN_STARTED = EventType.RUN_STARTED.value
_RUN_FINISHED = EventType.RUN_FINISHED.value
_RUN_ERROR = EventType.RUN_ERROR.value
_TEXT_START = EventType.TEXT_MESSAGE_START.value
_TEXT_CONTENT = EventType.TEXT_MESSAGE_CONTENT.value
_TEXT_END = EventType.TEXT_MESSAGE_END.value
_TOOL_START = EventType.TOOL_CALL_START.value
_TOOL_ARGS = EventType.TOOL_CALL_ARGS.value
_TOOL_END = EventType.TOOL_CALL_END.value
_TOOL_RESULT = EventType.TOOL_CALL_RESULT.value
_REASONING_START = EventType.REASONING_START.value
_REASONING_MESSAGE_START = EventType.REASONING_MESSAGE_START.value
_REASONING_CONTENT = EventType.REASONING_MESSAGE_CONTENT.value
_REASONING_MESSAGE_END = EventType.REASONING_MESSAGE_END.value
_REASONING_END = EventType.REASONING_END.value
_CUSTOM = EventType.CUSTOM.value
# The SSE frame of a TEXT_MESSAGE_CONTENT event up to its delta (keys in the order the dict form has them).
_DELTA_PREFIX = b'data: {"type":"' + _TEXT_CONTENT.encode() + b'","messageId":%s,"delta":'


class ApprovalPayload(BaseModel):
    """The answer to a tool approval, as a ``resume`` entry's ``payload`` (AG-UI) carries it.

    Deny by default: only ``approved: true`` (a JSON boolean, nothing truthy) approves.

    Attributes:
        approved: run the call (``true``) or refuse it.
        reason: why it was refused; the model reads it.
        edited_args: (``editedArgs``) run the call with these arguments instead.
    """

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        title="ToolApproval",
        json_schema_extra={"description": 'Approve with {"approved": true}; anything else refuses the call.'},
    )

    approved: StrictBool
    reason: str | None = None
    edited_args: dict[str, Any] | None = Field(default=None, alias="editedArgs")


APPROVAL_SCHEMA: dict[str, Any] = ApprovalPayload.model_json_schema(by_alias=True)


def approval_decision(payload: ApprovalPayload) -> Decision:
    """The `Decision` an approval payload stands for: approve, edit (approve with ``editedArgs``) or reject."""
    if not payload.approved:
        return {"type": "reject"} if payload.reason is None else {"type": "reject", "message": payload.reason}
    if payload.edited_args is not None:
        return {"type": "edit", "args": payload.edited_args}
    return "approve"


def _json_text(value: Any) -> str:
    """``value`` as compact JSON text (tool arguments, a tool's output), with the NDJSON lines' fallbacks."""
    try:
        return _dumps(value).decode()
    except TypeError:  # what plain orjson refuses
        return json_value(value).decode()


def _usage(usage: object) -> list[dict[str, int]] | None:
    if not usage or not isinstance(usage, Mapping):  # no usage (most runs) skips the ABC check
        return None
    names = {"input_tokens": "inputTokens", "output_tokens": "outputTokens", "total_tokens": "totalTokens"}
    entry = {names[k]: int(v) for k, v in usage.items() if k in names and isinstance(v, int) and v >= 0}
    return [entry] if entry else None


class AgUiEncoder(UIEncoder):
    """Stream chunks (or a session's log lines) -> AG-UI events; one instance per response.

    Args:
        thread_id: the AG-UI thread (the agent's ``thread_id`` or the session id); generated when ``None``.
        run_id: the run of an agent stream (a session's turns are runs named by their turn id).
        session: the chunks are a durable session's log: runs follow its turns, and a stream with no turn
            events opens no run of its own.
    """

    run_open = False
    ran = False
    message_id: str | None = None  # the assistant message the current step's tool calls belong to

    def __init__(self, *, thread_id: str | None = None, run_id: str | None = None, session: bool = False) -> None:
        super().__init__()
        self.thread_id = thread_id or fresh_id("thread")
        self.run_id = run_id or fresh_id("run")
        self.session = session
        self.interrupts: list[dict[str, Any]] = []

    def _start_run(self, run_id: str | None = None) -> list[Event]:
        self.run_open = self.ran = True
        if run_id is not None:
            self.run_id = run_id
        self.interrupts = []
        self.message_id = None
        return [
            {"type": _RUN_STARTED, "threadId": self.thread_id, "runId": self.run_id, "protocolVersion": AGUI_VERSION}
        ]

    def _in_run(self) -> list[Event]:
        return [] if self.run_open else self._start_run(None if not self.ran else fresh_id("run"))

    def on_text(self, text: str) -> list[Event]:
        if self.text_id is not None:
            return [{"type": _TEXT_CONTENT, "messageId": self.text_id, "delta": text}]
        out = [] if self.run_open else self._in_run()  # the checks inline: no call when the run is open
        if self.reasoning_id is not None:
            out += self.on_reasoning_end()
        self.text_id = self.message_id = self.new_id()
        # The id is our own str (a counter or a cursor): plain orjson writes it, no fallback call needed.
        self.delta_prefix = _DELTA_PREFIX % _dumps(self.text_id)
        out.append({"type": _TEXT_START, "messageId": self.text_id, "role": "assistant"})
        out.append({"type": _TEXT_CONTENT, "messageId": self.text_id, "delta": text})
        return out

    def on_text_end(self) -> list[Event]:
        event = {"type": _TEXT_END, "messageId": self.text_id}
        self.text_id = self.delta_prefix = None
        return [event]

    def on_reasoning(self, text: str) -> list[Event]:
        if not text:
            return []
        out = self._in_run()
        if self.reasoning_id is None:
            if self.text_id is not None:
                out += self.on_text_end()
            self.reasoning_id = rid = self.new_id()
            out.append({"type": _REASONING_START, "messageId": rid})
            out.append({"type": _REASONING_MESSAGE_START, "messageId": rid, "role": "reasoning"})
        out.append({"type": _REASONING_CONTENT, "messageId": self.reasoning_id, "delta": text})
        return out

    def on_reasoning_end(self) -> list[Event]:
        rid, self.reasoning_id = self.reasoning_id, None
        return [{"type": _REASONING_MESSAGE_END, "messageId": rid}, {"type": _REASONING_END, "messageId": rid}]

    def on_tool_start(self, call_id: str, name: str, args: Any) -> list[Event]:
        out = [] if self.run_open else self._in_run()
        if self.text_id is not None or self.reasoning_id is not None:
            out += self.close_parts()
        start: Event = {"type": _TOOL_START, "toolCallId": call_id, "toolCallName": name}
        if self.message_id is not None:
            start["parentMessageId"] = self.message_id
        out.append(start)
        out.append({"type": _TOOL_ARGS, "toolCallId": call_id, "delta": _json_text(args)})
        out.append({"type": _TOOL_END, "toolCallId": call_id})
        return out

    def on_tool_end(self, call_id: str, name: str, chunk: Mapping[str, Any], started: bool) -> list[Event]:
        out = [] if self.run_open else self._in_run()
        if self.text_id is not None or self.reasoning_id is not None:
            out += self.close_parts()
        output = chunk.get("output")
        event: Event = {
            "type": _TOOL_RESULT,
            "messageId": self.new_id(),
            "toolCallId": call_id,
            "content": output if isinstance(output, str) else _json_text(output),
            "role": "tool",
        }
        if chunk.get("status") == "error":
            event["metadata"] = {"status": "error"}
        out.append(event)
        self.message_id = None  # the model's next words are a new assistant message
        return out

    def _interrupt(self, item: InterruptEvent) -> dict[str, Any]:
        interrupt: dict[str, Any] = {"id": item["id"], "reason": "tool_approval" if item.get("tool_name") else "input"}
        if item.get("question"):
            interrupt["message"] = item["question"]
        metadata: dict[str, Any] = {"decisions": item.get("decisions", [])}
        if item.get("tool_name"):
            call_id = self.tool_call_of(item)
            if call_id is not None:
                interrupt["toolCallId"] = call_id
            interrupt["responseSchema"] = APPROVAL_SCHEMA
            metadata.update(toolName=item["tool_name"], args=item.get("args") or {})
        if "options" in item:
            metadata["options"] = item["options"]
        interrupt["metadata"] = metadata
        return interrupt

    def on_interrupt(self, items: list[InterruptEvent]) -> list[Event]:
        out = self._in_run() + self.close_parts()
        self.interrupts += [self._interrupt(item) for item in items]
        return out

    def on_other(self, kind: str, data: dict[str, Any]) -> list[Event]:
        return [*self._in_run(), {"type": _CUSTOM, "name": kind, "value": data}]

    def on_user_message(self, chunk: Mapping[str, Any]) -> list[Event]:
        out = self._in_run() + self.close_parts()
        mid = str(chunk.get("id") or self.new_id())
        out.append({"type": _TEXT_START, "messageId": mid, "role": "user"})
        out.append({"type": _TEXT_CONTENT, "messageId": mid, "delta": str(chunk.get("text", ""))})
        out.append({"type": _TEXT_END, "messageId": mid})
        self.message_id = None
        return out

    def _finish(self, outcome: dict[str, Any] | None = None, usage: object = None) -> list[Event]:
        out = self.close_parts() if self.text_id is not None or self.reasoning_id is not None else []
        if self.interrupts:
            outcome = {"type": "interrupt", "interrupts": self.interrupts}
        event: Event = {"type": _RUN_FINISHED, "threadId": self.thread_id, "runId": self.run_id}
        event["outcome"] = outcome or {"type": "success"}
        entries = _usage(usage) if usage else None
        if entries:
            event["usage"] = entries
        out.append(event)
        self.run_open = False
        self.interrupts = []
        return out

    def on_turn_start(self, chunk: Mapping[str, Any]) -> list[Event]:
        out = self._finish() if self.run_open else []
        return out + self._start_run(str(chunk.get("turn_id") or fresh_id("run")))

    def on_turn_resume(self, chunk: Mapping[str, Any]) -> list[Event]:
        out = [] if self.run_open else self._start_run(str(chunk.get("turn_id") or fresh_id("run")))
        return out + self.on_other("turn_resume", {k: v for k, v in chunk.items() if k != "kind"})

    def on_turn_end(self, chunk: Mapping[str, Any]) -> list[Event]:
        out = self._in_run()
        stop = chunk.get("stop_reason")
        if stop == "error":
            return out + self.fail(turn_error(chunk))
        return out + self._finish({"type": "cancelled"} if stop == "cancelled" else None, chunk.get("usage"))

    def on_error(self, error: ErrorEvent) -> list[Event]:
        self.run_open = False
        event: Event = {"type": _RUN_ERROR, "message": error["message"], "code": error["type"]}
        if "error_id" in error:
            event["metadata"] = {"errorId": error["error_id"]}
        return [event]

    def close(self) -> list[Event]:
        """Close what is open and finish the run (an agent stream with no chunk still gets its empty run)."""
        if self.done:
            return []
        if self.run_open:
            return self._finish()
        if self.session or self.ran:
            return []
        return self._start_run() + self._finish()


def to_ag_ui(
    chunks: AsyncIterable[Any] | Iterable[Any], *, thread_id: str | None = None, run_id: str | None = None
) -> AsyncIterator[Event]:
    r"""Turn an agent's chunk stream (or a durable session's log lines) into AG-UI events.

    Each event is a JSON-ready dict in AG-UI's wire form (camelCase, absent fields left out); send it as an
    SSE frame ``data: <json>\\n\\n`` with ``Content-Type: text/event-stream``. An agent stream is one run
    (``RUN_STARTED`` ... ``RUN_FINISHED``); a session's log (``s.astream(cursor)``) is one run per turn. An
    interrupt ends the run with ``outcome.type == "interrupt"``; a failure ends it with one ``RUN_ERROR``
    (generic text for errors that are not ai_utils' own). A sync iterable is read in worker threads.

    Example:
        ```python
        events = to_ag_ui(agent.astream("Hi", thread_id="t1", show_tool_calls=True), thread_id="t1")
        ```

    Args:
        chunks: e.g. ``agent.astream(..., show_tool_calls=True)`` or ``session.astream(cursor)``.
        thread_id: the events' ``threadId`` (generated when ``None``; a session's turns name their own).
        run_id: the ``runId`` of an agent stream's run (generated when ``None``).

    Returns:
        An async iterator of events.
    """
    return aevents(AgUiEncoder(thread_id=thread_id, run_id=run_id), chunks)
