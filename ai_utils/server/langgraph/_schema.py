"""Pure mappers to the LangGraph Server's objects (``langgraph_sdk.schema``).

Agent -> Assistant, session -> Thread, turn -> Run, checkpoint snapshot -> ThreadState.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from ai_utils.server.langgraph._messages import values_dict
from ai_utils.server.langgraph._parts import RunStatus, run_status
from ai_utils.server.langgraph._tables import RunRow, ThreadRow, TurnInfo

if TYPE_CHECKING:  # the shapes only: the routes never need langgraph-sdk installed
    from langgraph_sdk.schema import Assistant, Checkpoint, Interrupt, Run, Thread, ThreadState, ThreadStatus

__all__ = ["assistant", "interrupts_of", "iso", "run", "thread", "thread_state", "turn_status"]


def iso(stamp: float | None) -> str:
    """A unix time as an ISO 8601 string (UTC)."""
    return datetime.fromtimestamp(stamp or 0.0, tz=UTC).isoformat()


def assistant(name: str, agent: Any, created: float) -> Assistant:
    """The assistant of an agent: its name is the assistant id and the graph id."""
    description = getattr(agent, "describe", None)
    return cast(
        "Assistant",
        {
            "assistant_id": name,
            "graph_id": name,
            "config": {},
            "context": {},
            "created_at": iso(created),
            "updated_at": iso(created),
            "metadata": {"created_by": "system"},
            "version": 1,
            "name": name,
            "description": description if isinstance(description, str) else None,
        },
    )


def turn_status(turn: TurnInfo) -> RunStatus:
    """A turn's run status: ``pending`` while queued, ``running``, then by its stop reason."""
    if turn.status == "running":
        return "running"
    if turn.status == "ended":
        return run_status(turn.stop_reason)
    return "pending"


def run(turn: TurnInfo, thread_id: str, record: RunRow | None, default_assistant: str) -> Run:
    """A turn as a run (a turn made outside this API has no record: its thread's assistant, no metadata)."""
    created = iso(record.created if record is not None else None)
    body: dict[str, Any] = {
        "run_id": turn.turn_id,
        "thread_id": thread_id,
        "assistant_id": record.assistant if record is not None else default_assistant,
        "created_at": created,
        "updated_at": created,
        "status": turn_status(turn),
        "metadata": record.metadata if record is not None else {},
        "multitask_strategy": (record.options.get("multitask_strategy") if record is not None else None) or "reject",
    }
    if turn.stop_reason == "cancelled":
        body["cancel_reason"] = "cancelled"
    return cast("Run", body)


def _interrupt(item: Any) -> Interrupt:
    return cast("Interrupt", {"value": values_dict({"v": item.value}, {})["v"], "id": str(item.id)})


def interrupts_of(snapshot: Any) -> list[Interrupt]:
    """The snapshot's pending interrupts as ``{"value", "id"}``."""
    return [_interrupt(i) for i in getattr(snapshot, "interrupts", ()) or ()]


def _checkpoint(config: Mapping[str, Any] | None, thread_id: str) -> Checkpoint | None:
    if not config:
        return None
    conf = config.get("configurable") or {}
    return {
        "thread_id": thread_id,
        "checkpoint_ns": str(conf.get("checkpoint_ns", "")),
        "checkpoint_id": conf.get("checkpoint_id"),
        "checkpoint_map": conf.get("checkpoint_map"),
    }


def _task(task: Any, human_ids: Mapping[str, str]) -> dict[str, Any]:
    error = getattr(task, "error", None)
    result = getattr(task, "result", None)
    return {
        "id": task.id,
        "name": task.name,
        "error": None if error is None else type(error).__name__,  # never an exception's text
        "interrupts": [_interrupt(i) for i in task.interrupts],
        "checkpoint": None,
        "state": None,
        "result": values_dict(result, human_ids) if isinstance(result, Mapping) else None,
    }


def thread_state(snapshot: Any, thread_id: str, human_ids: Mapping[str, str]) -> ThreadState:
    """A checkpoint snapshot (``graph.get_state``) as a ThreadState; ``None`` -> the empty state of a new thread."""
    if snapshot is None or getattr(snapshot, "created_at", None) is None:
        empty: Checkpoint = {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": None, "checkpoint_map": None}
        state: dict[str, Any] = {
            "values": {},
            "next": [],
            "checkpoint": empty,
            "metadata": {},
            "created_at": None,
            "parent_checkpoint": None,
            "tasks": [],
            "interrupts": [],
        }
        return cast("ThreadState", state)
    metadata = values_dict(snapshot.metadata or {}, human_ids)
    state = {
        "values": values_dict(snapshot.values, human_ids),
        "next": list(snapshot.next),
        "checkpoint": _checkpoint(snapshot.config, thread_id),
        "metadata": metadata,
        "created_at": snapshot.created_at,
        "parent_checkpoint": _checkpoint(snapshot.parent_config, thread_id),
        "tasks": [_task(t, human_ids) for t in snapshot.tasks],
        "interrupts": interrupts_of(snapshot),
    }
    return cast("ThreadState", state)


def thread(row: ThreadRow, busy: bool, snapshot: Any, last: TurnInfo | None, human_ids: Mapping[str, str]) -> Thread:
    """A thread: its row, whether a turn runs or waits, and its current state."""
    status: ThreadStatus = "idle"
    if busy:
        status = "busy"
    elif snapshot is not None and getattr(snapshot, "interrupts", None):
        status = "interrupted"
    elif last is not None and turn_status(last) == "error":
        status = "error"
    interrupts: dict[str, list[Interrupt]] = {}
    for task in getattr(snapshot, "tasks", ()) or ():
        if task.interrupts:
            interrupts[task.id] = [_interrupt(i) for i in task.interrupts]
    values = values_dict(snapshot.values, human_ids) if snapshot is not None else {}
    body = {
        "thread_id": row.thread_id,
        "created_at": iso(row.created),
        "updated_at": iso(row.updated),
        "metadata": row.metadata,
        "status": status,
        "values": values,
        "interrupts": interrupts,
    }
    return cast("Thread", body)


def last_ended(turns: Sequence[TurnInfo]) -> TurnInfo | None:
    """The thread's last ended turn."""
    return next((t for t in reversed(turns) if t.status == "ended"), None)
