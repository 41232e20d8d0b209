"""Runs: create one (a prompt or a resume of the thread's session, after its multitask strategy), cancel one.

A run is a turn of the thread's session. ``multitask_strategy`` decides what a new run does while another
runs (the SDK's default, ``reject``, is the LangGraph Server's):

- ``reject``: 409 (the SDK raises ``ConflictError``), nothing stored;
- ``enqueue``: the prompt is stored at once and runs after the running one (the session's own order);
- ``interrupt``: the running (and waiting) runs are cancelled, their open tool calls answered, and the new one
  runs on the thread as it stands;
- ``rollback``: as ``interrupt``, and the cancelled run's messages are removed from the thread.

Each is the session's ``on_busy`` (SPEC §14b): the store decides it in the same transaction that stores the
prompt, across processes, so two runs racing for an idle thread never both pass a ``reject``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from ai_utils.exceptions import SessionBusyError
from ai_utils.gateway.actor import Actor
from ai_utils.server._bodies import RunRequest
from ai_utils.server._options import ContextHook, blocking, run_context
from ai_utils.server._request import actor_key, refuse
from ai_utils.server.langgraph._bodies import RunBody
from ai_utils.server.langgraph._follow import Thread
from ai_utils.server.langgraph._tables import RunRow, Tables, ThreadRow, TurnInfo
from ai_utils.streaming._decisions import to_resume

__all__ = ["Started", "cancel_run", "start_run", "turn_info"]


@dataclass(frozen=True, slots=True)
class Started:
    """A run just accepted: its thread, session and turn, and the request it came from."""

    thread: Thread
    row: ThreadRow
    session: Any
    turn: TurnInfo
    body: RunBody


def turn_info(row: Any) -> TurnInfo:
    """A store `TurnRow` as a `TurnInfo`."""
    first = None if row.first_cursor is None else int(row.first_cursor)
    return TurnInfo(row.turn_id, row.message_id, int(row.seq), row.status, row.stop_reason, first)


async def _thread_row(tables: Tables, store: Any, thread_id: str | None, actor: Actor, body: RunBody) -> ThreadRow:
    owner, metadata = actor_key(actor), {"owner": actor.user_id}  # as POST /threads makes it
    if thread_id is None:  # a thread-less run: a new thread of the caller's, which stays
        created: ThreadRow | None = (await blocking(store, tables.create_thread, uuid.uuid4().hex, owner, metadata))[0]
        assert created is not None  # a fresh uuid
        return created
    row: ThreadRow | None = await blocking(store, tables.thread, thread_id, owner)
    if row is None and body.create_thread:
        row, _ = await blocking(store, tables.create_thread, thread_id, owner, metadata)
    if row is None:
        refuse(
            404, f"There is no thread {thread_id!r} for you; create it with POST /threads (or if_not_exists='create')."
        )
    return row


async def _check_head(thread: Thread, checkpoint_id: str) -> None:
    """A run may name the thread's current checkpoint (``useStream`` does), never an earlier one."""
    snapshot = await thread.snapshot()
    head = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id") if snapshot.created_at else None
    if checkpoint_id != head:
        refuse(
            400,
            "This server does not support time travel (`checkpoint` other than the thread's current one): the "
            "thread continues from its last state; send no checkpoint, or the one GET /threads/{id}/state shows.",
        )


async def _check_resume(thread: Thread, body: RunBody) -> None:
    """A resume for an idle thread must answer what waits (the decision mapper's `UserError` is a 400)."""
    if await thread.io(thread.store.busy, thread.thread_id):
        return  # it answers the interrupt the running run will end with; checked when it runs
    snapshot = await thread.snapshot()
    if not snapshot.interrupts:
        refuse(400, f"Thread {thread.thread_id!r} has no interrupt waiting; send `input` (a new message) instead.")
    to_resume(body.decision, body.decisions, pending=snapshot.interrupts)


async def _accept(thread: Thread, session: Any, body: RunBody) -> Any:
    """Prompt the session with the run's multitask strategy as its ``on_busy``; the `Turn`.

    The store decides the strategy atomically, across processes; a reject stores nothing and answers 409.
    """
    try:
        return await session.aprompt(
            body.text,
            message_id=body.message_id,
            decision=body.decision,
            decisions=body.decisions,
            on_busy=body.multitask_strategy,
        )
    except SessionBusyError:
        refuse(
            409,
            f"Thread {thread.thread_id!r} is busy with another run; wait for it (join), cancel it, or send "
            "multitask_strategy='enqueue' (run after it), 'interrupt' (cancel it) or 'rollback' (cancel it and "
            "drop its messages).",
        )


async def start_run(
    request: Request,
    actor: Actor,
    *,
    agents: dict[str, Any],
    tables: Tables,
    thread_id: str | None,
    body: RunBody,
    context: ContextHook | None,
) -> Started:
    """Accept a run (stored before this returns) on the caller's thread ``thread_id`` (``None``: a new one)."""
    agent = agents.get(body.assistant_id)
    if agent is None:
        refuse(404, f"There is no assistant {body.assistant_id!r}; POST /assistants/search lists them.")
    store = agent.sessions
    row = await _thread_row(tables, store, thread_id, actor, body)
    if row.assistant != body.assistant_id:
        if row.assistant is not None:
            refuse(409, f"Thread {row.thread_id!r} runs assistant {row.assistant!r}; start a new thread for this one.")
        bound = await blocking(store, tables.bind, row.thread_id, body.assistant_id)
        if bound is None:
            refuse(409, f"Thread {row.thread_id!r} cannot run assistant {body.assistant_id!r}; start a new thread.")
        row = bound
    ctx = await run_context(context, request, actor, RunRequest(context=body.context, has_context=body.has_context))
    session = await blocking(store, lambda: agent.session(row.thread_id, context=ctx))
    thread = Thread(agent, tables, row.thread_id)
    if body.checkpoint_id is not None:
        await _check_head(thread, body.checkpoint_id)
    if body.resuming:
        await _check_resume(thread, body)
    turn = await _accept(thread, session, body)
    options = {
        "stream_mode": list(body.stream_modes),
        "stream_subgraphs": body.subgraphs,
        "multitask_strategy": body.multitask_strategy,
    }
    record = RunRow(turn.id, row.thread_id, body.assistant_id, body.metadata, options, time.time())
    await blocking(store, tables.add_run, record)
    stored = await blocking(store, store.turn, turn.id)
    return Started(thread, row, session, turn_info(stored), body)


async def cancel_run(thread: Thread, turn_id: str) -> None:
    """Cancel one run: a running one stops (in whichever process runs it), a waiting one ends when its turn comes.

    A run waiting behind another cannot be cancelled alone (the store cancels turns up to a sequence number):
    409, cancel the earlier one first.
    """
    store = thread.store
    row = await thread.io(store.turn, turn_id)
    if row is None or row.status == "ended":
        return
    turns: list[TurnInfo] = await thread.io(thread.tables.turns, thread.thread_id)
    earlier = [t.turn_id for t in turns if t.seq < row.seq and t.status != "ended"]
    if earlier:
        refuse(409, f"Run {turn_id!r} waits behind run {earlier[0]!r}; cancel that one first.")
    await thread.io(thread.tables.cancel_through, thread.thread_id, int(row.seq))
    if row.status == "running":
        store.engine.cancel(thread.thread_id)  # when it runs here; another worker hears it at its next renewal
    else:
        store.engine.kick(thread.thread_id)  # a waiting run: start it now so it ends cancelled
