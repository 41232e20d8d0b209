"""Failure handling: retry-after parsing, error messages, JevAPIError building, the retry policy."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest

from ai_utils.jev import JevAPIError, _retry

NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)
REQUEST = httpx.Request("POST", "http://127.0.0.1:1/api/alpha/decisions", content=b"{}")


def response(status: int, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers, request=REQUEST)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after": "-4"}, 0.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),
        ({"retry-after": "Sun, 29 Nov 2026 12:00:07 GMT"}, 7.0),
        ({"retry-after": "Sun, 29 Nov 2026 11:59:00 GMT"}, 0.0),
        ({"retry-after": "Sun, 29 Nov 2026 12:00:07 -0000"}, 7.0),
        ({"retry-after": "whenever"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_ms_seconds_and_http_dates(headers: dict[str, str], seconds: float | None) -> None:
    assert _retry.retry_after(httpx.Headers(headers), now=NOW) == seconds


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"error": "plain"}, "plain"),
        ({"error": {"code": 400, "message": "OpenRouter says no"}}, "OpenRouter says no"),
        ({"message": "top level"}, "top level"),
        ({"detail": "fastapi string"}, "fastapi string"),
        ({"detail": {"error_type": "unknown", "message": "Unknown model: jev-nope"}}, "Unknown model: jev-nope"),
        (
            {"detail": [{"loc": ["body", "questions", "u"], "msg": "missing"}, {"loc": ["body"], "msg": "bad"}]},
            "body.questions.u: missing; body: bad",
        ),
        ({"detail": ["odd"]}, "odd"),
        ({"something": "else"}, '{"something": "else"}'),
        ("x" * 300, "x" * 200),
    ],
)
def test_error_messages_are_found_like_the_typesafe_sdk_does(body: Any, message: str) -> None:
    assert _retry.error_message(body) == message


def test_api_errors_carry_status_body_request_id_and_a_hint() -> None:
    error = _retry.api_error(
        response(402, {"error": {"code": 402, "message": "Insufficient credits"}}, {"x-typesafe-request-id": "r1"})
    )

    assert isinstance(error, JevAPIError)
    assert (error.status, error.request_id) == (402, "r1")
    assert str(error) == "Jev API error 402: Insufficient credits. The account is out of credits; add credits."


def test_api_errors_keep_non_json_and_empty_bodies() -> None:
    text = _retry.api_error(httpx.Response(502, text="<html>Bad gateway</html>", request=REQUEST))
    empty = _retry.api_error(httpx.Response(404, request=REQUEST))

    assert text.body == "<html>Bad gateway</html>"
    assert "Try again later." in str(text)
    assert empty.body is None
    assert (
        str(empty)
        == "Jev API error 404: Not Found. Check `base_url` (requests go to http://127.0.0.1:1/api/alpha/decisions)."
    )


def test_the_retry_policy_retries_408_429_5xx_only_and_only_max_retries_times() -> None:
    def delay(status: int, attempt: int = 0, **headers: str) -> float | None:
        named = {name.replace("_", "-"): value for name, value in headers.items()}
        return _retry.retry_delay(response(status, headers=named), attempt, max_retries=2, max_retry_wait=10)

    assert delay(429, retry_after="1") == 1.0
    assert delay(429, 2, retry_after="1") is None
    assert delay(400, retry_after="0") is None
    assert delay(429, retry_after="11") is None
    assert 0.375 <= (delay(503) or 0) <= 0.5
    assert 0.75 <= (delay(503, 1) or 0) <= 1.0


def test_backoff_doubles_caps_at_five_seconds_and_at_max_retry_wait() -> None:
    assert 3.75 <= _retry.backoff(10, 60) <= 5.0
    assert _retry.backoff(3, 0.1) == 0.1
