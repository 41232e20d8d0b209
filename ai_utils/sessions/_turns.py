"""Run one stored turn on the agent's one run path (``GraphRunner._astream_run`` + the chunk adapter).

Every chunk is stored (fenced, with the next cursor) before any reader can see it. A turn found
``running`` belongs to a worker that died: it continues from the last checkpoint (``turn_resume``, and the
model gets the resume note); a turn found ``resume`` had yielded and continues the same way without the
note. Its input is sent again only if no checkpoint holds it yet (its message id is the turn id), so nothing
accepted is lost. How the turn ended, its summed usage and its output are stored with ``turn_end``.

Every checkpoint a turn writes carries the turn id in its metadata (``TURN_TAG``), so a rollback finds the
thread as it was before the turn in the checkpoint history and writes it back in one checkpoint: a crash
in the middle leaves the turn whole or removed, never half, and the next worker simply rolls back again.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.errors import GraphRecursionError
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from pydantic import BaseModel

from ai_utils._run.repair import unanswered_calls
from ai_utils.client import is_interrupt, is_tool_event
from ai_utils.exceptions import SessionFencedError
from ai_utils.sessions._content import message_content
from ai_utils.sessions._engine import turn_ends
from ai_utils.sessions._events import TurnWatch, fingerprint_changes, stop_for_finish, turn_error
from ai_utils.sessions._middleware import CONTEXT_KEY, STEERS_PART, TurnContext, TurnYielded
from ai_utils.sessions._schema import TurnRow, dumps, loads
from ai_utils.streaming._adapter import ChunkAdapter

__all__ = ["CANCELLED_TEXT", "TURN_TAG", "run_turn", "usage_of"]

CANCELLED_TEXT = "Not finished: the turn was cancelled while this call ran, so it may have partly run."
TURN_TAG = "ai_utils_turn"
"""Checkpoint metadata key: the turn that wrote the checkpoint."""


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
    # A list of steers (a turn made of them) is several messages; a list of content blocks is one.
    texts = value if isinstance(value, list) and all(isinstance(v, str) for v in value) else [value]
    # Deterministic ids: a continue after a crash can tell whether the input reached a checkpoint.
    return [
        HumanMessage(message_content(t), id=turn.turn_id if i == 0 else f"{turn.turn_id}.{i}")
        for i, t in enumerate(texts)
    ]


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


class _Log:
    """The turn's writer: chunks are stored in order, a burst in one transaction (group commit)."""

    def __init__(self, engine: Any, session_id: str, token: int, turn_id: str) -> None:
        self.engine, self.session_id, self.token, self.turn_id = engine, session_id, token, turn_id
        self.pending: list[str] = []
        self.text: list[str] = []  # text since the last event: the answer of the last model call
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def add(self, chunk: Any) -> None:
        self.pending.append(dumps(chunk))
        if isinstance(chunk, str):
            self.text.append(chunk)
        elif not (isinstance(chunk, dict) and chunk.get("kind") == "interrupt"):
            self.text.clear()
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._write())

    async def flush(self) -> None:
        if self.pending:
            lines, self.pending = self.pending, []
            await self.engine.io(self.engine.store.append, self.session_id, self.token, self.turn_id, lines)
            self.engine.signal.publish(self.session_id)

    async def _write(self) -> None:
        # One writer, one flush at a time: lines keep their order even when a flush runs in a worker thread.
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(0)  # let chunks that are ready join this transaction
            if not self._closing:  # closing: what is pending goes with the turn's end (`rest`)
                await self.flush()

    async def close(self) -> None:
        """Stop the writer once its flush in flight is stored (a refused write raises `SessionFencedError` here).

        The lines still pending stay in `pending`: the turn's end stores them (`rest`), in its own transaction.
        """
        self._closing = True
        if self._task is not None:
            self._wake.set()
            await self._task

    def rest(self) -> list[str]:
        """The lines no flush stored (after `close`): the turn's end stores them first."""
        lines, self.pending = self.pending, []
        return lines


