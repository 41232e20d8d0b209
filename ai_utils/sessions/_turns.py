"""Run one stored turn on the agent's one run path (``GraphRunner._astream_run`` + the chunk adapter).

Every chunk is stored (fenced, with the next cursor) before any reader can see it. A turn found
``running`` belongs to a worker that died: it continues from the last checkpoint (``turn_resume``); its
input is sent again only if no checkpoint holds it yet (its message id is the turn id), so nothing
accepted is lost. How the turn ended, its summed usage and its output are stored with ``turn_end``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import LLMResult
from langgraph.errors import GraphRecursionError
from pydantic import BaseModel

from ai_utils._run.repair import unanswered_calls
from ai_utils.client import is_interrupt, is_tool_event
from ai_utils.exceptions import SessionFencedError
from ai_utils.sessions._middleware import CONTEXT_KEY, TurnContext
from ai_utils.sessions._schema import TurnRow, dumps
from ai_utils.streaming._adapter import ChunkAdapter

__all__ = ["CANCELLED_TEXT", "run_turn", "usage_of"]

CANCELLED_TEXT = "Not finished: the turn was cancelled while this call ran, so it may have partly run."


def usage_of(messages: Sequence[BaseMessage]) -> dict[str, int]:
    """The summed token usage of the AI messages."""
    total = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    for message in messages:
        usage = getattr(message, "usage_metadata", None) if isinstance(message, AIMessage) else None
        if usage:
            for key in total:
                total[key] += int(usage.get(key, 0) or 0)
    return total


def _output(values: Mapping[str, Any], start: int) -> Any:
    structured = values.get("structured_response")
    if isinstance(structured, BaseModel):
        return {"structured": structured.model_dump(mode="json")}
    if structured is not None:
        return {"structured": structured}
    for message in reversed(list(values.get("messages", []))[start:]):
        if isinstance(message, AIMessage):
            return {"text": message.text}
    return {"text": ""}


def _inputs(turn: TurnRow) -> list[HumanMessage]:
    value = turn.payload.get("input")
    texts = value if isinstance(value, list) else [value]
    # Deterministic ids: a continue after a crash can tell whether the input reached a checkpoint.
    return [HumanMessage(str(t), id=turn.turn_id if i == 0 else f"{turn.turn_id}.{i}") for i, t in enumerate(texts)]


def _plan(turn: TurnRow, state: Any, messages: Sequence[Any], resuming: bool) -> tuple[Any, Any, Any, bool] | str:
    """``(graph input, decision, decisions, resuming)`` for the run, or the stop reason when nothing can run."""
    graph_input: Any = None
    decision = turn.payload.get("decision")
    decisions = turn.payload.get("decisions")
    if "input" in turn.payload:
        fresh = _inputs(turn)
        if not any(m.id == fresh[0].id for m in messages):
            return fresh, None, None, False  # the input never reached a checkpoint: start it now
    elif resuming and not state.interrupts:
        decision = decisions = None  # the decision was applied before the crash; continue from there
    if resuming and decision is None and decisions is None:
        if state.interrupts:
            return "interrupted"
        if not state.next:
            return "unknown"  # its end was never recorded and there is nothing left to run
    return graph_input, decision, decisions, resuming


class _Usage(BaseCallbackHandler):
    """Sums the token usage of this worker's model calls of one turn."""

    run_inline = True

    def __init__(self) -> None:
        self.total = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                usage = getattr(message, "usage_metadata", None) or {}
                for key in self.total:
                    self.total[key] += int(usage.get(key, 0) or 0)


