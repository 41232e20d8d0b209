"""Failure handling for Jev replies: error bodies -> `JevAPIError`, and the retry policy (reference §4).

Retries follow the TypeSafe SDK: 408, 429 and 5xx, at most ``max_retries`` times, honouring
``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date); otherwise 0.5 s doubling backoff,
capped at 5 s, minus up to 25 % jitter.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Final

import httpx

from ai_utils.jev.errors import JevAPIError, JevTimeoutError

__all__ = ["api_error", "backoff", "body_of", "error_message", "retry_after", "retry_delay", "timeout_error"]

_BACKOFF_BASE: Final = 0.5
_BACKOFF_CAP: Final = 5.0
_RETRY_STATUSES: Final = frozenset({408, 429})
_STATUS_HINTS = {
    400: "Check the questions and state.",
    401: "Check the API key ({key_env}).",
    402: "The account is out of credits; add credits.",
    403: "The provider refused the request (e.g. moderation).",
    404: "Check `base_url` (requests go to {url}).",
    413: "The request is too large; shorten `state` or send fewer questions.",
    422: "Check the questions and state.",
}


def body_of(response: httpx.Response) -> Any:
    """The reply body: parsed JSON, else the text, or None when empty."""
    if not response.content:
        return None
    try:
        return json.loads(response.content)
    except ValueError:
        return response.text


def error_message(body: Any) -> str:
    """The human message in an error body, found as the TypeSafe SDK does (reference §4)."""
    if isinstance(body, Mapping):
        error, detail = body.get("error"), body.get("detail")
        if isinstance(error, str):
            return error
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
        if isinstance(detail, str):
            return detail
        if isinstance(detail, Mapping) and isinstance(detail.get("message"), str):
            return str(detail["message"])
        if isinstance(detail, list) and detail:
            return "; ".join(_detail_entry(entry) for entry in detail)
    text = body if isinstance(body, str) else json.dumps(body)
    return text[:200]


def _detail_entry(entry: Any) -> str:
    if isinstance(entry, Mapping):
        loc = ".".join(str(part) for part in entry.get("loc", ()))
        return f"{loc}: {entry.get('msg', '')}"
    return str(entry)


def api_error(response: httpx.Response, *, key_env: str = "OPENROUTER_API_KEY", attempts: int = 1) -> JevAPIError:
    """Turn a non-2xx reply into a `JevAPIError` (status, parsed body, the provider's message and a hint)."""
    status = response.status_code
    body = body_of(response)
    message = error_message(body) if body is not None else response.reason_phrase
    hint = _STATUS_HINTS.get(status, "Try again later." if retryable(status) else "")
    hint = hint.format(key_env=key_env, url=response.request.url)
    tried = f" after {attempts} attempts" if attempts > 1 else ""
    return JevAPIError(
        f"Jev API error {status}{tried}: {message}. {hint}".strip(),
        status=status,
        body=body,
        request_id=response.headers.get("x-typesafe-request-id"),
    )


def retryable(status: int) -> bool:
    """Whether a reply with this status may be retried (408, 429, 5xx)."""
    return status in _RETRY_STATUSES or 500 <= status <= 599


def retry_after(headers: httpx.Headers, *, now: dt.datetime | None = None) -> float | None:
    """Seconds the server asks us to wait (``retry-after-ms``, then ``retry-after`` in seconds or as an HTTP date)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    now = now or dt.datetime.now(dt.UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - now).total_seconds())


def backoff(attempt: int, max_retry_wait: float) -> float:
    """TypeSafe SDK backoff: 0.5 s doubling, capped at 5 s, minus up to 25 % jitter; never above ``max_retry_wait``."""
    delay = min(_BACKOFF_BASE * 2**attempt, _BACKOFF_CAP)
    jittered: float = delay * (1 - random.random() / 4)
    return min(jittered, max_retry_wait)


def retry_delay(response: httpx.Response, attempt: int, *, max_retries: int, max_retry_wait: float) -> float | None:
    """Seconds to wait before retrying ``response``, or ``None`` when it must not be retried.

    408, 429 and 5xx are retried ``max_retries`` times; other statuses never. A ``retry-after`` longer
    than ``max_retry_wait`` is not waited for.
    """
    if attempt >= max_retries or not retryable(response.status_code):
        return None
    asked = retry_after(response.headers)
    if asked is None:
        return backoff(attempt, max_retry_wait)
    return asked if asked <= max_retry_wait else None


def timeout_error(timeout: float) -> JevTimeoutError:
    """The error for a call that ran out of time."""
    return JevTimeoutError(
        f"Jev did not answer within {timeout:g} s (retries included). Pass a larger `timeout=` or try again later.",
        timeout=timeout,
    )
