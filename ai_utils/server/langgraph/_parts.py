"""One run's log lines -> LangGraph stream parts (sans-IO), and the SSE frames that carry them.

The run's stream is its turn's lines in the session log (``turn_start`` ... ``turn_end``). `RunParts.feed`
maps each chunk to the parts of the requested stream modes, as the LangGraph Server sends them:

- ``messages-tuple`` -> event ``messages``, data ``[message chunk, metadata]``: each text token as an
  ``AIMessageChunk``, each tool call as its ``tool_call_chunks``, each tool result as a ``tool`` message;
- ``updates`` -> ``{"model": {"messages": [ai]}}`` when a model reply is complete, ``{"tools": {"messages":
  [tool]}}`` per result, ``{"__interrupt__": [{"value", "id"}]}`` when the run waits for a human;
- ``values`` -> ``{"messages": [...]}``, the whole thread, at the run's start and after every step: the
  thread before the run (``prior``, read from the checkpoint by the route) plus the run's messages built from
  the log; the last one (``final``, also read from the checkpoint) is what ``threads.get_state`` shows, with
  ``__interrupt__`` when the run ended waiting for a human;
- ``custom`` -> the data a node or tool wrote with ``get_stream_writer()``.

Interrupt values are the thread's own (``pending``, read by the route while the interrupt waits); one that is
no longer pending (a replay after the resume) is rebuilt from its chunk in the shape of LangChain's
``HumanInTheLoopMiddleware`` request (``action_requests`` / ``review_configs``). The mapping is deterministic,
so a rejoin that replays the run from its first line (silently up to ``Last-Event-ID``) continues exactly
where the client stopped: every frame of one log line goes out in one body part, the last one carrying the
line's cursor as its SSE ``id``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Literal

from ai_utils.server.langgraph._messages import ai_chunk, ai_message, human_message, tool_message
from ai_utils.streaming._encode import json_value
from ai_utils.streaming._ui import turn_error

__all__ = ["STREAM_MODES", "Part", "RunParts", "RunStatus", "frames", "run_status"]

STREAM_MODES = ("values", "updates", "messages-tuple", "custom")
"""The stream modes served (the LangGraph Server's others are refused with a 400 naming these)."""

Part = tuple[str, Any]
"""``(SSE event name, data)``."""

RunStatus = Literal["pending", "running", "error", "success", "timeout", "interrupted"]

_STATUS = {
    "end_turn": "success",
    "unknown": "success",  # the graph had finished; only its end was not recorded before the worker stopped
    "interrupted": "interrupted",
    "cancelled": "interrupted",
    "error": "error",
    "max_model_turns": "error",
}


def run_status(stop_reason: str | None) -> RunStatus:
    """The LangGraph run status of a turn's stop reason."""
    return _STATUS.get(stop_reason or "", "error")  # type: ignore[return-value]


def frames(parts: list[Part], cursor: int | None) -> bytes:
    """The SSE frames of one log line's parts (``event:``/``data:``), the last with ``id: <cursor>``."""
    out = [b"event: " + name.encode() + b"\ndata: " + json_value(data) + b"\n\n" for name, data in parts]
    if cursor is not None and out:
        out[-1] = out[-1][:-1] + b"id: %d\n\n" % cursor
    return b"".join(out)


def _interrupt_id(item_id: str) -> str:
    """The LangGraph interrupt id of an interrupt item (``"<id>:<n>"`` for one request of a batch)."""
    head, sep, tail = item_id.rpartition(":")
    return head if sep and tail.isdigit() else item_id


def _rebuilt(items: list[Mapping[str, Any]]) -> Any:
    """An interrupt's value rebuilt from its items: LangChain's HITL request, or a plain interrupt's question."""
    if items and all(item.get("tool_name") for item in items):
        return {
            "action_requests": [
                {"name": i["tool_name"], "args": i.get("args") or {}, "description": i.get("question", "")}
                for i in items
            ],
            "review_configs": [
                {"action_name": i["tool_name"], "allowed_decisions": list(i.get("decisions") or [])} for i in items
            ],
        }
    item = items[0]
    extra = {k: item[k] for k in ("options", "decisions") if item.get(k)}
    return {"question": item.get("question", ""), **extra} if extra else item.get("question", "")


class RunParts:
    """The stream parts of one run, fed its log chunks in order (``turn_start`` first, ``turn_end`` last).

    The route sets ``prior`` before feeding ``turn_start``, ``pending`` before an interrupt chunk and
    ``final`` before ``turn_end`` (only when ``needs_state``): they are the reads of the thread's checkpoint.

    Args:
        run_id: the run (the turn id).
        thread_id: the thread (the session id).
        modes: the stream modes to send.
        human: the run's input as a human message dict (``None`` for a resume).
        subgraphs: also send custom data written inside subgraphs (``custom|<namespace>``).
    """

    def __init__(
        self,
        *,
        run_id: str,
        thread_id: str,
        modes: Collection[str],
        human: dict[str, Any] | None,
        subgraphs: bool = False,
    ) -> None:
        self.run_id = run_id
        self.values = "values" in modes
        self.updates = "updates" in modes
        self.messages = "messages-tuple" in modes
        self.custom = "custom" in modes
        self.subgraphs = subgraphs
        self.human = human
        self.prior: list[dict[str, Any]] = []
        self.final: dict[str, Any] | None = None
        self.pending: Mapping[str, Any] = {}
        self.status: RunStatus | None = None
        self._meta = {"run_id": run_id, "thread_id": thread_id}
        self._done: list[dict[str, Any]] = []  # the run's messages so far
        self._text: list[str] = []  # the open AI message: its text and tool calls
        self._calls: list[dict[str, Any]] = []
        self._ai_id: str | None = None
        self._count = 0
        self._interrupts: list[dict[str, Any]] = []

    @property
    def needs_state(self) -> bool:
        """Whether the route must read the checkpoint for ``prior`` / ``pending`` / ``final``."""
        return self.values or self.updates

    def _next_id(self) -> str:
        self._count += 1
        return f"{self.run_id}.{self._count}"

    def _meta_of(self, node: str) -> dict[str, Any]:
        return {**self._meta, "langgraph_node": node}

    def _snapshot(self) -> list[Part]:
        return [("values", {"messages": [*self.prior, *self._done]})] if self.values else []

    def _close_ai(self, *, snapshot: bool = True) -> list[Part]:
        """The open AI message is complete: its ``updates`` (and the ``values`` after it)."""
        if self._ai_id is None:
            return []
        message = ai_message("".join(self._text), self._ai_id, self._calls)
        self._ai_id, self._text, self._calls = None, [], []
        self._done.append(message)
        parts: list[Part] = [("updates", {"model": {"messages": [message]}})] if self.updates else []
        return parts + (self._snapshot() if snapshot else [])

    def _open_ai(self) -> str:
        if self._ai_id is None:
            self._ai_id = self._next_id()
        return self._ai_id

    def feed(self, chunk: Any) -> list[Part]:
        """The parts of one chunk of the run's log."""
        if isinstance(chunk, str):
            message_id = self._open_ai()
            self._text.append(chunk)
            return [("messages", [ai_chunk(chunk, message_id), self._meta_of("model")])] if self.messages else []
        if not isinstance(chunk, Mapping):
            return []
        kind = chunk.get("kind")
        if kind == "tool":
            return self._tool(chunk)
        if kind == "custom":
            return self._custom(chunk)
        if kind == "interrupt":
            return self._interrupt(chunk)
        if kind == "user_message":
            parts = self._close_ai()
            self._done.append(human_message(chunk.get("text", ""), str(chunk.get("id") or self._next_id())))
            return parts + self._snapshot()
        if kind == "turn_start":
            if self.human is not None:
                self._done.append(self.human)
            return self._snapshot()
        if kind == "turn_resume":
            if self._ai_id is not None and not self._calls:
                self._ai_id, self._text = None, []  # the model call that was cut off runs again: a new message
            return []
        if kind == "turn_end":
            return self._end(chunk)
        return []  # modes, reasoning, subagent text, actions: not part of these stream modes

    def _tool(self, chunk: Mapping[str, Any]) -> list[Part]:
        call_id, name = str(chunk.get("id", "")), str(chunk.get("tool_name", ""))
        if chunk.get("phase") == "start":
            message_id = self._open_ai()
            call = {"name": name, "args": dict(chunk.get("args") or {}), "id": call_id, "type": "tool_call"}
            index = len(self._calls)
            self._calls.append(call)
            if not self.messages:
                return []
            piece = {
                "name": name,
                "args": json_value(call["args"]).decode(),
                "id": call_id,
                "index": index,
                "type": "tool_call_chunk",
            }
            return [("messages", [ai_chunk("", message_id, [piece]), self._meta_of("model")])]
        parts = self._close_ai()
        status = "error" if chunk.get("status") == "error" else "success"
        message = tool_message(str(chunk.get("output", "")), call_id, name, status, self._next_id())
        self._done.append(message)
        if self.messages:
            parts.append(("messages", [message, self._meta_of("tools")]))
        if self.updates:
            parts.append(("updates", {"tools": {"messages": [message]}}))
        return parts + self._snapshot()

    def _custom(self, chunk: Mapping[str, Any]) -> list[Part]:
        namespace = chunk.get("namespace")
        if not self.custom or (namespace and not self.subgraphs):
            return []
        event = "custom|" + "|".join(map(str, namespace)) if namespace else "custom"
        return [(event, chunk.get("data"))]

    def _interrupt(self, chunk: Mapping[str, Any]) -> list[Part]:
        parts = self._close_ai()
        items: list[Mapping[str, Any]] = list(chunk.get("items") or [chunk])
        grouped: dict[str, list[Mapping[str, Any]]] = {}
        for item in items:
            grouped.setdefault(_interrupt_id(str(item.get("id", ""))), []).append(item)
        self._interrupts = [
            {"value": self.pending[iid] if iid in self.pending else _rebuilt(group), "id": iid}
            for iid, group in grouped.items()
        ]
        if self.updates:
            parts.append(("updates", {"__interrupt__": self._interrupts}))
        return parts

    def _end(self, chunk: Mapping[str, Any]) -> list[Part]:
        stop = str(chunk.get("stop_reason") or "")
        self.status = run_status(stop)
        parts = self._close_ai(snapshot=False)
        if self.values:
            values = dict(self.final) if self.final is not None else {"messages": [*self.prior, *self._done]}
            if self._interrupts and stop == "interrupted":
                values["__interrupt__"] = self._interrupts
            parts.append(("values", values))
        if stop == "error":
            error = turn_error(chunk)
            parts.append(("error", {"error": error["type"], "message": error["message"]}))
        elif stop == "max_model_turns":
            message = "The run stopped: the agent reached its limit of model calls (max_model_turns)."
            parts.append(("error", {"error": "GraphRecursionError", "message": message}))
        return parts

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        """The run's interrupts (``[{"value", "id"}]``), once its interrupt chunk was fed."""
        return self._interrupts
