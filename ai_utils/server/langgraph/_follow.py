"""A run's stream is its turn's lines in the session log: follow them, read the thread around them.

`Thread` is one thread of one agent as the routes use it: its checkpoint reads (the state before a run, the
state at a run's end, the pending interrupts), the SSE frames of one run from any cursor (a rejoin replays
the run from its first line, silently up to ``Last-Event-ID``), and waiting for a run's end. Following goes
through ``Session.astream``, so a follower in any process takes over a turn whose worker died once its
lease expired: a run survives the process that started it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from ai_utils.server._options import blocking
from ai_utils.server.langgraph._messages import human_message, message_dict, values_dict
from ai_utils.server.langgraph._parts import Part, RunParts, frames
from ai_utils.server.langgraph._schema import interrupts_of
from ai_utils.server.langgraph._tables import Tables, TurnInfo
from ai_utils.sessions._schema import loads
from ai_utils.streaming._closing import Closing
from ai_utils.streaming._encode import failure_event

__all__ = ["Thread", "run_start"]

_log = logging.getLogger("ai_utils.server")
_PEEK = 2000  # log lines read to find where a resumed run's messages start in the thread


def _is_turn(chunk: Any, kinds: Sequence[str], turn_id: str) -> bool:
    return isinstance(chunk, dict) and chunk.get("kind") in kinds and chunk.get("turn_id") == turn_id


async def run_start(store: Any, session_id: str, turn_id: str) -> int:
    """The cursor to follow a run from: just before its first line, or the log's end if it has not started.

    The log's end is read first: a run that starts in between is then found started.
    """
    last = await blocking(store, store.last_cursor, session_id)
    row = await blocking(store, store.turn, turn_id)
    if row is not None and row.first_cursor is not None:
        return int(row.first_cursor) - 1
    return int(last)


class Thread:
    """One thread (a session) of one agent, for the routes that read and follow it.

    Args:
        agent: the thread's agent (an `Agent` or `DeepAgent` with ``sessions=``).
        tables: the API's tables in the agent's session store.
        thread_id: the thread (session) id.
    """

    def __init__(self, agent: Any, tables: Tables, thread_id: str) -> None:
        self.agent = agent
        self.tables = tables
        self.store = agent.sessions
        self.thread_id = thread_id
        self.config = {"configurable": {"thread_id": thread_id}}

    async def io(self, fn: Any, *args: Any) -> Any:
        """A blocking store call (in a worker thread on Postgres)."""
        return await blocking(self.store, fn, *args)

    async def snapshot(self) -> Any:
        """The thread's current checkpoint snapshot."""
        return await self.agent.graph.aget_state(self.config)

    async def human_ids(self) -> tuple[dict[str, str], list[TurnInfo]]:
        """``({turn id: message id}, turns)``: the ids clients gave their messages, and the thread's turns."""
        turns: list[TurnInfo] = await self.io(self.tables.turns, self.thread_id)
        return {t.turn_id: t.message_id for t in turns}, turns

    # --- where a run's messages start ----------------------------------------------------------------------

    def _first_result(self, turn: TurnInfo) -> str | None:
        """The tool call id of the first tool result a resumed run logged (its first message in the thread)."""
        if turn.first_cursor is None:
            return None
        for _, row_turn, line in self.store.read(self.thread_id, turn.first_cursor - 1, _PEEK):
            if row_turn != turn.turn_id:
                continue
            chunk = loads(line)
            if isinstance(chunk, dict) and chunk.get("kind") == "tool" and chunk.get("phase") == "end":
                return str(chunk.get("id"))
            if _is_turn(chunk, ("turn_end",), turn.turn_id):
                return None
        return None

    async def _cut(self, messages: Sequence[BaseMessage], turn: TurnInfo) -> int | None:
        """The index of ``turn``'s first message in the thread (``None``: none of its messages is stored yet)."""
        for index, message in enumerate(messages):
            if message.id == turn.turn_id:
                return index  # a prompt's message has the turn's id
        call_id = await self.io(self._first_result, turn)
        if call_id is not None:
            for index, message in enumerate(messages):
                if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
                    return index  # a resume starts with the result of the call that waited
        return None

    async def prior(self, turn_id: str) -> list[dict[str, Any]]:
        """The thread's messages before the run ``turn_id``."""
        snapshot = await self.snapshot()
        ids, turns = await self.human_ids()
        messages = list((snapshot.values or {}).get("messages", [])) if isinstance(snapshot.values, Mapping) else []
        turn = next((t for t in turns if t.turn_id == turn_id), None)
        cut = None if turn is None else await self._cut(messages, turn)
        return [message_dict(m, ids) for m in messages[:cut]]

    async def final(self, turn_id: str) -> tuple[dict[str, Any], Any, list[TurnInfo]]:
        """``(values at the run's end, the current snapshot, turns)``: the thread's values, cut before the next run."""
        snapshot = await self.snapshot()
        ids, turns = await self.human_ids()
        values = values_dict(snapshot.values, ids)
        raw = snapshot.values.get("messages", []) if isinstance(snapshot.values, Mapping) else []
        mine = next((i for i, t in enumerate(turns) if t.turn_id == turn_id), None)
        later = [t for t in turns[mine + 1 :] if t.first_cursor is not None] if mine is not None else []
        if later:
            cut = await self._cut(list(raw), later[0])
            if cut is not None:
                values["messages"] = [message_dict(m, ids) for m in list(raw)[:cut]]
        return values, snapshot, turns

    async def result(self, turn_id: str) -> dict[str, Any]:
        """What ``runs.wait`` / ``runs.join`` return: the values at the run's end.

        With ``__interrupt__`` while it waits for a human, ``__error__`` when it failed.
        """
        values, snapshot, turns = await self.final(turn_id)
        turn = next((t for t in turns if t.turn_id == turn_id), None)
        if turn is not None and turn.stop_reason == "interrupted" and turns[-1].turn_id == turn_id:
            interrupts = interrupts_of(snapshot)
            if interrupts:
                values["__interrupt__"] = interrupts
        if turn is not None and turn.stop_reason in ("error", "max_model_turns"):
            row = await self.io(self.store.turn, turn_id)
            error = (row.result or {}).get("error") if row is not None else None
            from ai_utils.streaming._ui import turn_error

            event = turn_error({"error": error or {"type": "GraphRecursionError"}})
            values["__error__"] = {"error": event["type"], "message": event["message"]}
        return values

    # --- following ---------------------------------------------------------------------------------------

    async def _prepare(self, parts: RunParts, chunk: Any, turn_id: str) -> None:
        """Give the mapper the checkpoint reads the next chunk needs."""
        kind = chunk.get("kind") if isinstance(chunk, dict) else None
        if kind == "turn_start" and parts.values:
            parts.prior = await self.prior(turn_id)
        elif kind == "interrupt":
            snapshot = await self.snapshot()
            parts.pending = {i["id"]: i["value"] for i in interrupts_of(snapshot)}
        elif kind == "turn_end" and parts.values:
            parts.final = (await self.final(turn_id))[0]

    async def lines(self, session: Any, turn_id: str, start: int) -> AsyncIterator[tuple[int, Any]]:
        """The run's log lines ``(cursor, chunk)`` after ``start``: from its first line to its ``turn_end``."""
        source = session.astream(start)
        inside = False
        async with Closing(source):
            async for line in source:
                chunk = line["chunk"]
                if not inside:
                    inside = _is_turn(chunk, ("turn_start", "turn_resume"), turn_id)
                    if not inside:
                        continue  # an earlier run's lines (this one waits behind it)
                yield line["cursor"], chunk
                if _is_turn(chunk, ("turn_end",), turn_id):
                    return

    async def frames(
        self, session: Any, turn: TurnInfo, parts: RunParts, *, after: int, metadata: bool
    ) -> AsyncIterator[bytes]:
        """The run's SSE frames: ``metadata`` first (a new stream), one body part per log line after ``after``.

        ``end`` comes last. The run is replayed from its first line, so the mapper knows what came before
        ``after``.
        """
        if metadata:
            yield frames([("metadata", {"run_id": turn.turn_id, "attempt": 1})], None)
        start = await run_start(self.store, self.thread_id, turn.turn_id)
        ended = sent_end = False
        try:
            async for cursor, chunk in self.lines(session, turn.turn_id, start):
                if parts.needs_state:
                    await self._prepare(parts, chunk, turn.turn_id)
                out: list[Part] = parts.feed(chunk)
                if _is_turn(chunk, ("turn_end",), turn.turn_id):
                    ended = True
                    out.append(("end", None))
                if out and cursor > after:
                    sent_end = ended
                    yield frames(out, cursor)
        except Exception as exc:  # a failure after the first frame: the stream's last event says so
            event = failure_event(exc)
            yield frames([("error", {"error": event["type"], "message": event["message"]}), ("end", None)], None)
            return
        if not sent_end:  # a rejoin after the run's last line still learns that the run is over
            yield frames([("end", None)], None)

    async def wait(self, session: Any, turn: TurnInfo) -> None:
        """Return when the run has ended (following its lines, so a dead worker's turn is taken over)."""
        start = await run_start(self.store, self.thread_id, turn.turn_id)
        async for _ in self.lines(session, turn.turn_id, start):
            pass

    def human(self, payload: Mapping[str, Any], message_id: str) -> dict[str, Any] | None:
        """The human message of a run's input (``None`` for a resume)."""
        if "input" not in payload:
            return None
        text = payload["input"]
        return human_message(" ".join(map(str, text)) if isinstance(text, list) else text, message_id)


def log_failure(message: str, exc: BaseException) -> None:
    """Log a failure of a background step (never the client's data)."""
    _log.warning("%s: %s", message, type(exc).__name__, exc_info=exc)
