"""NDJSON encoding of stream chunks, free of any web framework.

``encode_chunk`` turns one chunk into one line; ``ndjson_lines``/``andjson_lines`` turn a whole
(sync/async) chunk stream into lines and end a failed stream with an ``ErrorEvent`` line instead of a
silent cut. ``StreamResponse`` (Starlette) is built on them; any other server can use them directly.

What an error line says: for our own errors (`AiUtilsError`: a `UserError`, a `ModelOutputError`, ...) the
class and message, which name the bad value and the fix. For anything else (a bug, a driver error whose text
may hold SQL, paths or data) only the class and a generic message with an ``error_id``; the full text and
traceback are logged under that id on logger ``"ai_utils.streaming"``. ``expose_errors=True`` sends every
message as it is (development). `UserError`s are logged at WARNING without a traceback: they are the
caller's mistake, not the server's.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Generator, Iterable
from typing import Any

from ai_utils.client import ErrorEvent
from ai_utils.exceptions import AiUtilsError, UserError
from ai_utils.streaming._closing import Closing

__all__ = [
    "PASS_THROUGH",
    "ErrorHook",
    "ErrorLine",
    "andjson_lines",
    "encode_chunk",
    "error_event",
    "error_line",
    "error_status",
    "failure_event",
    "json_value",
    "ndjson_lines",
]

ErrorHook = Callable[[BaseException, ErrorEvent], ErrorEvent]
"""``on_error(exc, event) -> event``: the error line to send instead of ``event`` (e.g. your own message)."""

# Never turned into an error line: closing a generator and cancelling a task must work as usual.
PASS_THROUGH = (GeneratorExit, asyncio.CancelledError)

_log = logging.getLogger("ai_utils.streaming")


def _fallback(value: Any) -> str:
    """Values JSON cannot hold (models, paths in tool args) are sent as their text; dates as ISO, like orjson."""
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def _dumps_stdlib(chunk: Any) -> bytes:
    return (json.dumps(chunk, ensure_ascii=False, separators=(",", ":"), default=_fallback) + "\n").encode()


def _value_stdlib(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_fallback).encode()


_dumps: Callable[[Any], bytes]
json_value: Callable[[Any], bytes]
"""``value`` as compact UTF-8 JSON with no newline (what an SSE frame carries), with the line encoder's fallbacks."""
try:
    import orjson
except ImportError:  # pragma: no cover - orjson comes with langsmith; the stdlib path is tested directly
    _dumps = _dumps_stdlib
    json_value = _value_stdlib
