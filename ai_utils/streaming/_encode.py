"""NDJSON encoding of stream chunks, free of any web framework.

``encode_chunk`` turns one chunk into one line; ``ndjson_lines``/``andjson_lines`` turn a whole
(sync/async) chunk stream into lines and end a failed stream with an ``ErrorEvent`` line instead of a
silent cut. ``StreamResponse`` (Starlette) is built on them; any other server can use them directly.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Generator, Iterable
from typing import Any

from ai_utils.client import ErrorEvent

__all__ = ["andjson_lines", "encode_chunk", "error_event", "ndjson_lines"]

_log = logging.getLogger("ai_utils.streaming")


def _fallback(value: Any) -> str:
    """Values JSON cannot hold (models, paths in tool args) are sent as their text; dates as ISO, like orjson."""
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def _dumps_stdlib(chunk: Any) -> bytes:
    return (json.dumps(chunk, ensure_ascii=False, separators=(",", ":"), default=_fallback) + "\n").encode()


_dumps: Callable[[Any], bytes]
try:
    import orjson
except ImportError:  # pragma: no cover - orjson comes with langsmith; the stdlib path is tested directly
    _dumps = _dumps_stdlib
else:
    _OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS

    def _dumps_orjson(chunk: Any) -> bytes:
        return orjson.dumps(chunk, default=_fallback, option=_OPTIONS)

    _dumps = _dumps_orjson


def encode_chunk(chunk: Any) -> bytes:
    """Encode one stream chunk as one NDJSON line.

    Args:
        chunk: a ``StreamChunk``: a text chunk becomes a JSON string, an event a JSON object.

    Returns:
        UTF-8 JSON followed by a newline byte.
    """
    return _dumps(chunk)


def error_event(exc: BaseException) -> ErrorEvent:
    """The ``ErrorEvent`` that ends a failed stream.

    Args:
        exc: the exception that stopped the stream.

    Returns:
        ``{"kind": "error", "type": <class name>, "message": str(exc)}``.
    """
    return {"kind": "error", "type": type(exc).__name__, "message": str(exc) or type(exc).__name__}


def ndjson_lines(chunks: Iterable[Any]) -> Generator[bytes, None, None]:
    """Encode a sync chunk stream line by line; an exception becomes a final error line.

    Args:
        chunks: e.g. ``agent.stream(...)``.

    Yields:
        One encoded line per chunk. Closing this generator closes ``chunks``.
    """
    iterator = iter(chunks)
    try:
        for chunk in iterator:
            yield _dumps(chunk)
    except Exception as exc:
        _log.exception("stream failed; sending an error line")
        yield _dumps(error_event(exc))
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


async def andjson_lines(chunks: AsyncIterable[Any]) -> AsyncGenerator[bytes, None]:
    """Async twin of ``ndjson_lines``.

    Args:
        chunks: e.g. ``agent.astream(...)``.

    Yields:
        One encoded line per chunk. Closing this generator closes ``chunks``.
    """
    iterator = aiter(chunks)
    try:
        async for chunk in iterator:
            yield _dumps(chunk)
    except Exception as exc:
        _log.exception("stream failed; sending an error line")
        yield _dumps(error_event(exc))
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
