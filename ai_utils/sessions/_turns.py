"""Run one stored turn on the agent's one run path (``GraphRunner._astream_run`` + the chunk adapter).

Every chunk is stored (fenced, with the next cursor) before any reader can see it. A turn found
``running`` belongs to a worker that died: it continues from the last checkpoint (``turn_resume``); its
input is sent again only if no checkpoint holds it yet (its message id is the turn id), so nothing
accepted is lost. How the turn ended, its summed usage and its output are stored with ``turn_end``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.errors import GraphRecursionError
from pydantic import BaseModel

from ai_utils.agents._repair import unanswered_calls
from ai_utils.client import is_interrupt, is_tool_event
from ai_utils.exceptions import SessionFencedError
from ai_utils.sessions._middleware import CONTEXT_KEY, TurnContext
from ai_utils.sessions._store import TurnRow, dumps
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


async def run_turn(engine: Any, agent: Any, session_id: str, token: int, turn: TurnRow) -> None:
    """Run (or continue) ``turn`` to its end and store everything it emits."""
    store = engine.store
    publish = engine.signal.publish
    state_config: Any = {"configurable": {"thread_id": session_id}}
    resuming = turn.status == "running"
    context = engine.contexts.get(turn.turn_id, engine.contexts.get(session_id))
    state = await agent.graph.aget_state(state_config)
    values = state.values if isinstance(state.values, Mapping) else {}
    messages = list(values.get("messages", []))
    start_len = turn.start_len if turn.start_len is not None else len(messages)

    async def end(stop: str, error: dict[str, str] | None = None, extra: Sequence[Any] = ()) -> None:
        final = await agent.graph.aget_state(state_config)
        now = final.values if isinstance(final.values, Mapping) else {}
        usage = usage_of(list(now.get("messages", []))[start_len:])
        line: dict[str, Any] = {"kind": "turn_end", "turn_id": turn.turn_id, "stop_reason": stop, "usage": usage}
        if error is not None:
            line["error"] = error
        result = {"usage": usage, "error": error, "output": _output(now, start_len)}
        store.end_turn(session_id, token, turn.turn_id, stop, result, [*(dumps(x) for x in extra), dumps(line)])
        publish(session_id)

    if resuming:
        store.start_turn(session_id, token, turn.turn_id, dumps({"kind": "turn_resume", "turn_id": turn.turn_id}), None)
    else:
        first = {"kind": "turn_start", "turn_id": turn.turn_id, "session_id": session_id, "message_id": turn.message_id}
        store.start_turn(session_id, token, turn.turn_id, dumps(first), start_len)
    publish(session_id)

    if turn.seq <= store.cancel_seq(session_id):
        await end("cancelled", extra=await _close_calls(agent, session_id, state_config))
        return

    plan = _plan(turn, state, messages, resuming)
    if isinstance(plan, str):
        await end(plan)
        return
    graph_input, decision, decisions, resuming = plan

    config = agent._config(session_id, ())
    config.setdefault("configurable", {})[CONTEXT_KEY] = TurnContext(
        store=store, session_id=session_id, token=token, turn_id=turn.turn_id, resuming=resuming
    )
    adapter = ChunkAdapter(show_tool_calls=True)
    outcome: dict[str, Any] = {"stop": "end_turn"}
    open_calls: dict[str, str] = {}  # tool calls shown as started and not yet ended

    async def consume() -> None:
        chunks = agent._astream_run(graph_input, config, context, decision, decisions, adapter)
        try:
            async for chunk in chunks:
                if is_interrupt(chunk):
                    outcome["stop"] = "interrupted"
                elif is_tool_event(chunk):
                    (
                        open_calls.__setitem__(chunk["id"], chunk["tool_name"])
                        if chunk["phase"] == "start"
                        else open_calls.pop(chunk["id"], None)
                    )
                store.append(session_id, token, turn.turn_id, [dumps(chunk)])
                publish(session_id)
        finally:
            await chunks.aclose()

    task = asyncio.create_task(consume())
    task.turn_seq = turn.seq  # type: ignore[attr-defined]
    engine.set_running(session_id, task)
    try:
        await asyncio.wait({task})
    finally:
        cancelled_by_user = engine.was_cancelled(session_id)
        engine.set_running(session_id, None)
    if task.cancelled():
        if not cancelled_by_user:
            raise SessionFencedError(f"Session {session_id!r}: the turn stopped (lease lost).", session_id=session_id)
        closed = await _close_calls(agent, session_id, state_config)
        shown = {c["id"] for c in closed}
        closed += [_end_chunk(i, n, CANCELLED_TEXT) for i, n in open_calls.items() if i not in shown]
        await end("cancelled", extra=closed)
        return
    error = task.exception()
    if isinstance(error, SessionFencedError):
        raise error
    if isinstance(error, GraphRecursionError):
        await end("max_model_turns")
    elif error is not None:
        await end("error", {"type": type(error).__name__, "message": str(error)})
    else:
        await end(outcome["stop"])


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
