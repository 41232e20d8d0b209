"""Diagnostics apart from the stream: ``Agent(..., sessions=store, on_event=fn)`` and what each turn measures.

`Emitter` hands ``{"type": ..., "at": <unix time>, ...}`` events to the agent's ``on_event`` (sync, or async:
then run as a task). They name sessions, turns, leases, models, tools, stop reasons, timings and error
*types* only — never a credential, a ``context`` value, message content or an error's text, so a sink can
ship them anywhere. A sink that raises is logged and never fails a turn.

`TurnWatch` is the LangChain callback handler a turn runs with: it sums the turn's token usage, keeps the
last model call's finish reason (``length`` -> stop reason ``max_output_tokens``, ``content_filter`` or a
refusal -> ``refused``) and emits ``model.request`` / ``model.retry``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from ai_utils._secrets import redact_secrets
from ai_utils.exceptions import AiUtilsError, UserError

__all__ = [
    "EVENT_TYPES",
    "Emitter",
    "TurnWatch",
    "check_sink",
    "fingerprint_changes",
    "stop_for_finish",
    "turn_error",
]

logger = logging.getLogger("ai_utils.sessions")

EVENT_TYPES = (
    "turn.accepted",
    "turn.started",
    "turn.resumed",
    "turn.ended",
    "lease.acquired",
    "lease.lost",
    "model.request",
    "model.retry",
    "checkpoint.mismatch",
)

# Provider finish reasons (OpenAI, Anthropic, Gemini, ...) that end a turn other than normally.
_MAX_OUTPUT = frozenset({"length", "max_tokens", "max_output_tokens", "model_length"})
_REFUSED = frozenset({"content_filter", "refusal", "safety", "prohibited_content", "blocklist", "spii", "recitation"})


def check_sink(fn: Any, owner: str) -> Callable[[dict[str, Any]], Any] | None:
    """``on_event`` when it is callable (or ``None``), else `UserError`."""
    if fn is not None and not callable(fn):
        raise UserError(
            f"{owner}(on_event=...) must be a function `(event: dict) -> None` (sync or async), got {fn!r}."
        )
    return cast("Callable[[dict[str, Any]], Any] | None", fn)


class Emitter:
    """Calls one ``on_event`` sink; keeps the tasks of an async sink alive until they finish."""

    def __init__(self, sink: Callable[[dict[str, Any]], Any] | None) -> None:
        self.sink = sink
        self._tasks: set[asyncio.Future[Any]] = set()

    def __bool__(self) -> bool:
        return self.sink is not None

    def emit(self, type: str, **fields: Any) -> None:
        """Send one event (no-op without a sink)."""
        if self.sink is None:
            return
        event = {"type": type, "at": time.time(), **fields}
        try:
            result = self.sink(event)
            if inspect.isawaitable(result):
                self._schedule(result)
        except Exception:
            logger.exception("on_event failed for a %r event; the turn goes on", type)

    def _schedule(self, awaitable: Any) -> None:
        async def run() -> None:
            try:
                await awaitable
            except Exception:
                logger.exception("on_event failed; the turn goes on")

        try:
            task: asyncio.Future[Any] = asyncio.get_running_loop().create_task(run())
        except RuntimeError:  # called from sync code: run it to the end here
            from ai_utils._utils import run_sync

            run_sync(run(), what="an async on_event")
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


_CONTEXT_MARK = "[context]"
_MIN_SECRET = 4  # shorter context values ("en", ids like 7) are not worth hiding and would garble messages
_MAX_VALUES = 256


def _context_values(context: Any, depth: int = 0) -> Iterator[str]:
    """The text leaves of a turn's ``context`` (a dataclass, a pydantic model, mappings, sequences), bounded."""
    if depth > 8 or context is None or isinstance(context, bool):
        return
    if isinstance(context, str):
        if len(context) >= _MIN_SECRET:
            yield context
        return
    if isinstance(context, int | float):
        if len(text := str(context)) >= _MIN_SECRET:
            yield text
        return
    if dataclasses.is_dataclass(context) and not isinstance(context, type):
        children: Any = [getattr(context, f.name, None) for f in dataclasses.fields(context)]
    elif hasattr(context, "model_dump") and callable(context.model_dump):
        children = list(vars(context).values()) if hasattr(context, "__dict__") else []
    elif isinstance(context, Mapping):
        children = list(context.values())
    elif isinstance(context, list | tuple | set | frozenset):
        children = list(context)
    else:
        return
    for child in children[:_MAX_VALUES]:
        yield from _context_values(child, depth + 1)


def _without_context(text: str, context: Any) -> str:
    """``text`` with the context's values and secret shapes (keys, tokens) cut out."""
    # Longest first: a value that contains another is cut whole.
    for value in sorted(set(_context_values(context)), key=len, reverse=True)[:_MAX_VALUES]:
        text = text.replace(value, _CONTEXT_MARK)
    return redact_secrets(text)[0]