class _TurnRun:
    """One run of one stored turn (a class only to keep the steps apart)."""

    def __init__(self, engine: Any, agent: Any, session_id: str, token: int, turn: TurnRow, quiet: Any = None) -> None:
        self.engine, self.agent, self.session_id, self.token, self.turn = engine, agent, session_id, token, turn
        self.quiet = quiet
        self.store = engine.store
        self.link = agent._sessions_link
        self.tag = {TURN_TAG: turn.turn_id}
        self.state_config: Any = {"configurable": {"thread_id": session_id}, "metadata": self.tag}
        self.crashed = turn.status == "running"  # its worker died mid-turn: the model gets the resume note
        self.continuing = turn.status in ("running", "resume")  # also: a yielded turn continues
        self.ids = {"session_id": session_id, "turn_id": turn.turn_id}
        self.watch = TurnWatch(self.link.events, session_id, turn.turn_id)
        self.log = _Log(engine, session_id, token, turn.turn_id)
        self.stop = "end_turn"
        self.open_calls: dict[str, str] = {}  # tool calls shown as started and not yet ended
        self.began = time.perf_counter()
        self.released = False  # the turn's end gave the lease back: the session had no other work
        # With the lease kept: the turn to run next, read in the end's transaction, and the session's steer version
        # from before that read (`SessionStore.steer_version`); empty when not read.
        self.then: list[tuple[TurnRow | None]] = []
        self.then_version: Any = None

    # --- ends --------------------------------------------------------------------------------------------

    async def end(
        self,
        stop: str,
        error: dict[str, str] | None = None,
        extra: Sequence[Any] = (),
        after: Sequence[Any] = (),
        *,
        status: str = "ended",
    ) -> None:
        await self.log.close()
        turn, agent = self.turn, self.agent
        total, output = dict(self.watch.total), {"text": "".join(self.log.text)}
        if self.continuing or agent.output is not None:
            # A continued turn's earlier model calls ran earlier (maybe elsewhere): count them from the thread.
            final = await agent.graph.aget_state(self.state_config)
            now = final.values if isinstance(final.values, Mapping) else {}
            messages = list(now.get("messages", []))
            if self.continuing:
                start = next((i for i, m in enumerate(messages) if m.id == turn.turn_id), turn.start_len or 0)
                total = usage_of(messages[start:])
            output = _output(now, turn.start_len or 0)
        if stop == "yielded":
            line: dict[str, Any] = {"kind": "turn_yield", "turn_id": turn.turn_id}
        else:
            line = {"kind": "turn_end", "turn_id": turn.turn_id, "stop_reason": stop, "usage": total}
            if error is not None:
                line["error"] = error
        ends = int((turn.result or {}).get("ends", 0)) + 1  # a yielded turn stops more than once
        result = {"usage": total, "error": error, "output": output, "ends": ends}
        # The chunks the writer had not stored yet come first, in the same transaction as the end.
        lines = [*self.log.rest(), *(dumps(x) for x in extra), dumps(line), *(dumps(x) for x in after)]
        self.then_version = self.store.steer_version(self.session_id)  # before the read (a later steer bumps it)
        # Dropped before the end is stored: once it is, a prompt, steer or resume() may continue the turn (a yielded
        # one) and hand it the context of the object that continued it, which this must not remove.
        self.engine.contexts.pop(turn.turn_id, None)
        self.released = await self.engine.io(
            functools.partial(self.store.end_turn, status=status, then=self.then),
            self.session_id,
            self.token,
            turn.turn_id,
            stop,
            result,
            lines,
        )
        self.engine.signal.publish(self.session_id)
        self.engine.signal.publish(turn_ends(self.session_id))
        self.link.events.emit(
            "turn.ended",
            **self.ids,
            stop_reason=stop,
            usage=total,
            elapsed_ms=round((time.perf_counter() - self.began) * 1000, 3),
            error_type=error["type"] if error else None,
        )

    async def cancelled(self, error: dict[str, str] | None = None) -> None:
        await self.log.close()
        if self._rollback_asked():
            await self.rolled_back()
            return
        closed = await _close_calls(self.agent, self.state_config)
        shown = {c["id"] for c in closed}
        closed += [_end_chunk(i, n, CANCELLED_TEXT) for i, n in self.open_calls.items() if i not in shown]
        await self.end("cancelled", error, extra=closed)

    def _rollback_asked(self) -> bool:
        if self.turn.rollback:
            return True
        row = self.store.turn(self.turn.turn_id)  # a prompt with on_busy="rollback" may have asked since
        return row is not None and row.rollback  # (rare: a cancelled turn only)

    async def rolled_back(self) -> None:
        """Remove the turn's messages from the thread (one checkpoint), then log its end and ``turn_rollback``."""
        graph = self.agent.graph
        newest: Any = None
        before: list[Any] = []
        async for snapshot in graph.aget_state_history({"configurable": {"thread_id": self.session_id}}):
            newest = snapshot if newest is None else newest
            if (snapshot.metadata or {}).get(TURN_TAG) != self.turn.turn_id:
                values = snapshot.values if isinstance(snapshot.values, Mapping) else {}
                before = list(values.get("messages", []))
                break
        # Only while the thread's newest checkpoint is this turn's: once anything else wrote after it (a later turn
        # that already runs, or a rollback already written), a rollback from this older read would erase it.
        if newest is not None and (newest.metadata or {}).get(TURN_TAG) == self.turn.turn_id:
            values = newest.values if isinstance(newest.values, Mapping) else {}
            now = list(values.get("messages", []))
            if [m.id for m in now] != [m.id for m in before]:
                update = {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *before]}
                await graph.aupdate_state(self.state_config, update, as_node="tools")
        shown = [_end_chunk(i, n, CANCELLED_TEXT) for i, n in self.open_calls.items()]
        await self.end("cancelled", extra=shown, after=[{"kind": "turn_rollback", "turn_id": self.turn.turn_id}])

    # --- the run -----------------------------------------------------------------------------------------

    async def plan(self) -> tuple[Any, Any, Any, bool] | str:
        turn = self.turn
        if not self.continuing:
            graph_input = _inputs(turn) if "input" in turn.payload else None
            return graph_input, turn.payload.get("decision"), turn.payload.get("decisions"), False
        state = await self.agent.graph.aget_state(self.state_config)
        values = state.values if isinstance(state.values, Mapping) else {}
        return _plan(turn, state, list(values.get("messages", [])), True)

    async def consume(self, graph_input: Any, decision: Any, decisions: Any, resuming: bool) -> None:
        turn = self.turn
        config = self.agent._config(self.session_id, (self.watch,))
        config.setdefault("metadata", {}).update(self.tag)
        session = turn.config
        config.setdefault("configurable", {})[CONTEXT_KEY] = TurnContext(
            store=self.store,
            session_id=self.session_id,
            token=self.token,
            turn_id=turn.turn_id,
            resuming=self.crashed,
            yield_at=turn.payload.get("yield_at"),
            model=self.link.chat_model(session.model) if session is not None else None,
            instructions=session.instructions if session is not None else None,
            quiet=self.quiet,
        )
        # Only the context the turn's own session object gave (never another object's): SPEC security rule.
        context = self.engine.contexts.get(turn.turn_id)
        adapter = ChunkAdapter(show_tool_calls=True)
        chunks = self.agent._astream_run(graph_input, config, context, decision, decisions, adapter)
        shown = await self._logged_steers()  # steers already logged as user_message chunks
        try:
            async for chunk in chunks:
                if is_interrupt(chunk):
                    self.stop = "interrupted"
                elif is_tool_event(chunk):
                    if chunk["phase"] == "start":
                        self.open_calls[chunk["id"]] = chunk["tool_name"]
                    else:
                        self.open_calls.pop(chunk["id"], None)
                elif isinstance(chunk, dict) and chunk.get("kind") in ("custom", "user_message"):
                    for line in _steers(chunk, shown):
                        self.log.add(line)
                    continue
                self.log.add(chunk)
        finally:
            await chunks.aclose()

    async def _logged_steers(self) -> set[str]:
        """The steers this turn's log already shows (after a crash: the continued turn joins them again, once)."""
        shown: set[str] = set()
        after = (self.turn.first_cursor or 1) - 1
        while self.crashed:
            rows = await self.engine.io(self.store.read, self.session_id, after)
            if not rows:
                break
            after = rows[-1][0]
            for _, turn_id, line in rows:
                chunk = loads(line) if turn_id == self.turn.turn_id and '"user_message"' in line else None
                if isinstance(chunk, dict) and chunk.get("kind") == "user_message":
                    shown.add(str(chunk["id"]))
        return shown

    def _first_line(self) -> dict[str, Any]:
        turn = self.turn
        if self.continuing:
            return {"kind": "turn_resume", "turn_id": turn.turn_id}
        return {
            "kind": "turn_start",
            "turn_id": turn.turn_id,
            "session_id": self.session_id,
            "message_id": turn.message_id,
        }

    def _fingerprint(self) -> dict[str, Any] | None:
        """The agent's tool set and model, to store when they differ from what the session last ran with."""
        session = self.turn.config
        now: dict[str, Any] = self.link.fingerprint(self.agent, session.model if session is not None else None)
        before = session.fingerprint if session is not None else None
        if before == now:
            return None
        changed = fingerprint_changes(before, now)
        if changed:
            self.link.events.emit("checkpoint.mismatch", **self.ids, changed=changed)
        return now

    async def run(self) -> None:
        turn, engine = self.turn, self.engine
        cancelled = await self.engine.io(
            self.store.start_turn, self.session_id, self.token, turn, dumps(self._first_line()), self._fingerprint()
        )
        engine.signal.publish(self.session_id)
        if self.continuing:
            self.link.events.emit("turn.resumed", **self.ids, after="crash" if self.crashed else "yield")
        else:
            self.link.events.emit("turn.started", **self.ids, message_id=turn.message_id)
        if cancelled:
            await self.cancelled()
            return
        deadline = turn.payload.get("deadline")
        if deadline is not None and time.time() >= deadline:
            await self.timed_out()
            return
        plan = await self.plan()
        if isinstance(plan, str):
            await self.end(plan)
            return
        task = asyncio.create_task(self.consume(*plan))
        task.turn_seq = turn.seq  # type: ignore[attr-defined]
        engine.set_running(self.session_id, task)
        timed_out = False
        try:
            done, _ = await asyncio.wait({task}, timeout=None if deadline is None else max(deadline - time.time(), 0))
            if not done:
                timed_out = True
                task.cancel()
                await asyncio.wait({task})
        finally:
            by_user = engine.was_cancelled(self.session_id)
            engine.set_running(self.session_id, None)
        await self.finish(task, timed_out=timed_out, by_user=by_user)

    async def timed_out(self) -> None:
        seconds = self.turn.payload.get("timeout")
        await self.cancelled(
            {"type": "TimeoutError", "message": f"The turn ran longer than its timeout ({seconds} s)."}
        )

    async def finish(self, task: asyncio.Task[None], *, timed_out: bool, by_user: bool) -> None:
        if timed_out and (task.cancelled() or task.exception() is None):
            await self.timed_out()
            return
        if task.cancelled():
            if not by_user:
                raise SessionFencedError(f"Session {self.session_id!r}: the turn stopped.", session_id=self.session_id)
            await self.cancelled()
            return
        error = task.exception()
        if isinstance(error, SessionFencedError):
            raise error
        if isinstance(error, TurnYielded):
            await self.end("yielded", status="yielded")
        elif isinstance(error, GraphRecursionError):
            await self.end("max_model_turns")
        elif error is not None:
            await self.end("error", turn_error(error, self.engine.contexts.get(self.turn.turn_id)))
        elif self.stop == "end_turn":
            await self.end(stop_for_finish(self.watch.finish) or "end_turn")
        else:
            await self.end(self.stop)


