"""The response half: a chunk stream (or a session's log) as NDJSON, AG-UI SSE or a Vercel UI message stream.

All three send through `StreamResponse`'s machinery: the response start waits for the first line, so a
failure before it is the JSON error object with its real status; a client that disconnects closes the chunk
source (which stops an agent run, not a session's turn: turns finish on their own).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Collection, Mapping
from typing import Any

from starlette.responses import Response, StreamingResponse

from ai_utils.server._bodies import Protocol
from ai_utils.streaming._ui import UIEncoder, aencode_events
from ai_utils.streaming.ndjson import StreamResponse

__all__ = ["EventStreamResponse", "encoder_for", "stream_response"]

_DONE = b"data: [DONE]\n\n"


class EventStreamResponse(StreamResponse):
    """``text/event-stream`` of encoded SSE frames, sent as `StreamResponse` sends lines.

    The frames are encoded already, so StreamResponse's NDJSON encoding is skipped; its sending is kept: the
    status of a failure before the first frame, and closing the source however sending ends.
    """

    media_type = "text/event-stream"

    def __init__(self, frames: AsyncIterator[bytes], *, headers: Mapping[str, str] | None = None) -> None:
        base = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        StreamingResponse.__init__(self, frames, 200, {**base, **(headers or {})}, None, None)


def encoder_for(
    protocol: Protocol,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    session: bool = False,
    message_id: str | None = None,
    known_tool_calls: Collection[str] = (),
) -> UIEncoder:
    """The SSE encoder of ``protocol`` (``"ag-ui"`` or ``"vercel-ai"``)."""
    if protocol == "ag-ui":
        from ai_utils.streaming._ag_ui import AgUiEncoder

        return AgUiEncoder(thread_id=thread_id, run_id=run_id, session=session)
    from ai_utils.streaming._vercel import VercelEncoder

    return VercelEncoder(message_id=message_id, known_tool_calls=known_tool_calls)


def stream_response(
    protocol: Protocol,
    chunks: AsyncIterable[Any],
    *,
    encoder: UIEncoder | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """``chunks`` (bare chunks or a session's lines) as ``protocol``'s streaming response."""
    if protocol == "ndjson":
        return StreamResponse(chunks, headers=headers)
    assert encoder is not None, "an SSE protocol needs its encoder"
    if protocol == "vercel-ai":
        from ai_utils.streaming._vercel import VERCEL_HEADERS

        frames = aencode_events(encoder, chunks, last=_DONE)
        return EventStreamResponse(frames, headers={**VERCEL_HEADERS, **(headers or {})})
    return EventStreamResponse(aencode_events(encoder, chunks), headers=headers)