def turn_error(exc: BaseException, context: Any = None) -> dict[str, str]:
    """The ``error`` a failed turn stores with its ``turn_end`` line: safe to replay to any reader.

    The log is replayed to every reader of the session (over HTTP too) and stored for good, so it never holds
    an exception's raw text. ai_utils' own errors keep their message (it names the bad value and the fix) with
    every value of the turn's ``context`` and every secret shape (`ai_utils._secrets`) cut out; any other
    failure (a provider error may quote a key, a driver error SQL or data) reads generically. The traceback is
    logged once on logger ``ai_utils.sessions`` under the ``error_id``, with the same values cut out.

    Returns:
        ``{"type": <class name>, "message", "error_id"}``, plus ``"code"`` when the error has a stable one.
    """
    name = type(exc).__name__
    error_id = uuid.uuid4().hex[:12]
    if isinstance(exc, AiUtilsError):
        message = _without_context(str(exc) or name, context)
    else:
        message = f"The turn failed ({name}); the server's log has the details (error id {error_id})."
    details = _without_context("".join(traceback.format_exception(exc)), context)
    logger.error("turn failed (error id %s):\n%s", error_id, details.rstrip())
    error = {"type": name, "message": message, "error_id": error_id}
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code:
        error["code"] = code
    return error


def stop_for_finish(reason: object) -> str | None:
    """The stop reason a provider's finish reason stands for (``None``: the turn ended normally)."""
    if not isinstance(reason, str):
        return None
    value = reason.lower()
    if value in _MAX_OUTPUT:
        return "max_output_tokens"
    if value in _REFUSED:
        return "refused"
    return None


def _finish_reason(message: Any, info: Mapping[str, Any] | None) -> str | None:
    """The reason the model stopped; one that ends the turn other than normally wins.

    Providers name it ``finish_reason`` (OpenAI, Gemini) or ``stop_reason`` (Anthropic), some both.
    """
    meta = getattr(message, "response_metadata", None) or {}
    if (getattr(message, "additional_kwargs", None) or {}).get("refusal"):
        return "refusal"
    found: str | None = None
    for source in (meta, info or {}):
        for key in ("finish_reason", "stop_reason"):
            value = source.get(key)
            if isinstance(value, str):
                if stop_for_finish(value) is not None:
                    return value
                found = found or value
    return found


class TurnWatch(BaseCallbackHandler):
    """One turn's model calls: summed usage, the last finish reason, ``model.request`` / ``model.retry`` events."""

    run_inline = True

    def __init__(self, emitter: Emitter, session_id: str, turn_id: str) -> None:
        self.emitter = emitter
        self.ids = {"session_id": session_id, "turn_id": turn_id}
        self.total = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        self.finish: str | None = None
        self._started: dict[UUID, tuple[float, str | None]] = {}
        self._attempt = 0
        self._failed = False

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        model = (kwargs.get("metadata") or {}).get("ls_model_name")
        self._attempt = self._attempt + 1 if self._failed else 1
        if self._failed:
            self.emitter.emit("model.retry", **self.ids, model=model, attempt=self._attempt)
        self._started[run_id] = (time.perf_counter(), model if isinstance(model, str) else None)

    def on_retry(self, retry_state: Any, *, run_id: UUID, **kwargs: Any) -> None:
        outcome = getattr(retry_state, "outcome", None)
        error = outcome.exception() if outcome is not None and outcome.failed else None
        self.emitter.emit(
            "model.retry",
            **self.ids,
            attempt=int(getattr(retry_state, "attempt_number", 0) or 0) + 1,
            error_type=type(error).__name__ if error is not None else None,
        )

    def _request(self, run_id: UUID, ok: bool, error: BaseException | None = None) -> None:
        started = self._started.pop(run_id, None)
        self._failed = not ok
        if started is None or not self.emitter:
            return
        fields: dict[str, Any] = {
            "model": started[1],
            "elapsed_ms": round((time.perf_counter() - started[0]) * 1000, 3),
        }
        if error is not None:
            fields["error_type"] = type(error).__name__
        self.emitter.emit("model.request", **self.ids, **fields, attempt=self._attempt, ok=ok)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                usage = getattr(message, "usage_metadata", None) or {}
                for key in self.total:
                    self.total[key] += int(usage.get(key, 0) or 0)
                self.finish = _finish_reason(message, generation.generation_info)
        self._request(run_id, True)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._request(run_id, False, error)


def fingerprint_changes(before: Mapping[str, Any] | None, now: Mapping[str, Any]) -> dict[str, Any]:
    """What differs between the tool set / model a session's thread was written with and this agent's."""
    if not before:
        return {}
    changed: dict[str, Any] = {}
    old_tools: Sequence[str] = before.get("tools") or []
    new_tools: Sequence[str] = now.get("tools") or []
    if sorted(old_tools) != sorted(new_tools):
        changed["tools"] = {
            "added": sorted(set(new_tools) - set(old_tools)),
            "removed": sorted(set(old_tools) - set(new_tools)),
        }
    if before.get("model") != now.get("model"):
        changed["model"] = {"before": before.get("model"), "now": now.get("model")}
    return changed
