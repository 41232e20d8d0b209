"""THE chunk adapter: LangGraph ``version="v2"`` stream parts -> client ``StreamChunk``s.

Every wrapper (Agent, DeepAgent, JevToolCaller) runs its graph with ``**stream_kwargs()``
(``stream_mode=["messages", "updates", "custom"], subgraphs=True, version="v2"``) and feeds each part to one
``ChunkAdapter``; ``adapt``/``aadapt`` do exactly that. Sources:

- text: ``AIMessageChunk``/``AIMessage`` parts of the ``messages`` mode at the root namespace from a
  model node (``text_nodes``), via ``.text`` (reasoning blocks never leak into text);
- reasoning (``show_reasoning``): the ``reasoning`` content blocks of the same messages;
- tool start (``show_tool_calls``): the complete ``tool_calls`` of the AIMessage in a root ``updates``
  part of a model node, once per tool call id; tool end: root ``ToolMessage`` parts, once per id;
- subagent (``show_subagents``): text of any part with a non-empty namespace;
- mode (``show_tool_calls``): the ``custom`` part that ``Agent(modes=...)`` writes (`mode_part`) before the
  turn's first model call, at the root namespace;
- custom: every ``custom`` part (``get_stream_writer()`` data) as ``{"kind": "custom", "data"}``, with the
  ``namespace`` when a subgraph wrote it; always on, since a writer only writes when asked to;
- original tool output (``context_trust="enforce"``): the custom part `trust_part` that context trust writes
  before it wraps a result is never a chunk; it becomes the ``output`` of that call's tool ``end`` chunk, so the
  stream shows what the tool said while the history holds the wrapped form;
- actions (``Agent(actions=...)``): the custom parts its middleware writes (`ai_utils.streaming._directives`)
  become ``action`` / ``follow_up`` chunks, and from the first one on the main agent's text goes through
  `DirectiveLines`, so no ``!>``/``?>`` line reaches a text chunk;
- interrupts: ``updates["__interrupt__"]`` at any namespace, deduplicated by interrupt id and emitted
  by ``finish()`` as one chunk (an interrupt ends the run, so it is always the last chunk; collecting
  them first is what turns several pending interrupts into one batch).

Per part the work is a few dict lookups and an ``isinstance``: no pydantic, no ``astream_events``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Collection, Iterable, Iterator, Mapping
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.types import Interrupt

from ai_utils.client import CustomEvent, ModeEvent, StreamChunk, SubagentEvent, ToolEvent
from ai_utils.streaming._closing import Closing
from ai_utils.streaming._directives import DIRECTIVE_PART, DirectiveLines, directive_chunk
from ai_utils.streaming._interrupts import interrupt_chunk

__all__ = [
    "REPAIR_KEY",
    "STEER_KEY",
    "ChunkAdapter",
    "aadapt",
    "adapt",
    "mode_part",
    "stream_kwargs",
    "trust_part",
]

REPAIR_KEY = "ai_utils_repair"
"""``ToolMessage.response_metadata`` key of a result written by the thread-repair step (`ai_utils._run.repair`)."""

STEER_KEY = "ai_utils_steer"
"""``HumanMessage.response_metadata`` key (the steer's message id) of a steer that joined a durable turn."""

# Marks the custom stream part that announces a turn's mode, so it is told apart from user writer events.
_MODE_PART = "__ai_utils_mode__"
_TRUST_PART = "__ai_utils_trust__"


def mode_part(mode: str, tools: list[str]) -> dict[str, Any]:
    """The custom stream part a graph writes (``runtime.stream_writer``) to announce the turn's mode."""
    return {_MODE_PART: True, "mode": mode, "tools": tools}


def trust_part(tool_call_id: str, output: str) -> dict[str, Any]:
    """The custom stream part context trust writes with a tool's original output before wrapping it."""
    return {_TRUST_PART: True, "id": tool_call_id, "output": output}


def stream_kwargs() -> dict[str, Any]:
    """The ``graph.stream``/``graph.astream`` keyword arguments the adapter expects.

    Returns:
        A fresh ``{"stream_mode": ["messages", "updates", "custom"], "subgraphs": True, "version": "v2"}``.
    """
    return {"stream_mode": ["messages", "updates", "custom"], "subgraphs": True, "version": "v2"}


def _messages_of(update: object) -> list[Any]:
    if isinstance(update, list):  # a node that wrote several updates in one step
        return [m for u in update for m in _messages_of(u)]
    if isinstance(update, Mapping):
        messages = update.get("messages")
        if isinstance(messages, list):
            return messages
        if messages is not None:
            return [messages]
    return []


class ChunkAdapter:
    """Turns the parts of one graph run into client chunks; one instance per run.

    Args:
        show_tool_calls: emit ``ToolEvent`` start/end chunks of the main agent.
        show_reasoning: emit ``ReasoningEvent`` chunks of the main agent.
        show_subagents: emit ``SubagentEvent`` chunks for text produced inside subgraphs.
        text_nodes: graph nodes whose model messages are the answer text (``create_agent`` and
            ``create_deep_agent`` call theirs ``"model"``); ``None`` accepts every node.

    Example:
        ```python
        adapter = ChunkAdapter(show_tool_calls=True)
        for part in graph.stream(inputs, config, **stream_kwargs()):
            yield from adapter.feed(part)
        yield from adapter.finish()
        ```
    """

    __slots__ = (
        "_directives",
        "_ended",
        "_fresh",
        "_held",
        "_interrupts",
        "_originals",
        "_started",
        "_text_nodes",
        "show_reasoning",
        "show_subagents",
        "show_tool_calls",
    )

    def __init__(
        self,
        *,
        show_tool_calls: bool = False,
        show_reasoning: bool = False,
        show_subagents: bool = False,
        text_nodes: Collection[str] | None = ("model",),
    ) -> None:
        self.show_tool_calls = show_tool_calls
        self.show_reasoning = show_reasoning
        self.show_subagents = show_subagents
        self._text_nodes = None if text_nodes is None else frozenset(text_nodes)
        self._started: set[str] = set()
        self._ended: set[str] = set()
        # Original outputs of results context trust wrapped, by tool call id, until their "end" chunk.
        self._originals: dict[str, str] = {}
        # Results the model node itself wrote (the mode router's refusals), held until that node's update has
        # announced their calls, so a tool's "end" never comes before its "start".
        self._held: list[ToolEvent] = []
        # AI messages the model streamed in this run: when the model node rewrites the whole thread (the repair
        # step's rewrite), only these announce tool calls, not the history the rewrite repeats.
        self._fresh: set[str | None] = set()
        self._interrupts: dict[str, Interrupt] = {}
        # Set once the graph announces an actions run: the main agent's text is then filtered line by line.
        self._directives: DirectiveLines | None = None

    @property
    def interrupts(self) -> list[Interrupt]:
        """The distinct interrupts seen so far (what the run is waiting for when it ends)."""
        return list(self._interrupts.values())

    def feed(self, part: Mapping[str, Any]) -> list[StreamChunk]:
        """Translate one stream part.

        Args:
            part: a ``version="v2"`` part ``{"type", "ns", "data"}``; other stream modes are ignored.

        Returns:
            The chunks for this part, often none.
        """
        kind = part["type"]
        if kind == "messages":
            message, metadata = part["data"]
            return self._on_message(part["ns"], message, metadata)
        if kind == "updates":
            return self._on_updates(part["ns"], part["data"])
        if kind == "custom":
            return self._on_custom(part["ns"], part["data"])
        return []

    def _on_custom(self, ns: tuple[str, ...], data: object) -> list[StreamChunk]:
        if isinstance(data, dict) and DIRECTIVE_PART in data:
            if ns:
                return []
            if self._directives is None:
                self._directives = DirectiveLines()
            chunk = directive_chunk(data)
            return [*self._flush(), chunk] if chunk is not None else self._flush()
        if isinstance(data, dict) and data.get(_MODE_PART) is True:
            # The mode announcement of `Agent(modes=...)`: a mode chunk (with show_tool_calls), never a custom one.
            if not self.show_tool_calls or ns:
                return []
            mode: ModeEvent = {"kind": "mode", "mode": data["mode"], "tools": list(data["tools"])}
            return [mode]
        if isinstance(data, dict) and data.get(_TRUST_PART) is True:
            if self.show_tool_calls and not ns:
                self._originals[str(data["id"])] = str(data["output"])
            return []
        event: CustomEvent = {"kind": "custom", "data": data}
        if ns:
            event["namespace"] = list(ns)
        return [event]

    def finish(self) -> list[StreamChunk]:
        """Close the run: the interrupt chunk if the run paused, else nothing.

        Returns:
            ``[InterruptEvent]``, ``[InterruptBatch]`` or ``[]``.
        """
        held: list[StreamChunk] = [*self._flush(), *self._held]
        self._held.clear()
        chunk = interrupt_chunk(self.interrupts)
        return held if chunk is None else [*held, chunk]

    def _on_message(self, ns: tuple[str, ...], message: object, metadata: Mapping[str, Any]) -> list[StreamChunk]:
        if isinstance(message, AIMessage):
            if ns:
                if self.show_subagents and (text := message.text):
                    event: SubagentEvent = {"kind": "subagent", "text": text, "namespace": list(ns)}
                    if name := metadata.get("lc_agent_name"):
                        event["name"] = str(name)
                    return [event]
                return []
            if self._text_nodes is not None and metadata.get("langgraph_node") not in self._text_nodes:
                return []
            if self.show_tool_calls:
                self._fresh.add(message.id)
            out: list[StreamChunk] = []
            if self.show_reasoning:
                for block in message.content_blocks:
                    if block["type"] == "reasoning" and (reasoning := block.get("reasoning")):
                        out.append({"kind": "reasoning", "text": str(reasoning)})
            # With directive filtering (an actions run) a piece may be held back whole, so it can come out empty.
            shown = message.text if self._directives is None else self._directives.feed(message.text)
            if shown:
                out.append(shown)
            return out
        if not ns and isinstance(message, HumanMessage) and STEER_KEY in message.response_metadata:
            return [{"kind": "user_message", "text": message.text, "id": str(message.response_metadata[STEER_KEY])}]
        if (
            not ns
            and isinstance(message, ToolMessage)
            # A call the repair step answered (e.g. an approval superseded by a new message) is always reported.
            and (self.show_tool_calls or REPAIR_KEY in message.response_metadata)
            and message.tool_call_id not in self._ended
        ):
            self._ended.add(message.tool_call_id)
            original = self._originals.pop(message.tool_call_id, None)
            end: ToolEvent = {
                "kind": "tool",
                "phase": "end",
                "tool_name": message.name or "",
                "id": message.tool_call_id,
                "output": message.text if original is None else original,
                "status": message.status,
            }
            if (
                self.show_tool_calls
                and message.tool_call_id not in self._started
                and metadata.get("langgraph_node") in (self._text_nodes or ())
            ):
                self._held.append(end)
                return []
            return [end]
        return []

    def _flush(self) -> list[StreamChunk]:
        """The held end of the reply that just ended (directive filtering only)."""
        rest = self._directives.flush() if self._directives is not None else ""
        return [rest] if rest else []

    def _on_updates(self, ns: tuple[str, ...], data: Mapping[str, Any]) -> list[StreamChunk]:
        out: list[StreamChunk] = [] if ns or self._directives is None else self._flush()
        for node, update in data.items():
            if node == "__interrupt__":
                for interrupt in update:
                    self._interrupts.setdefault(interrupt.id, interrupt)
            elif self.show_tool_calls and not ns and (self._text_nodes is None or node in self._text_nodes):
                # Only the model node: middleware such as HITL re-writes the same AIMessage on resume.
                messages = _messages_of(update)
                rewrite = any(isinstance(m, RemoveMessage) for m in messages)
                for message in messages:
                    if (
                        isinstance(message, AIMessage)
                        and message.tool_calls
                        and (not rewrite or message.id in self._fresh)
                    ):
                        out.extend(self._tool_starts(message))
                if self._held:
                    out.extend(self._held)
                    self._held.clear()
        return out

    def _tool_starts(self, message: AIMessage) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        for call in message.tool_calls:
            call_id = call["id"] or f"{message.id}:{call['name']}"
            if call_id not in self._started:
                self._started.add(call_id)
                start: ToolEvent = {
                    "kind": "tool",
                    "phase": "start",
                    "tool_name": call["name"],
                    "id": call_id,
                    "args": call["args"],
                }
                out.append(start)
        return out


def adapt(parts: Iterable[Mapping[str, Any]], adapter: ChunkAdapter) -> Iterator[StreamChunk]:
    """Run ``adapter`` over a sync stream: every part's chunks, then ``finish()``.

    Args:
        parts: ``graph.stream(..., **stream_kwargs())``.
        adapter: a fresh ``ChunkAdapter`` for this run.

    Yields:
        The run's chunks; the interrupt chunk (if any) last. Closing this generator closes ``parts``.
    """
    with Closing(parts):
        for part in parts:
            yield from adapter.feed(part)
        yield from adapter.finish()


async def aadapt(parts: AsyncIterable[Mapping[str, Any]], adapter: ChunkAdapter) -> AsyncIterator[StreamChunk]:
    """Async twin of ``adapt`` for ``graph.astream(...)``, with the same arguments and chunks."""
    async with Closing(parts):
        async for part in parts:
            for chunk in adapter.feed(part):
                yield chunk
        for chunk in adapter.finish():
            yield chunk
