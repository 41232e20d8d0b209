"""``StreamResponse``: an agent stream as an ``application/x-ndjson`` Starlette/FastAPI response."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import AsyncIterable, AsyncIterator, Generator, Iterable, Mapping
from typing import Any, cast

import anyio

from ai_utils._optional import missing_extra
from ai_utils.streaming._encode import ErrorHook, ErrorLine, andjson_lines, encode_chunk, ndjson_lines

try:
    from starlette.background import BackgroundTask
    from starlette.responses import StreamingResponse
    from starlette.types import Message, Send
except ImportError as _import_error:
    raise missing_extra("starlette", extra="server", feature="StreamResponse") from _import_error

__all__ = ["StreamResponse", "encode_chunk"]

_STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    # Tell nginx-style proxies not to buffer, so each line reaches the client as it is produced.
    "X-Accel-Buffering": "no",
}

# Headers that describe the stream; an error before the first line is one JSON object instead, so they go (the AI
# SDK's header would tell a client the body is a UI message stream).
_STREAM_ONLY = frozenset({b"content-type", b"x-vercel-ai-ui-message-stream"})


async def _in_worker_threads(lines: Generator[bytes, None, None]) -> AsyncIterator[bytes]:
    """Pull a sync stream from worker threads, so the event loop never blocks.

    Unlike Starlette's helper it closes the stream when we stop early (which stops the agent run), and
    it runs every step in one shared context, so context variables set by the stream persist.
    """
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    step: asyncio.Future[bytes | None] | None = None

    def advance() -> bytes | None:
        return next(lines, None)

    try:
        while True:
            step = loop.run_in_executor(None, functools.partial(context.run, advance))
            # Shielded: a cancel must not orphan a step that is still running in its thread.
            line = await asyncio.shield(step)
            if line is None:
                break
            yield line
    finally:
        with anyio.CancelScope(shield=True):
            if step is not None and not step.done():
                await asyncio.wait([step])
            await loop.run_in_executor(None, functools.partial(context.run, lines.close))


class StreamResponse(StreamingResponse):
    """Stream chunks as NDJSON: one JSON value per line, a text chunk as a JSON string.

    Accepts a sync iterable (run in a worker thread, so the event loop never blocks) or an async
    iterable, e.g. ``agent.astream(...)``. When the client disconnects, the chunk source is closed, which
    stops the agent run.

    Errors have one shape, ``{"kind": "error", "type": <exception class>, "message": ...}``:

    - before the first line (a bad call such as ``input`` with ``decision``, a missing ``thread_id``): the
      whole body is that object as ``application/json``, with status 400 for a `UserError`, else 500;
    - after it: the stream's last line, status 200 (already sent).

    For errors that are not ai_utils' own (`AiUtilsError`) the message is generic and ``error_id`` names the
    log record (logger ``"ai_utils.streaming"``) holding the full text, unless ``expose_errors=True``.

    Args:
        chunks: the stream, e.g. ``agent.astream(message, thread_id=tid)``.
        status_code: HTTP status, 200 by default.
        headers: extra response headers.
        background: a Starlette task run after the body was sent.
        expose_errors: send every error's own message (development; it may hold paths, SQL or data).
        on_error: ``(exc, event) -> event``: the error object to send instead (e.g. a localized message).

    Example:
        ```python
        @app.post("/chat")
        async def chat(body: ChatIn) -> StreamResponse:
            return StreamResponse(agent.astream(body.message, thread_id=body.thread_id, show_tool_calls=True))
        ```
    """

    media_type = "application/x-ndjson"

    def __init__(
        self,
        chunks: Iterable[Any] | AsyncIterable[Any],
        *,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        background: BackgroundTask | None = None,
        expose_errors: bool = False,
        on_error: ErrorHook | None = None,
    ) -> None:
        lines: AsyncIterator[bytes]
        if isinstance(chunks, AsyncIterable):
            lines = andjson_lines(chunks, expose_errors=expose_errors, on_error=on_error)
        else:
            lines = _in_worker_threads(ndjson_lines(chunks, expose_errors=expose_errors, on_error=on_error))
        super().__init__(lines, status_code, {**_STREAM_HEADERS, **(headers or {})}, None, background)

    async def stream_response(self, send: Send) -> None:
        """Send the body; stop and close the chunk source however sending ends (done, error, disconnect).

        The body is pumped in its own task. On a client disconnect Starlette cancels the response's
        cancel scope, which re-cancels at every ``await``; LangGraph's ``astream`` cleanup does not
        survive that (its running tools go on). The pump is therefore cancelled exactly once, like a
        plain ``task.cancel()``, and its cleanup is awaited under a shield (asyncio only, as LangGraph).
        """
        pump = asyncio.ensure_future(super().stream_response(_status_from_first_line(send)))
        try:
            await asyncio.shield(pump)
        finally:
            if not pump.done():
                pump.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([pump])
                if not pump.cancelled():
                    pump.exception()  # mark it retrieved; it already propagated through the shield or is moot
                aclose = getattr(self.body_iterator, "aclose", None)
                if aclose is not None:
                    await aclose()


def _status_from_first_line(send: Send) -> Send:
    """Hold the response start until the first body part: an error as the first line sets the status."""
    start: Message | None = None

    async def deferred(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if start is not None:
            first, start = start, None
            body = message.get("body")
            if isinstance(body, ErrorLine):
                headers = [(k, v) for k, v in first["headers"] if k.lower() not in _STREAM_ONLY]
                first = {**first, "status": body.status, "headers": [*headers, (b"content-type", b"application/json")]}
            await send(first)
        await send(message)

    return cast(Send, deferred)
