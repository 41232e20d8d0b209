"""`LoopRunStore`: which loop runs exist and in which state, plus each run's steering queue.

A run is recorded when it starts (before any step runs: an unreachable store fails the call there), when it
pauses at a gate, when a decision claims a gate, and when it ends. The records are for governance and
operations (`LoopRunner.runs`); the run itself lives in the checkpointer.

Three operations are atomic in every store, so that several processes can share one:

- ``claim``: a decision takes the gate it answers (state ``awaiting_approval`` and the gate still waiting)
  or nothing — two processes answering one gate, or an answer sent twice, run the gated call once;
- ``enqueue``: a steer is accepted only while the run is not sealed;
- ``complete``: at its last boundary a run either takes the messages still queued for it or seals itself and
  records ``completed`` (one write), so an accepted steer or follow-up can never be lost while the run finishes.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

__all__ = [
    "TERMINAL",
    "LoopRun",
    "LoopRunStore",
    "MemoryLoopRuns",
    "RunState",
    "SteerKind",
    "memory_loop_runs",
]

RunState = Literal["running", "awaiting_approval", "approval_approved", "resuming", "completed", "failed"]
SteerKind = Literal["steer", "follow_up"]
TERMINAL = frozenset({"completed", "failed"})
_MEMORY_RUNS = 10_000
_T = TypeVar("_T")


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)


@dataclass(frozen=True, slots=True)
class LoopRun:
    """One recorded run of a loop.

    Attributes:
        run_id: the run's id (also in `LoopResult.run_id`).
        thread_id: the checkpoint thread it runs on (a thread holds its runs one after another).
        loop: the loop's name.
        state: ``running``, ``awaiting_approval``, ``approval_approved``, ``resuming``, ``completed`` or ``failed``.
        created_at: when it started (UTC).
        updated_at: when its state last changed (UTC).
        step_keys: the steps it completed, in order (as of the last update).
        gate_ids: the gates it waits at (``awaiting_approval``), else empty.
        gates_answered: how many decisions it took.
        error: the error type it failed with (e.g. ``"LoopPermissionDeniedError"``), or ``None``.
    """

    run_id: str
    thread_id: str
    loop: str
    state: RunState
    created_at: datetime.datetime
    updated_at: datetime.datetime
    step_keys: tuple[str, ...] = ()
    gate_ids: tuple[str, ...] = ()
    gates_answered: int = 0
    error: str | None = None


class LoopRunStore:
    """Where `LoopRunner` records its runs: `memory_loop_runs`, `sqlite_loop_runs` or `postgres_loop_runs`.

    Pass one to ``LoopRunner(..., run_store=...)``; share a SQLite or Postgres store between processes to list,
    approve and steer their runs from anywhere. The sync methods are the store's; the ``a``-prefixed twins run
    them in a worker thread (where the store answers in microseconds, inline).
    """

    kind = "store"
    # The sync methods whose async twins run inline (a store answering them in microseconds: a thread hop per
    # call would cost more than the call); the others run in a worker thread.
    _inline: frozenset[str] = frozenset()

    # --- what a store implements --------------------------------------------------------------------------

    def put(self, run: LoopRun) -> None:
        """Insert or replace ``run``."""
        raise NotImplementedError

    def update(
        self,
        run_id: str,
        *,
        state: RunState,
        step_keys: Sequence[str] | None = None,
        gate_ids: Sequence[str] = (),
        error: str | None = None,
    ) -> None:
        """Set a recorded run's state (and its step keys, waiting gates and error)."""
        raise NotImplementedError

    def claim(self, run_id: str, gate_ids: Sequence[str], *, approve: bool, decision: str) -> LoopRun | None:
        """Atomically take the waiting gates ``gate_ids`` of ``run_id`` and keep the ``decision`` (JSON) for them.

        Returns ``None`` when they are not all waiting. The decision stays with the run while it is
        ``approval_approved`` or ``resuming``, so a process that dies before the gate is passed leaves a run that
        `LoopRunner.invoke` (with neither input nor decision) resumes with the same answer.
        """
        raise NotImplementedError

    def decision_of(self, run_id: str) -> str | None:
        """The decision (JSON) a claimed run resumes with, while it is ``approval_approved`` or ``resuming``."""
        raise NotImplementedError

    def get(self, run_id: str) -> LoopRun | None:
        """The run, or ``None``."""
        raise NotImplementedError

    def runs(
        self,
        *,
        loop: str | None = None,
        state: RunState | None = None,
        thread_id: str | None = None,
        limit: int = 100,
    ) -> list[LoopRun]:
        """Runs, newest first, filtered by loop name, state and thread."""
        raise NotImplementedError

    def enqueue(self, run_id: str, kind: SteerKind, text: str) -> int | None:
        """Queue a steer or follow-up for a run that is not sealed; its sequence number, or ``None`` (refused)."""
        raise NotImplementedError

    def messages(self, run_id: str, *, after: int) -> list[tuple[int, str]]:
        """The run's queued steers (not follow-ups) with a sequence number above ``after``, in order."""
        raise NotImplementedError

    def complete(
        self, run_id: str, *, steer_after: int, follow_after: int, step_keys: Sequence[str]
    ) -> list[tuple[int, SteerKind, str]]:
        """At the run's last boundary: the messages still queued, or ``[]`` and the run is now sealed and completed."""
        raise NotImplementedError

    def close(self) -> None:
        """Release connections; the store cannot be used afterwards."""

    # --- shared ------------------------------------------------------------------------------------------------

    def latest(self, thread_id: str, loop: str) -> LoopRun | None:
        """The newest run of ``loop`` on ``thread_id``."""
        runs = self.runs(loop=loop, thread_id=thread_id, limit=1)
        return runs[0] if runs else None

    async def _twin(self, method: str, call: Callable[[], _T]) -> _T:
        """Run ``call`` (the sync ``method``) inline when the store answers it in microseconds, else in a thread."""
        if method in self._inline:
            return call()
        return await asyncio.to_thread(call)

    async def aput(self, run: LoopRun) -> None:
        """Async twin of `put`."""
        await self._twin("put", lambda: self.put(run))

    async def aupdate(
        self,
        run_id: str,
        *,
        state: RunState,
        step_keys: Sequence[str] | None = None,
        gate_ids: Sequence[str] = (),
        error: str | None = None,
    ) -> None:
        """Async twin of `update`."""
        await self._twin(
            "update", lambda: self.update(run_id, state=state, step_keys=step_keys, gate_ids=gate_ids, error=error)
        )

    async def aclaim(self, run_id: str, gate_ids: Sequence[str], *, approve: bool, decision: str) -> LoopRun | None:
        """Async twin of `claim`."""
        return await self._twin("claim", lambda: self.claim(run_id, gate_ids, approve=approve, decision=decision))

    async def adecision_of(self, run_id: str) -> str | None:
        """Async twin of `decision_of`."""
        return await self._twin("decision_of", lambda: self.decision_of(run_id))

    async def aget(self, run_id: str) -> LoopRun | None:
        """Async twin of `get`."""
        return await self._twin("get", lambda: self.get(run_id))

    async def aruns(
        self,
        *,
        loop: str | None = None,
        state: RunState | None = None,
        thread_id: str | None = None,
        limit: int = 100,
    ) -> list[LoopRun]:
        """Async twin of `runs`."""
        return await self._twin("runs", lambda: self.runs(loop=loop, state=state, thread_id=thread_id, limit=limit))

    async def acomplete(
        self, run_id: str, *, steer_after: int, follow_after: int, step_keys: Sequence[str]
    ) -> list[tuple[int, SteerKind, str]]:
        """Async twin of `complete`."""
        return await self._twin(
            "complete",
            lambda: self.complete(run_id, steer_after=steer_after, follow_after=follow_after, step_keys=step_keys),
        )

    def __enter__(self) -> LoopRunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemoryLoopRuns(LoopRunStore):
    """Runs in this process's memory (see `memory_loop_runs`)."""

    kind = "memory"
    _inline = frozenset({"put", "update", "claim", "decision_of", "get", "complete"})

    def __init__(self, max_runs: int = _MEMORY_RUNS) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, LoopRun] = {}
        self._sealed: set[str] = set()
        self._queue: list[tuple[int, str, SteerKind, str]] = []
        self._decisions: dict[str, str] = {}
        self._max_runs = max_runs

    def put(self, run: LoopRun) -> None:
        """Insert or replace ``run`` (past `max_runs`, the oldest finished runs are forgotten)."""
        with self._lock:
            self._runs.pop(run.run_id, None)
            self._runs[run.run_id] = run
            if len(self._runs) > self._max_runs:
                for old in [k for k, r in self._runs.items() if r.state in TERMINAL][: len(self._runs) // 10 or 1]:
                    del self._runs[old]
                    self._sealed.discard(old)
                    self._decisions.pop(old, None)
                    self._queue = [m for m in self._queue if m[1] != old]

    def update(
        self,
        run_id: str,
        *,
        state: RunState,
        step_keys: Sequence[str] | None = None,
        gate_ids: Sequence[str] = (),
        error: str | None = None,
    ) -> None:
        """Set a recorded run's state."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return
            keys = run.step_keys if step_keys is None else tuple(step_keys)
            self._runs[run_id] = LoopRun(
                run.run_id,
                run.thread_id,
                run.loop,
                state,
                run.created_at,
                _utc(time.time()),
                keys,
                tuple(gate_ids),
                run.gates_answered,
                error,
            )
            if state in TERMINAL:
                self._sealed.add(run_id)
            if state not in ("approval_approved", "resuming"):
                self._decisions.pop(run_id, None)

    def claim(self, run_id: str, gate_ids: Sequence[str], *, approve: bool, decision: str) -> LoopRun | None:
        """Atomically take waiting gates."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.state != "awaiting_approval" or not set(gate_ids) <= set(run.gate_ids):
                return None
            claimed = replace(
                run,
                state="approval_approved" if approve else "resuming",
                gate_ids=tuple(g for g in run.gate_ids if g not in gate_ids),
                gates_answered=run.gates_answered + 1,
                updated_at=_utc(time.time()),
            )
            self._runs[run_id] = claimed
            self._decisions[run_id] = decision
            return claimed

    def decision_of(self, run_id: str) -> str | None:
        """The claimed decision, if any."""
        with self._lock:
            return self._decisions.get(run_id)

    def get(self, run_id: str) -> LoopRun | None:
        """The run, or ``None``."""
        with self._lock:
            return self._runs.get(run_id)

    def runs(
        self,
        *,
        loop: str | None = None,
        state: RunState | None = None,
        thread_id: str | None = None,
        limit: int = 100,
    ) -> list[LoopRun]:
        """Runs, newest first."""
        with self._lock:
            runs = [
                r
                for r in reversed(self._runs.values())
                if (loop is None or r.loop == loop)
                and (state is None or r.state == state)
                and (thread_id is None or r.thread_id == thread_id)
            ]
        runs.sort(key=lambda r: r.created_at, reverse=True)
        return runs[:limit]

    def enqueue(self, run_id: str, kind: SteerKind, text: str) -> int | None:
        """Queue a message for a run that is not sealed."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run_id in self._sealed or run.state in TERMINAL:
                return None
            seq = (self._queue[-1][0] if self._queue else 0) + 1
            self._queue.append((seq, run_id, kind, text))
            return seq

    def messages(self, run_id: str, *, after: int) -> list[tuple[int, str]]:
        """Queued steers above ``after``."""
        if not self._queue:  # the common case, without the lock
            return []
        with self._lock:
            return [(s, t) for s, r, k, t in self._queue if r == run_id and k == "steer" and s > after]

    def complete(
        self, run_id: str, *, steer_after: int, follow_after: int, step_keys: Sequence[str]
    ) -> list[tuple[int, SteerKind, str]]:
        """Take what is still queued, or seal and complete."""
        with self._lock:
            pending = [
                (s, k, t)
                for s, r, k, t in self._queue
                if r == run_id and s > (steer_after if k == "steer" else follow_after)
            ]
            if pending:
                return pending
            self._sealed.add(run_id)
            self._decisions.pop(run_id, None)
            run = self._runs.get(run_id)
            if run is not None:
                self._runs[run_id] = LoopRun(
                    run.run_id,
                    run.thread_id,
                    run.loop,
                    "completed",
                    run.created_at,
                    _utc(time.time()),
                    tuple(step_keys),
                    (),
                    run.gates_answered,
                    None,
                )
            return []

    def __repr__(self) -> str:
        return f"memory_loop_runs() ({len(self._runs)} runs)"


def memory_loop_runs() -> LoopRunStore:
    """A run store in this process's memory (the default of `LoopRunner`): runs, states and steering queues.

    Runs are listed only in this process and forgotten when it ends (past 10,000 runs the oldest finished ones
    are dropped); use `sqlite_loop_runs` or `postgres_loop_runs` to share them between processes.
    """
    return MemoryLoopRuns()


def record(
    run_id: str, thread_id: str, loop: str, state: RunState, *, step_keys: Sequence[str] = (), now: float | None = None
) -> LoopRun:
    """A new record (``created_at`` = ``updated_at`` = now)."""
    at = _utc(time.time() if now is None else now)
    return LoopRun(run_id, thread_id, loop, state, at, at, tuple(step_keys))


def from_row(row: Sequence[Any]) -> LoopRun:
    """A record from a SQL row (the column order of `COLUMNS`)."""
    import json

    run_id, thread_id, loop, state, created, updated, keys, gates, answered, error = row[:10]
    return LoopRun(
        str(run_id),
        str(thread_id),
        str(loop),
        state,
        _utc(float(created)),
        _utc(float(updated)),
        tuple(json.loads(keys or "[]")),
        tuple(json.loads(gates or "[]")),
        int(answered or 0),
        error,
    )


COLUMNS = "run_id, thread_id, loop, state, created_at, updated_at, step_keys, gate_ids, gates_answered, error"