async def run_turn(
    engine: Any, agent: Any, session_id: str, token: int, turn: TurnRow, quiet: Any = None
) -> tuple[bool, tuple[TurnRow | None] | None, Any]:
    """Run (or continue) ``turn`` to its end and store everything it emits.

    ``quiet``: the session's steer version at which it was seen without a waiting steer (`TurnContext.quiet`).

    Returns:
        Whether its end gave the lease back; else the turn to run next as ``(turn,)`` when the end read it (``None``:
        not read), and the steer version from before that read.
    """
    run = _TurnRun(engine, agent, session_id, token, turn, quiet)
    await run.run()
    return run.released, (run.then[0] if run.then else None), run.then_version


async def _close_calls(agent: Any, config: Any) -> list[dict[str, Any]]:
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


def _steers(chunk: Mapping[str, Any], shown: set[str]) -> list[Any]:
    """What a custom or ``user_message`` chunk logs: joined steers once each, as ``user_message`` chunks.

    The session step announces steers when they join (a custom part, before the model's answer); the model's step
    then stores them with the answer, which the adapter shows again as ``user_message`` chunks (dropped here).
    """
    if chunk["kind"] == "user_message":
        if chunk["id"] in shown:
            return []
        shown.add(chunk["id"])
        return [chunk]
    data = chunk.get("data")
    if "namespace" in chunk or not isinstance(data, Mapping) or STEERS_PART not in data:
        return [chunk]
    out: list[Any] = []
    for steer in data[STEERS_PART]:
        if steer["id"] not in shown:
            shown.add(steer["id"])
            out.append({"kind": "user_message", "text": steer["text"], "id": steer["id"]})
    return out


def _end_chunk(call_id: str, name: str, text: str) -> dict[str, Any]:
    return {"kind": "tool", "phase": "end", "tool_name": name, "id": call_id, "output": text, "status": "error"}
