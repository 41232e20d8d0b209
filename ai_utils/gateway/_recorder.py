"""`CallRecorder`: a gateway's audit writer and event emitter, the one object its callback handlers are handed.

The gateway owns one; the handlers it builds write rows and emit events through it, so the handler needs
nothing private from `Gateway` (and `callbacks` does not import `gateway`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar, overload

from ai_utils.gateway.audit import AuditEntry, AuditSink
from ai_utils.gateway.errors import AuditWriteError
from ai_utils.gateway.events import GatewayEvent

__all__ = ["AuditMode", "CallRecorder", "OnRecorder"]

logger = logging.getLogger("ai_utils.gateway")

AuditMode = Literal["best-effort", "required"]
T = TypeVar("T")


def _default_audit_error(error: BaseException, entry: AuditEntry) -> None:
    # The row goes to the log in full, so a sink outage never loses it silently.
    logger.error("Audit sink failed (%s: %s); unwritten row: %r", type(error).__name__, error, entry.to_dict())


class CallRecorder:
    """Write audit rows to a sink and hand events to a hook, as a gateway's settings say.

    Args:
        audit: the sink.
        audit_mode: ``"required"`` turns a failed write into `AuditWriteError` (after ``on_audit_error``).
        on_event: called with every event (sync, or async: then scheduled on the running loop); errors are logged.
        on_audit_error: ``(error, entry)`` for a failed write; ``None`` logs the full row at ERROR.
        now: the clock for ``created_at``.
    """

    def __init__(
        self,
        *,
        audit: AuditSink,
        audit_mode: AuditMode,
        on_event: Callable[[GatewayEvent], Any] | None,
        on_audit_error: Callable[[BaseException, AuditEntry], Any] | None,
        now: Callable[[], datetime],
    ) -> None:
        self.audit = audit
        self.audit_mode: AuditMode = audit_mode
        self.on_event = on_event
        self.on_audit_error: Callable[[BaseException, AuditEntry], Any] = on_audit_error or _default_audit_error
        self.now = now
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def required(self) -> bool:
        """Whether a failed write fails the call (``audit_mode="required"``)."""
        return self.audit_mode == "required"

    @property
    def listening(self) -> bool:
        """Whether anyone receives events (callers skip building them otherwise)."""
        return self.on_event is not None

    def write(self, entry: AuditEntry) -> None:
        """Write one row; a sink failure goes to ``on_audit_error``.

        Args:
            entry: the row.

        Raises:
            AuditWriteError: the sink failed and the audit mode is ``"required"``.
        """
        try:
            self.audit.write(entry)
        except Exception as error:
            try:
                self.on_audit_error(error, entry)
            except Exception:
                logger.exception("on_audit_error failed for request %s", entry.request_id)
            if self.required:
                raise AuditWriteError(
                    f"Audit sink {type(self.audit).__name__} failed for request {entry.request_id!r} and "
                    f"audit_mode is 'required' ({type(error).__name__}: {error}). Fix the sink or use 'best-effort'."
                ) from error

    def emit(self, event: GatewayEvent) -> None:
        """Hand one event to ``on_event``; its errors are logged, never raised.

        Args:
            event: the event.
        """
        if self.on_event is None:
            return
        try:
            result = self.on_event(event)
            if inspect.isawaitable(result):
                self._schedule(result)
        except Exception:
            logger.exception("on_event failed for %s %s", event.type, event.request_id)

    def _schedule(self, awaitable: Any) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            from ai_utils._utils import run_sync

            async def wait() -> None:
                await awaitable

            run_sync(wait, what="an async on_event hook")
            return
        task = asyncio.ensure_future(awaitable, loop=loop)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("on_event failed", exc_info=task.exception())


class OnRecorder(Generic[T]):
    """An attribute of an owner with a ``_recorder`` (the `Gateway`) that lives on that `CallRecorder`."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, owner: None, kind: type) -> OnRecorder[T]: ...
    @overload
    def __get__(self, owner: object, kind: type | None = None) -> T: ...
    def __get__(self, owner: object, kind: type | None = None) -> T | OnRecorder[T]:
        if owner is None:
            return self
        value: T = getattr(owner._recorder, self.name)  # type: ignore[attr-defined]
        return value

    def __set__(self, owner: Any, value: T) -> None:
        setattr(owner._recorder, self.name, value)