class _Log:
    """The turn's writer: chunks are stored in order, a burst in one transaction (group commit)."""

    def __init__(self, engine: Any, session_id: str, token: int, turn_id: str) -> None:
        self.engine, self.session_id, self.token, self.turn_id = engine, session_id, token, turn_id
        self.pending: list[str] = []
        self.text: list[str] = []  # text since the last event: the answer of the last model call
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def add(self, chunk: Any) -> None:
        self.pending.append(dumps(chunk))
        if isinstance(chunk, str):
            self.text.append(chunk)
        elif not (isinstance(chunk, dict) and chunk.get("kind") == "interrupt"):
            self.text.clear()
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._write())

    def flush(self) -> None:
        if self.pending:
            lines, self.pending = self.pending, []
            self.engine.store.append(self.session_id, self.token, self.turn_id, lines)
            self.engine.signal.publish(self.session_id)

    async def _write(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(0)  # let chunks that are ready join this transaction
            self.flush()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.flush()


class _TurnRun:
    """One run of one stored turn (a class only to keep the steps apart)."""

    def __init__(self, engine: Any, agent: Any, session_id: str, token: int, turn: TurnRow) -> None:
        self.engine, self.agent, self.session_id, self.token, self.turn = engine, agent, session_id, token, turn
        self.store = engine.store
        self.state_config: Any = {"configurable": {"thread_id": session_id}}
        self.resuming = turn.status == "running"
        self.usage = _Usage()
        self.log = _Log(engine, session_id, token, turn.turn_id)
        self.stop = "end_turn"
        self.open_calls: dict[str, str] = {}  # tool calls shown as started and not yet ended

    async def end(self, stop: str, error: dict[str, str] | None = None, extra: Sequence[Any] = ()) -> None:
        await self.log.close()
        turn, agent = self.turn, self.agent
        total, output = dict(self.usage.total), {"text": "".join(self.log.text)}
        if self.resuming or agent.output is not None:
            # A continued turn's earlier model calls ran in another process: count them from the thread.
            final = await agent.graph.aget_state(self.state_config)
            now = final.values if isinstance(final.values, Mapping) else {}
            messages = list(now.get("messages", []))
            if self.resuming:
                start = next((i for i, m in enumerate(messages) if m.id == turn.turn_id), turn.start_len or 0)
                total = usage_of(messages[start:])
            output = _output(now, turn.start_len or 0)
        line: dict[str, Any] = {"kind": "turn_end", "turn_id": turn.turn_id, "stop_reason": stop, "usage": total}
        if error is not None:
            line["error"] = error
        result = {"usage": total, "error": error, "output": output}
        lines = [*(dumps(x) for x in extra), dumps(line)]
        self.store.end_turn(self.session_id, self.token, turn.turn_id, stop, result, lines)
        self.engine.signal.publish(self.session_id)
        self.engine.contexts.pop(turn.turn_id, None)

    async def plan(self) -> tuple[Any, Any, Any, bool] | str:
        turn = self.turn
        if not self.resuming:
            graph_input = _inputs(turn) if "input" in turn.payload else None
            return graph_input, turn.payload.get("decision"), turn.payload.get("decisions"), False
        state = await self.agent.graph.aget_state(self.state_config)
        values = state.values if isinstance(state.values, Mapping) else {}
        return _plan(turn, state, list(values.get("messages", [])), True)

    async def consume(self, graph_input: Any, decision: Any, decisions: Any, resuming: bool) -> None:
        turn = self.turn
        config = self.agent._config(self.session_id, (self.usage,))
        config.setdefault("configurable", {})[CONTEXT_KEY] = TurnContext(
            store=self.store, session_id=self.session_id, token=self.token, turn_id=turn.turn_id, resuming=resuming
        )
        context = self.engine.contexts.get(turn.turn_id, self.engine.contexts.get(self.session_id))
        adapter = ChunkAdapter(show_tool_calls=True)
        chunks = self.agent._astream_run(graph_input, config, context, decision, decisions, adapter)
        try:
            async for chunk in chunks:
                if is_interrupt(chunk):
                    self.stop = "interrupted"
                elif is_tool_event(chunk):
                    if chunk["phase"] == "start":
                        self.open_calls[chunk["id"]] = chunk["tool_name"]
                    else:
                        self.open_calls.pop(chunk["id"], None)
                self.log.add(chunk)
        finally:
            await chunks.aclose()

    async def cancelled(self) -> None:
        await self.log.close()
        closed = await _close_calls(self.agent, self.session_id, self.state_config)
        shown = {c["id"] for c in closed}
        closed += [_end_chunk(i, n, CANCELLED_TEXT) for i, n in self.open_calls.items() if i not in shown]
        await self.end("cancelled", extra=closed)

    async def run(self) -> None:
        turn, engine = self.turn, self.engine
        if self.resuming:
            first: dict[str, Any] = {"kind": "turn_resume", "turn_id": turn.turn_id}
        else:
            first = {"kind": "turn_start", "turn_id": turn.turn_id, "session_id": self.session_id}
            first["message_id"] = turn.message_id
        cancelled = self.store.start_turn(self.session_id, self.token, turn.turn_id, dumps(first), turn.seq)
        engine.signal.publish(self.session_id)
        if cancelled:
            await self.cancelled()
            return
        plan = await self.plan()
        if isinstance(plan, str):
            await self.end(plan)
            return
        task = asyncio.create_task(self.consume(*plan))
        task.turn_seq = turn.seq  # type: ignore[attr-defined]
        engine.set_running(self.session_id, task)
        try:
            await asyncio.wait({task})
        finally:
            by_user = engine.was_cancelled(self.session_id)
            engine.set_running(self.session_id, None)
        if task.cancelled():
            if not by_user:
                raise SessionFencedError(f"Session {self.session_id!r}: the turn stopped.", session_id=self.session_id)
            await self.cancelled()
            return
        error = task.exception()
        if isinstance(error, SessionFencedError):
            raise error
        if isinstance(error, GraphRecursionError):
            await self.end("max_model_turns")
        elif error is not None:
            await self.end("error", {"type": type(error).__name__, "message": str(error)})
        else:
            await self.end(self.stop)


async def run_turn(engine: Any, agent: Any, session_id: str, token: int, turn: TurnRow) -> None:
    """Run (or continue) ``turn`` to its end and store everything it emits."""
    await _TurnRun(engine, agent, session_id, token, turn).run()


async def _close_calls(agent: Any, session_id: str, config: Any) -> list[dict[str, Any]]:
    """Answer the calls a cancel left without a result (no dangling call); their tool ``end`` chunks."""
    state = await agent.graph.aget_state(config)
    values = state.values if isinstance(state.values, Mapping) else {}
    missing = unanswered_calls(list(values.get("messages", [])))
    if not missing:
        return []
    answers = [
        ToolMessage(CANCELLED_TEXT, tool_call_id=call["id"], name=call.get("name") or "unknown", status="error")
        for _, call in missing
    ]
    await agent.graph.aupdate_state(config, {"messages": answers}, as_node="tools")
    return [_end_chunk(a.tool_call_id, a.name or "unknown", a.text) for a in answers]


def _end_chunk(call_id: str, name: str, text: str) -> dict[str, Any]:
    return {"kind": "tool", "phase": "end", "tool_name": name, "id": call_id, "output": text, "status": "error"}