else:
    _OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS

    def _dumps_orjson(chunk: Any) -> bytes:
        try:
            return orjson.dumps(chunk, default=_fallback, option=_OPTIONS)
        except TypeError:  # what orjson refuses (integers beyond 64 bits) the stdlib writes, as ai_utils._json
            return _dumps_stdlib(chunk)

    def _value_orjson(value: Any) -> bytes:
        try:
            return orjson.dumps(value, default=_fallback, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:
            return _value_stdlib(value)

    _dumps = _dumps_orjson
    json_value = _value_orjson


def encode_chunk(chunk: Any) -> bytes:
    """Encode one stream chunk as one NDJSON line.

    Args:
        chunk: a ``StreamChunk``: a text chunk becomes a JSON string, an event a JSON object.

    Returns:
        UTF-8 JSON followed by a newline byte.
    """
    return _dumps(chunk)


def error_event(exc: BaseException, *, expose: bool = True, error_id: str | None = None) -> ErrorEvent:
    """The ``ErrorEvent`` that ends a failed stream.

    Args:
        exc: the exception that stopped the stream.
        expose: send the message of an exception that is not an `AiUtilsError` (else a generic one).
        error_id: the id under which the failure was logged; added to the event when given.

    Returns:
        ``{"kind": "error", "type": <class name>, "message": ...}`` (plus ``"error_id"``).
    """
    if expose or isinstance(exc, AiUtilsError):
        message = str(exc) or type(exc).__name__
    else:
        message = f"The server failed ({type(exc).__name__}); error id {error_id or '-'}."
    event: ErrorEvent = {"kind": "error", "type": type(exc).__name__, "message": message}
    if error_id is not None:
        event["error_id"] = error_id
    return event


def error_status(exc: BaseException) -> int:
    """The HTTP status for a failure before the first line: 400 for a `UserError`, else 500."""
    return 400 if isinstance(exc, UserError) else 500


class ErrorLine(bytes):
    """An encoded error line; ``status`` is the HTTP status it calls for if it is the first line."""

    status: int


def failure_event(exc: BaseException, *, expose: bool = False, on_error: ErrorHook | None = None) -> ErrorEvent:
    """Log a failure once and build the error object a client gets for it (any wire format).

    Args:
        exc: the exception that stopped the stream (or the request).
        expose: send the message of an exception that is not an `AiUtilsError` (else generic + ``error_id``).
        on_error: ``(exc, event) -> event``, to change the object.

    Returns:
        The ``ErrorEvent``; `UserError`s are logged at WARNING without a traceback, anything else at ERROR.
    """
    if isinstance(exc, UserError):
        _log.warning("stream refused: %s: %s", type(exc).__name__, exc)
        event = error_event(exc)
    elif isinstance(exc, AiUtilsError):
        _log.error("stream failed; sending an error line", exc_info=exc)
        event = error_event(exc)
    else:
        error_id = uuid.uuid4().hex[:12]
        _log.error("stream failed (error id %s); sending an error line", error_id, exc_info=exc)
        event = error_event(exc, expose=expose, error_id=error_id)
    if on_error is not None:
        event = on_error(exc, event)
    return event


def error_line(event: ErrorEvent, status: int) -> ErrorLine:
    """``event`` as an encoded `ErrorLine` that calls for ``status`` if it is the first line of a response."""
    line = ErrorLine(_dumps(event))
    line.status = status
    return line


def _error_line(exc: BaseException, *, expose: bool, on_error: ErrorHook | None) -> ErrorLine:
    return error_line(failure_event(exc, expose=expose, on_error=on_error), error_status(exc))


def _final_line(exc: BaseException, expose: bool, on_error: ErrorHook | None) -> ErrorLine:
    """The error line that ends a failed stream; closing the generator or cancelling the task goes on as usual."""
    if isinstance(exc, PASS_THROUGH):
        raise exc
    return _error_line(exc, expose=expose, on_error=on_error)


def ndjson_lines(
    chunks: Iterable[Any], *, expose_errors: bool = False, on_error: ErrorHook | None = None
) -> Generator[bytes, None, None]:
    """Encode a sync chunk stream line by line; an exception becomes a final error line.

    Any exception, also a ``SystemExit``/``KeyboardInterrupt`` raised inside the run, ends the stream with
    an error line (an `ErrorLine`, whose ``status`` a server may use if it is the first line).

    Args:
        chunks: e.g. ``agent.stream(...)``.
        expose_errors: send the message of errors that are not `AiUtilsError`s (else generic + error id).
        on_error: ``(exc, event) -> event``, to change the error line.

    Yields:
        One encoded line per chunk. Closing this generator closes ``chunks``.
    """
    iterator = iter(chunks)
    with Closing(iterator):
        try:
            for chunk in iterator:
                yield _dumps(chunk)
        except BaseException as exc:
            yield _final_line(exc, expose_errors, on_error)


async def andjson_lines(
    chunks: AsyncIterable[Any], *, expose_errors: bool = False, on_error: ErrorHook | None = None
) -> AsyncGenerator[bytes, None]:
    """Async twin of ``ndjson_lines`` (e.g. over ``agent.astream(...)``), with the same arguments and lines."""
    iterator = aiter(chunks)
    async with Closing(iterator):
        try:
            async for chunk in iterator:
                yield _dumps(chunk)
        except BaseException as exc:
            yield _final_line(exc, expose_errors, on_error)
