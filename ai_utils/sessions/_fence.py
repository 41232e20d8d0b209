"""Fenced checkpoint writes: the part both session savers (SQLite, Postgres) share.

While this worker leases a session, every checkpoint write for its thread runs with ``FENCE`` set to
``(session_id, token)``; each dialect's saver reads it where it opens the write transaction and checks the
lease there (`check_fence`), so a replaced worker's write never becomes visible (`SessionFencedError`).

A failed task's exception (the ``__error__`` pending write) is stored as its class name only, by the savers these
build on (`ai_utils.memory._error_writes`): the turn's ``turn_end`` line carries the safe error, the server's log
the details.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from ai_utils.exceptions import SessionFencedError
from ai_utils.memory._methods import named

__all__ = ["FENCE", "FencedWrites", "check_fence", "refused"]

P = ParamSpec("P")
R = TypeVar("R")

# (session_id, token) of the checkpoint write in progress in this context.
FENCE: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("ai_utils_session_fence", default=None)


def check_fence(fence: tuple[str, int], token: Any) -> None:
    """Refuse the write unless ``token`` (read from the session row in the write transaction) is still ours."""
    if token is None or int(token) != fence[1]:
        raise refused(fence)


def refused(fence: tuple[str, int]) -> SessionFencedError:
    """The error of a checkpoint write whose lease ``fence`` is stale."""
    return SessionFencedError(
        f"Session {fence[0]!r} was taken over by another worker; its checkpoint write is refused.",
        session_id=fence[0],
    )


def _fenced(template: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """The saver's own write method ``template`` names, run with ``FENCE`` set from its config."""
    name = template.__name__

    def write(self: FencedWrites, /, *args: P.args, **kwargs: P.kwargs) -> R:
        config = args[0] if args else kwargs["config"]
        reset = FENCE.set(self._fence(cast("RunnableConfig", config)))
        try:
            return cast("R", getattr(super(FencedWrites, self), name)(*args, **kwargs))
        finally:
            FENCE.reset(reset)

    named(write, template, name, f"``{name}`` of the saver, fenced while this worker leases the thread's session.")
    return write


class FencedWrites(BaseCheckpointSaver[Any]):
    """Mixin (first base) for a saver: ``put``/``put_writes`` run with ``FENCE`` set for leased threads."""

    leases: dict[str, int]

    def _fence(self, config: RunnableConfig) -> tuple[str, int] | None:
        thread = (config.get("configurable") or {}).get("thread_id")
        token = self.leases.get(thread) if isinstance(thread, str) else None
        return None if token is None else (thread, token)  # type: ignore[return-value]

    put = _fenced(BaseCheckpointSaver.put)
    put_writes = _fenced(BaseCheckpointSaver.put_writes)
